"""The fitted posterior of GPPL, shared by every inference route.

Every route returns the posterior over the inducing utilities f_m as a mixture of Gaussians,

    q(f_m) = Σ_g w_g N(f_m; m_g, S_g),   with inverse scale s_g in component g,

which covers all of them without special cases: ``natgrad`` is one component (S from Eq. 17,
s_g = E[s] from Eq. 15), ``ep`` one component per grid value of s (weights ∝ EP evidence ×
prior), and ``nuts``/``svi`` one zero-covariance component per posterior draw. Test utilities
follow from the GP conditional (Eq. 19): f* | f_m, s ~ N(A f_m, (K** − A K_m*) / s) with
A = K*m K_mm⁻¹, so the predictive probability of a pair is the mixture of Eq. 3.

With length-scales under a prior (``GPPL(lengthscale_prior=...)``, svi and nuts) every draw g has its
own ℓ_g (``lengthscales`` (G, D)), hence its own K_mm, A and c: predictions are computed draw by draw,
batched over chunks of draws (:class:`~crowdzoo.gp.learn.ARDGP`), and mixed as before. With
``learn_kernel=True`` (svi) the one learned ℓ defines the setup, as for natgrad and ep.

A fit to labels with ties (``ties="model"``) holds the tie threshold τ of each component (``tau``
(G,): svi's and nuts's draws, natgrad's point estimate, repeated). Its :meth:`predict_outcomes`
gives the three outcomes' probabilities in closed form per component
(:func:`~crowdzoo.gp.ordinal.predictive_outcomes`), and ``predict_proba`` gives P(a ≻ b | not a
tie), the probability that the pair's decided label, if it has one, is a ≻ b.

A model with the item residual (:mod:`crowdzoo.gp.residual`) holds each component's q(r) over the
training items (``r_means``, ``r_vars`` (G, N); draws have no variance) and s_r: a training item's
utility is the GP's plus r_i, a new item's residual is the prior's N(0, 1/s_r).

A model with the order effect (:mod:`crowdzoo.gp.order`) holds each component's mean and variance of δ,
the advantage of the item listed first (``order_means``, ``order_vars`` (G,); draws have no variance):
a pair (a, b) is predicted as given, f_a − f_b + δ, or with ``order=False`` at a neutral venue. The
Gaussian routes' q(δ) is added as independent of q(f_m) (natgrad's mean field; ep's covariance of δ with
f_m is left out of the predictions).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import distinct_pairs, feature_rows, positions
from ...core.posterior import Posterior, uniform_weights
from ...errors import DataError
from ...gp import order as order_effect
from ...gp import residual
from ...gp.linalg import DTYPE, cholesky, gamma_draws
from ...gp.probit import mixture_moments, mixture_prob

_CHUNK = 2**22


@dataclass(kw_only=True)
class GPPLPosterior(Posterior):
    """Posterior of a fitted GPPL. Build it with :func:`crowdzoo.fit`.

    Attributes (besides :class:`~crowdzoo.core.posterior.Posterior`'s): ``means`` (G, M), ``covs``
    (G, M, M) or None, ``s`` (G,), optional q(s) = Gamma(``s_shape``, ``s_rate``), ``lengthscales``
    (G, D) per component when the length-scales were inferred under a prior (else None: the setup's),
    ``tau`` (G,) the tie threshold per component of a fit to labels with ties (else None); ``r_means``,
    ``r_vars`` (G, N) and ``s_r`` (G,) the item residual's q per component (else None; ``r_vars`` None
    for draws); ``order_means``, ``order_vars`` (G,) δ's mean and variance per component with the order
    effect (else None; ``order_vars`` None for draws).
    """

    means: torch.Tensor
    covs: torch.Tensor | None
    s: torch.Tensor
    s_shape: float | None = None
    s_rate: float | None = None
    lengthscales: torch.Tensor | None = None
    tau: torch.Tensor | None = None
    r_means: torch.Tensor | None = None
    r_vars: torch.Tensor | None = None
    s_r: torch.Tensor | None = None
    order_means: torch.Tensor | None = None
    order_vars: torch.Tensor | None = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, params=None, **kw):
        """Draws of the non-centred sites u, s: f_m = L_mm u / √s per draw; with a "lengthscale"
        site, L_mm is each draw's own. ``params`` (svi with ``learn_kernel``): the model's learned
        {"lengthscale": ℓ}, which then fixes the setup."""
        s = sites["s"].to(DTYPE)
        u = sites["u"].to(DTYPE)
        if "tau" in sites:
            kw["tau"] = sites["tau"].to(DTYPE).reshape(-1)
        if "u_r" in sites:
            s_r = sites["s_r"].to(DTYPE).reshape(-1)
            kw.update(s_r=s_r, r_means=sites["u_r"].to(DTYPE) / s_r.sqrt()[:, None])
        if "order" in sites:
            kw["order_means"] = sites["order"].to(DTYPE).reshape(-1)
        if params and "lengthscale" in params:
            import dataclasses

            ell = params["lengthscale"].to(DTYPE)
            from .model import learning_start_of

            start = learning_start_of(model, setup)
            setup = model.ard(setup).sparse_gp(ell, type(setup), s_prior=setup.s_prior,
                                               tie_prior=setup.tie_prior, residual_prior=setup.residual_prior,
                                               order_prior=setup.order_prior)
            model = dataclasses.replace(model, lengthscale=ell)
            kw["settings"] = {**kw.get("settings", {}), "learned_lengthscale": ell.tolist(),
                              "start_lengthscale": start.tolist()}
        if "lengthscale" in sites:
            ell = sites["lengthscale"].to(DTYPE).reshape(s.shape[0], -1)
            ard = model.ard(setup)
            f_m = torch.empty_like(u)
            step = max(1, _CHUNK // setup.M ** 2)
            for lo in range(0, s.shape[0], step):  # chunks of draws bound the memory
                L = ard.chol(ell[lo:lo + step])[1]
                f_m[lo:lo + step] = (L @ u[lo:lo + step, :, None])[..., 0]
            f_m = f_m / s.sqrt()[:, None]
            return cls(model=model, setup=setup, data=data, method=method,
                       weights=uniform_weights(s.shape[0]), means=f_m, covs=None, s=s, lengthscales=ell, **kw)
        f_m = (u @ setup.L_mm.T) / s.sqrt()[:, None]
        return cls(model=model, setup=setup, data=data, method=method, weights=uniform_weights(s.shape[0]),
                   means=f_m, covs=None, s=s, **kw)

    # ------------------------------------------------------------------ per-draw length-scales
    def _draw_items(self, X):
        """Per-draw conditional mean (G, n) and variance (G, n) of f at items X (None: the training
        items) when every draw has its own ℓ: mean k_m(x)ᵀ K_mm⁻¹ f_m, variance c / s (Eq. 19)."""
        ard = self.model.ard(self.setup)
        Xs = self.setup.X if X is None else X
        G, n, M = self.means.shape[0], Xs.shape[0], self.setup.M
        mu = torch.empty(G, n, dtype=DTYPE)
        c = torch.zeros(G, n, dtype=DTYPE)
        step = max(1, _CHUNK // max(1, n * M))
        for lo in range(0, G, step):
            sl = slice(lo, lo + step)
            ell = self.lengthscales[sl]
            L = ard.chol(ell)[1]
            B = ard.whitened(L, Xs, ell)  # (g, M, n)
            w = torch.linalg.solve_triangular(L, self.means[sl, :, None], upper=False)  # L⁻¹ f_m
            mu[sl] = (B * w).sum(-2)
            if not (X is None and self.setup.exact):
                c[sl] = (ard.variance - (B * B).sum(-2)).clamp_min(0.0)
        return mu, c / self.s[:, None]

    def _draw_pairs(self, a, b, X):
        """Per-draw mean (G, P) and conditional variance (G, P) of f_a − f_b, as :meth:`_draw_items`."""
        ard = self.model.ard(self.setup)
        Xs = self.setup.X if X is None else X
        G, P, M = self.means.shape[0], a.shape[0], self.setup.M
        mu = torch.empty(G, P, dtype=DTYPE)
        c = torch.zeros(G, P, dtype=DTYPE)
        xa, xb = Xs[a], Xs[b]
        step = max(1, _CHUNK // max(1, P * M))
        for lo in range(0, G, step):
            sl = slice(lo, lo + step)
            ell = self.lengthscales[sl]
            L = ard.chol(ell)[1]
            d = ard.whitened(L, xa, ell) - ard.whitened(L, xb, ell)  # (g, M, P)
            w = torch.linalg.solve_triangular(L, self.means[sl, :, None], upper=False)
            mu[sl] = (d * w).sum(-2)
            if not (X is None and self.setup.exact):
                k_d = 2.0 * ard.variance - 2.0 * ard.k_pairs(xa, xb, ell)
                c[sl] = (k_d - (d * d).sum(-2)).clamp_min(0.0)
        return mu, c / self.s[:, None]

    # ------------------------------------------------------------------ the item residual
    def _residual_items(self, mu, var, X):
        return residual.predictive_items(mu, var, self.r_means, self.r_vars, self.s_r, X is not None)

    def _residual_pairs(self, mu, var, a, b, X):
        return residual.predictive_pairs(mu, var, a, b, self.r_means, self.r_vars, self.s_r, X is not None)

    # ------------------------------------------------------------------ helpers
    def _items(self, item_features):
        if item_features is None:
            return None, self.setup.X
        if self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this model was fitted without item features (independent "
                            "utilities), so it cannot predict for new items")
        X, self._new_ids = feature_rows("item_features", item_features, self.setup.X.shape[1])
        return X, X

    def _positions(self, name, ids, X, n: int) -> torch.Tensor:
        return positions(name, ids, self.data.item_ids if X is None else self._new_ids, n)

    # ------------------------------------------------------------------ predictions
    def utilities(self, item_features=None):
        """Posterior mean and variance of the utility of each item: (mean, variance) as
        pandas Series labelled by item id (or by position for new ``item_features``)."""
        X, Xs = self._items(item_features)
        if self.lengthscales is not None:
            mu, var = self._draw_items(X)
        else:
            A, c = self.setup.item_terms(X)  # Eq. 19
            mu = self.means @ A.T  # (G, N*)
            var = c / self.s[:, None]
            if self.covs is not None:
                var = var + torch.einsum("im,gmn,in->gi", A, self.covs, A)
        mu, var = self._residual_items(mu, var, X)
        mean, variance = mixture_moments(self.weights, mu, var)
        index = pd.Index(self.data.item_ids if X is None else np.arange(Xs.shape[0]), name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(variance.numpy(), index=index, name="variance"))

    def predict_proba(self, a, b, item_features=None, order: bool = True) -> np.ndarray:
        """P(a ≻ b) for each pair (Eq. 3, mixed over the posterior components).

        ``a``, ``b`` name items of the table predicted for: the training items by id or, with
        ``item_features=`` (new items), that table's rows — by its index when it is a DataFrame,
        by position when it is an array. A pair of an item with itself is refused. A fit with ties gives
        P(a ≻ b | not a tie) (module docstring). ``order``: with the order effect, a listed first (the
        home side, shown first: f_a − f_b + δ); False: a neutral venue, without δ."""
        if self.tau is not None:
            return self.decided_proba(a, b, item_features=item_features, order=order)
        out = torch.empty(len(a), dtype=DTYPE)
        for sl, mu, var in self._pair_chunks(a, b, item_features, order):
            out[sl] = mixture_prob(self.weights, mu, var)
        return out.numpy()

    def set_moments(self, items, users=None):
        """Each component's mean and variance (G, R, k_max) of the set members' utilities (training
        items): A m_g and c / s_g + diag(A S_g Aᵀ) (Eq. 19)."""
        if users is not None:
            raise DataError("users: this model has one utility per item (no personal utilities)", arg="users")
        if self.lengthscales is not None:
            mu, var = self._draw_items(None)
        else:
            A, c = self.setup.item_terms()
            mu, var = self.means @ A.T, (c / self.s[:, None]).expand(self.means.shape[0], -1)
            if self.covs is not None:
                var = var + torch.einsum("im,gmn,in->gi", A, self.covs, A)
        mu, var = self._residual_items(mu, var, None)
        return mu[:, items], var[:, items]

    def predict_choice(self, sets, users=None, worst: bool = False, **kwargs):
        """:meth:`~crowdzoo.core.posterior.Posterior.predict_choice`; a Gaussian posterior (natgrad, ep:
        ``covs``) integrates the members' joint Gaussian N(A_J m, A_J S A_Jᵀ) rather than each member's
        variance alone: sets of two in closed form, Φ((μ_i − μ_j) / √(1 + v_Δ + c_i / s + c_j / s)) (as
        :meth:`predict_proba`, with the members' conditional variances c_j / s as noise), larger ones by 256
        antithetic quasi-random pairs of points (:func:`~crowdzoo.gp.choice.normal_points`)."""
        if self.covs is None or self.lengthscales is not None or users is not None or kwargs:
            return super().predict_choice(sets, users, worst, **kwargs)
        from ...core.ids import choice_positions
        from ...gp.choice import gaussian_choice_probs, normal_points

        items, mask = choice_positions(sets, self.data.item_ids)
        R, K = mask.shape
        A, c = self.setup.item_terms()
        A_J = A[items] * mask[..., None]
        points = normal_points(K, 256)
        p = torch.zeros(R, K, dtype=DTYPE)
        for g in range(self.weights.shape[0]):
            mu = A_J @ self.means[g]
            cov = A_J @ self.covs[g] @ A_J.mT
            var = c[items] / self.s[g] * mask
            if self.r_means is not None:
                mu = mu + self.r_means[g][items] * mask
                cov = cov + torch.diag_embed(self.r_vars[g][items] * mask)
            pg = gaussian_choice_probs(-mu if worst else mu, cov, var, mask, points)
            p += self.weights[g] * pg
        return np.where(mask.numpy(), p.numpy(), 0.0)

    def pair_moments(self, a, b, item_features=None, order: bool = True):
        """Mean and variance (G, P) of f_a − f_b (+ δ with the order effect, unless ``order=False``) per
        component (Eq. 19), for pairs named as in :meth:`predict_proba`."""
        parts = list(self._pair_chunks(a, b, item_features, order))
        return torch.cat([p[1] for p in parts], -1), torch.cat([p[2] for p in parts], -1)

    def outcome_probs(self, a, b, item_features=None, order: bool = True) -> torch.Tensor:
        """(P, 3) probabilities (p_a, p_tie, p_b) of a fit with ties, mixed over the components chunk by
        chunk of pairs (``order`` as for :meth:`predict_proba`)."""
        from ...gp.ordinal import predictive_outcomes

        out = torch.empty(len(a), 3, dtype=DTYPE)
        for sl, mu, var in self._pair_chunks(a, b, item_features, order):
            p = predictive_outcomes(mu, var, self.tau[:, None])
            out[sl] = (self.weights[:, None, None] * p).sum(0)
        return out

    def _pair_chunks(self, a, b, item_features, order: bool = True):
        """(slice, mean (G, p), variance (G, p)) of f_a − f_b per component, for chunks of the pairs (δ
        added with the order effect and ``order``)."""
        X, Xs = self._items(item_features)
        ids_a = a
        a = self._positions("a", a, X, Xs.shape[0])
        b = self._positions("b", b, X, Xs.shape[0])
        distinct_pairs(a, b, ids_a)
        G, M = self.weights.shape[0], self.setup.M
        chunk = max(64, _CHUNK // (G * M))  # ≤ _CHUNK numbers per chunk of (component, pair, M) rows
        items = None  # the items' rows once, when they fit: O(M) a pair after that, not O(M²)
        if self.lengthscales is None and Xs.shape[0] * M * (G if self.covs is not None else 1) <= _CHUNK:
            items = self.setup.item_moments(self.means, self.covs, self.s, X)
        for lo in range(0, a.shape[0], chunk):  # chunks bound memory; vectorised within
            sl = slice(lo, lo + chunk)
            mu, var = self._residual_pairs(*self._gp_pairs(items, a[sl], b[sl], X), a[sl], b[sl], X)
            yield (sl, *order_effect.predictive(mu, var, self.order_means, self.order_vars, order))

    def _gp_pairs(self, items, a, b, X):
        """Mean and variance (G, P) of the GP part of f_a − f_b per component (``items``: the items' rows,
        when :meth:`_pair_chunks` holds them)."""
        if items is not None:
            return items.pairs(a, b)
        if self.lengthscales is not None:
            return self._draw_pairs(a, b, X)
        dA, c = self.setup.pair_rows(a, b, X)
        mu = self.means @ dA.T  # (G, P)
        var = c[None, :] / self.s[:, None]
        if self.covs is not None:
            var = var + torch.einsum("pm,gmn,pn->gp", dA, self.covs, dA)
        return mu, var

    def utility_gaussian(self, user=None, n_draws: int = 1000, seed: int = 0):
        """Mean (N,) and covariance (N, N) of the training items' utilities, the mixture moment-matched:
        A m̄ and A (Σ_g w_g (S_g + m_g m_gᵀ) − m̄ m̄ᵀ) Aᵀ + diag(Σ_g w_g c / s_g) (Eq. 19)."""
        if user is not None:
            raise DataError("user: this model has one utility per item (no personal utilities)")
        if self.lengthscales is not None or self.r_means is not None:  # from draws
            return super().utility_gaussian(None, n_draws, seed)
        A, c = self.setup.item_terms()
        w = self.weights
        m = w @ self.means
        second = torch.einsum("g,gm,gn->mn", w, self.means, self.means)
        if self.covs is not None:
            second = second + torch.einsum("g,gmn->mn", w, self.covs)
        S = second - torch.outer(m, m)
        cov = A @ S @ A.T + torch.diag(c * (w / self.s).sum())
        return A @ m, cov

    # ------------------------------------------------------------------ draws
    def sample(self, n: int = 1000, seed: int = 0) -> dict:
        """Posterior draws: {"f": (n, N) utilities of the training items, "s": (n,)}, "lengthscale"
        (n, D) when the length-scales were inferred under a prior, "tau" (n,) for a fit with ties,
        "s_r" (n,) with the item residual (which f includes) and "order" (n,) δ with the order effect.

        For approximate routes these are draws from the approximation. For a sparse model the
        conditional variance of f given f_m is added independently per item (FITC-style)."""
        g = torch.Generator().manual_seed(seed)
        comp = torch.multinomial(self.weights, n, replacement=True, generator=g)
        if self.covs is None and self.weights.shape[0] == n and torch.allclose(
                self.weights, torch.full_like(self.weights, 1.0 / n)):
            comp = torch.arange(n)  # the draws themselves, in chain order
        f_m = self.means[comp]
        if self.covs is not None:
            L = cholesky(self.covs, what="posterior covariance S")
            eps = torch.randn(n, self.setup.M, dtype=DTYPE, generator=g)
            f_m = f_m + torch.einsum("nij,nj->ni", L[comp], eps)
        if self.s_shape is not None:
            s = gamma_draws(self.s_shape, self.s_rate, n, g)
        else:
            s = self.s[comp]
        extra = {} if self.tau is None else {"tau": self.tau[comp]}
        if self.r_means is not None:
            extra["s_r"] = self.s_r[comp]
        if self.order_means is not None:
            extra["order"] = self.order_means[comp]
            if self.order_vars is not None:
                extra["order"] = extra["order"] + torch.randn(n, dtype=DTYPE, generator=g) * \
                    self.order_vars[comp].sqrt()
        if self.lengthscales is not None:  # each draw its own ℓ (the draws' f_m as above)
            mu, var = self._draw_items(None)
            f = mu[comp]
            if not self.setup.exact:
                f = f + torch.randn(f.shape, dtype=DTYPE, generator=g) * torch.sqrt(var[comp])
            return {"f": residual.draws(f, comp, self.r_means, self.r_vars, g), "s": s,
                    "lengthscale": self.lengthscales[comp], **extra}
        A, c = self.setup.item_terms()
        f = f_m @ A.T
        if not self.setup.exact:
            f = f + torch.randn(f.shape, dtype=DTYPE, generator=g) * torch.sqrt(c / self.s[comp][:, None])
        return {"f": residual.draws(f, comp, self.r_means, self.r_vars, g), "s": s, **extra}

    # ------------------------------------------------------------------ output
    def utility_draws(self, n: int = 2000, seed: int = 0, user=None) -> torch.Tensor:
        """(n, N) draws of the items' utilities f (one user: ``user`` must be None)."""
        if user is not None:
            raise DataError("user: this model has one utility per item (no personal utilities)")
        return self.sample(n, seed=seed)["f"]

    def to_arviz(self, n_draws: int = 1000, seed: int = 0):
        """An ArviZ ``DataTree`` (posterior, posterior_predictive, observed_data,
        log_likelihood, sample_stats); see :mod:`crowdzoo.models.gppl.arviz`."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"GPPLPosterior(method={self.method!r}, items={self.data.n_items}, "
                f"pairs={self.data.n_pairs}, inducing={self.setup.M}, components={self.weights.shape[0]})")
