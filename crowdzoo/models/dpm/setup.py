"""The DPM's setup and data plumbing: what every route fixes before inference (:class:`DPMSetup`: the
communities' item GP, GPPL's, with s at its prior mean, α and each label's direction), the item GP as a
function of its length-scales for the svi and nuts program (:class:`LengthscaleSpace`), the data contract
of the story (:func:`check_data`) and each user's labels as a padded table (:func:`user_labels`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import DataError, _show
from ...gp.kernels import KernelBase
from ...gp.linalg import DTYPE, cholesky
from ..gppl.model import GPPLSetup


def check_data(model, data):
    """DataErrors for data no route of the model can use: no users, users without labels (the data
    contract of the story; the Gibbs route and :meth:`DPMCommunities.program` both check it)."""
    if data.users is None:
        raise DataError("users: the DPM community model needs a user per label "
                        "(PairwiseData(..., users=...))")
    counts = np.bincount(data.users, minlength=data.n_users)
    if data.n_pairs == 0:
        raise DataError("data: no labels")
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise DataError(f"users: user id {_show(data.user_ids[empty[0]])} has no labels ({empty.size} such "
                        "user(s)); drop them (predict_proba treats unseen users by the CRP prior predictive)")


@dataclass(frozen=True)
class ResidualKernel(KernelBase):
    """k(x, x') + v·[same item]: the item kernel with each item's own variance v added (an item
    residual r_i ~ N(0, v) independent across items). Distinct items share no residual, so the cross
    kernel ``k(X1, X2)`` and ``pairs`` (pairs of distinct items) are the base kernel's; only ``diag``
    (an item with itself) adds v. The training items' K_mm carries v on its diagonal
    (:func:`with_item_residual`)."""

    base: object
    variance: float

    @property
    def lengthscale(self):
        return self.base.lengthscale

    def __call__(self, x1, x2):
        return self.base(x1, x2)

    def pairs(self, xa, xb):
        return self.base.pairs(xa, xb)

    def diag(self, x):
        return self.base.diag(x) + self.variance


def with_item_residual(gp: GPPLSetup, variance: float) -> GPPLSetup:
    """The exact item GP with an item residual of variance ``variance`` (in the kernel's units, × s):
    K_mm + v I over the training items (every item inducing), its Cholesky factor, B = L_mm⁻¹ K_mm, and
    a :class:`ResidualKernel` for new items (cross-covariance k, own variance k(x, x) + v). A sparse
    side is refused: its conditional would need the residual outside the inducing items."""
    if not gp.exact:
        raise DataError(f"item_residual: the DPM's item residual needs every item inducing (an exact item "
                        f"GP); this one has {gp.M} inducing items for {gp.X.shape[0]} items — pass "
                        "n_inducing=None, or item_residual=False", arg="item_residual")
    K_mm = gp.K_mm + variance * torch.eye(gp.M, dtype=gp.K_mm.dtype)
    L_mm = cholesky(K_mm, jitter=gp.jitter, what="K_mm + v I (item kernel with the residual)")
    B = torch.linalg.solve_triangular(L_mm, K_mm, upper=False)
    return dataclasses.replace(gp, kernel=ResidualKernel(gp.kernel, float(variance)), K_mm=K_mm,
                               L_mm=L_mm, B=B)


#: σ_r² tried by :func:`learn_residual_variance` (utility units): 0 (no residual) and 2⁻⁸ … 4 by factors
#: of 2, from far below the probit's unit noise to four times the battery's item effects of variance 1
RESIDUAL_GRID = (0.0,) + tuple(2.0 ** k for k in range(-8, 3))


def learn_residual_variance(gp: GPPLSetup, data, s: float, alpha: float, grid=RESIDUAL_GRID,
                            tol: float = 1e-5):
    """Type-II maximum likelihood of the item residual's variance σ_r² over ``grid``: the EP evidence
    log Z_EP(y | σ_r²) of one GP over every label pooled (the crowd's labels as one user's, f ~
    GP(0, K_mm / s + σ_r² I), probit sites at scale α, a tie's threshold where a tie of equal items is
    as common as ties are in the data) at each σ_r², warm-started from the last; returns (the σ_r² of
    the largest evidence, the grid (G,), the log evidences (G,)). 0 on the grid lets a crowd whose
    items have no effects of their own switch the residual off.

    Pooled rather than per community: the communities do not exist before the sampler, and whatever
    item effect the crowd shares shows in the pooled labels; a community's own effects, which the
    pooled labels average out, are not seen. Needs an exact item side (:func:`with_item_residual`)."""
    from ...data.tensors import weight_tensor
    from ...gp.conditional import probit_rows
    from ...gp.ordinal import initial_tau
    from ...inference.ep import ep_fixed_s

    a, b = (torch.as_tensor(x, dtype=torch.long) for x in (data.a, data.b))
    sgn = 2.0 * torch.as_tensor(data.y, dtype=DTYPE) - 1.0
    w = weight_tensor(data)
    threshold = None
    if data.has_ties:
        share = np.average(data.y == 0.5, weights=data.label_weights)
        threshold = torch.full_like(sgn, float(initial_tau(share)))
    tau = nu = None
    log_z = torch.empty(len(grid), dtype=DTYPE)
    for i, v in enumerate(grid):
        g = with_item_residual(gp, s * v) if v > 0 else gp
        H = probit_rows(g, a, b, s, alpha)
        L = g.L_mm / s ** 0.5
        *_, tau, nu, log_z[i], _ = ep_fixed_s(None, H, sgn, tau, nu, L=L, threshold=threshold, tol=tol,
                                              weights=w)
    grid = torch.as_tensor(grid, dtype=DTYPE)
    return float(grid[torch.argmax(log_z)]), grid, log_z


def user_labels(users, n_users: int, weights=None):
    """Each user's label indices, padded: (U, L) long and its (U, L) float mask (L: the most labels
    of any user), which holds each label's weight (``weights``, (P,); 1 without) and 0 in the padding, so
    that Σ mask · log p(y_p) is the user's weighted log-likelihood."""
    users = np.asarray(users)
    order = np.argsort(users, kind="stable")
    n = np.bincount(users, minlength=n_users)
    L = max(int(n.max()), 1)
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    pos = np.arange(L)[None, :]
    mask = pos < n[:, None]
    lab = np.where(mask, order[np.minimum(start[:, None] + pos, len(order) - 1)], 0)
    if weights is not None:
        mask = np.where(mask, np.asarray(weights)[lab], 0.0)
    return torch.as_tensor(lab, dtype=torch.long), torch.as_tensor(mask, dtype=DTYPE)


@dataclass
class LengthscaleSpace:
    """The ARD algebra of the communities' item GP (``ard``), the setup it varies (ℓ starts at the
    base setup's), and the prior of ℓ (event shape (D,); None: ℓ is a ``pyro.param``)."""

    ard: object
    base: DPMSetup
    prior: object = None

    @property
    def ell0(self) -> torch.Tensor:
        """The base setup's length-scales (the median heuristic, or the model's ``lengthscale``)."""
        return self.base.gp.kernel.lengthscale.detach()

    def gp(self, ell) -> GPPLSetup:
        return self.ard.sparse_gp(ell, GPPLSetup, s_prior=self.base.gp.s_prior)

    def setup_at(self, ell) -> DPMSetup:
        """The setup at length-scales ``ell`` (H is not needed by the Pyro program and left as is)."""
        return DPMSetup(gp=self.gp(ell), s=self.base.s, alpha=self.base.alpha, H=self.base.H,
                        tie_prior=self.base.tie_prior, tie_per_user=self.base.tie_per_user)


@dataclass
class DPMSetup:
    """What is fixed before inference: the item GP (GPPL's setup), s, α, H (P, M): each training
    label's direction in the inducing utilities (see :func:`crowdzoo.gp.conditional.probit_rows`), and
    the prior of the tie threshold τ for data with ties (None: no ties), and whether τ is per user
    (``tie_threshold="per_user"``); with ``item_residual="learned"`` the σ_r² tried and their pooled
    EP log evidences (:func:`learn_residual_variance`; else None)."""

    gp: GPPLSetup
    s: float
    alpha: float
    H: torch.Tensor
    tie_prior: object = None
    tie_per_user: bool = False
    residual_grid: torch.Tensor | None = None
    residual_log_evidence: torch.Tensor | None = None

    @property
    def residual_variance(self) -> float:
        """σ_r² of the communities' item residual in utility units (0: none)."""
        k = self.gp.kernel
        return float(k.variance) / self.s if isinstance(k, ResidualKernel) else 0.0

    @property
    def M(self) -> int:
        return self.gp.M

    @property
    def K(self) -> torch.Tensor:
        """Prior covariance K_mm / s of a community's inducing utilities."""
        return self.gp.K_mm / self.s


__all__ = ["LengthscaleSpace", "DPMSetup", "RESIDUAL_GRID", "ResidualKernel", "check_data",
           "learn_residual_variance", "user_labels", "with_item_residual"]
