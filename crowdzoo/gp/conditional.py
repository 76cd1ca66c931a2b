"""The sparse GP conditional, written once for every model (Simpson & Gurevych 2020, Eq. 19).

With M inducing inputs Z and f_m = f(Z) ~ N(0, K_mm / s), the values at any inputs X satisfy

    f(X) | f_m, s ~ N(A f_m, diag(c) / s),   A = K_xm K_mm⁻¹,   c = k(x, x) − ‖L_mm⁻¹ k_m(x)‖²,

and a difference f_a − f_b has rows A_a − A_b and conditional variance
k(a, a) + k(b, b) − 2 k(a, b) − ‖L_mm⁻¹ (k_m(a) − k_m(b))‖². With the training items as inducing
inputs (``exact``) c = 0 at the training items. Non-centred models work in whitened coordinates
u = L_mm⁻¹ f_m √s, whose rows are B = L_mm⁻¹ K_mx; :meth:`SparseGP.pair_terms` returns those.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from .linalg import DTYPE, cholesky, solve_lower

FACTOR_FROM = 2**22  # P M² from which pair rows go through the items' rows (SparseGP.pair_factors)


@dataclass
class SparseGP:
    """One side of a sparse GP: kernel, inputs X (N, D), inducing inputs Z (M, D), K_mm and its
    Cholesky factor L_mm, and B = L_mm⁻¹ K_mn (M, N); ``exact`` when Z are the inputs themselves."""

    kernel: object
    X: torch.Tensor
    Z: torch.Tensor
    K_mm: torch.Tensor
    L_mm: torch.Tensor
    B: torch.Tensor
    exact: bool
    jitter: float

    @classmethod
    def build(cls, kernel, X, Z, jitter, exact, **extra):
        K_mm = kernel(Z, Z)
        L_mm = cholesky(K_mm, jitter=jitter, what="K_mm (inducing-input kernel)")
        B = solve_lower(L_mm, K_mm if Z is X else kernel(Z, X))  # every item inducing: K_mn is K_mm
        return cls(kernel=kernel, X=X, Z=Z, K_mm=K_mm, L_mm=L_mm, B=B, exact=exact, jitter=jitter, **extra)

    @property
    def M(self) -> int:
        return self.Z.shape[0]

    def _whitened(self, X):
        """B = L_mm⁻¹ K_mx for new inputs X (or the stored B for the training inputs)."""
        return self.B if X is None else solve_lower(self.L_mm, self.kernel(self.Z, X))

    def item_terms(self, X=None):
        """For inputs X (default: the training inputs): A (n, M) with E[f | f_m] = A f_m and the
        conditional variance c (n,) of f given f_m, times s (Eq. 19)."""
        B = self._whitened(X)
        A = torch.linalg.solve_triangular(self.L_mm.T, B, upper=True).T
        return A, self._cond_var(B, X)

    def conditional_variance(self, X=None):
        """c (n,) of :meth:`item_terms` alone."""
        return self._cond_var(self._whitened(X), X)

    def pair_cond_var(self, xa: torch.Tensor, xb: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """c (P,) of f_a − f_b given f_m for inputs xa, xb with whitened difference rows d (P, M):
        k(a, a) + k(b, b) − 2 k(a, b) − ‖d‖² (Eq. 19)."""
        k_d = self.kernel.diag(xa) + self.kernel.diag(xb) - 2.0 * self.kernel.pairs(xa, xb)
        return (k_d - (d * d).sum(-1)).clamp_min(0.0)

    def _cond_var(self, B, X):
        if X is None and self.exact:
            return torch.zeros(B.shape[1], dtype=DTYPE)
        Xs = self.X if X is None else X
        return (self.kernel.diag(Xs) - (B * B).sum(0)).clamp_min(0.0)

    def pair_terms(self, a: torch.Tensor, b: torch.Tensor, X=None):
        """For pairs (a, b) of rows of X (default: the training inputs): whitened rows d (P, M)
        with f_a − f_b | u = d·u / √s, and the conditional variance c (P,) of f_a − f_b given f_m,
        times s (0 for training pairs of an exact model)."""
        Xs = self.X if X is None else X
        if X is None:
            d = (self.B[:, a] - self.B[:, b]).T
        else:
            d = solve_lower(self.L_mm, self.kernel(self.Z, Xs[a]) - self.kernel(self.Z, Xs[b])).T
        if X is None and self.exact:
            return d, torch.zeros(d.shape[0], dtype=DTYPE)
        return d, self.pair_cond_var(Xs[a], Xs[b], d)

    def item_moments(self, means, covs, s, X=None) -> ItemMoments:
        """The items' side of the moments of f_a − f_b under G Gaussian components N(means_g, covs_g)
        of q(f_m) (``covs`` None: point masses) with inverse scales ``s`` (G,) (Eq. 14 and 19), for
        pairs of rows of X (default: the training inputs): the rows A (n, M), each item's means and
        A S_g Aᵀ diagonal, O(n M² G) once; :meth:`ItemMoments.pairs` then costs O(M G) a pair."""
        W = self._whitened(X).T  # (n, M)
        A = torch.linalg.solve_triangular(self.L_mm.T, W.T, upper=True).T
        AS = None if covs is None else A @ covs  # (G, n, M)
        return ItemMoments(self, X, W, A, means @ A.T, AS, None if AS is None else (AS * A).sum(-1), s)

    def pair_factors(self, a: torch.Tensor, b: torch.Tensor, whitened: bool = True,
                     factor_from: int = FACTOR_FROM):
        """:meth:`pair_terms` (``whitened``) or :meth:`pair_rows` for training pairs, and c (P,), the
        rows kept as :class:`PairRows` over the pairs' distinct items where that saves work: P M² of at
        least ``factor_from`` and at most half as many distinct items as pairs (else the rows
        themselves; a few small products cost less than the bookkeeping)."""
        P = a.shape[0]
        items = None
        if P * self.M ** 2 >= factor_from:
            items, inv = torch.unique(torch.cat([a, b]), return_inverse=True)
        if items is None or 2 * items.numel() > P:
            d, c = self.pair_terms(a, b) if whitened else self.pair_rows(a, b)
            return PairRows(d, None, None), c
        W = self.B[:, items].T  # (n, M) whitened rows of the distinct items
        ia, ib = inv[:P], inv[P:]
        if self.exact:
            c = torch.zeros(P, dtype=W.dtype)
        else:
            c = self.pair_cond_var(self.X[a], self.X[b], W[ia] - W[ib])
        R = W if whitened else torch.linalg.solve_triangular(self.L_mm.T, W.T, upper=True).T
        return PairRows(R, ia, ib), c

    def pair_rows(self, a: torch.Tensor, b: torch.Tensor, X=None):
        """Rows A_d (P, M) = A_a − A_b (f_a − f_b = A_d f_m + noise) and c (P,) as in
        :meth:`pair_terms`."""
        d, c = self.pair_terms(a, b, X)
        return torch.linalg.solve_triangular(self.L_mm.T, d.T, upper=True).T, c


class PairRows(NamedTuple):
    """Pair-difference rows D (P, M) = R[ia] − R[ib] kept as the rows R (n, M) of the pairs' n distinct
    items: D m, the row-wise D S Dᵀ, Dᵀ v and Dᵀ diag(λ) D then cost O(n M²) + O(P M) instead of
    O(P M²), which is the most of a full batch over few items (2·10⁴ pairs over 10³ items: a
    sixteenth). ``ia`` None: R is D itself.

    Where the items' n × n matrices are no larger than the gathered (P, M) rows (n² ≤ P M),
    D S Dᵀ and Dᵀ diag(λ) D go through them instead — the items' covariances R S Rᵀ, read at each
    pair, and the items' weighted Laplacian Σ_p λ_p (e_a − e_b)(e_a − e_b)ᵀ between Rᵀ and R — as
    matrix products, which run several times faster than gathering and multiplying P rows (150 items
    and 1500 pairs: 0.4 against 2.9 ms for D S Dᵀ, 0.4 against 0.9 ms for the Gram matrix, one thread;
    their gradients in R too, which the learned kernel's steps take)."""

    R: torch.Tensor
    ia: torch.Tensor | None
    ib: torch.Tensor | None

    @property
    def dense(self) -> torch.Tensor:
        return self.R if self.ia is None else self.R[self.ia] - self.R[self.ib]

    @property
    def through_items(self) -> bool:
        """Whether the products go through the items' n × n matrices (class docstring)."""
        n, M = self.R.shape
        return self.ia is not None and n * n <= self.ia.shape[0] * M

    def mean(self, m: torch.Tensor) -> torch.Tensor:
        """D m (P,)."""
        r = self.R @ m
        return r if self.ia is None else r[self.ia] - r[self.ib]

    def quad(self, S: torch.Tensor) -> torch.Tensor:
        """(D S Dᵀ)_pp (P,) for symmetric S: q_a + q_b − 2 R_a S R_b."""
        RS = self.R @ S
        if self.ia is None:
            return (RS * self.R).sum(-1)
        if self.through_items:
            C = RS @ self.R.T  # the items' covariances R S Rᵀ (n, n)
            q = C.diagonal()
            return q[self.ia] + q[self.ib] - 2.0 * C[self.ia, self.ib]
        q = (RS * self.R).sum(-1)
        return q[self.ia] + q[self.ib] - 2.0 * (RS[self.ia] * self.R[self.ib]).sum(-1)

    def tmul(self, v: torch.Tensor) -> torch.Tensor:
        """Dᵀ v (M,)."""
        if self.ia is None:
            return self.R.T @ v
        w = torch.zeros(self.R.shape[0], dtype=v.dtype).index_add_(0, self.ia, v).index_add_(0, self.ib, -v)
        return self.R.T @ w

    def gram(self, lam: torch.Tensor) -> torch.Tensor:
        """Dᵀ diag(λ) D (M, M) = Rᵀ G, G_i = Σ_{p: a_p = i} λ_p D_p − Σ_{p: b_p = i} λ_p D_p (or, through
        the items, Rᵀ Λ R with Λ the items' weighted Laplacian)."""
        if self.ia is None:
            return (self.R.T * lam) @ self.R
        if self.through_items:
            n = self.R.shape[0]
            ia, ib = self.ia, self.ib
            lap = (torch.zeros(n * n, dtype=lam.dtype).index_add_(0, ia * n + ia, lam)
                   .index_add_(0, ib * n + ib, lam).index_add_(0, ia * n + ib, -lam)
                   .index_add_(0, ib * n + ia, -lam)).view(n, n)
            return self.R.T @ (lap @ self.R)
        lD = lam[:, None] * self.dense
        G = torch.zeros_like(self.R).index_add_(0, self.ia, lD).index_add_(0, self.ib, -lD)
        return self.R.T @ G


def probit_rows(gp: SparseGP, a, b, s, alpha: float = 1.0, X=None) -> torch.Tensor:
    """Rows h_p (P, M) with P(a ≻ b | f_m) = Φ(h_pᵀ f_m) = Φ((A_a − A_b) f_m / √(α² + c_p / s)): the
    probit with the pair's conditional variance c_p / s integrated in (the label directions of EP)."""
    rows, c = gp.pair_rows(a, b, X)
    return rows / torch.sqrt(alpha ** 2 + c / s)[:, None]


def identity_gp(n: int, jitter: float = 1e-6) -> SparseGP:
    """K = I over n items (row index as the only input), every item inducing: independent values
    per item (crowdGPPL's variants without features, and models of items without features)."""
    from .kernels import Kernel

    X = torch.arange(n, dtype=DTYPE)[:, None]
    return SparseGP.build(Kernel("identity", torch.ones(1, dtype=DTYPE)), X, X, jitter, exact=True)


class ItemMoments(NamedTuple):
    """:meth:`SparseGP.item_moments`: what pairs of its items share."""

    gp: SparseGP
    X: torch.Tensor | None
    W: torch.Tensor  # (n, M) whitened rows
    A: torch.Tensor  # (n, M) rows of E[f | f_m] = A f_m
    mu: torch.Tensor  # (G, n) item means
    AS: torch.Tensor | None  # (G, n, M) A S_g
    q: torch.Tensor | None  # (G, n) diagonal of A S_g Aᵀ
    s: torch.Tensor  # (G,)

    def pairs(self, a: torch.Tensor, b: torch.Tensor):
        """Mean and variance (G, P) of f_a − f_b: the items' terms, the cross term A_a S_g A_bᵀ and the
        conditional variance c / s (0 for training pairs of an exact model)."""
        gp = self.gp
        mu = self.mu[:, a] - self.mu[:, b]
        if self.X is None and gp.exact:
            c = torch.zeros(a.shape[0], dtype=DTYPE)
        else:
            Xs = gp.X if self.X is None else self.X
            c = gp.pair_cond_var(Xs[a], Xs[b], self.W[a] - self.W[b])
        var = c[None, :] / self.s[:, None]
        if self.AS is not None:
            var = var + self.q[:, a] + self.q[:, b] - 2.0 * (self.AS[:, a] * self.A[b]).sum(-1)
        return mu, var.clamp_min(0.0)
