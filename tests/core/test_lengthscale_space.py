"""One name for a kernel's learnable space: every model whose svi/nuts program can move its
length-scales offers ``lengthscale_space(setup, prior=False)``, a ``LengthscaleSpace`` whose
``setup_at`` rebuilds the model's setup from ℓ — at the setup's own length-scales, the setup it
started from (to the fixed jitter of the rebuilt factors); with ``prior=True`` it carries the
length-scale prior."""
from __future__ import annotations

import pyro.distributions as dist
import pytest
import torch

import crowdzoo as cz
from crowdzoo.data.simulate import simulate_crowd
from crowdzoo.gp.linalg import DTYPE

PRIOR = dist.Gamma(torch.tensor(2.0, dtype=DTYPE), torch.tensor(2.0, dtype=DTYPE))

#: model → (the setup's ℓ, what setup_at takes after ℓ, the prior covariance it rebuilds)
CASES = {
    "gppl": (cz.GPPL(kernel="se", n_inducing=5, lengthscale_prior=PRIOR),
             lambda st: (st.kernel.lengthscale,), lambda st: st.K_mm),
    "crowdgppl": (cz.CrowdGPPL(n_components=2, kernel="se", n_inducing=5, lengthscale_prior=PRIOR),
                  lambda st: (st.items.kernel.lengthscale, None), lambda st: st.items.K_mm),
    "collabgp": (cz.CollabGP(n_latent=2, lengthscale_prior=PRIOR),
                 lambda st: (st.items.kernel.lengthscale, None), lambda st: st.Phi_h @ st.Phi_h.T),
    "dpm": (cz.DPMCommunities(kernel="se", n_inducing=5, lengthscale_prior=PRIOR),
            lambda st: (st.gp.kernel.lengthscale,), lambda st: st.gp.K_mm),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lengthscale_space_rebuilds_the_setup_at_its_own_lengthscales(name):
    model, start, cov = CASES[name]
    data, _ = simulate_crowd(n_items=9, n_users=3, n_pairs=50, n_components=2, n_user_features=0, seed=5)
    setup = model.setup(data, seed=0)
    for prior in (False, True):
        space = model.lengthscale_space(setup, prior=prior)
        assert type(space).__name__ == "LengthscaleSpace"
        ell = start(setup)
        again = space.setup_at(*ell)
        torch.testing.assert_close(cov(again), cov(setup), atol=1e-5, rtol=1e-5)
        moved = space.setup_at(ell[0] * 3.0, *ell[1:])  # and ℓ moves it
        assert (cov(moved) - cov(setup)).abs().max() > 1e-3
    assert getattr(model.lengthscale_space(setup, prior=True), "prior", None) is not None
    assert getattr(model.lengthscale_space(setup), "prior", None) is None
