"""Seeded simulators of the generative models (they return the true utilities too)."""
from __future__ import annotations

import numpy as np
import torch
from torch.special import ndtr

from ..gp.kernels import Kernel, median_heuristic
from ..gp.linalg import cholesky
from .pairwise import PairwiseData


def random_pairs(rng: np.random.Generator, n_items: int, n_pairs: int):
    """n_pairs pairs (a, b) with a ≠ b, drawn uniformly."""
    a = rng.integers(0, n_items, size=n_pairs)
    b = (a + rng.integers(1, n_items, size=n_pairs)) % n_items
    return a, b


def simulate_gppl(n_items: int = 30, n_pairs: int = 300, n_features: int = 2, s: float = 1.0,
                  kernel: str = "matern32", lengthscale=None, seed: int = 0, tau: float = 0.0):
    """Draw from GPPL (Eq. 4): x ~ U[0, 10]^D, f ~ N(0, K/s), y_p ~ Bernoulli(Φ(f_a − f_b)).

    ``tau`` > 0: ties as a third outcome at threshold τ (:mod:`crowdzoo.gp.ordinal`): y_p = 1 with
    probability Φ(Δ − τ), 0 with Φ(−Δ − τ), else ½ (a tie), Δ = f_a − f_b; the data are then built
    with ``ties="model"``. Returns ``(data, f_true)`` with f_true (N,) float64 numpy.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(n_items, n_features))
    ell = median_heuristic(X) if lengthscale is None else lengthscale
    k = Kernel(kernel, ell)
    Xt = torch.as_tensor(X)
    L = cholesky(k(Xt, Xt), what="simulation kernel")
    eps = torch.as_tensor(rng.standard_normal(n_items))
    f = (L @ eps) / np.sqrt(s)
    a, b = random_pairs(rng, n_items, n_pairs)
    p = ndtr(f[a] - f[b] - tau).numpy()
    draw = rng.uniform(size=n_pairs)
    y = (draw < p).astype(np.float64)
    if tau > 0:
        p_b = ndtr(f[b] - f[a] - tau).numpy()
        y = np.where(draw < p, 1.0, np.where(draw > 1.0 - p_b, 0.0, 0.5))
        return PairwiseData.from_arrays(a, b, y, X, ties="model"), f.numpy()
    return PairwiseData.from_arrays(a, b, y, X), f.numpy()


def _gp_draws(rng, X, n: int, s, kernel: str) -> np.ndarray:
    """n independent draws of a GP(0, k/s_i) at rows of X: (n, len(X)); s scalar or (n,)."""
    k = Kernel(kernel, median_heuristic(X))
    Xt = torch.as_tensor(X)
    L = cholesky(k(Xt, Xt), what="simulation kernel").numpy()
    s = np.broadcast_to(np.asarray(s, dtype=np.float64), (n,))
    return (rng.standard_normal((n, X.shape[0])) @ L.T) / np.sqrt(s)[:, None]


def simulate_crowd(n_items: int = 50, n_users: int = 20, n_pairs: int = 1000, n_components: int = 5,
                   n_features: int = 2, n_user_features: int = 2, s_t: float = 1.0, s_v=1.0,
                   s_w=1.0, grid: bool = False, kernel: str = "matern32", seed: int = 0, tau: float = 0.0):
    """Draw a crowd from crowdGPPL (Eq. 5–6; the protocol of §5.1).

    Items have features x ~ U[0, 10]^D (or, with ``grid=True``, a √N × √N grid on [0, 10]²),
    users u ~ U[0, 10]^E (``n_user_features=0``: no user features, independent w per user);
    t ~ GP(0, k/s_t), v_c ~ GP(0, k/s_v,c), w_c ~ GP(0, k/s_w,c) (``s_v``, ``s_w`` scalars or
    length-C arrays); pairs and users uniform; y_p ~ Bernoulli(Φ(F[a, j] − F[b, j])). ``tau`` > 0 (a
    number, or one per user (U,)): ties as a third outcome at threshold τ (each label's user's), as
    :func:`simulate_gppl` draws them (``ties="model"`` data).

    Returns ``(data, truth)`` with truth = {"t" (N,), "V" (C, N), "W" (C, U), "F" (N, U)} numpy.
    """
    rng = np.random.default_rng(seed)
    if grid:
        side = int(round(np.sqrt(n_items)))
        if side * side != n_items:
            raise ValueError(f"n_items: grid=True needs a square number, got {n_items}")
        g = np.linspace(0.0, 10.0, side)
        X = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    else:
        X = rng.uniform(0.0, 10.0, size=(n_items, n_features))
    U = rng.uniform(0.0, 10.0, size=(n_users, n_user_features)) if n_user_features else None
    t = _gp_draws(rng, X, 1, s_t, kernel)[0]
    V = _gp_draws(rng, X, n_components, s_v, kernel)
    if U is not None:
        W = _gp_draws(rng, U, n_components, s_w, kernel)
    else:
        s_w = np.broadcast_to(np.asarray(s_w, dtype=np.float64), (n_components,))
        W = rng.standard_normal((n_components, n_users)) / np.sqrt(s_w)[:, None]
    F = V.T @ W + t[:, None]
    a, b = random_pairs(rng, n_items, n_pairs)
    j = rng.integers(0, n_users, size=n_pairs)
    delta = torch.as_tensor(F[a, j] - F[b, j])
    ties = bool(np.any(np.asarray(tau) > 0))
    if np.ndim(tau):  # a threshold per user: each label's user's
        tau = torch.as_tensor(np.broadcast_to(np.asarray(tau, dtype=np.float64), (n_users,))[j])
    p = ndtr(delta - tau).numpy()
    draw = rng.uniform(size=n_pairs)
    y = (draw < p).astype(np.float64)
    if ties:
        y = np.where(draw < p, 1.0, np.where(draw > 1.0 - ndtr(-delta - tau).numpy(), 0.0, 0.5))
    data = PairwiseData.from_arrays(a, b, y, X, users=j, user_features=U,
                                    user_ids=None if U is not None else np.arange(n_users),
                                    ties="model" if ties else "error")
    return data, {"t": t, "V": V, "W": W, "F": F}


def simulate_collab(n_items: int = 10, n_users: int = 100, n_latent: int = 5, n_features: int = 2,
                    n_user_features: int = 2, lengthscale: float = 1.0, seed: int = 0):
    """The Synthetic data of Houlsby et al. (2012, supplement a §6).

    Item and user features are uniform with zero mean and unit variance (U(−√3, √3)); D latent
    functions h_d ~ GP(0, k_pref) with a squared-exponential k of unit length-scale (drawn as
    h_d(i, j) = f_d(x_i) − f_d(x_j), f_d ~ GP(0, k)); weights w_d(u) ~ GP(0, k) over user
    features; each user labels every pair once, shown in a random order, with
    t = sign(Σ_d w_d(u) h_d(x_i, x_j) + ε), ε ~ N(0, 1).

    Returns ``(data, truth)``, truth = {"F" (D, N), "W" (U, D), "G" (U, N, N)} with
    G[u, i, j] = g_u(x_i, x_j) (noise-free).
    """
    rng = np.random.default_rng(seed)
    half = np.sqrt(3.0)
    X = rng.uniform(-half, half, size=(n_items, n_features))
    Uf = rng.uniform(-half, half, size=(n_users, n_user_features))
    k = Kernel("se", np.full(n_features, lengthscale))
    ku = Kernel("se", np.full(n_user_features, lengthscale))
    Lx = cholesky(k(torch.as_tensor(X), torch.as_tensor(X)), what="simulation kernel").numpy()
    Lu = cholesky(ku(torch.as_tensor(Uf), torch.as_tensor(Uf)), what="simulation kernel").numpy()
    F = rng.standard_normal((n_latent, n_items)) @ Lx.T  # f_d at the items
    W = Lu @ rng.standard_normal((n_users, n_latent))  # w_d(u), columns are GP draws
    G = np.einsum("ud,dij->uij", W, F[:, :, None] - F[:, None, :])
    i, j = np.triu_indices(n_items, k=1)
    users = np.repeat(np.arange(n_users), i.size)
    a, b = np.tile(i, n_users), np.tile(j, n_users)
    flip = rng.random(a.size) < 0.5
    a, b = np.where(flip, b, a), np.where(flip, a, b)
    y = (G[users, a, b] + rng.standard_normal(a.size) > 0).astype(np.float64)
    data = PairwiseData.from_arrays(a, b, y, X, users=users, user_features=Uf)
    return data, {"F": F, "W": W, "G": G}
