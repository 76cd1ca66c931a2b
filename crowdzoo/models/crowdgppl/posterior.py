"""The fitted posterior of crowdGPPL, shared by every inference route.

Every route returns G components (weights w_g) over the inducing values: ``natgrad`` one
component with the mean-field Gaussians of Eq. 20 (covariances S_t, S_v,c, Σ_c and E[s] of every
scale), ``svi`` and ``nuts`` one zero-covariance component per draw. Predictions follow Appendix 4:
test values are GP projections of the inducing values (Eq. 39–41), and for a pair (a, b) and user
j the utility difference z has mean Δt̂ + Σ_c Δv̂_c ŵ_c,j and variance

    Var Δt + Σ_c [Var Δv_c (ŵ²_c,j + ω_c,j) + Δv̂²_c ω_c,j]                     (Eq. 25)

(ω the variance of w_c,j); P(a ≻ b) = Φ(mean / √(1 + variance)) (Eq. 3), mixed over components.
With ``users=None`` the prediction is the consensus, z = t_a − t_b.

With length-scales under a prior (``CrowdGPPL(lengthscale_prior=..., user_lengthscale_prior=...)``, svi
and nuts) every draw g has its own ℓ_g (``lengthscales`` (G, D), ``user_lengthscales`` (G, E)), hence
its own K_mm and projections A_g = K_*m K_mm⁻¹ and conditional variances c_g (Eq. 19, 39–41) on that
side: predictions run over chunks of draws, each chunk's projections built at once
(:class:`~crowdzoo.gp.learn.ARDGP`, at most about 2²² numbers per chunk), and are mixed as before.

With the item residual (:mod:`crowdzoo.gp.residual`) the consensus of a training item is t_i + r_i
(``r_means``, ``r_vars`` (G, N), ``s_r`` (G,)); a new item's residual is the prior's, N(0, 1/s_r).

With the order effect (:mod:`crowdzoo.gp.order`) z of a pair as given (a first: the home side, the item
shown first) gains δ, the crowd's advantage of the first item, with each component's mean and variance
(``order_means``, ``order_vars`` (G,); natgrad's q(δ) is independent of the other factors, draws have no
variance); ``predict_proba(..., order=False)`` leaves it out (a neutral venue).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ...core.ids import by_rows, check_features, distinct_pairs, feature_rows, positions, seen_users
from ...core.posterior import Posterior, draw_chunks, uniform_weights
from ...errors import DataError
from ...gp import order as order_effect
from ...gp import residual
from ...gp.learn import learned_sides
from ...gp.linalg import DTYPE, cholesky, gamma_draws
from ...gp.probit import mixture_moments, mixture_prob
from .model import inducing_values

_CHUNK = 2**22


def _quad(A, S):
    """Row-wise A S Aᵀ for A (P, M) and S (C, M, M) → (P, C); S (M, M) → (P,)."""
    if S.dim() == 2:
        return ((A @ S) * A).sum(-1)
    return torch.einsum("pm,cmn,pn->pc", A, S, A)


def _draw_inducing_values(space, sites, ell) -> dict:
    """:func:`~crowdzoo.models.crowdgppl.model.inducing_values` with each draw's own factors L_mm
    (and L_u) at its length-scales ``ell`` {"lengthscale": (G, D), "user_lengthscale": (G, E)}, in chunks
    of draws that bound the memory."""
    G = sites["u_v"].shape[0]
    step = max(1, _CHUNK // max(space.base.M, space.base.M_u) ** 2)
    parts = []
    for lo in range(0, G, step):
        sl = slice(lo, lo + step)
        L = None if space.items is None else space.items.chol(ell["lengthscale"][sl])[1]
        L_u = None if space.users is None else space.users.chol(ell["user_lengthscale"][sl])[1]
        parts.append(inducing_values(space.base, {k: v[sl] for k, v in sites.items()}, L, L_u))
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def _put(out, sl, part, n: int):
    """Write a chunk's predictions ``part`` (p, ...) at rows ``sl`` of ``out`` (n, ...), made on first use."""
    if out is None:
        out = torch.empty((n,) + part.shape[1:], dtype=DTYPE)
    out[sl] = part
    return out


