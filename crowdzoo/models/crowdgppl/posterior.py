"""The fitted posterior of crowdGPPL, shared by every inference route.

Every route returns G components (weights w_g) over the inducing values: ``natgrad`` one
component with the mean-field Gaussians of Eq. 20 (covariances S_t, S_v,c, Σ_c and E[s] of every
scale), ``svi`` and ``nuts`` one zero-covariance component per draw. Predictions follow Appendix 4:
test values are GP projections of the inducing values (Eq. 39–41), and for a pair (a, b) and user
j the utility difference z has mean Δt̂ + Σ_c Δv̂_c ŵ_c,j and variance

    Var Δt + Σ_c [Var Δv_c (ŵ²_c,j + ω_c,j) + Δv̂²_c ω_c,j]                     (Eq. 25)

(ω the variance of w_c,j); P(a ≻ b) = Φ(mean / √(1 + variance)) (Eq. 3), mixed over components.
With ``users=None`` the prediction is the consensus, z = t_a − t_b.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ...core.ids import check_features, distinct_pairs, feature_rows, positions
from ...core.posterior import Posterior, uniform_weights
from ...errors import DataError
from ...gp.linalg import DTYPE, cholesky, gamma_draws
from ...gp.probit import mixture_moments, mixture_prob
from .model import inducing_values

_CHUNK = 2**22


def _quad(A, S):
    """Row-wise A S Aᵀ for A (P, M) and S (C, M, M) → (P, C); S (M, M) → (P,)."""
    if S.dim() == 2:
        return ((A @ S) * A).sum(-1)
    return torch.einsum("pm,cmn,pn->pc", A, S, A)


@dataclass(kw_only=True)
class CrowdGPPLPosterior(Posterior):
    """Posterior of a fitted crowdGPPL. Build it with :func:`crowdzoo.fit`.

    ``t_m`` (G, M) or None, ``v_m`` (G, C, M), ``w_m`` (G, C, M_u) inducing values per component;
    ``t_cov`` (M, M), ``v_cov`` (C, M, M), ``w_cov`` (C, M_u, M_u) — or (C, U) variances for
    independent users — for Gaussian routes (G = 1), else None; ``s_t`` (G,), ``s_v``, ``s_w``
    (G, C) inverse scales (E[s] for natgrad, whose Gamma q(s) parameters are in ``gamma``).
    """

    t_m: torch.Tensor | None
    v_m: torch.Tensor
    w_m: torch.Tensor
    s_t: torch.Tensor | None
    s_v: torch.Tensor
    s_w: torch.Tensor
    t_cov: torch.Tensor | None = None
    v_cov: torch.Tensor | None = None
    w_cov: torch.Tensor | None = None
    gamma: dict = field(default_factory=dict)

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, params=None, **kw):
        """Draws of the non-centred sites (u_t, s_t, u_v, s_v, u_w, s_w) mapped to inducing values.
        ``params`` (svi with ``learn_kernel``): the learned length-scales, which then fix the setup."""
        if params and "lengthscale" in params:
            ell = params["lengthscale"].detach().to(DTYPE)
            ell_u = params.get("user_lengthscale")
            ell_u = None if ell_u is None else ell_u.detach().to(DTYPE)
            learned = {"learned_lengthscale": ell.tolist(),
                       "start_lengthscale": setup.items.kernel.lengthscale.tolist()}
            if ell_u is not None:
                learned.update(learned_user_lengthscale=ell_u.tolist(),
                               start_user_lengthscale=setup.users.kernel.lengthscale.tolist())
            with torch.no_grad():
                model, setup = model.with_lengthscales(setup, ell, ell_u)
            kw["settings"] = {**(kw.get("settings") or {}), **learned}
        iv = inducing_values(setup, {k: v.to(DTYPE) for k, v in sites.items()})
        return cls(model=model, setup=setup, data=data, method=method,
                   weights=uniform_weights(iv["v_m"].shape[0]), t_m=iv.get("t_m"), v_m=iv["v_m"],
                   w_m=iv["w_m"], s_t=iv.get("s_t"), s_v=iv["s_v"], s_w=iv["s_w"], **kw)

    # ------------------------------------------------------------------ lookups
    def _item_rows(self, item_features):
        """(A (N*, M), c (N*,), training?) for the training items or new ``item_features``."""
        side = self.setup.items
        if item_features is None:
            return (*side.item_terms(), True)
        if not self.model.item_features or self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this crowdGPPL has no item features (item_features=False "
                            "or none in the data), so it cannot predict for new items")
        X, _ = feature_rows("item_features", item_features, self.data.item_features.shape[1])
        return (*side.item_terms(X), False)

    def _user_rows(self, user_features):
        """(A_w (U*, M_u) or None for independent users, d (U*,), training?)."""
        side = self.setup.users
        if user_features is None:
            if side is None:
                return None, torch.zeros(self.setup.n_users, dtype=DTYPE), True
            return (*side.item_terms(), True)
        if side is None:
            raise DataError("user_features: this model has independent users (no user features or "
                            "user_features=False), so it cannot predict for new users")
        U = check_features("user_features", user_features, self.data.user_features.shape[1])
        return (*side.item_terms(U), False)

    def _positions(self, name, ids, training, n, table):
        return positions(name, ids, table if training else None, n, "item" if name in ("a", "b") else "user")

    # ------------------------------------------------------------------ moments
    def _item_moments(self, A):
        """Means (G, N*) of t and (G, N*, C) of v_c at rows A, and their q variances (from the
        Gaussian routes' covariances; 0 for draws): (N*,) and (N*, C)."""
        t = None if self.t_m is None else self.t_m @ A.T
        v = torch.einsum("gcm,nm->gnc", self.v_m, A)
        n, C = A.shape[0], self.setup.C
        vt = torch.zeros(n, dtype=DTYPE) if self.t_cov is None else _quad(A, self.t_cov)
        vv = torch.zeros(n, C, dtype=DTYPE) if self.v_cov is None else _quad(A, self.v_cov)
        return t, v, vt, vv

    def _user_moments(self, Aw, d, j):
        """Means (G, P, C) and variances (G, P, C) of w_c,j for users j (positions into Aw)."""
        if Aw is None:
            w = self.w_m[:, :, j].transpose(1, 2)
            var = torch.zeros(j.shape[0], self.setup.C, dtype=DTYPE)
            if self.w_cov is not None:
                var = self.w_cov[:, j].T
        else:
            Aj = Aw[j]
            w = torch.einsum("gcm,pm->gpc", self.w_m, Aj)
            var = torch.zeros(j.shape[0], self.setup.C, dtype=DTYPE)
            if self.w_cov is not None:
                var = _quad(Aj, self.w_cov)
        return w, var + d[j][:, None] / self.s_w[:, None, :]

    # ------------------------------------------------------------------ predictions
    def predict_proba(self, a, b, users=None, item_features=None, user_features=None) -> np.ndarray:
        """P(a ≻ b) per pair: the consensus (``users=None``) or the personal preference of each
        pair's user (Eq. 25, 3). ``a``, ``b`` are item ids (or rows of ``item_features``);
        ``users`` user ids (or rows of ``user_features``)."""
        A, c, tr_items = self._item_rows(item_features)
        X_items, new_ids = (None, None) if tr_items else feature_rows(
            "item_features", item_features, self.data.item_features.shape[1])
        ids_a = a
        a = positions("a", a, self.data.item_ids if tr_items else new_ids, A.shape[0])
        b = positions("b", b, self.data.item_ids if tr_items else new_ids, A.shape[0])
        distinct_pairs(a, b, ids_a)
        j = None
        if users is not None:
            Aw, d, tr_users = self._user_rows(user_features)
            n_u = self.setup.n_users if Aw is None else Aw.shape[0]
            j = self._positions("users", users, tr_users, n_u, self.data.user_ids)
            if j.shape != a.shape:
                raise DataError(f"users: {j.shape[0]} users for {a.shape[0]} pairs")
        elif not self.setup.consensus:
            raise DataError("users: this model has no consensus (consensus=False); pass users= "
                            "to predict personal preferences")
        out = torch.empty(a.shape[0], dtype=DTYPE)
        chunk = max(64, _CHUNK // (self.weights.shape[0] * (self.setup.C + 1)))
        for lo in range(0, a.shape[0], chunk):
            sl = slice(lo, lo + chunk)
            dA, cd = self.setup.items.pair_rows(a[sl], b[sl], X_items)  # the sparse conditional, Eq. 19
            mean, var = self._z(dA, cd, None if j is None else (Aw, d, j[sl]))
            out[sl] = mixture_prob(self.weights, mean, var)  # Eq. 3
        return out.numpy()

    def _z(self, dA, cd, user):
        """Mean and variance (G, P) of z for item-difference rows dA (P, M), conditional
        variances cd (P,), and user = (Aw, d, j) or None (consensus)."""
        t, dv, vt, vv = self._item_moments(dA)
        if t is None:
            mean = torch.zeros(self.weights.shape[0], dA.shape[0], dtype=DTYPE)
            var = torch.zeros_like(mean)
        else:
            mean = t
            var = vt + cd / self.s_t[:, None]
        if user is None:
            return mean, var
        w, ww = self._user_moments(*user)
        var_v = vv + cd[:, None] / self.s_v[:, None, :]  # (G, P, C)
        mean = mean + (dv * w).sum(-1)
        var = var + (var_v * (w * w + ww) + dv * dv * ww).sum(-1)
        return mean, var

    def utilities(self, item_features=None, users=None, user_features=None):
        """Posterior mean and variance of utilities.

        ``users=None``: the consensus t* (Eq. 39) as two pandas Series indexed by item.
        Otherwise the personal utilities F* = t* + Σ_c v*_c w*_c (Eq. 25) for the given user ids
        (or rows of ``user_features``), as two DataFrames (items × users)."""
        A, c, tr_items = self._item_rows(item_features)
        item_index = pd.Index(self.data.item_ids if tr_items else np.arange(A.shape[0]), name="item")
        if users is None:
            if not self.setup.consensus:
                raise DataError("users: this model has no consensus (consensus=False); pass users=")
            t, _, vt, _ = self._item_moments(A)
            var = vt + c / self.s_t[:, None]
            mean, variance = mixture_moments(self.weights, t, var)
            return (pd.Series(mean.numpy(), index=item_index, name="mean"),
                    pd.Series(variance.numpy(), index=item_index, name="variance"))
        Aw, d, tr_users = self._user_rows(user_features)
        n_u = self.setup.n_users if Aw is None else Aw.shape[0]
        j = self._positions("users", users, tr_users, n_u, self.data.user_ids)
        t, v, vt, vv = self._item_moments(A)  # (G, N), (G, N, C)
        w, ww = self._user_moments(Aw, d, j)  # (G, U*, C)
        var_v = vv + c[:, None] / self.s_v[:, None, :]
        mean = torch.einsum("gnc,guc->gnu", v, w)
        var = torch.einsum("gnc,guc->gnu", var_v, w * w + ww) + torch.einsum("gnc,guc->gnu", v * v, ww)
        if t is not None:
            mean = mean + t[:, :, None]
            var = var + (vt + c / self.s_t[:, None])[:, :, None]
        m, s2 = mixture_moments(self.weights, mean, var)
        cols = pd.Index(np.asarray(users).reshape(-1), name="user")
        return (pd.DataFrame(m.numpy(), index=item_index, columns=cols),
                pd.DataFrame(s2.numpy(), index=item_index, columns=cols))

    # ------------------------------------------------------------------ draws
    def sample(self, n: int = 1000, seed: int = 0) -> dict:
        """Draws for the training items and users: {"t" (n, N), "V" (n, C, N), "W" (n, C, U),
        "s_t", "s_v", "s_w"}; F = t + VᵀW per draw. Draws of an approximation for approximate
        routes; sparse models add the conditional variance per item/user independently."""
        g = torch.Generator().manual_seed(seed)
        G = self.weights.shape[0]
        comp = torch.arange(n) if (self.t_cov is None and self.v_cov is None and G == n) \
            else torch.multinomial(self.weights, n, replacement=True, generator=g)
        A, c, _ = self._item_rows(None)
        Aw, d, _ = self._user_rows(None)

        def draw(mean, cov):
            if cov is None:
                return mean[comp]
            if cov.shape == mean.shape[1:]:  # diagonal variances (C, U)
                return mean[comp] + cov.sqrt() * torch.randn((n,) + cov.shape, dtype=DTYPE, generator=g)
            L = cholesky(cov, what="posterior covariance")
            eps = torch.randn((n,) + cov.shape[:-1], dtype=DTYPE, generator=g)
            return mean[comp] + torch.einsum("...ij,n...j->n...i", L, eps)

        s_t, s_v, s_w = self._scale_draws(comp, n, g)
        out = {"s_v": s_v, "s_w": s_w}
        V = draw(self.v_m, self.v_cov) @ A.T
        out["V"] = V + torch.randn(V.shape, dtype=DTYPE, generator=g) * (c / s_v[..., None]).sqrt()
        W = draw(self.w_m, self.w_cov)
        if Aw is not None:
            W = W @ Aw.T
        out["W"] = W + torch.randn(W.shape, dtype=DTYPE, generator=g) * (d / s_w[..., None]).sqrt()
        if self.t_m is not None:
            t = draw(self.t_m, self.t_cov) @ A.T
            out["t"] = t + torch.randn(t.shape, dtype=DTYPE, generator=g) * (c / s_t[:, None]).sqrt()
            out["s_t"] = s_t
        return out

    def utility_draws(self, n: int = 2000, seed: int = 0, user=None) -> torch.Tensor:
        """(n, N) draws of the consensus t, or of ``user``'s utilities t + Σ_c v_c w_c,j (Eq. 5)."""
        dr = self.sample(n, seed=seed)
        if user is None:
            if "t" not in dr:
                raise DataError("user: this model has no consensus (consensus=False); pass user=")
            return dr["t"]
        j = int(positions("user", [user], self.data.user_ids, what="user")[0])
        f = (dr["V"] * dr["W"][:, :, j:j + 1]).sum(1)
        return f + dr["t"] if "t" in dr else f

    def _scale_draws(self, comp, n, g):
        if not self.gamma:
            return (None if self.s_t is None else self.s_t[comp]), self.s_v[comp], self.s_w[comp]

        def gam(key):
            shape, rate = self.gamma[key]
            return gamma_draws(shape, rate, n, g)

        return (gam("t") if self.s_t is not None else None), gam("v"), gam("w")

    # ------------------------------------------------------------------ output
    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`crowdzoo.models.crowdgppl.arviz.to_arviz`."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"CrowdGPPLPosterior(method={self.method!r}, items={self.data.n_items}, "
                f"users={self.data.n_users}, pairs={self.data.n_pairs}, C={self.setup.C}, "
                f"components={self.weights.shape[0]})")
