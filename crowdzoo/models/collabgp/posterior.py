"""The fitted posterior of collabGP, shared by its routes (EP–VB, Pyro SVI, NUTS).

Every route gives a mixture over G components (one for EP, one per draw for SVI and NUTS) of

* a_d ~ N(a_mean, a_cov): the whitened pseudo-input values of h_d (h_d = Φ_h a_d + √δ_h ε);
* w_u,d ~ N(w_mean, w_var) for the training users;
* b_d ~ N(b_mean, b_cov): the whitened pseudo-user values of w_d (with user features only),
  for users the data has not seen.

Predictions follow supplement a §4.1 (Eq. 11–15) and, with FITC, Eq. 59–60: h_d at any pair has
mean φᵀ a_mean and variance φᵀ a_cov φ + δ, and the personal preference of user u is
Φ(m_g / √(1 + v_g)) with m_g, v_g of Eq. 12–13.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...core.ids import check_features, distinct_pairs, feature_rows, positions
from ...core.posterior import Posterior, uniform_weights
from ...errors import DataError
from ...gp.linalg import DTYPE
from ...gp.probit import mixture_prob


@dataclass(kw_only=True)
class CollabGPPosterior(Posterior):
    """Posterior of a fitted :class:`~crowdzoo.models.CollabGP`; build it with :func:`crowdzoo.fit`.

    Shapes: ``weights`` (G,), ``a_mean`` (G, D, M), ``a_cov`` (D, M, M) or None, ``w_mean``
    (G, U, D), ``w_var`` (U, D) or None, ``b_mean`` (G, D, M_u) or None, ``b_cov`` or None.
    ``log_evidence``: the EP approximation of log P(labels) (§4.3; EP only)."""

    a_mean: torch.Tensor
    a_cov: torch.Tensor | None
    w_mean: torch.Tensor
    w_var: torch.Tensor | None
    b_mean: torch.Tensor | None = None
    b_cov: torch.Tensor | None = None
    log_evidence: float | None = None
    state: object = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, **kw):
        """Draws of a, and w or b [+ e_w], as zero-covariance components."""
        sites = {k: v.to(DTYPE) for k, v in sites.items()}
        if "w" in sites:
            w = sites["w"]
        else:
            w = (sites["b"] @ setup.Phi_w.T).transpose(1, 2)  # (S, U, D)
            if "e_w" in sites:
                w = w + setup.delta_w.sqrt()[:, None] * sites["e_w"]
        return cls(model=model, setup=setup, data=data, method=method,
                   weights=uniform_weights(sites["a"].shape[0]), a_mean=sites["a"], a_cov=None, w_mean=w,
                   w_var=None, b_mean=sites.get("b"), **kw)

    # ------------------------------------------------------------------ moments
    def _items(self, item_features):
        if item_features is None:
            return self.setup.X, True
        if self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this collabGP was fitted without item features, so it cannot "
                            "predict for new items")
        X, self._new_ids = feature_rows("item_features", item_features, self.setup.X.shape[1])
        return X, False

    def _h_moments(self, Xs, a, b):
        """Means (G, n, D) and variances (n, D) of h_d at the pairs (a, b) (Eq. 14–15, 59–60)."""
        Phi, delta = self.setup.items.basis(Xs[a], Xs[b])
        mean = torch.einsum("gdm,nm->gnd", self.a_mean, Phi)
        var = delta[:, None].expand(-1, self.setup.D).clone()
        if self.a_cov is not None:
            var = var + torch.einsum("nm,dmk,nk->nd", Phi, self.a_cov, Phi)
        return mean, var

    def _w_moments(self, users, user_features):
        """Means (G, n, D) and variances (n, D) of w for the given users."""
        if user_features is None:
            j = positions("users", users, self.data.user_ids, what="user")
            var = torch.zeros(j.shape[0], self.setup.D, dtype=DTYPE) if self.w_var is None else self.w_var[j]
            return self.w_mean[:, j], var
        if self.setup.users is None:
            raise DataError("user_features: this collabGP has no user GP (user_features=False or no "
                            "user features in the data), so it cannot predict for new users")
        U = check_features("user_features", user_features, self.setup.user_X.shape[1])
        j = positions("users", users, None, U.shape[0], what="user")
        Phi, delta = self.setup.users.basis(U[j])
        mean = torch.einsum("gdm,nm->gnd", self.b_mean, Phi)
        var = delta[:, None].expand(-1, self.setup.D).clone()
        if self.b_cov is not None:
            var = var + torch.einsum("nm,dmk,nk->nd", Phi, self.b_cov, Phi)
        return mean, var

    def latent_moments(self, a, b, users, item_features=None, user_features=None):
        """Mean and variance of g_u(a, b) per pair, each (G, n) (Eq. 12–13): the quantities BALD
        and the predictive probability are built from."""
        if users is None:
            raise DataError("users: collabGP predicts each user's preferences (it has no consensus); "
                            "pass users= (one user id per pair)")
        Xs, training = self._items(item_features)
        table = self.data.item_ids if training else self._new_ids
        ia = positions("a", a, table, Xs.shape[0])
        ib = positions("b", b, table, Xs.shape[0])
        distinct_pairs(ia, ib, a)
        mh, vh = self._h_moments(Xs, ia, ib)
        mw, vw = self._w_moments(users, user_features)
        if mw.shape[1] != ia.shape[0]:
            raise DataError(f"users: {mw.shape[1]} users for {ia.shape[0]} pairs")
        mean = (mw * mh).sum(-1)
        var = (mw * mw * vh + vw * mh * mh + vw * vh).sum(-1)
        return mean, var

    # ------------------------------------------------------------------ predictions
    def predict_proba(self, a, b, users=None, item_features=None, user_features=None) -> np.ndarray:
        """P(user prefers a to b) for each pair: Φ(m_g / √(1 + v_g)) (supplement a, Eq. 11),
        mixed over components. ``a``, ``b``: item ids (or rows of ``item_features``); ``users``:
        user ids (or rows of ``user_features``)."""
        mean, var = self.latent_moments(a, b, users, item_features, user_features)
        return mixture_prob(self.weights, mean, var).numpy()

    def utilities(self, *args, **kwargs):
        raise DataError("utilities: collabGP models preferences between pairs of items directly "
                        "(h_d over item pairs, supplement a §1), so it has no utility per item; use "
                        "predict_proba(a, b, users=...) for pairwise preferences")

    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """Draws {"w": (n, U, D), "h": (n, D, P)} at the training users and pairs (from the
        approximation for EP; for NUTS/SVI the draws themselves when n is their number)."""
        g = torch.Generator().manual_seed(seed)
        G = self.weights.shape[0]
        # the draws themselves in chain order when n matches, else components drawn by weight
        comp = (torch.arange(n) if G == n
                else torch.multinomial(self.weights, n, replacement=True, generator=g))
        P = self.setup.pairs
        Phi, delta = self.setup.items.basis(self.setup.X[P[:, 0]], self.setup.X[P[:, 1]])
        a = self.a_mean[comp]
        if self.a_cov is not None:
            Lc = torch.linalg.cholesky(self.a_cov)
            a = a + torch.einsum("dmk,ndk->ndm", Lc, torch.randn(a.shape, dtype=DTYPE, generator=g))
        h = torch.einsum("ndm,pm->ndp", a, Phi)
        h = h + delta.sqrt() * torch.randn(h.shape, dtype=DTYPE, generator=g)
        w = self.w_mean[comp]
        if self.w_var is not None:
            w = w + self.w_var.sqrt() * torch.randn(w.shape, dtype=DTYPE, generator=g)
        return {"w": w, "h": h}

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree`` (posterior of w, h and the labels' g; observed data; log-likelihood)."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"CollabGPPosterior(method={self.method!r}, users={self.setup.n_users}, "
                f"pairs={self.setup.P}, labels={self.setup.L}, D={self.setup.D}, "
                f"components={self.weights.shape[0]})")