@dataclass(kw_only=True)
class CrowdGPPLPosterior(Posterior):
    """Posterior of a fitted crowdGPPL. Build it with :func:`crowdzoo.fit`.

    ``t_m`` (G, M) or None, ``v_m`` (G, C, M), ``w_m`` (G, C, M_u) inducing values per component;
    ``t_cov`` (M, M), ``v_cov`` (C, M, M), ``w_cov`` (C, M_u, M_u) — or (C, U) variances for
    independent users — for Gaussian routes (G = 1), else None; ``s_t`` (G,), ``s_v``, ``s_w``
    (G, C) inverse scales (E[s] for natgrad, whose Gamma q(s) parameters are in ``gamma``);
    ``lengthscales`` (G, D) and ``user_lengthscales`` (G, E) per draw when those were inferred under a
    prior (else None: the setup's kernels); ``tau`` (G,) the crowd's tie threshold per component of a fit
    to labels with ties (else None), whose ``predict_proba`` is then P(a ≻ b | not a tie) and whose
    :meth:`predict_outcomes` gives the three outcomes (the closed form of
    :func:`~crowdzoo.gp.ordinal.predictive_outcomes` per component, mixed); ``r_means``, ``r_vars``
    (G, N) and ``s_r`` (G,) the item residual's q per component (else None; ``r_vars`` None for draws),
    part of the consensus; ``order_means``, ``order_vars`` (G,) the order effect δ per component (else
    None; ``order_vars`` None for draws).
    """

    query_users = "personal"  # a query asks one user about her own utilities (active learning)

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
    lengthscales: torch.Tensor | None = None
    user_lengthscales: torch.Tensor | None = None
    tau: torch.Tensor | None = None
    r_means: torch.Tensor | None = None
    r_vars: torch.Tensor | None = None
    s_r: torch.Tensor | None = None
    order_means: torch.Tensor | None = None
    order_vars: torch.Tensor | None = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, params=None, **kw):
        """Draws of the non-centred sites (u_t, s_t, u_v, s_v, u_w, s_w) mapped to inducing values;
        with "lengthscale" / "user_lengthscale" sites, each draw's own L_mm on that side.
        ``params`` (svi with ``learn_kernel``): the learned length-scales, which then fix the setup."""
        if params and "lengthscale" in params:
            ell, ell_u, learned = learned_sides(params, setup)
            with torch.no_grad():
                model, setup = model.with_lengthscales(setup, ell, ell_u)
            kw["settings"] = {**(kw.get("settings") or {}), **learned}
        sites = {k: v.to(DTYPE) for k, v in sites.items()}
        G = sites["u_v"].shape[0]
        if "tau" in sites:  # (G,), or (G, U) with a τ per user
            kw["tau"] = sites["tau"].reshape(G, -1) if setup.tie_per_user else sites["tau"].reshape(G)
        if "u_r" in sites:
            kw.update(s_r=sites["s_r"].reshape(G), r_means=sites["u_r"] / sites["s_r"].reshape(G, 1).sqrt())
        if "order" in sites:
            kw["order_means"] = sites["order"].reshape(G)
        ell = {k: sites[k].reshape(G, -1) for k in ("lengthscale", "user_lengthscale") if k in sites}
        iv = (_draw_inducing_values(model.lengthscale_space(setup, prior=True), sites, ell) if ell
              else inducing_values(setup, sites))
        return cls(model=model, setup=setup, data=data, method=method,
                   weights=uniform_weights(G), t_m=iv.get("t_m"), v_m=iv["v_m"],
                   w_m=iv["w_m"], s_t=iv.get("s_t"), s_v=iv["s_v"], s_w=iv["s_w"],
                   lengthscales=ell.get("lengthscale"), user_lengthscales=ell.get("user_lengthscale"), **kw)

    # ------------------------------------------------------------------ lookups
    def _item_inputs(self, item_features):
        """(None, None) for the training items, else the new items' features X (n, D) and their ids."""
        if item_features is None:
            return None, None
        if not self.model.item_features or self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this crowdGPPL has no item features (item_features=False "
                            "or none in the data), so it cannot predict for new items")
        return feature_rows("item_features", item_features, self.data.item_features.shape[1])

    def _user_inputs(self, user_features):
        """None for the training users, else the new users' features (U*, E)."""
        if user_features is None:
            return None
        if self.setup.users is None:
            raise DataError("user_features: this model has independent users (no user features or "
                            "user_features=False), so it cannot predict for new users")
        return check_features("user_features", user_features, self.data.user_features.shape[1])

    def _positions(self, name, ids, training, n, table):
        return positions(name, ids, table if training else None, n, "item" if name in ("a", "b") else "user")

    # ------------------------------------------------------------------ per-draw kernels
    def _ards(self):
        """(item, user) ARD algebra of the sides whose length-scales vary per draw (None: fixed)."""
        if self.lengthscales is None and self.user_lengthscales is None:
            return None, None
        space = self.model.lengthscale_space(self.setup, prior=True)
        return (space.items if self.lengthscales is not None else None,
                space.users if self.user_lengthscales is not None else None)

    def _draw_chunks(self, per_draw: int):
        """Slices of the components: all at once with fixed kernels, else chunks whose per-draw
        projections hold about ``_CHUNK`` numbers (``per_draw`` numbers for each draw)."""
        varying = self.lengthscales is not None or self.user_lengthscales is not None
        return draw_chunks(self.weights.shape[0], per_draw, varying, _CHUNK)

    def _item_rows(self, X, gs):
        """Projection A (Eq. 39) and conditional variance c (× 1/s) at the training items (X None) or
        new items X: (n, M) and (n,) with a fixed kernel, per draw (g, n, M) and (g, n) for the
        components ``gs`` when the item length-scales were inferred."""
        ard = self._ards()[0]
        if ard is None:
            return self.setup.items.item_terms(X)
        return ard.item_rows(self.lengthscales[gs], X)

    def _pair_rows(self, a, b, X, gs):
        """Rows A_a − A_b and conditional variances of f_a − f_b (Eq. 19), shared or per draw."""
        ard = self._ards()[0]
        if ard is None:
            return self.setup.items.pair_rows(a, b, X)
        return ard.pair_rows(self.lengthscales[gs], a, b, X)

    def _user_rows(self, U, gs, j):
        """(A_w, d) at users ``j`` (positions among the training users, U None, or rows of new user
        features U): A_w (P, M_u) or per draw (g, P, M_u), None for independent users; d (P,) or (g, P)."""
        side = self.setup.users
        if side is None:
            return None, torch.zeros(j.shape[0], dtype=DTYPE)
        ard = self._ards()[1]
        if ard is None:
            Aw, d = side.item_terms(U)
            return Aw[j], d[j]
        ell = self.user_lengthscales[gs]
        return ard.item_rows(ell, None if U is None else U[j], idx=j if U is None else None)

    # ------------------------------------------------------------------ moments
    def _item_moments(self, A, gs):
        """Means (g, N*) of t and (g, N*, C) of v_c at rows A (shared (N*, M) or per draw) for the
        components ``gs``, and their q variances (from the Gaussian routes' covariances; 0 for draws):
        (N*,) and (N*, C)."""
        t = None if self.t_m is None else (A @ self.t_m[gs, :, None])[..., 0]
        v = A @ self.v_m[gs].mT
        n, C = A.shape[-2], self.setup.C
        vt = torch.zeros(n, dtype=DTYPE) if self.t_cov is None else _quad(A, self.t_cov)
        vv = torch.zeros(n, C, dtype=DTYPE) if self.v_cov is None else _quad(A, self.v_cov)
        return t, v, vt, vv

    def _user_moments(self, Aj, dj, j, gs):
        """Means (g, P, C) and variances (g, P, C) of w_c,j for users j, from their rows Aj (None:
        independent users, w_c,j = w_m[c, j]) and conditional variances dj (:meth:`_user_rows`)."""
        C = self.setup.C
        if Aj is None:
            w = self.w_m[gs][:, :, j].transpose(1, 2)
            var = torch.zeros(j.shape[0], C, dtype=DTYPE) if self.w_cov is None else self.w_cov[:, j].T
        else:
            w = Aj @ self.w_m[gs].mT
            var = torch.zeros(j.shape[0], C, dtype=DTYPE) if self.w_cov is None else _quad(Aj, self.w_cov)
        return w, var + dj[..., None] / self.s_w[gs][:, None, :]

    def _residual_items(self, mu, var, X):
        return residual.predictive_items(mu, var, self.r_means, self.r_vars, self.s_r, X is not None)

    def _residual_pairs(self, mu, var, a, b, X):
        return residual.predictive_pairs(mu, var, a, b, self.r_means, self.r_vars, self.s_r, X is not None)

    # ------------------------------------------------------------------ predictions
    def predict_proba(self, a, b, users=None, item_features=None, user_features=None,
                      new_users: str = "error", order: bool = True) -> np.ndarray:
        """P(a ≻ b) per pair: the consensus (``users=None``) or the personal preference of each
        pair's user (Eq. 25, 3). ``a``, ``b`` are item ids (or rows of ``item_features``);
        ``users`` user ids (or rows of ``user_features``). ``new_users``: what a user id not seen in
        training gets — "error" (refused, naming it), "consensus" (the consensus t alone) or "prior"
        (its w_c from the prior N(0, 1/s_w), Eq. 23: the consensus's mean with the personal part's
        variance). A fit with ties gives P(a ≻ b | not a tie). ``order``: with the order effect, a listed
        first (z + δ); False: a neutral venue, without δ."""
        if self.tau is not None:  # ties: the decided pairs' P(a ≻ b)
            p = self.outcome_probs(a, b, users, item_features, user_features, new_users, order)
            return (p[:, 0] / (p[:, 0] + p[:, 2]).clamp_min(1e-300)).numpy()
        return self._combined(a, b, users, item_features, user_features, new_users,
                              self._ordered(self._mixed, order))

    def _ordered(self, combine, order: bool):
        """``combine(mean, var)`` of each chunk's moments (G, P) of z, with δ's moments added first where
        the fit has the order effect and ``order`` is True."""
        if self.order_means is None or not order:
            return combine
        means, variances = self.order_means, self.order_vars
        return lambda mean, var: combine(*order_effect.predictive(mean, var, means, variances))

    def outcome_probs(self, a, b, users=None, item_features=None, user_features=None,
                      new_users: str = "error", order: bool = True) -> torch.Tensor:
        """(P, 3) probabilities (p_a, p_tie, p_b) of a fit with ties, for the arguments of
        :meth:`predict_proba`, mixed over the components."""
        from ...gp.ordinal import predictive_outcomes

        def combine_at(tau):
            def combine(mean, var):
                p = predictive_outcomes(mean, var, tau[:, None])
                return (self.weights[:, None, None] * p).sum(0)
            return self._ordered(combine, order)

        if self.tau.dim() == 1:
            out = self._combined(a, b, users, item_features, user_features, new_users, combine_at(self.tau))
            return torch.as_tensor(out, dtype=DTYPE)
        return self._outcomes_per_user(a, b, users, item_features, user_features, new_users, combine_at)

    def _outcomes_per_user(self, a, b, users, item_features, user_features, new_users, combine_at):
        """:meth:`outcome_probs` with a τ per user (G, U): the pairs of each training user at that user's
        τ; the consensus, new users and users by features at the median of the users' τ per component."""
        median = self.tau.median(-1).values
        n = np.asarray(a).shape[0]
        if users is None or user_features is not None:
            out = self._combined(a, b, users, item_features, user_features, new_users, combine_at(median))
            return torch.as_tensor(out, dtype=DTYPE)
        users = np.asarray(users).reshape(-1)
        if users.shape[0] != n:
            raise DataError(f"users: {users.shape[0]} users for {n} pairs", arg="users")
        known = pd.Index(self.data.user_ids).get_indexer(users)
        out = torch.empty(n, 3, dtype=DTYPE)
        for u in np.unique(known):  # a batch per user (users, not labels)
            rows = np.flatnonzero(known == u)
            tau = median if u < 0 else self.tau[:, u]
            out[rows] = torch.as_tensor(self._combined(np.asarray(a)[rows], np.asarray(b)[rows], users[rows],
                                                       item_features, None, new_users, combine_at(tau)),
                                        dtype=DTYPE)
        return out

    def _combined(self, a, b, users, item_features, user_features, new_users, combine):
        """:meth:`predict_proba`'s work, each chunk's moments of z made into predictions by ``combine``
        (:meth:`_predict`)."""
        X, new_ids = self._item_inputs(item_features)
        n_items = self.data.n_items if X is None else X.shape[0]
        ids_a = a
        a = positions("a", a, self.data.item_ids if X is None else new_ids, n_items)
        b = positions("b", b, self.data.item_ids if X is None else new_ids, n_items)
        distinct_pairs(a, b, ids_a)
        no_consensus = None if self.setup.consensus else "this crowdGPPL has no consensus (consensus=False)"
        if users is None:
            if no_consensus:
                raise DataError("users: this model has no consensus (consensus=False); pass users= "
                                "to predict personal preferences")
            return self._predict(a, b, X, None, None, combine)
        U = self._user_inputs(user_features)
        if U is not None:
            j = self._positions("users", users, False, U.shape[0], self.data.user_ids)
            if j.shape != a.shape:
                raise DataError(f"users: {j.shape[0]} users for {a.shape[0]} pairs")
            return self._predict(a, b, X, U, j, combine)
        _, j = seen_users(users, self.data.user_ids, a.shape[0], new_users, consensus=no_consensus)
        unseen = "prior" if new_users == "prior" else None
        return by_rows(j, lambda r: self._predict(a[r], b[r], X, None, j[r], combine),
                       lambda r: self._predict(a[r], b[r], X, None, unseen, combine))

    def _predict(self, a, b, X, U, j, combine=None):
        """P(a ≻ b) at item positions a, b; j: the users' positions (among the training users, or
        rows of new user features U), None for the consensus, or "prior" for users not seen.
        ``combine(mean, var)``: what to make of each chunk's moments (G, P) of z, (P, ...) (None: the
        mixture of Eq. 3)."""
        if self.lengthscales is None and self.user_lengthscales is None:
            return self._predict_by_items(a, b, X, U, j, combine)
        return self._predict_by_pairs(a, b, X, U, j, combine)

    def _mixed(self, mean, var):
        """The mixture of Eq. 3 over the components: P(a ≻ b) (P,) from moments (G, P) of z."""
        return mixture_prob(self.weights, mean, var)

    def _predict_by_pairs(self, a, b, X, U, j, combine=None):
        """:meth:`predict_proba` through each pair's own rows (per-draw kernels need them)."""
        combine = combine or self._mixed
        G, C = self.weights.shape[0], self.setup.C
        out = None
        chunk = max(64, _CHUNK // (G * (C + 1) * max(self.setup.M, self.setup.M_u)))
        for lo in range(0, a.shape[0], chunk):
            sl = slice(lo, lo + chunk)
            P = a[sl].shape[0]
            mean, var = torch.empty(G, P, dtype=DTYPE), torch.empty(G, P, dtype=DTYPE)
            for gs in self._draw_chunks(P * (self.setup.M + self.setup.M_u + C + 1)):
                dA, cd = self._pair_rows(a[sl], b[sl], X, gs)  # the sparse conditional, Eq. 19
                user = j if j is None or isinstance(j, str) else (*self._user_rows(U, gs, j[sl]), j[sl])
                mean[gs], var[gs] = self._z(dA, cd, user, gs)
            mean, var = self._residual_pairs(mean, var, a[sl], b[sl], X)
            out = _put(out, sl, combine(mean, var), a.shape[0])
        return out.numpy()

    def _predict_by_items(self, a, b, X, U, j, combine=None):
        """:meth:`predict_proba` with fixed kernels, through the items' and users' rows: each item's
        moments of t and v_c and each user's of w_c once (:meth:`SparseGP.item_moments`,
        :meth:`_user_table`), then O(C M) a pair for the cross terms A_a S A_bᵀ — where each pair's own
        rows cost O(C M²) — in chunks of pairs that bound the memory."""
        combine = combine or self._mixed
        G, C = self.weights.shape[0], self.setup.C
        out = None
        items = self.setup.items
        T = None if self.t_m is None else items.item_moments(self.t_m, None if self.t_cov is None
                                                             else self.t_cov[None], self.s_t, X)
        V = items.item_moments(self.v_m.reshape(G * C, -1), self.v_cov, self.s_v.reshape(-1), X)
        w_u = (None if j is None or isinstance(j, str)
               else self._user_table(U, self.setup.n_users if U is None else U.shape[0]))
        chunk = max(64, _CHUNK // (G * (C + 1) * max(self.setup.M, 1)))
        for lo in range(0, a.shape[0], chunk):
            sl = slice(lo, lo + chunk)
            dv, var_v = (x.reshape(G, C, -1).mT for x in V.pairs(a[sl], b[sl]))  # (G, P, C)
            if T is None:
                mean = var = torch.zeros(dv.shape[:2], dtype=DTYPE)
            else:
                mean, var = self._residual_pairs(*T.pairs(a[sl], b[sl]), a[sl], b[sl], X)
            if isinstance(j, str):  # "prior": w_c ~ N(0, 1/s_w,c): E[w] = 0
                var = var + ((var_v + dv * dv) / self.s_w[:, None, :]).sum(-1)
            elif w_u is not None:
                w, ww = w_u[0][:, j[sl]], w_u[1][:, j[sl]]  # (G, P, C)
                mean = mean + (dv * w).sum(-1)
                var = var + (var_v * (w * w + ww) + dv * dv * ww).sum(-1)
            out = _put(out, sl, combine(mean, var), a.shape[0])
        return out.numpy()

    def _user_table(self, U, n: int):
        """Means and variances (G, n, C) of w_c for the first ``n`` training users (U None) or the rows
        of new user features U, in chunks of users."""
        G, C = self.weights.shape[0], self.setup.C
        w, ww = torch.empty(G, n, C, dtype=DTYPE), torch.empty(G, n, C, dtype=DTYPE)
        step = max(1, _CHUNK // (C * max(self.setup.M_u or 1, 1)))
        gs = slice(0, G)
        for lo in range(0, n, step):
            j = torch.arange(lo, min(n, lo + step))
            w[:, j], ww[:, j] = self._user_moments(*self._user_rows(U, gs, j), j, gs)
        return w, ww

    def _z(self, dA, cd, user, gs):
        """Mean and variance (g, P) of z for the components ``gs``, item-difference rows dA (P, M) (or
        per draw), conditional variances cd, and user = (A_w, d, j) at the pairs' users or None
        (consensus)."""
        t, dv, vt, vv = self._item_moments(dA, gs)
        if t is None:
            mean = torch.zeros(dv.shape[:2], dtype=DTYPE)
            var = torch.zeros_like(mean)
        else:
            mean = t
            var = vt + cd / self.s_t[gs][:, None]
        if user is None:
            return mean, var
        var_v = vv + cd[..., None] / self.s_v[gs][:, None, :]  # (g, P, C)
        if isinstance(user, str):  # "prior": w_c ~ N(0, 1/s_w,c)
            return mean, var + ((var_v + dv * dv) / self.s_w[gs][:, None, :]).sum(-1)
        w, ww = self._user_moments(*user, gs)
        mean = mean + (dv * w).sum(-1)
        var = var + (var_v * (w * w + ww) + dv * dv * ww).sum(-1)
        return mean, var

    def utilities(self, item_features=None, users=None, user_features=None):
        """Posterior mean and variance of utilities.

        ``users=None``: the consensus t* (Eq. 39) as two pandas Series indexed by item.
        Otherwise the personal utilities F* = t* + Σ_c v*_c w*_c (Eq. 25) for the given user ids
        (or rows of ``user_features``), as two DataFrames (items × users)."""
        X, _ = self._item_inputs(item_features)
        n = self.data.n_items if X is None else X.shape[0]
        item_index = pd.Index(self.data.item_ids if X is None else np.arange(n), name="item")
        G, M = self.weights.shape[0], self.setup.M
        if users is None:
            if not self.setup.consensus:
                raise DataError("users: this model has no consensus (consensus=False); pass users=")
            mean, var = torch.empty(G, n, dtype=DTYPE), torch.empty(G, n, dtype=DTYPE)
            for gs in self._draw_chunks(n * (M + self.setup.C + 2)):
                A, c = self._item_rows(X, gs)
                t, _, vt, _ = self._item_moments(A, gs)
                mean[gs], var[gs] = t, vt + c / self.s_t[gs][:, None]
            m, s2 = mixture_moments(self.weights, *self._residual_items(mean, var, X))
            return (pd.Series(m.numpy(), index=item_index, name="mean"),
                    pd.Series(s2.numpy(), index=item_index, name="variance"))
        U = self._user_inputs(user_features)
        n_u = self.setup.n_users if U is None else U.shape[0]
        j = self._positions("users", users, U is None, n_u, self.data.user_ids)
        mean, var = torch.empty(G, n, j.shape[0], dtype=DTYPE), torch.empty(G, n, j.shape[0], dtype=DTYPE)
        for gs in self._draw_chunks(n * (M + j.shape[0]) + j.shape[0] * self.setup.M_u):
            A, c = self._item_rows(X, gs)
            t, v, vt, vv = self._item_moments(A, gs)  # (g, N), (g, N, C)
            w, ww = self._user_moments(*self._user_rows(U, gs, j), j, gs)  # (g, U*, C)
            var_v = vv + c[..., None] / self.s_v[gs][:, None, :]
            mean[gs] = torch.einsum("gnc,guc->gnu", v, w)
            var[gs] = (torch.einsum("gnc,guc->gnu", var_v, w * w + ww)
                       + torch.einsum("gnc,guc->gnu", v * v, ww))
            if t is not None:
                mean[gs] += t[:, :, None]
                var[gs] += (vt + c / self.s_t[gs][:, None])[:, :, None]
        if self.r_means is not None:  # the item residual, shared by every user
            zero = torch.zeros(G, n, dtype=DTYPE)
            r_mean, r_var = self._residual_items(zero, zero, X)
            mean, var = mean + r_mean[:, :, None], var + r_var[:, :, None]
        m, s2 = mixture_moments(self.weights, mean, var)
        cols = pd.Index(np.asarray(users).reshape(-1), name="user")
        return (pd.DataFrame(m.numpy(), index=item_index, columns=cols),
                pd.DataFrame(s2.numpy(), index=item_index, columns=cols))

    # ------------------------------------------------------------------ draws
    def _at_training(self, f_m, comp, users: bool = False):
        """Values f_m Aᵀ (n, ..., N) at the training items (or users) of inducing draws f_m (n, ..., M)
        of the components ``comp``, and the conditional variances c: (N,), or (n, N) with per-draw ℓ."""
        side = self.setup.users if users else self.setup.items
        ard = self._ards()[1 if users else 0]
        if ard is None:
            A, c = side.item_terms()
            return f_m @ A.T, c
        ell = (self.user_lengthscales if users else self.lengthscales)[comp]
        n, N = ell.shape[0], side.X.shape[0]
        f, c = torch.empty(f_m.shape[:-1] + (N,), dtype=DTYPE), torch.empty(n, N, dtype=DTYPE)
        step = max(1, _CHUNK // (N * side.M))
        for lo in range(0, n, step):
            sl = slice(lo, lo + step)
            A, c[sl] = ard.item_rows(ell[sl])
            f[sl] = torch.einsum("gnm,g...m->g...n", A, f_m[sl])
        return f, c

    def sample(self, n: int = 1000, seed: int = 0) -> dict:
        """Draws for the training items and users: {"t" (n, N), "V" (n, C, N), "W" (n, C, U),
        "s_t", "s_v", "s_w"}, and "lengthscale" (n, D), "user_lengthscale" (n, E) when those were
        inferred under a prior; F = t + VᵀW per draw. Draws of an approximation for approximate
        routes; sparse models add the conditional variance per item/user independently."""
        g = torch.Generator().manual_seed(seed)
        G = self.weights.shape[0]
        comp = torch.arange(n) if (self.t_cov is None and self.v_cov is None and G == n) \
            else torch.multinomial(self.weights, n, replacement=True, generator=g)

        def draw(mean, cov):
            if cov is None:
                return mean[comp]
            if cov.shape == mean.shape[1:]:  # diagonal variances (C, U)
                return mean[comp] + cov.sqrt() * torch.randn((n,) + cov.shape, dtype=DTYPE, generator=g)
            L = cholesky(cov, what="posterior covariance")
            eps = torch.randn((n,) + cov.shape[:-1], dtype=DTYPE, generator=g)
            return mean[comp] + torch.einsum("...ij,n...j->n...i", L, eps)

        def per_component(c):  # c (N,) or per draw (n, N), against (n, C, N)
            return c if c.dim() == 1 else c[:, None, :]

        s_t, s_v, s_w = self._scale_draws(comp, n, g)
        out = {"s_v": s_v, "s_w": s_w}
        V, c = self._at_training(draw(self.v_m, self.v_cov), comp)
        noise = torch.randn(V.shape, dtype=DTYPE, generator=g)
        out["V"] = V + noise * (per_component(c) / s_v[..., None]).sqrt()
        W = draw(self.w_m, self.w_cov)
        d = torch.zeros(self.setup.n_users, dtype=DTYPE)
        if self.setup.users is not None:
            W, d = self._at_training(W, comp, users=True)
        noise = torch.randn(W.shape, dtype=DTYPE, generator=g)
        out["W"] = W + noise * (per_component(d) / s_w[..., None]).sqrt()
        if self.t_m is not None:
            t, _ = self._at_training(draw(self.t_m, self.t_cov), comp)
            t = t + torch.randn(t.shape, dtype=DTYPE, generator=g) * (c / s_t[:, None]).sqrt()
            out["t"] = residual.draws(t, comp, self.r_means, self.r_vars, g)  # the consensus, t + r
            out["s_t"] = s_t
            if self.s_r is not None:
                out["s_r"] = self.s_r[comp]
        if self.lengthscales is not None:
            out["lengthscale"] = self.lengthscales[comp]
        if self.user_lengthscales is not None:
            out["user_lengthscale"] = self.user_lengthscales[comp]
        if self.tau is not None:
            out["tau"] = self.tau[comp]
        if self.order_means is not None:  # δ, the first item's advantage
            out["order"] = self.order_means[comp]
            if self.order_vars is not None:
                out["order"] = out["order"] + torch.randn(n, dtype=DTYPE, generator=g) * \
                    self.order_vars[comp].sqrt()
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

    def utility_gaussians(self, users, n_draws: int = 1000, seed: int = 0) -> list:
        """Mean and covariance of each of ``users``' utilities t + Σ_c v_c w_c,j from one set of draws."""
        from ...core.suggest import moment_gaussian

        dr = self.sample(n_draws, seed=seed)
        j = torch.as_tensor(positions("users", users, self.data.user_ids, what="user"))
        f = torch.einsum("ncN,ncu->unN", dr["V"], dr["W"][:, :, j])
        if "t" in dr:
            f = f + dr["t"][None]
        return [moment_gaussian(fu) for fu in f]

    def _queries(self, a, b, u, n_draws: int = 1000, seed: int = 0):
        """Every user's candidates in one joint Gaussian, linearised at the posterior mean
        (:func:`~crowdzoo.core.suggest.factor_queries`): a query's fantasy step updates the consensus
        and the components, and with them every other user's candidates, not only the asked user's."""
        from ...core.suggest import factor_queries

        dr = self.sample(n_draws, seed=seed)
        return factor_queries(dr.get("t"), dr["V"], dr["W"], a, b, u, self.label_link(u))

    def _scale_draws(self, comp, n, g):
        if not self.gamma:
            return (None if self.s_t is None else self.s_t[comp]), self.s_v[comp], self.s_w[comp]

        def gam(key):
            shape, rate = self.gamma[key]
            return gamma_draws(shape, rate, n, g)

        return (gam("t") if self.s_t is not None else None), gam("v"), gam("w")

    # ------------------------------------------------------------------ output
    def set_moments(self, items, users=None):
        """Mean and variance (G, R, k_max) of each row's user's utilities of its set's members
        (:func:`crowdzoo.models.crowdgppl.choices.set_moments`), what ``predict_choice`` mixes."""
        from .choices import set_moments

        return set_moments(self, items, users)

    def predict_choice(self, sets, users=None, worst: bool = False, **kwargs):
        """:meth:`~crowdzoo.core.posterior.Posterior.predict_choice`; the natgrad posterior's q integrates
        each set's members' joint Gaussian, whose covariances the row's user's shared weights make
        (:func:`crowdzoo.models.crowdgppl.members.predict_choice`)."""
        if self.method != "natgrad" or self.v_cov is None or self.lengthscales is not None or kwargs:
            return super().predict_choice(sets, users, worst, **kwargs)
        from .members import predict_choice

        return predict_choice(self, sets, users, worst)

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree``; see :func:`crowdzoo.models.crowdgppl.arviz.to_arviz`."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"CrowdGPPLPosterior(method={self.method!r}, items={self.data.n_items}, "
                f"users={self.data.n_users}, "
                f"pairs={getattr(self.data, 'n_pairs', None) or self.data.n_rows}, C={self.setup.C}, "
                f"components={self.weights.shape[0]})")
