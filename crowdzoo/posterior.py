"""The fitted posterior of GPPL, shared by every inference route.

Every route returns the posterior over the inducing utilities f_m as a mixture of Gaussians,

    q(f_m) = Σ_g w_g N(f_m; m_g, S_g),   with inverse scale s_g in component g,

which covers all of them without special cases: ``natgrad`` is one component (S from Eq. 17,
s_g = E[s] from Eq. 15), ``ep`` one component per grid value of s (weights ∝ EP evidence ×
prior), and ``nuts``/``svi`` one zero-covariance component per posterior draw. Test utilities
follow from the GP conditional (Eq. 19): f* | f_m, s ~ N(A f_m, (K** − A K_m*) / s) with
A = K*m K_mm⁻¹, so the predictive probability of a pair is the mixture of Eq. 3.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

from .data import PairwiseData
from .errors import DataError
from .linalg import DTYPE, cho_solve, cholesky, gamma_draws, solve_lower
from .lookup import positions
from .models.gppl import GPPL, GPPLSetup

_CHUNK = 2**22


@dataclass
class GPPLPosterior:
    """Posterior of a fitted GPPL. Build it with :func:`crowdzoo.fit`.

    Attributes: ``weights`` (G,), ``means`` (G, M), ``covs`` (G, M, M) or None, ``s`` (G,),
    optional q(s) = Gamma(``s_shape``, ``s_rate``), ``n_chains`` (for draws), ``trace`` (the
    loss or bound per iteration), ``sample_stats`` (NUTS), ``settings``.
    """

    model: GPPL
    setup: GPPLSetup
    data: PairwiseData
    method: str
    weights: torch.Tensor
    means: torch.Tensor
    covs: torch.Tensor | None
    s: torch.Tensor
    s_shape: float | None = None
    s_rate: float | None = None
    n_chains: int = 1
    trace: dict = field(default_factory=dict)
    sample_stats: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ helpers
    def _items(self, item_features):
        if item_features is None:
            return self.setup.X, True
        X = np.asarray(item_features, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.setup.X.shape[1]:
            raise DataError(
                f"item_features: expected shape (n, {self.setup.X.shape[1]}), got {X.shape}")
        if not np.isfinite(X).all():
            r, c = np.argwhere(~np.isfinite(X))[0]
            raise DataError(f"item_features: row {r}, column {c}: value is not finite")
        return torch.as_tensor(X, dtype=DTYPE), False

    def _positions(self, name, ids, training: bool, n: int) -> torch.Tensor:
        return positions(name, ids, self.data.item_ids if training else None, n)

    def _project(self, Xs):
        """A_T = K_mm⁻¹ K_m* (M, N*) and B* = L_mm⁻¹ K_m* (M, N*)."""
        K_ms = self.setup.kernel(self.setup.Z, Xs)
        return cho_solve(self.setup.L_mm, K_ms), solve_lower(self.setup.L_mm, K_ms)

    # ------------------------------------------------------------------ predictions
    def utilities(self, item_features=None):
        """Posterior mean and variance of the utility of each item: (mean, variance) as
        pandas Series labelled by item id (or by position for new ``item_features``)."""
        Xs, training = self._items(item_features)
        A_T, Bs = self._project(Xs)
        mu = self.means @ A_T  # (G, N*)
        c = (1.0 - (Bs * Bs).sum(0)).clamp_min(0.0)
        if training and self.setup.exact:
            c = torch.zeros_like(c)
        var = c / self.s[:, None]
        if self.covs is not None:
            var = var + torch.einsum("mi,gmn,ni->gi", A_T, self.covs, A_T)
        w = self.weights[:, None]
        mean = (w * mu).sum(0)
        variance = (w * (var + mu * mu)).sum(0) - mean * mean
        index = pd.Index(self.data.item_ids if training else np.arange(Xs.shape[0]), name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(variance.clamp_min(0.0).numpy(), index=index, name="variance"))

    def predict_proba(self, a, b, item_features=None) -> np.ndarray:
        """P(a ≻ b) for each pair (Eq. 3, mixed over the posterior components).

        ``a``, ``b`` are item ids of the training data, or row positions in ``item_features``
        when it is given (new items)."""
        Xs, training = self._items(item_features)
        a = self._positions("a", a, training, Xs.shape[0])
        b = self._positions("b", b, training, Xs.shape[0])
        if a.shape != b.shape:
            raise DataError(f"a, b: mismatched lengths {a.shape[0]} and {b.shape[0]}")
        out = torch.empty(a.shape[0], dtype=DTYPE)
        chunk = max(64, _CHUNK // self.weights.shape[0])  # ≤ _CHUNK numbers per (component, pair)
        for lo in range(0, a.shape[0], chunk):  # chunks bound memory; vectorised within
            sl = slice(lo, lo + chunk)
            out[sl] = self._pair_prob(Xs, a[sl], b[sl], exact=training and self.setup.exact)
        return out.numpy()

    def _pair_prob(self, Xs, a, b, exact):
        items, inv = torch.unique(torch.cat([a, b]), return_inverse=True)
        A_T, Bs = self._project(Xs[items])
        ia, ib = inv[: a.shape[0]], inv[a.shape[0]:]
        dA = A_T[:, ia] - A_T[:, ib]  # (M, P)
        mu = self.means @ dA  # (G, P)
        if exact:
            c = torch.zeros(a.shape[0], dtype=DTYPE)
        else:
            dB = Bs[:, ia] - Bs[:, ib]
            k_d = 2.0 - 2.0 * self.setup.kernel.pairs(Xs[a], Xs[b])
            c = (k_d - (dB * dB).sum(0)).clamp_min(0.0)
        var = c[None, :] / self.s[:, None]
        if self.covs is not None:
            var = var + torch.einsum("mp,gmn,np->gp", dA, self.covs, dA)
        return (self.weights[:, None] * ndtr(mu / torch.sqrt(1.0 + var))).sum(0)

    # ------------------------------------------------------------------ draws
    def sample(self, n: int = 1000, seed: int = 0) -> dict:
        """Posterior draws: {"f": (n, N) utilities of the training items, "s": (n,)}.

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
        A, c = self.setup.item_terms()
        f = f_m @ A.T
        if not self.setup.exact:
            f = f + torch.randn(f.shape, dtype=DTYPE, generator=g) * torch.sqrt(c / self.s[comp][:, None])
        return {"f": f, "s": s}

    # ------------------------------------------------------------------ output
    def to_arviz(self, n_draws: int = 1000, seed: int = 0):
        """An ArviZ ``DataTree`` (posterior, posterior_predictive, observed_data,
        log_likelihood, sample_stats); see :mod:`crowdzoo.diagnostics.arviz`."""
        from .diagnostics.arviz import gppl_to_arviz

        return gppl_to_arviz(self, n_draws=n_draws, seed=seed)

    def save(self, path) -> None:
        """Write to ``path`` (a torch file of tensors and plain values; see :func:`crowdzoo.load`)."""
        from .io import save_posterior

        save_posterior(self, path)

    def __repr__(self) -> str:
        return (f"GPPLPosterior(method={self.method!r}, items={self.data.n_items}, "
                f"pairs={self.data.n_pairs}, inducing={self.setup.M}, components={self.weights.shape[0]})")
