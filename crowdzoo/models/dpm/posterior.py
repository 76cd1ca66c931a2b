"""The fitted posterior of the DPM community model: S kept Gibbs samples of the memberships, each
with its communities' EP posteriors over the inducing utilities.

Per sample s: memberships z[s] (U,) labelled 0, 1, … by first appearance, community c's
q(f_m^c) = N(means[s, c], covs[s, c]) with counts[s, c] members (0 for padding slots, which hold the
prior), and λ. A known user's prediction averages, over samples, Eq. 3 under their community's
posterior; a user not seen in training gets the CRP prior predictive, the mixture of the
communities weighted n_c / (U + λ) and the prior GP weighted λ / (U + λ). Community labels differ
between samples, so every summary here is label-invariant (co-clustering, number of communities,
per-user predictions).

The ``svi`` and ``nuts`` routes (the generic engines over the truncated Pyro program of
:mod:`crowdzoo.models.dpm.model`) give draws of the sticks β and the whitened inducing utilities u
(and λ with a prior): per draw, each community's f_m^c = L_mm u_c / √s is a point (``covs`` None), and
each user's membership probabilities r[s, u, c] = p(c_u = c | β, u, D_u) are stored as
``responsibilities``, with one membership per draw drawn from them (seeded by the fit's seed) in ``z``.
Predictions, utilities and the co-clustering average over r (Rao–Blackwellised); ``z`` serves the
point partition, the number of communities (those with any user in the drawn memberships), draws
and ArviZ.

A fit to labels with ties (``ties="model"``) holds the tie threshold τ of each draw or kept Gibbs sample
(``tau`` (S,)): :meth:`DPMPosterior.predict_outcomes` mixes, over draws, communities and each user's
membership probabilities, the ordered probit's closed form under each community's Gaussian f_a − f_b
(:func:`~crowdzoo.gp.ordinal.predictive_outcomes`, with the threshold τ α/√(α² + c/s) of the model),
and ``predict_proba`` is then P(a ≻ b | not a tie). With ``tie_threshold="per_user"`` ``tau`` is (S, U):
a training user's pairs take that user's τ_u, a new user's (``users=None`` or ``new_users="prior"``)
the median of the users' τ_u in each draw.

With the item length-scales under a prior (``DPMCommunities(lengthscale_prior=...)``, svi and nuts) every
draw s has its own ℓ_s (``lengthscales`` (S, D)), hence its own K_mm, L_mm, label directions G and
projections A = K_*m K_mm⁻¹ (Eq. 19): r, f_m^c and every prediction use draw s's, computed over chunks
of draws (:class:`~crowdzoo.gp.learn.ARDGP`, about 2²² numbers per chunk).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import distinct_pairs, feature_rows, positions, seen_users
from ...core.posterior import Posterior, draw_chunks, uniform_weights
from ...errors import DataError
from ...gp.conditional import probit_rows
from ...gp.linalg import DTYPE, cholesky
from ...gp.ordinal import predictive_outcomes
from ...gp.probit import mixture_moments, predictive_prob
from .model import directions, stick_weights, tie_scale, user_loglik

_CHUNK = 2**22


@dataclass(kw_only=True)
class DPMPosterior(Posterior):
    """Posterior of a fitted :class:`~crowdzoo.models.dpm.model.DPMCommunities` (module docstring).

    Attributes (besides :class:`~crowdzoo.core.posterior.Posterior`'s): ``z`` (S, U) memberships,
    ``means`` (S, C, M), ``covs`` (S, C, M, M) (None: point communities, the svi and nuts routes),
    ``counts`` (S, C), ``concentration`` (S,) λ per sample, ``responsibilities`` (S, U, C) p(c_u = c)
    per sample (svi and nuts; None for Gibbs, whose z are the samples themselves), ``lengthscales``
    (S, D) per draw when the item length-scales were inferred under a prior (None: the setup's kernel),
    ``tau`` (S,) the tie threshold per draw of a fit to labels with ties, (S, U) with a τ per user
    (else None).
    """

    query_users = "personal"  # a query asks one user about her own utilities (active learning)

    z: torch.Tensor
    means: torch.Tensor
    covs: torch.Tensor
    counts: torch.Tensor
    concentration: torch.Tensor
    responsibilities: torch.Tensor | None = None
    lengthscales: torch.Tensor | None = None
    tau: torch.Tensor | None = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, params=None, **kw):
        """From draws of the Pyro program's sites (β, u, and λ when it has a prior): per draw the
        communities' f_m^c = L_mm u_c / √s, the users' membership probabilities
        r ∝ π_c p(D_u | u_c), and one membership per user drawn from r (a generator seeded by the
        fit's seed); communities relabelled by first appearance in the drawn memberships. With a
        "lengthscale" site each draw's own L_mm and G. ``params`` (svi with ``learn_kernel``): the
        learned {"lengthscale": ℓ}, which then fixes the setup."""
        if params and "lengthscale" in params:
            ell = params["lengthscale"].detach().to(DTYPE)
            start = setup.gp.kernel.lengthscale
            a, b = (torch.as_tensor(x, dtype=torch.long) for x in (data.a, data.b))
            with torch.no_grad():
                model, setup = model.with_lengthscale(setup, ell, a, b)
            kw["settings"] = {**(kw.get("settings") or {}), "learned_lengthscale": ell.tolist(),
                              "start_lengthscale": start.tolist()}
        model = model.resolved(setup)
        u = sites["u"].to(DTYPE)
        S, T, M = u.shape
        U = data.n_users
        log_pi = (stick_weights(sites["beta"].to(DTYPE)) if "beta" in sites
                  else torch.zeros(S, 1, dtype=DTYPE))
        lam = (sites["concentration"].to(DTYPE).reshape(S) if "concentration" in sites
               else torch.full((S,), float(model.concentration), dtype=DTYPE))
        ell = sites["lengthscale"].to(DTYPE).reshape(S, -1) if "lengthscale" in sites else None
        per_user = setup.tie_per_user
        tau = sites["tau"].to(DTYPE).reshape((S, -1) if per_user else (S,)) if "tau" in sites else None
        users = torch.as_tensor(data.users, dtype=torch.long)
        args = model.program(setup, data, None)[1]
        G, sgn, lab, mask = args[:4] if ell is None else (None, *args[3:6])
        scale = args[8] if tau is not None and ell is None else None
        f_m = torch.empty(S, T, M, dtype=DTYPE)
        resp = torch.empty(S, U, T, dtype=DTYPE)
        step = 64 if ell is None else max(1, min(64, _CHUNK // (M * (M + lab.numel()))))
        ard = None if ell is None else model.item_gp.ard(setup.gp)
        for lo in range(0, S, step):
            sl = slice(lo, lo + step)
            L = setup.gp.L_mm
            if ard is not None:  # each draw its own K_mm, L_mm and label directions G
                L = ard.chol(ell[sl])[1]
                d, c = ard.pair_terms(ell[sl], args[1], args[2], L=L)
                G = directions(d, c, setup.s, setup.alpha)
                if tau is not None:
                    scale = tie_scale(c, setup.s, setup.alpha)
            if tau is not None:  # (s, P): each label's threshold (its user's with a τ per user)
                tau_p = (tau[sl][:, users] if per_user else tau[sl, None]) * scale
            ll = user_loglik(G, sgn, lab, mask, u[sl], None if tau is None else tau_p)  # (s, U, T)
            resp[sl] = torch.softmax(log_pi[sl, None, :] + ll, -1)
            f_m[sl] = u[sl] @ L.mT / setup.s ** 0.5
        g = torch.Generator().manual_seed(int((kw.get("settings") or {}).get("seed", 0)))
        z = torch.multinomial(resp.reshape(-1, T), 1, generator=g).reshape(S, U)
        first = torch.full((S, T), U, dtype=torch.long).scatter_reduce(
            1, z, torch.arange(U).expand(S, U), reduce="amin")
        perm = torch.argsort(first, dim=1, stable=True)  # communities by first appearance, unused last
        z = torch.argsort(perm, dim=1).gather(1, z)
        means = f_m.gather(1, perm[:, :, None].expand(-1, -1, M))
        resp = resp.gather(2, perm[:, None, :].expand(-1, U, -1))
        counts = torch.zeros(S, T, dtype=torch.long).scatter_add(1, z, torch.ones(S, U, dtype=torch.long))
        return cls(model=model, setup=setup, data=data, method=method, weights=uniform_weights(S), z=z,
                   means=means, covs=None, counts=counts, concentration=lam, responsibilities=resp,
                   lengthscales=ell, tau=tau, **kw)

    # ------------------------------------------------------------------ helpers
    def _weights(self):
        """(S, C + 1) CRP prior predictive weights of a new user: n_c / (U + λ), then λ / (U + λ)."""
        U = self.z.shape[1]
        w = torch.cat([self.counts.to(DTYPE), self.concentration[:, None]], 1)
        return w / (U + self.concentration)[:, None]

    def _moments(self, R, c, gs=slice(None), K=None):
        """Mean and variance (g, C + 1, n) of R f_m (+ c) under each community and the prior, for the
        samples ``gs``: rows R (n, M) and c (n,) shared, or per draw (g, n, M), (g, n) with the draws'
        prior covariances K (g, M, M) (:meth:`_item_rows`)."""
        K = self.setup.K if K is None else K
        mu = self.means[gs] @ R.mT
        var = (torch.zeros_like(mu) if self.covs is None else
               torch.einsum("nm,scmk,nk->scn", R, self.covs[gs], R))
        prior_var = ((R @ K) * R).sum(-1)
        mu = torch.cat([mu, torch.zeros_like(mu[:, :1])], 1)
        var = torch.cat([var, prior_var[..., None, :].expand(var.shape[0], 1, -1)], 1)
        return mu, var + (c[:, None, :] if torch.is_tensor(c) and c.dim() == 2 else c)

    def _pair_tau(self, gs, j):
        """(g, n) τ of each pair's user in the draws ``gs``: one per draw, or with a τ per user that
        user's, the median of the users' for a new user (j = −1)."""
        tau = self.tau[gs]
        if tau.dim() == 1:
            return tau[:, None].expand(-1, j.shape[0])
        median = tau.median(-1).values[:, None]
        return torch.where(j[None, :] >= 0, tau[:, j.clamp_min(0)], median)

    # ------------------------------------------------------------------ per-draw kernels
    def _draw_chunks(self, per_draw: int):
        """Slices of the samples: all at once with a fixed kernel, else chunks holding about ``_CHUNK``
        numbers (``per_draw`` for each draw)."""
        return draw_chunks(self.z.shape[0], per_draw, self.lengthscales is not None, _CHUNK)

    def _item_rows(self, X, gs):
        """(A, c / s, K) at the training items (X None) or new items X: the projection A (Eq. 19), the
        conditional variance and the communities' prior covariance K_mm / s; per draw (g, ...) for
        the samples ``gs`` when ℓ was inferred, else shared (K None: the setup's)."""
        st = self.setup
        if self.lengthscales is None:
            A, c = st.gp.item_terms(X)
            return A, c / st.s, None
        ard = self.model.item_gp.ard(st.gp)
        K, L = ard.chol(self.lengthscales[gs])
        A, c = ard.item_rows(self.lengthscales[gs], X, L=L)
        return A, c / st.s, K / st.s

    def _probit_rows(self, ia, ib, X, gs):
        """(h, K, scale): probit rows of pairs (:func:`~crowdzoo.gp.conditional.probit_rows`), the prior
        covariance, and each pair's tie scale α/√(α² + c/s) (:func:`~crowdzoo.models.dpm.model.tie_scale`),
        shared or per draw as in :meth:`_item_rows`."""
        st = self.setup
        if self.lengthscales is None:
            _, c = st.gp.pair_terms(ia, ib, X)
            return probit_rows(st.gp, ia, ib, st.s, st.alpha, X), None, tie_scale(c, st.s, st.alpha)
        ard = self.model.item_gp.ard(st.gp)
        K, L = ard.chol(self.lengthscales[gs])
        rows, c = ard.pair_rows(self.lengthscales[gs], ia, ib, X, L=L)
        return (rows / torch.sqrt(st.alpha ** 2 + c / st.s)[..., None], K / st.s,
                tie_scale(c, st.s, st.alpha))

    # ------------------------------------------------------------------ predictions
    def _items(self, item_features):
        """(X, ids) of the items predicted for: (None, training item ids), or the rows of new
        ``item_features`` (ids: the DataFrame's index, or None for positions)."""
        if item_features is None:
            return None, self.data.item_ids
        if self.data.item_features.shape[1] == 0:
            raise DataError("item_features: this model was fitted without item features (independent "
                            "utilities), so it cannot predict for new items")
        return feature_rows("item_features", item_features, self.setup.gp.X.shape[1])

    def predict_proba(self, a, b, users=None, item_features=None, new_users: str = "error") -> np.ndarray:
        """P(a ≻ b | user) per pair, averaged over the kept samples (a fit with ties: P(a ≻ b | not a
        tie), from :meth:`predict_outcomes`).

        ``users``: one user id per pair (or one for all); ``users=None`` gets the CRP prior
        predictive of a new user (module docstring), the population's preference. A user id not seen
        in training is refused (``new_users="error"``, naming it) or gets that same prior predictive
        (``"prior"`` or ``"consensus"``: for the DPM they are one).
        ``item_features=`` (new items): ``a``, ``b`` name rows of that table — by its index when it
        is a DataFrame, by position when it is an array — and each community's GP predicts there."""
        p = self._mixed(a, b, users, item_features, new_users, outcomes=self.tau is not None)
        if self.tau is None:
            return p.numpy()
        return (p[:, 0] / (p[:, 0] + p[:, 2]).clamp_min(1e-300)).numpy()

    def outcome_probs(self, a, b, users=None, item_features=None, new_users: str = "error") -> torch.Tensor:
        """(P, 3) probabilities (p_a, p_tie, p_b) of a fit with ties, for :meth:`predict_outcomes`
        (the arguments as :meth:`predict_proba`'s)."""
        return self._mixed(a, b, users, item_features, new_users, outcomes=True)

    def _mixed(self, a, b, users, item_features, new_users, outcomes: bool) -> torch.Tensor:
        """P(a ≻ b) (n,), or with ``outcomes`` (p_a, p_tie, p_b) (n, 3), mixed over the kept samples,
        each user's communities (or the CRP prior predictive of a new user) and their Gaussians."""
        X, ids = self._items(item_features)
        n_items = self.data.n_items if X is None else X.shape[0]
        ia = positions("a", a, ids, n_items)
        ib = positions("b", b, ids, n_items)
        distinct_pairs(ia, ib, a)
        n = ia.shape[0]
        if users is None:
            j = torch.full((n,), -1, dtype=torch.long)
        else:
            _, j = seen_users(users, self.data.user_ids, n, new_users)  # −1: the CRP's new user
        S, C = self.counts.shape
        k = 3 if outcomes else 1
        out = torch.empty(n, k, dtype=DTYPE)
        w_new = self._weights()
        chunk = max(16, _CHUNK // (S * (C + 1) * k))
        for lo in range(0, n, chunk):  # chunks bound memory; vectorised within
            sl = slice(lo, lo + chunk)
            p = torch.empty(S, C + 1, ia[sl].shape[0], k, dtype=DTYPE)
            for gs in self._draw_chunks(ia[sl].shape[0] * self.setup.M + self.setup.M ** 2):
                h, K, scale = self._probit_rows(ia[sl], ib[sl], X, gs)
                mean, var = self._moments(h, 0.0, gs, K)  # (g, C + 1, n)
                if outcomes:  # each draw's τ (each pair user's) at each pair's scale α/√(α² + c/s)
                    tau = self._pair_tau(gs, j[sl])[:, None, :] * scale[..., None, :]
                    p[gs] = predictive_outcomes(mean, var, tau)  # (g, C + 1, n, 3)
                else:
                    p[gs] = predictive_prob(mean, var)[..., None]
            jj = j[sl]
            known = jj >= 0
            if self.responsibilities is None:
                comm = self.z[:, jj.clamp_min(0)]  # (S, n)
                p_known = p.gather(1, comm[:, None, :, None].expand(-1, 1, -1, k))[:, 0]
            else:  # average over each user's membership probabilities
                p_known = torch.einsum("snc,scnk->snk", self.responsibilities[:, jj.clamp_min(0)], p[:, :C])
            p_new = (w_new[:, :, None, None] * p).sum(1)
            out[sl] = torch.where(known[None, :, None], p_known, p_new).mean(0)
        return out[:, 0] if not outcomes else out

    def utilities(self, users=None, item_features=None):
        """Posterior mean and variance of the items' utilities: for ``users`` (ids), DataFrames
        items × users; for ``users=None``, Series by item for a new user (the CRP prior predictive
        mixture). ``item_features=``: at those rows instead of the training items."""
        X, ids = self._items(item_features)
        N = self.data.n_items if X is None else X.shape[0]
        S, C = self.counts.shape
        mu, var = torch.empty(S, C + 1, N, dtype=DTYPE), torch.empty(S, C + 1, N, dtype=DTYPE)
        for gs in self._draw_chunks(N * (self.setup.M + 2 * C + 2) + self.setup.M ** 2):
            A, c, K = self._item_rows(X, gs)
            mu[gs], var[gs] = self._moments(A, c, gs, K)  # (S, C + 1, N)
        index = pd.Index(np.arange(N) if ids is None else ids, name="item")
        if users is None:
            w = self._weights() / self.z.shape[0]  # (S, C + 1), summing to 1 overall
            N = mu.shape[-1]
            m, v = mixture_moments(w.reshape(-1), mu.reshape(-1, N), var.reshape(-1, N))
            return (pd.Series(m.numpy(), index=index, name="mean"),
                    pd.Series(v.numpy(), index=index, name="variance"))
        ids = np.asarray(users).reshape(-1)
        j = positions("users", ids, self.data.user_ids, what="user", hint=False)
        if self.responsibilities is None:
            comm = self.z[:, j]  # (S, n_users)
            idx = comm[:, :, None].expand(-1, -1, mu.shape[-1])
            m_u, v_u = mu.gather(1, idx), var.gather(1, idx)  # (S, n_users, N)
            m, v = mixture_moments(self.weights, m_u, v_u)
        else:  # the mixture over draws and each user's membership probabilities
            C = self.counts.shape[1]
            w = self.weights[:, None, None] * self.responsibilities[:, j]  # (S, n_users, C)
            m = torch.einsum("suc,scn->un", w, mu[:, :C])
            v = (torch.einsum("suc,scn->un", w, var[:, :C] + mu[:, :C] ** 2) - m * m).clamp_min(0.0)
        cols = pd.Index(ids, name="user")
        return (pd.DataFrame(m.T.numpy(), index=index, columns=cols),
                pd.DataFrame(v.T.numpy(), index=index, columns=cols))

    # ------------------------------------------------------------------ memberships
    def coclustering(self) -> torch.Tensor:
        """(U, U) posterior probability that two users share a community (svi, nuts: Σ_c r_uc r_vc
        averaged over draws)."""
        S = self.z.shape[0]
        out = torch.zeros(self.z.shape[1], self.z.shape[1], dtype=DTYPE)
        if self.responsibilities is not None:
            for lo in range(0, S, 256):
                r = self.responsibilities[lo:lo + 256]
                out += torch.einsum("suc,svc->uv", r, r)
            out /= S
            out.fill_diagonal_(1.0)
            return out
        for lo in range(0, S, 256):
            zz = self.z[lo:lo + 256]
            out += (zz[:, :, None] == zz[:, None, :]).to(DTYPE).sum(0)
        return out / S

    def memberships(self, loss: str = "binder", max_candidates: int = 200):
        """(co-clustering, partition): the U × U DataFrame of P(c_u = c_v) by user id, and a point
        partition as a Series of community labels (0, 1, … by first appearance) by user id: the kept
        sample (at most ``max_candidates`` of them, evenly spaced) minimising the posterior expected
        ``loss`` (:func:`point_partition`): "binder" (Binder 1978, equal costs) or "vi" (the
        variation of information; Wade & Ghahramani 2018, Eq. 13)."""
        if loss not in ("binder", "vi"):
            raise DataError(f"loss: expected 'binder' or 'vi', got {loss!r}")
        P = self.coclustering()
        best = point_partition(self.z, self.weights, loss, self.responsibilities, max_candidates)
        ids = pd.Index(self.data.user_ids, name="user")
        return (pd.DataFrame(P.numpy(), index=ids, columns=ids),
                pd.Series(self.z[best].numpy(), index=ids, name="community"))

    def n_communities(self) -> pd.Series:
        """Posterior probability of each number of communities (a Series indexed by the count)."""
        k = (self.counts > 0).sum(1).numpy()
        vals, freq = np.unique(k, return_counts=True)
        return pd.Series(freq / k.shape[0], index=pd.Index(vals, name="n_communities"), name="probability")

    # ------------------------------------------------------------------ draws
    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """Draws: {"z" (n, U) memberships, "n_communities" (n,), "concentration" (n,), "f" (n, U, N)
        each user's utilities at the training items (their community's draw; for a sparse GP the
        conditional variance is added per item)}, and "lengthscale" (n, D) when it was inferred under
        a prior. With n equal to the number of kept samples the samples are taken in chain order."""
        g = torch.Generator().manual_seed(seed)
        S = self.z.shape[0]
        comp = (torch.arange(S) if n == S else
                torch.multinomial(self.weights, n, replacement=True, generator=g))
        st = self.setup
        if self.covs is None:  # point communities (svi, nuts draws)
            f_m = self.means[comp]
        else:
            L = cholesky(self.covs[comp], what="a community's posterior covariance")
            eps = torch.randn(n, L.shape[1], L.shape[-1], 1, dtype=DTYPE, generator=g)
            f_m = self.means[comp] + (L @ eps)[..., 0]  # (n, C, M)
        f, c = self._at_training(f_m, comp)  # (n, C, N), c / s
        if not st.gp.exact:
            f = f + torch.randn(f.shape, dtype=DTYPE, generator=g) * torch.sqrt(c)
        z = self.z[comp]
        f_user = f.gather(1, z[:, :, None].expand(-1, -1, f.shape[-1]))
        out = {"z": z, "n_communities": (self.counts[comp] > 0).sum(1),
               "concentration": self.concentration[comp], "f": f_user}
        if self.lengthscales is not None:
            out["lengthscale"] = self.lengthscales[comp]
        if self.tau is not None:
            out["tau"] = self.tau[comp]
        return out

    def _at_training(self, f_m, comp):
        """Values f_m Aᵀ (n, C, N) at the training items of community draws f_m (n, C, M) of the samples
        ``comp`` and the conditional variances c / s: (N,), or (n, 1, N) with per-draw ℓ."""
        if self.lengthscales is None:
            A, c, _ = self._item_rows(None, None)
            return f_m @ A.T, c
        n, N = f_m.shape[0], self.data.n_items
        f, c = torch.empty(f_m.shape[:-1] + (N,), dtype=DTYPE), torch.empty(n, 1, N, dtype=DTYPE)
        step = max(1, _CHUNK // (N * self.setup.M))
        for lo in range(0, n, step):
            sl = slice(lo, lo + step)
            A, c_g, _ = self._item_rows(None, comp[sl])
            f[sl], c[sl, 0] = f_m[sl] @ A.mT, c_g
        return f, c

    def utility_gaussians(self, users, n_draws: int = 1000, seed: int = 0) -> list:
        """Mean and covariance of each of ``users``' utilities (their communities' draws), drawn once."""
        from ...core.suggest import moment_gaussian

        f = self.sample(n_draws, seed)["f"]
        j = positions("users", users, self.data.user_ids, what="user", hint=False)
        return [moment_gaussian(f[:, int(k)]) for k in j]

    def utility_draws(self, n: int = 2000, seed: int = 0, user=None) -> torch.Tensor:
        """(n, N) draws of ``user``'s utilities (user=None: the average over users)."""
        f = self.sample(n, seed)["f"]
        if user is None:
            return f.mean(1)
        j = int(positions("user", [user], self.data.user_ids, what="user", hint=False)[0])
        return f[:, j]

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        """An ArviZ ``DataTree`` of label-invariant quantities; see :mod:`crowdzoo.models.dpm.arviz`."""
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)

    def __repr__(self) -> str:
        return (f"DPMPosterior(method={self.method!r}, users={self.z.shape[1]}, items={self.data.n_items}, "
                f"pairs={self.data.n_pairs}, samples={self.z.shape[0]}, chains={self.n_chains})")


def point_partition(z, weights, loss="binder", responsibilities=None, max_candidates: int = 200) -> int:
    """The index of the sample in ``z`` (S, U) minimising the posterior expected loss over the samples'
    partitions (weights (S,)), among at most ``max_candidates`` evenly spaced candidates.

    Both losses come from the contingency table n_kl[s] of a candidate ĉ against each sample s
    (n_k its cluster sizes), in O(S U) per candidate:

    * Binder (equal costs): E Σ_{u<v} |1[ĉ_u = ĉ_v] − 1[c_u = c_v]| = ½ (Σ_k n_k² − 2 E Σ_kl n_kl²) + const;
      with ``responsibilities`` r (S, U, C) the sample's memberships are soft, n_kl = Σ_{u: ĉ_u = k} r_ul
      (Rao–Blackwellised: E 1[c_u = c_v] = Σ_l r_ul r_vl);
    * VI (Wade & Ghahramani 2018, Eq. 13, in nats): Σ_k n_k log n_k − 2 E Σ_kl n_kl log n_kl + const,
      over the samples' drawn memberships.
    """
    S, U = z.shape
    cand = np.unique(np.linspace(0, S - 1, min(S, max_candidates)).round().astype(np.int64))
    w = weights.to(DTYPE)
    soft = responsibilities is not None and loss == "binder"
    K2 = responsibilities.shape[2] if soft else int(z.max()) + 1
    out = torch.empty(len(cand), dtype=DTYPE)
    for i, c in enumerate(cand.tolist()):
        zc = z[c]
        K1 = int(zc.max()) + 1
        n_k = torch.bincount(zc, minlength=K1).to(DTYPE)
        if soft:
            onehot = torch.nn.functional.one_hot(zc, K1).to(DTYPE)  # (U, K1)
            n_kl = torch.einsum("uk,sul->skl", onehot, responsibilities)
        else:
            key = (torch.arange(S)[:, None] * K1 + zc[None, :]) * K2 + z
            n_kl = torch.bincount(key.reshape(-1), minlength=S * K1 * K2).reshape(S, K1, K2).to(DTYPE)
        if loss == "binder":
            out[i] = (n_k ** 2).sum() - 2.0 * (w * (n_kl ** 2).sum((1, 2))).sum()
        else:
            xlogx = torch.special.xlogy(n_kl, n_kl).sum((1, 2))
            out[i] = torch.special.xlogy(n_k, n_k).sum() - 2.0 * (w * xlogx).sum()
    return int(cand[int(torch.argmin(out))])
