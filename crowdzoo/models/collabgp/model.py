"""collabGP: collaborative GP preference learning (Houlsby et al. 2012, §3; supplement a §1–2).

Generative story (main paper Eq. 1 and the priors on W and H; supplement a Eq. 1):

    h_d      ~ GP(0, k_pref),  d = 1..D       shared latent functions over item pairs, with
               k_pref((i,j),(k,l)) = k(x_i,x_k) + k(x_j,x_l) − k(x_i,x_l) − k(x_j,x_k)
    w_·,d    ~ N(0, K_users)                  user weights: a GP over user features,
                                              or K_users = I without them (collabGP\\u, "CP")
    g_u,p    = Σ_d w_u,d h_d,p                G = W H
    t_u,p    ~ P(t | g) = Φ(t g),  t = ±1     sign(g + ε), ε ~ N(0, 1)

Each unordered pair is one latent value: pairs are stored as (lo, hi) = (min, max) of the two item
rows and t is taken relative to that orientation. h(x_j, x_i) = −h(x_i, x_j) exactly under k_pref
(supplement Eq. 3), so the perfectly anti-correlated duplicates that would make K_items singular
never enter it.

Both priors are written as x = Φ a + √δ ∘ ε with a ~ N(0, I_M) and ε ~ N(0, I) (Φ = K_nm L_mm⁻ᵀ,
δ = diag(K − Φ Φᵀ)): the FITC form of supplement a §4.4 with M pseudo-inputs, which is exact
(δ = 0) when the pseudo-inputs are all the inputs. For the items the exact prior uses every
training *item* as pseudo-input: h(i, j) = f(x_i) − f(x_j) with f ~ GP(0, k), so N items carry the
preference GP over all N(N−1)/2 pairs exactly. ``n_pseudo_pairs`` switches to the paper's FITC
with P₀ pseudo item *pairs*; ``n_pseudo_users`` to FITC with U₀ pseudo users. The pseudo-inputs are
drawn at random from the training pairs and users, as the paper does (§4, "Experimental
procedure"). Kernels have unit amplitude; length-scales default to the median distance between
feature vectors (the paper's choice).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyro
import pyro.distributions as dist
import torch

from ...errors import DataError
from ...gp.kernels import Kernel, as_kernel
from ...gp.linalg import DTYPE, cholesky, solve_lower
from ...gp.probit import probit_logits


@dataclass
class CollabGP:
    """Collaborative GP preference model (Houlsby et al. 2012).

    Parameters
    ----------
    n_latent : D shared latent functions (the paper uses 20).
    kernel, lengthscale : item kernel ("se", the paper's, or "matern32") and its isotropic
        length-scale (None: the median distance between item feature vectors).
    user_kernel, user_lengthscale : the same for the GP over user features.
    user_features : False ignores them (K_users = I): collabGP\\u, the paper's "CP".
    n_pseudo_pairs : P₀ pseudo item pairs for FITC on K_items (None: exact).
    n_pseudo_users : U₀ pseudo users for FITC on K_users (None: exact).
    jitter : relative jitter on the pseudo-input kernel matrices.
    """

    n_latent: int = 20
    kernel: object = "se"
    lengthscale: float | None = None
    user_kernel: object = "se"
    user_lengthscale: float | None = None
    user_features: bool = True
    n_pseudo_pairs: int | None = None
    n_pseudo_users: int | None = None
    jitter: float = 1e-8

    def __post_init__(self):
        if int(self.n_latent) < 1:
            raise DataError(f"n_latent: need at least one latent function, got {self.n_latent}")
        for arg in ("n_pseudo_pairs", "n_pseudo_users"):
            v = getattr(self, arg)
            if v is not None and int(v) < 1:
                raise DataError(f"{arg}: must be at least 1 (or None for the exact prior), got {v}")

    def variant(self, name: str) -> CollabGP:
        """``"\\u"``: the same model without user features (collabGP\\u, the paper's CP)."""
        if name != "\\u":
            raise DataError(f"variant: collabGP has one variant, '\\\\u'; got {name!r}")
        return dataclasses.replace(self, user_features=False)

    def setup(self, data, seed: int = 0, pseudo_pairs=None, pseudo_users=None) -> CollabSetup:
        """Fix the pairs, kernels and pseudo-inputs every route shares. ``pseudo_pairs`` (P₀, 2)
        item rows and ``pseudo_users`` (U₀,) user rows override the random choice."""
        if data.users is None:
            raise DataError("users: collabGP needs one user per label (PairwiseData users=); for a "
                            "single user fit GPPL")
        return build_setup(self, data, seed, pseudo_pairs, pseudo_users)

    def program(self, setup: CollabSetup, data, subsample_size=None):
        """The Pyro model and its arguments (the labels live in ``setup``)."""
        return collabgp_model, (setup, subsample_size)


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
    w_·,d = Φ_w b_d + √δ_w ε (Φ_w (U, M_u), or None with δ_w = 1: K_users = I)."""

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


def build_setup(model: CollabGP, data, seed, pseudo_pairs, pseudo_users) -> CollabSetup:
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(data.item_features, dtype=DTYPE)
    pairs, z, t = canonical_pairs(data.a, data.b, data.y)
    if X.shape[1] == 0:  # no item features: the identity kernel over item rows (independent items)
        X = torch.arange(X.shape[0], dtype=DTYPE)[:, None]
        k = Kernel("identity", torch.ones(1, dtype=DTYPE))
    else:
        ell = model.lengthscale if model.lengthscale is not None else median_distance(X)
        k = as_kernel(model.kernel, torch.full((X.shape[1],), float(ell), dtype=DTYPE))
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
        ell_u = model.user_lengthscale if model.user_lengthscale is not None else median_distance(user_X)
        ku = as_kernel(model.user_kernel, torch.full((user_X.shape[1],), float(ell_u), dtype=DTYPE))
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
                       delta_w=delta_w, n_users=U_n)


def collabgp_model(setup: CollabSetup, subsample_size: int | None = None, obs: bool = True):
    """The Pyro model (module docstring), non-centred: a_d ~ N(0, I) and b_d ~ N(0, I) are the
    whitened pseudo-input values, ε the FITC residuals (sampled only where δ > 0)."""
    D, P, U = setup.D, setup.P, setup.n_users
    a = pyro.sample("a", dist.Normal(torch.zeros(D, setup.Phi_h.shape[1], dtype=DTYPE), 1.0).to_event(2))
    h = a @ setup.Phi_h.T  # (D, P)
    if bool((setup.delta_h > 0).any()):
        e_h = pyro.sample("e_h", dist.Normal(torch.zeros(D, P, dtype=DTYPE), 1.0).to_event(2))
        h = h + setup.delta_h.sqrt() * e_h
    if setup.Phi_w is None:
        w = pyro.sample("w", dist.Normal(torch.zeros(U, D, dtype=DTYPE), 1.0).to_event(2))
    else:
        b = pyro.sample("b", dist.Normal(torch.zeros(D, setup.Phi_w.shape[1], dtype=DTYPE), 1.0).to_event(2))
        w = setup.Phi_w @ b.T  # (U, D)
        if bool((setup.delta_w > 0).any()):
            e_w = pyro.sample("e_w", dist.Normal(torch.zeros(U, D, dtype=DTYPE), 1.0).to_event(2))
            w = w + setup.delta_w.sqrt()[:, None] * e_w
    with pyro.plate("labels", setup.L, subsample_size=subsample_size) as idx:
        g = (w[setup.u[idx]] * h[:, setup.z[idx]].T).sum(-1)
        y = 0.5 * (setup.t[idx] + 1.0)
        pyro.sample("y", dist.Bernoulli(logits=probit_logits(g)), obs=y if obs else None)


__all__ = ["CollabGP", "CollabSetup", "collabgp_model", "pref_kernel", "canonical_pairs", "median_distance"]
