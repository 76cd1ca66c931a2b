"""crowdGPPL's setup: what every route fixes before inference (:class:`CrowdSetup`: the item and user
sides' sparse GPs, C, the priors) and the setup as a function of the item and user length-scales for
the svi and nuts program (:class:`LengthscaleSpace`; the story is in
:mod:`crowdzoo.models.crowdgppl.model`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch

from ...gp.conditional import SparseGP
from ...gp.linalg import DTYPE


@dataclass
class CrowdSetup:
    """Fixed before inference: the item side (kernel, inducing items, projections; see
    :class:`~crowdzoo.gp.SparseGP`), the user side (the same, or None for independent
    users), C, whether there is a consensus, the Gamma priors, τ's prior for labels with ties
    (None: no ties), the prior of the item residual's s_r (None: no residual) and the prior of the order
    effect δ (None: none)."""

    items: SparseGP
    users: SparseGP | None
    n_users: int
    C: int
    consensus: bool
    priors: dict
    tie_prior: object = None
    residual_prior: object = None
    tie_per_user: bool = False  # a τ per user (tie_threshold="per_user")
    order_prior: object = None  # δ's prior with the order effect (crowdzoo.gp.order)

    @property
    def N(self) -> int:
        return self.items.X.shape[0]

    @property
    def M(self) -> int:
        return self.items.M

    @property
    def M_u(self) -> int:
        """Size of each user component's q: inducing users, or every user when independent."""
        return self.n_users if self.users is None else self.users.M

    def user_terms(self, j: torch.Tensor):
        """Whitened user rows e (P, M_u) with w_c,j = e·u_w,c / √s_w,c and conditional variances
        d (P,) (× 1/s_w,c); None for independent users (then w_c,j = u_w,c[j] / √s_w,c, d = 0)."""
        if self.users is None:
            return None, torch.zeros(j.shape[0], dtype=DTYPE)
        return self.users.B[:, j].T, self.users.conditional_variance()[j]  # Eq. 19 per user


def _has_kernel(side) -> bool:
    """Whether a side has a kernel over features (not the identity over row indices, nor absent)."""
    return side is not None and getattr(side.kernel, "name", None) != "identity"


@dataclass
class LengthscaleSpace:
    """A crowdGPPL setup as a function of its length-scales: the item and user sides' ARD algebra
    (``items``, ``users``; None: that side's kernel stays the base setup's) and their priors (event
    shape (D,)). A side with an algebra and a prior has its ℓ sampled (svi and nuts under
    ``lengthscale_prior``); without a prior ℓ is a ``pyro.param`` (svi's ``learn_kernel``)."""

    base: CrowdSetup
    items: object | None
    users: object | None
    prior: object = None
    user_prior: object = None

    def __getattr__(self, name):  # C, M, M_u, n_users, ...: the base setup's (what guides read)
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def setup_at(self, ell=None, ell_u=None) -> CrowdSetup:
        """The setup at item length-scales ``ell`` and user ``ell_u`` (None: that side's base)."""
        items = self.base.items if self.items is None or ell is None else self.items.sparse_gp(ell)
        users = self.base.users if self.users is None or ell_u is None else self.users.sparse_gp(ell_u)
        return dataclasses.replace(self.base, items=items, users=users)

    def sides(self):
        """(site name, ARD algebra, prior, start ℓ) of each side whose length-scales vary."""
        from ...gp.learn import varying_sides

        return varying_sides(self)


def global_sites(setup: CrowdSetup):
    """The global sites of the story (:func:`~crowdzoo.models.crowdgppl.model.crowdgppl_model`), which
    the pair and choice programs share: s_t and the whitened consensus u_t (None without one), then per
    component s_v, s_w and the whitened u_v (M), u_w (M_u) → (u_t, s_t, u_v, s_v, u_w, s_w)."""
    C, M, M_u = setup.C, setup.M, setup.M_u
    one = torch.ones((), dtype=DTYPE)
    u_t = s_t = None
    if setup.consensus:
        s_t = pyro.sample("s_t", setup.priors["t"])
        u_t = pyro.sample("u_t", dist.Normal(torch.zeros(M, dtype=DTYPE), one).to_event(1))
    with pyro.plate("components", C, dim=-1):
        s_v = pyro.sample("s_v", setup.priors["v"])
        s_w = pyro.sample("s_w", setup.priors["w"])
        u_v = pyro.sample("u_v", dist.Normal(torch.zeros(M, dtype=DTYPE), one).to_event(1))
        u_w = pyro.sample("u_w", dist.Normal(torch.zeros(M_u, dtype=DTYPE), one).to_event(1))
    return u_t, s_t, u_v, s_v, u_w, s_w


__all__ = ["CrowdSetup", "LengthscaleSpace", "global_sites"]

