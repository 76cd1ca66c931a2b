"""The fitted posterior of collabGP, shared by its routes (EP–VB, Pyro SVI, NUTS).

Every route gives a mixture over G components (one for EP, one per draw for SVI and NUTS) of

* a_d ~ N(a_mean, a_cov): the pseudo-input values of h_d (h_d = Φ_h a_d + √δ_h ε, whitened under
  the unit prior; with learned scales a_d and ε have prior variance 1/s_d, and ``h_scale`` holds
  each component's 1/s_d for the FITC residual ε);
* w_u,d ~ N(w_mean, w_var) for the training users;
* b_d ~ N(b_mean, b_cov): the whitened pseudo-user values of w_d (with user features only),
  for users the data has not seen.

Predictions follow supplement a §4.1 (Eq. 11–15) and, with FITC, Eq. 59–60: h_d at any pair has
mean φᵀ a_mean and variance φᵀ a_cov φ + δ/s_d, and the personal preference of user u is
Φ(m_g / √(1 + v_g)) with m_g, v_g of Eq. 12–13.

With length-scales under a prior (``CollabGP(lengthscale_prior=..., user_lengthscale_prior=...)``, svi
and nuts) every draw g has its own ℓ_g (``lengthscales`` (G, D), ``user_lengthscales`` (G, E)), hence
its own L_zz and bases Φ, δ on that side (:class:`~crowdzoo.models.collabgp.lengthscales.SideARD`): w at the
training users is built per draw, and predictions and draws run over chunks of draws, each chunk's
bases built at once (at most about 2²² numbers per chunk), mixed as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import check_features, distinct_pairs, feature_rows, positions, seen_users
from ...core.posterior import Posterior, draw_chunks, uniform_weights
from ...errors import DataError
from ...gp.learn import learned_sides
from ...gp.linalg import DTYPE
from ...gp.probit import mixture_prob

_CHUNK = 2**22


@dataclass(kw_only=True)
class CollabGPPosterior(Posterior):
    """Posterior of a fitted :class:`~crowdzoo.models.CollabGP`; build it with :func:`crowdzoo.fit`.

    Shapes: ``weights`` (G,), ``a_mean`` (G, D, M), ``a_cov`` (D, M, M) or None, ``w_mean``
    (G, U, D), ``w_var`` (U, D) or None, ``b_mean`` (G, D, M_u) or None, ``b_cov`` or None.
    ``log_evidence``: the EP approximation of log P(labels) (§4.3; EP only). ``lengthscales`` (G, D)
    and ``user_lengthscales`` (G, E): each draw's ARD length-scales when those were inferred under a
    prior (else None: the setup's kernels). ``h_scale`` (G, D): 1/s_d, each component's prior variance
    of h_d relative to the unit prior (1/E[s_d] for EP, each draw's for svi and nuts; None: 1)."""

    a_mean: torch.Tensor
    a_cov: torch.Tensor | None
    w_mean: torch.Tensor
    w_var: torch.Tensor | None
    b_mean: torch.Tensor | None = None
    b_cov: torch.Tensor | None = None
    log_evidence: float | None = None
    h_scale: torch.Tensor | None = None
    state: object = None
    lengthscales: torch.Tensor | None = None
    user_lengthscales: torch.Tensor | None = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, params=None, **kw):
        """Draws of a, and w or b [+ e_w], as zero-covariance components; with a "user_lengthscale"
        site each draw's own Φ_w, δ_w. ``params`` (svi with ``learn_kernel``): the learned ARD
        length-scales, which then fix the setup."""
        if params and ("lengthscale" in params or "user_lengthscale" in params):
            ell, ell_u, learned = learned_sides(params, setup)
            with torch.no_grad():
                model, setup = model.with_lengthscales(setup, ell, ell_u)
            kw["settings"] = {**(kw.get("settings") or {}), **learned}
        sites = {k: v.to(DTYPE) for k, v in sites.items()}
        G = sites["a"].shape[0]
        if "s_h" in sites:  # h_d = Φ_h a_d / √s_d: a in the units of h
            kw["h_scale"] = 1.0 / sites["s_h"].reshape(G, -1)
            sites["a"] = sites["a"] * kw["h_scale"].sqrt()[..., None]
        ell = {k: sites[k].reshape(G, -1) for k in ("lengthscale", "user_lengthscale") if k in sites}
        if "w" in sites:
            w = sites["w"]
        elif "user_lengthscale" in ell:  # each draw its own Φ_w, δ_w
            space = model.lengthscale_space(setup, prior=True)
            w = torch.empty(G, setup.n_users, setup.D, dtype=DTYPE)
            step = max(1, _CHUNK // (setup.n_users * setup.Phi_w.shape[1] + setup.Phi_w.shape[1] ** 2))
            for lo in range(0, G, step):
                sl = slice(lo, lo + step)
                Phi, delta = space.user_basis(ell["user_lengthscale"][sl])
                w[sl] = Phi @ sites["b"][sl].mT
                if "e_w" in sites:
                    w[sl] = w[sl] + delta.sqrt()[..., None] * sites["e_w"][sl]
        else:
            w = (sites["b"] @ setup.Phi_w.T).transpose(1, 2)  # (S, U, D)
            if "e_w" in sites:
                w = w + setup.delta_w.sqrt()[:, None] * sites["e_w"]
        return cls(model=model, setup=setup, data=data, method=method,
                   weights=uniform_weights(G), a_mean=sites["a"], a_cov=None, w_mean=w,
                   w_var=None, b_mean=sites.get("b"), lengthscales=ell.get("lengthscale"),
                   user_lengthscales=ell.get("user_lengthscale"), **kw)

    # ------------------------------------------------------------------ per-draw kernels
    def _space(self):
        """The ARD algebra of the sides whose length-scales vary per draw (None: fixed kernels)."""
        if self.lengthscales is None and self.user_lengthscales is None:
            return None
        return self.model.lengthscale_space(self.setup, prior=True)

    def _draw_chunks(self, per_draw: int):
        """Slices of the components: all at once with fixed kernels, else chunks whose per-draw bases
        hold about ``_CHUNK`` numbers (``per_draw`` numbers for each draw)."""
        varying = self.lengthscales is not None or self.user_lengthscales is not None
        return draw_chunks(self.weights.shape[0], per_draw, varying, _CHUNK)

    def _item_basis(self, xa, xb, gs):
        """(Φ, δ) of h at the pairs (x_a, x_b): (n, M), (n,) with a fixed kernel, per draw (g, n, M),
        (g, n) for the components ``gs`` when the item length-scales were inferred."""
        if self.lengthscales is None:
            return self.setup.items.basis(xa, xb)
        return self._space().items.basis(self.lengthscales[gs], xa, xb)

    def _user_basis(self, U, gs):
        """(Φ, δ) of w at new users' features U, shared or per draw as :meth:`_item_basis`."""
        if self.user_lengthscales is None:
            return self.setup.users.basis(U)
        return self._space().users.basis(self.user_lengthscales[gs], U)

    # ------------------------------------------------------------------ moments
    def _items(self, item_features):
        if item_features is None:
            return self.setup.X, True
        if self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this collabGP was fitted without item features, so it cannot "
                            "predict for new items")
        X, self._new_ids = feature_rows("item_features", item_features, self.setup.X.shape[1])
        return X, False

    def _h_moments(self, Xs, a, b, gs=slice(None)):
        """Means (g, n, D) and variances (n, D) — (g, n, D) with per-draw kernels — of h_d at the pairs
        (a, b) for the components ``gs`` (Eq. 14–15, 59–60)."""
        Phi, delta = self._item_basis(Xs[a], Xs[b], gs)
        mean = Phi @ self.a_mean[gs].mT  # (g, n, D)
        var = delta[..., None].expand(*delta.shape, self.setup.D).clone()
        if self.h_scale is not None:  # the FITC residual's prior variance δ/s_d
            var = var * self.h_scale[gs][:, None, :]
        if self.a_cov is not None:
            var = var + torch.einsum("nm,dmk,nk->nd", Phi, self.a_cov, Phi)
        return mean, var

    def _w_users(self, users, user_features):
        """(positions j of the users, their features U[j] or None for training users)."""
        if user_features is None:
            return positions("users", users, self.data.user_ids, what="user"), None
        if self.setup.users is None:
            raise DataError("user_features: this collabGP has no user GP (user_features=False or no "
                            "user features in the data), so it cannot predict for new users")
        U = check_features("user_features", user_features, self.setup.user_X.shape[1])
        j = positions("users", users, None, U.shape[0], what="user")
        return j, U[j]

    def _w_moments(self, j, Uj, gs=slice(None)):
        """Means (g, n, D) and variances (n, D) — (g, n, D) with per-draw user kernels — of w for the
        users j (training users, Uj None, or new users of features Uj) for the components ``gs``."""
        if Uj is None:
            var = torch.zeros(j.shape[0], self.setup.D, dtype=DTYPE) if self.w_var is None else self.w_var[j]
            return self.w_mean[gs][:, j], var
        Phi, delta = self._user_basis(Uj, gs)
        mean = Phi @ self.b_mean[gs].mT  # (g, n, D)
        var = delta[..., None].expand(*delta.shape, self.setup.D).clone()
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
        j, Uj = self._w_users(users, user_features)
        if j.shape[0] != ia.shape[0]:
            raise DataError(f"users: {j.shape[0]} users for {ia.shape[0]} pairs")
        G, n = self.weights.shape[0], ia.shape[0]
        mean, var = torch.empty(G, n, dtype=DTYPE), torch.empty(G, n, dtype=DTYPE)
        M, M_u = self.setup.Phi_h.shape[1], 0 if self.setup.Phi_w is None else self.setup.Phi_w.shape[1]
        for gs in self._draw_chunks(n * (M + M_u + 4 * self.setup.D) + M * M + M_u * M_u):
            mh, vh = self._h_moments(Xs, ia, ib, gs)
            mw, vw = self._w_moments(j, Uj, gs)
            mean[gs] = (mw * mh).sum(-1)
            var[gs] = (mw * mw * vh + vw * mh * mh + vw * vh).sum(-1)
        return mean, var

    query_users = "personal"  # a query asks one user about her own preferences (active learning)

    def _queries(self, a, b, u):
        """Active learning's candidates: each one's moments of g_u(a, b) (Eq. 12–13, the mixture
        moment-matched); collabGP's latent lives on pairs, so no covariance between candidates is formed
        and a batch's fantasy step updates only its own query."""
        from ...core.suggest import GaussianQueries

        ids, uids = self.data.item_ids, self.data.user_ids
        mean, var = self.latent_moments(ids[a], ids[b], uids[u])
        w = self.weights[:, None]
        m = (w * mean).sum(0)
        return GaussianQueries(m, (w * (var + mean * mean)).sum(0) - m * m)

    # ------------------------------------------------------------------ predictions
    def predict_proba(self, a, b, users=None, item_features=None, user_features=None,
                      new_users: str = "error") -> np.ndarray:
        """P(user prefers a to b) for each pair: Φ(m_g / √(1 + v_g)) (supplement a, Eq. 11),
        mixed over components. ``a``, ``b``: item ids (or rows of ``item_features``); ``users``:
        user ids (or rows of ``user_features``). A user id not seen in training is refused whatever
        ``new_users`` says: collabGP has no consensus, and a new user's prior w has mean 0 (P = ½)."""
        if users is not None and user_features is None:
            n = np.asarray(a).reshape(-1).shape[0]
            why = ("collabGP has no consensus, and without features a new user's prior w has mean 0, so "
                   "every P would be ½; pass user_features= for new users, or drop their rows")
            seen_users(users, self.data.user_ids, n, new_users, prior=why, consensus=why)
        mean, var = self.latent_moments(a, b, users, item_features, user_features)
        return mixture_prob(self.weights, mean, var).numpy()

    def utilities(self, *args, **kwargs):
        raise DataError("utilities: collabGP models preferences between pairs of items directly "
                        "(h_d over item pairs, supplement a §1), so it has no utility per item; use "
                        "predict_proba(a, b, users=...) for pairwise preferences")

    def mean_preferences(self, n_pairs: int = 200_000, seed: int = 0) -> pd.DataFrame:
        """What collabGP has in place of utilities: per training item i, the average over the training
        users u and the other items j of the posterior mean preference E[g_u(i, j)] (``mean``; the
        preference kernel makes g_u(i, j) = f_u(i) − f_u(j), so this is i's personal utility less the
        mean item's, averaged over users) and of P_u(i ≻ j) (``p_win``), best first. Where items ×
        (items − 1) × users exceeds ``n_pairs``, a seeded random share of the users and opponents."""
        N = self.data.n_items
        users = np.unique(self.data.users)
        rng = np.random.default_rng(seed)
        k = min(N - 1, max(1, n_pairs // (N * users.size)))  # opponents per item and user
        if k < N - 1:
            users = np.sort(rng.choice(users, min(users.size, max(1, n_pairs // (N * k))), replace=False))
        opp = (np.tile(np.arange(N - 1), (N, 1)) if k == N - 1 else rng.integers(0, N - 1, size=(N, k)))
        opp = opp + (opp >= np.arange(N)[:, None])  # every item but i itself
        item = np.tile(np.repeat(np.arange(N), k), users.size)  # (item, opponent, user) rows
        other = np.tile(opp.ravel(), users.size)
        who = self.data.user_ids[np.repeat(users, N * k)]
        ids = self.data.item_ids
        mean, p = np.zeros(N), np.zeros(N)
        for lo in range(0, item.size, 50_000):
            part = slice(lo, lo + 50_000)
            m, v = self.latent_moments(ids[item[part]], ids[other[part]], who[part])
            mean += np.bincount(item[part], (self.weights[:, None] * m).sum(0).numpy(), minlength=N)
            p += np.bincount(item[part], mixture_prob(self.weights, m, v).numpy(), minlength=N)
        mean, p = mean / (k * users.size), p / (k * users.size)
        table = pd.DataFrame({"item": ids, "mean": mean, "p_win": p})
        return table.sort_values("mean", ascending=False, ignore_index=True)

    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """Draws {"w": (n, U, D), "h": (n, D, P)} at the training users and pairs (from the
        approximation for EP; for NUTS/SVI the draws themselves when n is their number), and
        "lengthscale" (n, D) / "user_lengthscale" (n, E) when those were inferred under a prior (each
        draw's h from its own kernel)."""
        g = torch.Generator().manual_seed(seed)
        G = self.weights.shape[0]
        # the draws themselves in chain order when n matches, else components drawn by weight
        comp = (torch.arange(n) if G == n
                else torch.multinomial(self.weights, n, replacement=True, generator=g))
        P = self.setup.pairs
        xa, xb = self.setup.X[P[:, 0]], self.setup.X[P[:, 1]]
        a = self.a_mean[comp]
        if self.a_cov is not None:
            Lc = torch.linalg.cholesky(self.a_cov)
            a = a + torch.einsum("dmk,ndk->ndm", Lc, torch.randn(a.shape, dtype=DTYPE, generator=g))
        if self.lengthscales is None:
            Phi, delta = self.setup.items.basis(xa, xb)
            h = torch.einsum("ndm,pm->ndp", a, Phi)
            sd = delta.sqrt()
        else:  # each draw its own Φ_h, δ_h
            h, sd = torch.empty(n, self.setup.D, self.setup.P, dtype=DTYPE), torch.empty(n, 1, self.setup.P,
                                                                                          dtype=DTYPE)
            M = self.setup.Phi_h.shape[1]
            step = max(1, _CHUNK // (self.setup.P * M + M * M))
            for lo in range(0, n, step):
                sl = slice(lo, lo + step)
                Phi, delta = self._item_basis(xa, xb, comp[sl])
                h[sl], sd[sl, 0] = a[sl] @ Phi.mT, delta.sqrt()
        if self.h_scale is not None:
            sd = sd * self.h_scale[comp].sqrt()[..., None]
        h = h + sd * torch.randn(h.shape, dtype=DTYPE, generator=g)
        w = self.w_mean[comp]
        if self.w_var is not None:
            w = w + self.w_var.sqrt() * torch.randn(w.shape, dtype=DTYPE, generator=g)
        out = {"w": w, "h": h}
        for name, ell in (("lengthscale", self.lengthscales), ("user_lengthscale", self.user_lengthscales)):
            if ell is not None:
                out[name] = ell[comp]
        return out

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree`` (posterior of w, h and the labels' g; observed data; log-likelihood)."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"CollabGPPosterior(method={self.method!r}, users={self.setup.n_users}, "
                f"pairs={self.setup.P}, labels={self.setup.L}, D={self.setup.D}, "
                f"components={self.weights.shape[0]})")

