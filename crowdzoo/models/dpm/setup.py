"""The DPM's setup and data plumbing: what every route fixes before inference (:class:`DPMSetup`: the
communities' item GP, GPPL's, with s at its prior mean, α and each label's direction), the item GP as a
function of its length-scales for the svi and nuts program (:class:`LengthscaleSpace`), the data contract
of the story (:func:`check_data`) and each user's labels as a padded table (:func:`user_labels`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...errors import DataError, _show
from ...gp.linalg import DTYPE
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


def user_labels(users, n_users: int):
    """Each user's label indices, padded: (U, L) long and its (U, L) float mask (L: the most labels
    of any user)."""
    users = np.asarray(users)
    order = np.argsort(users, kind="stable")
    n = np.bincount(users, minlength=n_users)
    L = max(int(n.max()), 1)
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    pos = np.arange(L)[None, :]
    mask = pos < n[:, None]
    lab = np.where(mask, order[np.minimum(start[:, None] + pos, len(order) - 1)], 0)
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
    (``tie_threshold="per_user"``)."""

    gp: GPPLSetup
    s: float
    alpha: float
    H: torch.Tensor
    tie_prior: object = None
    tie_per_user: bool = False

    @property
    def M(self) -> int:
        return self.gp.M

    @property
    def K(self) -> torch.Tensor:
        """Prior covariance K_mm / s of a community's inducing utilities."""
        return self.gp.K_mm / self.s


__all__ = ["LengthscaleSpace", "DPMSetup", "check_data", "user_labels"]
