"""SBC of BayesSCDC (crowdzoo.comparisons.sbc): the simulator draws from the model's generative story
(the exact conjugate posterior given the true clusters ranks its draws uniformly), the summaries do
not depend on the clusters' labels, and a check of the natgrad route runs and tells a shrunk
posterior from the route's own."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from crowdzoo.comparisons import sbc
from crowdzoo.errors import DataError


def _simulation(check, seed):
    model = check.spec.model(check.problem)
    design = check.spec.design(check.problem, np.random.default_rng([seed, 2018]))
    state, y = check.spec.simulate(model, design, seed)
    return model, design, state, y


def _exact_ranks(S: int, L: int, shrink: float = 1.0):
    """Ranks of worker 0's α̃, β̃ and of π̃_{z_0} among L draws of their exact posterior given the true
    clusters — Beta(1 + must-links, 1 + cannot-links) over worker 0's same-cluster pairs (α), Beta(1 +
    cannot-links, 1 + must-links) over its different-cluster pairs (β), Dirichlet(a₀ + n_k) (π) —
    drawn with numpy, apart from the route, and pulled towards their mean by ``shrink``."""
    check = sbc.Check("bayesscdc", "natgrad")
    rng = np.random.default_rng(0)
    ranks = {"alpha": [], "beta": [], "pi": []}
    for seed in range(S):
        model, design, state, (O, L_ann, z) = _simulation(check, seed)
        mine = design.workers == 0
        same = z[design.i] == z[design.j]
        ones = L_ann == 1
        n_k = np.bincount(z, minlength=model.n_clusters)
        draws = {"alpha": rng.beta(1 + (mine & same & ones).sum(), 1 + (mine & same & ~ones).sum(), L),
                 "beta": rng.beta(1 + (mine & ~same & ~ones).sum(), 1 + (mine & ~same & ones).sum(), L),
                 "pi": rng.dirichlet(model.dirichlet + n_k, L)[:, z[0]]}
        truth = {"alpha": float(state["alpha"][0, 0]), "beta": float(state["beta"][0, 0]),
                 "pi": float(state["pi"][0, z[0]])}
        for k, h in draws.items():
            h = h.mean() + shrink * (h - h.mean())
            ranks[k].append(sbc.rank_of(truth[k], h, rng))
    return {k: np.array(v) for k, v in ranks.items()}


def test_the_simulator_is_the_models_story():
    """With the simulator's clusters, the exact posteriors of α, β (the two coins, Eq. 1, under their
    Beta(1, 1) priors) and of π (Dirichlet) rank the simulated values uniformly — which they would not
    if the labels did not follow the two coins or π were not the clusters' weights; shrunk ×0.3, the
    same posteriors fail."""
    exact = _exact_ranks(300, 99)
    for k, r in exact.items():
        t = sbc.rank_tests(r, 99)
        assert t["chi2 p"] > 0.001 and 0.12 < t["tails"] < 0.28, (k, t)
    for k, r in _exact_ranks(300, 99, shrink=0.3).items():
        t = sbc.rank_tests(r, 99)
        assert t["chi2 p"] < 1e-6 and t["tails"] > 0.45, (k, t)


def test_the_simulated_clusters_are_well_separated():
    """The fixed design's centres are 6 apart and the observations spread by 0.5 around them: every
    item's nearest centre is its own cluster's, so the observations fix the partition."""
    check = sbc.Check("bayesscdc", "natgrad")
    C = sbc.scdc_centres(3, 2)
    d = np.linalg.norm(C[:, None] - C[None], axis=-1)
    assert np.allclose(d[~np.eye(3, dtype=bool)], sbc.SCDC_SIDE)
    for seed in range(20):
        _, _, _, (O, _, z) = _simulation(check, seed)
        nearest = np.linalg.norm(O[:, None] - C[None], axis=-1).argmin(1)
        assert np.array_equal(nearest, z)


def test_bayesscdc_summaries_are_invariant_to_the_clusters_labels():
    g = torch.Generator().manual_seed(2)
    pi = torch.distributions.Dirichlet(torch.ones(3, dtype=torch.float64)).sample((4,))
    state = {"pi": pi, "z": torch.randint(0, 3, (4, 30), generator=g),
             "alpha": torch.rand(4, 3, generator=g, dtype=torch.float64),
             "beta": torch.rand(4, 3, generator=g, dtype=torch.float64)}
    perm = torch.tensor([2, 0, 1])  # cluster k is called perm[k]
    relabelled = {**state, "z": perm[state["z"]], "pi": state["pi"][:, torch.argsort(perm)]}
    q, qr = sbc._scdc_quantities(state), sbc._scdc_quantities(relabelled)
    for name in q:
        assert torch.equal(q[name], qr[name]), name


def test_bayesscdc_check_runs_and_flags_a_shrunk_posterior():
    """Six quick simulations of BayesSCDC by natgrad: every rank in 0..L, and the workers' 90 %
    intervals hold the simulated α, β most of the time as fitted, but not once the draws are pulled
    ×0.2 towards their mean (the same fits ranked twice)."""
    check = sbc.Check("bayesscdc", "natgrad", draws=49)
    assert check.problem == sbc.SPECS["bayesscdc"].problem
    sims = [check.simulate(s, quick=True) for s in range(6)]
    fitted = sbc.pd.concat([check.rank(s) for s in sims])
    shrunk = sbc.pd.concat([check.rank(s, shrink=0.2) for s in sims])
    assert len(fitted) == 6 * len(sbc._SCDC_GROUPS) and fitted["rank"].between(0, 49).all()
    workers = fitted["group"] == "worker"
    assert fitted.loc[workers, "in 90%"].mean() >= 0.7
    # measured 0.917 as fitted, 0.542 shrunk (24 intervals, a binomial sd of 0.06 about 0.9): shrunk,
    # 6 sds below the nominal rate
    assert shrunk.loc[workers, "in 90%"].mean() <= 0.6
    assert sbc.rank_tests(shrunk.loc[workers, "rank"].to_numpy(), 49)["tails"] > 0.45


def test_scdc_is_refused_with_the_reason():
    with pytest.raises(DataError, match="point estimates"):
        sbc.Check("scdc", "svi")


@pytest.mark.slow
def test_bayesscdc_workers_are_calibrated():
    """30 simulations at the check's settings: the workers' α, β ranks consistent with uniform
    (Bonferroni over the four) and their 90 % intervals holding about 90 % of the simulated values
    (docs/sbc-bayesscdc.md: 0.88–0.94 over 100)."""
    check = sbc.Check("bayesscdc", "natgrad")
    df = sbc.pd.concat([check.run_one(s) for s in range(30)])
    workers = df[df["group"] == "worker"]
    s = sbc.summary_frame(workers)
    assert s["chi2 p"].min() * len(s) > 0.001, s[["quantity", "chi2 p", "mean rank", "tails"]]
    assert 0.8 <= workers["in 90%"].mean() <= 0.98
