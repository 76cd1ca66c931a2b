"""collabGP's setup: the pairs, kernels, pseudo-inputs and prior bases every route shares
(Houlsby et al. 2012, supplement a §1–2, §4.4).

Both priors are written as x = Φ a + √δ ∘ ε with a ~ N(0, I_M) and ε ~ N(0, I) (Φ = K_nm L_mm⁻ᵀ,
δ = diag(K − Φ Φᵀ)): the FITC form of supplement a §4.4 with M pseudo-inputs, which is exact
(δ = 0) when the pseudo-inputs are all the inputs. For the items the exact prior uses every
training *item* as pseudo-input: h(i, j) = f(x_i) − f(x_j) with f ~ GP(0, k), so N items carry the
preference GP over all N(N−1)/2 pairs exactly. ``n_pseudo_pairs`` switches to the paper's FITC
with P₀ pseudo item *pairs*; ``n_pseudo_users`` to FITC with U₀ pseudo users. The pseudo-inputs are
drawn at random from the training pairs and users, as the paper does (§4, "Experimental
procedure"). Kernels have unit amplitude; length-scales default to the per-dimension median
heuristic (as GPPL's), the paper's single median distance between feature vectors one argument away
(``lengthscale="median distance"``): with features in different units, the paper's choice lets the
largest decide (on the calibration battery's coffee panel, metres beside one-hot origins, held-out
log loss .64–.69 against .34–.37 per dimension).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...errors import DataError
from ...gp.kernels import Kernel, as_kernel
from ...gp.linalg import DTYPE, cholesky, solve_lower


def median_distance(X: torch.Tensor, max_points: int = 2000, seed: int = 0) -> float:
    """Median Euclidean distance between distinct rows (the paper's length-scale); above
    ``max_points`` rows over a seeded random subset, as :func:`~crowdzoo.models.kernels.median_heuristic`."""
    if X.shape[0] > max_points:
        X = X[torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))[:max_points]]
    d = torch.pdist(X)
    d = d[d > 0]
    return float(d.median()) if d.numel() else 1.0


def pref_kernel(k, xa, xb, za, zb) -> torch.Tensor:
    """k_pref((x_a, x_b), (z_a, z_b)) = k(x_a,z_a) + k(x_b,z_b) − k(x_a,z_b) − k(x_b,z_a)
    (supplement a, Eq. 1): (n, m) for n pairs of rows and m pairs of rows."""
    return k(xa, za) + k(xb, zb) - k(xa, zb) - k(xb, za)


@dataclass
class ItemSide:
    """The prior over h in the form h = Φ a + √δ ε. Pseudo-inputs are items (``Zb`` None: the
    covariance of h(x_a, x_b) with f(z) is k(x_a, z) − k(x_b, z)) or item pairs (Eq. 1)."""

    kernel: object
    Za: torch.Tensor
    Zb: torch.Tensor | None
    L_zz: torch.Tensor

    def basis(self, xa: torch.Tensor, xb: torch.Tensor):
        """(Φ (n, M), δ (n,)) for the pairs (x_a, x_b) (rows of features)."""
        if self.Zb is None:
            K_nz = self.kernel(xa, self.Za) - self.kernel(xb, self.Za)
        else:
            K_nz = pref_kernel(self.kernel, xa, xb, self.Za, self.Zb)
        Phi = solve_lower(self.L_zz, K_nz.T).T
        # k_pref((a,b),(a,b))
        k_nn = self.kernel.diag(xa) + self.kernel.diag(xb) - 2.0 * self.kernel.pairs(xa, xb)
        return Phi, (k_nn - (Phi * Phi).sum(-1)).clamp_min(0.0)


@dataclass
class UserSide:
    """The prior over one column of W, w = Φ b + √δ ε, with pseudo users Z."""

    kernel: object
    Z: torch.Tensor
    L_zz: torch.Tensor

    def basis(self, U: torch.Tensor):
        Phi = solve_lower(self.L_zz, self.kernel(self.Z, U)).T
        return Phi, (self.kernel.diag(U) - (Phi * Phi).sum(-1)).clamp_min(0.0)


@dataclass
class CollabSetup:
    """What is fixed before inference. Labels l = 1..L: pair ``z`` (L,), user ``u`` (L,), t = ±1
    (L,). Pairs (P, 2) of item rows (lo < hi). Priors: h_d = Φ_h a_d + √δ_h ε (Φ_h (P, M)),
    w_·,d = Φ_w b_d + √δ_w ε (Φ_w (U, M_u), or None with δ_w = 1: K_users = I). ``scale_prior``: (α₀, β₀)
    of the Gamma prior on the inverse scales s_d of h_d (None: s_d = 1, the paper's prior). ``w`` (L,):
    each label's weight (``PairwiseData.weights``; None: every label 1)."""

    D: int
    X: torch.Tensor
    items: ItemSide
    users: UserSide | None
    user_X: torch.Tensor | None
    pairs: torch.Tensor
    z: torch.Tensor
    u: torch.Tensor
    t: torch.Tensor
    Phi_h: torch.Tensor
    delta_h: torch.Tensor
    Phi_w: torch.Tensor | None
    delta_w: torch.Tensor
    n_users: int
    scale_prior: tuple[float, float] | None = None
    w: torch.Tensor | None = None

    @property
    def P(self) -> int:
        return self.pairs.shape[0]

    @property
    def L(self) -> int:
        return self.z.shape[0]


def canonical_pairs(a: np.ndarray, b: np.ndarray, y: np.ndarray):
    """Distinct unordered pairs (P, 2) with lo < hi, each label's pair index z and its t = ±1
    relative to (lo, hi)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pairs, z = np.unique(np.stack([lo, hi], 1), axis=0, return_inverse=True)
    t = (2.0 * y - 1.0) * np.where(a == lo, 1.0, -1.0)
    return pairs, z.reshape(-1), t


MEDIAN_DISTANCE = "median distance"


def start_lengthscale(spec, X: torch.Tensor, what: str = "lengthscale"):
    """The length-scales ``spec`` asks for on inputs X: None → the per-dimension median heuristic
    (Eq. 26 of Simpson & Gurevych 2020), ``"median distance"`` → the paper's isotropic median distance
    between feature vectors, anything else as given."""
    if spec is None:
        from ...gp.kernels import median_heuristic

        return median_heuristic(X)
    if isinstance(spec, str):
        if spec != MEDIAN_DISTANCE:
            raise DataError(f"{what}: expected None (per-dimension median heuristic), {MEDIAN_DISTANCE!r} or "
                            f"length-scale values, got {spec!r}", arg=what)
        return median_distance(X)
    return spec


def _ell_vector(ell, D: int, what: str) -> torch.Tensor:
    """A length-scale (isotropic, or ARD values (D,)) as a (D,) tensor."""
    v = torch.as_tensor(ell, dtype=DTYPE).detach().reshape(-1)
    if v.shape[0] not in (1, D):
        raise DataError(f"{what}: expected one length-scale or {D} (one per feature), got {v.shape[0]}")
    return v.expand(D).clone()


def build_setup(model, data, seed, pseudo_pairs, pseudo_users) -> CollabSetup:
    """:meth:`CollabGP.setup <crowdzoo.models.collabgp.model.CollabGP.setup>` for the model ``model``."""
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(data.item_features, dtype=DTYPE)
    pairs, z, t = canonical_pairs(data.a, data.b, data.y)
    if X.shape[1] == 0:  # no item features: the identity kernel over item rows (independent items)
        X = torch.arange(X.shape[0], dtype=DTYPE)[:, None]
        k = Kernel("identity", torch.ones(1, dtype=DTYPE))
    else:
        k = as_kernel(model.kernel, _ell_vector(start_lengthscale(model.lengthscale, X), X.shape[1],
                                                "lengthscale"))
    if pseudo_pairs is None and model.n_pseudo_pairs is not None and model.n_pseudo_pairs < len(pairs):
        pseudo_pairs = pairs[rng.choice(len(pairs), model.n_pseudo_pairs, replace=False)]
    if pseudo_pairs is not None:
        pp = torch.as_tensor(np.asarray(pseudo_pairs), dtype=torch.long)
        if pp.ndim != 2 or pp.shape[1] != 2:
            raise DataError(f"pseudo_pairs: expected shape (P0, 2) of item rows, got {tuple(pp.shape)}")
        Za, Zb = X[pp[:, 0]], X[pp[:, 1]]
        K_zz = pref_kernel(k, Za, Zb, Za, Zb)
    else:
        Za, Zb = X, None
        K_zz = k(X, X)
    items = ItemSide(k, Za, Zb, cholesky(K_zz, jitter=model.jitter, what="K_items at the pseudo-inputs"))
    P_t = torch.as_tensor(pairs, dtype=torch.long)
    Phi_h, delta_h = items.basis(X[P_t[:, 0]], X[P_t[:, 1]])
    if Zb is None:
        delta_h = torch.zeros_like(delta_h)  # every item is a pseudo-input: exact on training pairs
    U_n = data.n_users
    users, user_X, Phi_w, delta_w = None, None, None, torch.ones(U_n, dtype=DTYPE)
    if model.user_features and data.user_features is not None and data.user_features.shape[1] > 0:
        user_X = torch.as_tensor(data.user_features, dtype=DTYPE)
        ell_u = start_lengthscale(model.user_lengthscale, user_X, "user_lengthscale")
        ku = as_kernel(model.user_kernel, _ell_vector(ell_u, user_X.shape[1], "user_lengthscale"))
        if pseudo_users is None and model.n_pseudo_users is not None and model.n_pseudo_users < U_n:
            pseudo_users = rng.choice(U_n, model.n_pseudo_users, replace=False)
        Zu = user_X if pseudo_users is None else user_X[torch.as_tensor(np.asarray(pseudo_users))]
        L_uu = cholesky(ku(Zu, Zu), jitter=model.jitter, what="K_users at the pseudo users")
        users = UserSide(ku, Zu, L_uu)
        Phi_w, delta_w = users.basis(user_X)
        if pseudo_users is None:
            delta_w = torch.zeros_like(delta_w)
    return CollabSetup(D=int(model.n_latent), X=X, items=items, users=users, user_X=user_X, pairs=P_t,
                       z=torch.as_tensor(z, dtype=torch.long),
                       u=torch.as_tensor(data.users, dtype=torch.long),
                       t=torch.as_tensor(t, dtype=DTYPE), Phi_h=Phi_h, delta_h=delta_h, Phi_w=Phi_w,
                       delta_w=delta_w, n_users=U_n,
                       scale_prior=((float(model.shape_s0), float(model.rate_s0)) if model.learn_scale
                                    else None),
                       w=None if data.weights is None else torch.as_tensor(data.weights, dtype=DTYPE))



__all__ = ["CollabSetup", "ItemSide", "UserSide", "MEDIAN_DISTANCE", "build_setup", "canonical_pairs",
           "median_distance", "pref_kernel", "start_lengthscale"]
