"""collabGP: collaborative GP preference learning (Houlsby et al. 2012, §3; supplement a §1–2).

Generative story (main paper Eq. 1 and the priors on W and H; supplement a Eq. 1):

    s_d      ~ Gamma(α₀, β₀),  d = 1..D       inverse output scale of each shared function
    h_d      ~ GP(0, k_pref / s_d)             shared latent functions over item pairs, with
               k_pref((i,j),(k,l)) = k(x_i,x_k) + k(x_j,x_l) − k(x_i,x_l) − k(x_j,x_k)
    w_·,d    ~ N(0, K_users)                  user weights: a GP over user features,
                                              or K_users = I without them (collabGP\\u, "CP")
    g_u,p    = Σ_d w_u,d h_d,p                G = W H
    t_u,p    ~ P(t | g) = Φ(t g),  t = ±1     sign(g + ε), ε ~ N(0, 1)

Each unordered pair is one latent value: pairs are stored as (lo, hi) = (min, max) of the two item
rows and t is taken relative to that orientation. h(x_j, x_i) = −h(x_i, x_j) exactly under k_pref
(supplement Eq. 3), so the perfectly anti-correlated duplicates that would make K_items singular
never enter it.

The paper's prior on H (main paper Eq. 5, P(H | X, L) = Π_d N(h_d | 0, K_items)) has s_d = 1: a unit
amplitude for each of the D latent functions, so that g_u,p has prior variance D · k_pref((p),(p)),
up to 2D = 40 at D = 20 (an SE kernel's k_pref((p),(p)) = 2 − 2k(x_i, x_j)) — labels are then
expected to be near certain, and nothing in the paper's inference learns otherwise. The zoo's default
learns each function's scale instead (``learn_scale``): the Gamma prior on s_d is conjugate to the
Gaussian on h_d, and the EP–VB route updates q(s_d) in its VB step as GPPL's natgrad updates its
inverse scale (:mod:`crowdzoo.models.collabgp.ep_vb`), which also prunes
latent functions the labels do not need (automatic relevance determination over d: an unneeded
h_d settles at the prior's E[s_d] = α₀/β₀). The default prior Gamma(1, 10⁻³) is vague — the scales are
in effect learned by type-II maximum likelihood, and a pruned function keeps a prior variance of 10⁻³ —
and q(s_d) starts at E[s_d] = D/2, where g's prior variance is 2 per unit of k_pref whatever D is (as
GPPL's Gamma(2, 2) gives its utility). A prior holding s_d near D/2 (Gamma(2, 2/D)) keeps each pruned
function's prior variance (1/20) in every prediction and scored up to 0.009 nats worse on the
calibration battery's crowds the paper's prior missed (docs/collabgp.md, "Defaults"). Where tastes are
strongly personal and each user gave many labels, VB prunes to one or two functions and the learned
scales cost 0.01–0.04 nats against the paper's twenty unit ones (still within pooled GPPL's log loss
+ 0.01 on the battery). ``CollabGP.paper()`` restores the paper's settings (``learn_scale=False``,
s_d = 1).

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

Length-scales under a prior (the paper picks them by a grid on the evidence, supplement a
§9): with ``lengthscale_prior=`` (and ``user_lengthscale_prior=`` when there is a user GP) the svi and
nuts routes' program samples the ARD length-scales first,

    ℓ_d   ~ lengthscale_prior,  d = 1..D        item kernel k (site "lengthscale")
    ℓᵘ_e  ~ user_lengthscale_prior, e = 1..E    user kernel (site "user_lengthscale")

and rebuilds from them what :func:`build_setup` computes from the kernels: the pseudo-inputs' Cholesky
factor (K_zz + jitter·I, a fixed jitter, so the factor is smooth in ℓ and traceable by NUTS) and the
prior bases Φ_h, δ_h (Φ_w, δ_w), the pseudo-inputs staying those of the median-heuristic setup
(:func:`collabgp_lengthscale_model`); the rest of the story is :func:`collabgp_model`'s. The same
program with ``learn_kernel=True`` (svi, no prior) makes the ARD length-scales ``pyro.param`` s
(type-II maximum likelihood inside VI), started at the setup's.
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
from ...gp.learn import ard_k, ard_k_pairs, fixed_jitter_chol
from ...gp.linalg import DTYPE, cholesky, solve_lower
from ...gp.priors import check_priors
from ...gp.probit import probit_logits


@dataclass
class CollabGP:
    """Collaborative GP preference model (Houlsby et al. 2012).

    Parameters
    ----------
    n_latent : D shared latent functions (the paper uses 20; with ``learn_scale`` the unneeded ones are
        shrunk away by their scales s_d).
    learn_scale : infer each latent function's inverse output scale s_d under Gamma(α₀, β₀) (the
        module docstring's story; default). False: s_d = 1, the paper's prior on H (main paper Eq. 5),
        whose amplitude D × 1 the labels cannot lower (on the calibration battery's noisy crowd held-out
        log loss .66, near a coin's .69, against .56 learned; docs/collabgp.md, "Defaults").
    shape_s0, rate_s0 : α₀, β₀ of the Gamma prior on each s_d (default 1, 10⁻³: vague, so that the
        labels set the scales and an unneeded latent function is pruned to a prior variance β₀/α₀;
        the EP–VB route starts q(s_d) at E[s_d] = D/2 whatever the prior).
    kernel, lengthscale : item kernel ("se", the paper's, or "matern32") and its length-scales: None
        (default) the per-dimension median heuristic ℓ_d = median |x_i,d − x_j,d| (Simpson & Gurevych
        2020, Eq. 26; as GPPL), so that features in raw units (metres beside 0/1 columns) each count;
        ``"median distance"`` the paper's single length-scale, the median distance between item
        feature vectors, which lets the feature with the largest units decide; or a value, or ARD
        values (D,) (what svi's ``learn_kernel=True`` leaves in the posterior's model).
    user_kernel, user_lengthscale : the same for the GP over user features.
    user_features : False ignores them (K_users = I): collabGP\\u, the paper's "CP".
    n_pseudo_pairs : P₀ pseudo item pairs for FITC on K_items (None: exact).
    n_pseudo_users : U₀ pseudo users for FITC on K_users (None: exact).
    jitter : relative jitter on the pseudo-input kernel matrices.
    lengthscale_prior, user_lengthscale_prior : positive Pyro distributions over the item and user
        ARD length-scales (over one, iid over the dimensions, or with batch shape (D,)), in the
        features' units. The svi and nuts routes then infer those length-scales with the rest (module
        docstring; the posterior predicts with each draw's kernels); the ep route refuses them. Each
        needs its side's named kernel ("se", "matern32"): item features for ``lengthscale_prior``,
        user features (and ``user_features=True``) for ``user_lengthscale_prior``. Without priors svi
        learns the ARD length-scales as ``pyro.param`` s with ``learn_kernel=True``.
    """

    n_latent: int = 20
    learn_scale: bool = True
    shape_s0: float = 1.0
    rate_s0: float = 1e-3
    kernel: object = "se"
    lengthscale: float | str | None = None
    user_kernel: object = "se"
    user_lengthscale: float | str | None = None
    user_features: bool = True
    n_pseudo_pairs: int | None = None
    n_pseudo_users: int | None = None
    jitter: float = 1e-8
    lengthscale_prior: object = None
    user_lengthscale_prior: object = None

    def __post_init__(self):
        check_priors(self, {"shape_s0": "a positive Gamma shape α₀ (of the prior on the inverse scales s_d)",
                            "rate_s0": "a positive Gamma rate β₀ (of the prior on the inverse scales s_d)"},
                     lengthscale_priors=("lengthscale_prior", "user_lengthscale_prior"))
        if int(self.n_latent) < 1:
            raise DataError(f"n_latent: need at least one latent function, got {self.n_latent}")
        for arg in ("n_pseudo_pairs", "n_pseudo_users"):
            v = getattr(self, arg)
            if v is not None and int(v) < 1:
                raise DataError(f"{arg}: must be at least 1 (or None for the exact prior), got {v}")

    @classmethod
    def paper(cls, **kw) -> CollabGP:
        """The paper's settings (main paper §5, "Experimental procedure"; supplement a §4.4): D = 20
        latent functions of unit amplitude (s_d = 1, Eq. 5), the median distance between feature vectors
        as every length-scale, and FITC with P₀ = 25 pseudo item pairs and U₀ = 25 pseudo users (``kw``
        replaces any of them). The defaults differ (the class docstring says why); the paper
        reproductions pin these."""
        return cls(**{**PAPER, **kw})

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

    def check_route(self, method: str, settings: dict) -> None:
        """Refuse length-scale priors where the route would ignore them (called by :func:`crowdzoo.fit`):
        svi and nuts infer the length-scales under them; ep keeps them fixed (or maximises its evidence
        over them with ``learn_kernel=True``)."""
        for name in ("lengthscale_prior", "user_lengthscale_prior"):
            if getattr(self, name) is None or method in ("svi", "nuts"):
                continue
            raise DataError(f"{name}: collabGP's svi and nuts routes infer the length-scales under the "
                            f"prior; its {method!r} route keeps them fixed or maximises the EP evidence "
                            "over them (drop the prior, or fit with {method='svi'} or 'nuts')", arg=name,
                            settings=("method",))

    def program(self, setup: CollabSetup, data, subsample_size=None, learn_kernel: bool = False):
        """The Pyro model and its arguments (the labels live in ``setup``): :func:`collabgp_model` with
        the kernels fixed; :func:`collabgp_lengthscale_model` with ``lengthscale_prior`` /
        ``user_lengthscale_prior`` (those sides' ℓ sampled, :meth:`prior_space`) or ``learn_kernel``
        (the item and user ARD ℓ ``pyro.param`` s started at ``setup``'s, svi's type-II maximum
        likelihood; :meth:`kernel_space`)."""
        from ...gp.learn import varying_space

        space = varying_space(self, setup, learn_kernel)
        if space is None:
            return collabgp_model, (setup, subsample_size)
        return collabgp_lengthscale_model, (space, subsample_size)

    def kernel_space(self, setup: CollabSetup) -> CollabSpace:
        """The item and user sides' algebra as functions of their ARD length-scales (``learn_kernel``)."""
        items = SideARD.of(self.kernel, setup, True, self.jitter, "learn_kernel")
        users = None if setup.users is None else SideARD.of(self.user_kernel, setup, False, self.jitter,
                                                             "learn_kernel")
        return CollabSpace.of(setup, items, users)

    def prior_space(self, setup: CollabSetup) -> CollabSpace:
        """The sides whose length-scales are random variables (svi and nuts): the item side under
        ``lengthscale_prior``, the user side under ``user_lengthscale_prior``, each with its ARD algebra
        and its prior as a distribution with event shape (D,); the other sides keep ``setup``'s."""
        from ...gp.learn import lengthscale_prior_of

        items = users = prior = user_prior = None
        if self.lengthscale_prior is not None:
            items = SideARD.of(self.kernel, setup, True, self.jitter, "lengthscale_prior")
            prior = lengthscale_prior_of(self.lengthscale_prior, items.D)
        if self.user_lengthscale_prior is not None:
            if setup.users is None:
                raise DataError("user_lengthscale_prior: the model has no user GP (user_features=False or "
                                "no user features in the data), so there are no user length-scales to "
                                "infer; drop user_lengthscale_prior")
            users = SideARD.of(self.user_kernel, setup, False, self.jitter, "user_lengthscale_prior")
            user_prior = lengthscale_prior_of(self.user_lengthscale_prior, users.D, "user_lengthscale_prior")
        return CollabSpace.of(setup, items, users, prior, user_prior)

    def with_lengthscales(self, setup: CollabSetup, ell=None, ell_u=None):
        """(the model, its setup) at item ARD length-scales ``ell`` (D,) and user ``ell_u`` (E,) (None:
        that side's kernel stays ``setup``'s), with the fixed-jitter factors of the svi/nuts program."""
        items = None if ell is None else SideARD.of(self.kernel, setup, True, self.jitter, "lengthscale")
        users = None if ell_u is None else SideARD.of(self.user_kernel, setup, False, self.jitter,
                                                       "user_lengthscale")
        model = self if ell is None else dataclasses.replace(self, lengthscale=ell)
        model = model if ell_u is None else dataclasses.replace(model, user_lengthscale=ell_u)
        return model, CollabSpace.of(setup, items, users).setup_at(ell, ell_u)


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
    of the Gamma prior on the inverse scales s_d of h_d (None: s_d = 1, the paper's prior)."""

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


def build_setup(model: CollabGP, data, seed, pseudo_pairs, pseudo_users) -> CollabSetup:
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
                                    else None))


def collabgp_model(setup: CollabSetup, subsample_size: int | None = None, obs: bool = True):
    """The Pyro model (module docstring), non-centred: a_d ~ N(0, I) and b_d ~ N(0, I) are the
    whitened pseudo-input values, ε the FITC residuals (sampled only where δ > 0)."""
    sd_h = setup.delta_h.sqrt() if bool((setup.delta_h > 0).any()) else None
    sd_w = None
    if setup.Phi_w is not None and bool((setup.delta_w > 0).any()):
        sd_w = setup.delta_w.sqrt()
    collab_story(setup, setup.Phi_h, sd_h, setup.Phi_w, sd_w, subsample_size, obs)


def collab_story(setup: CollabSetup, Phi_h, sd_h, Phi_w, sd_w, subsample_size=None, obs: bool = True):
    """The story shared by :func:`collabgp_model` and :func:`collabgp_lengthscale_model` (main paper
    Eq. 1, supplement a Eq. 1) on given prior bases: h_d = Φ_h a_d + √δ_h ε, w_·,d = Φ_w b_d + √δ_w ε
    (``sd_*`` = √δ, None where no residual is sampled; Φ_w None: K_users = I), g_u,p = Σ_d w_u,d h_d,p,
    P(t | g) = Φ(t g). With ``setup.scale_prior`` each h_d is divided by √s_d, s_d ~ Gamma(α₀, β₀)
    (site "s_h"). Labels, pairs and users are ``setup``'s."""
    D, P, U = setup.D, setup.P, setup.n_users
    a = pyro.sample("a", dist.Normal(torch.zeros(D, Phi_h.shape[1], dtype=DTYPE), 1.0).to_event(2))
    h = a @ Phi_h.T  # (D, P)
    if sd_h is not None:
        e_h = pyro.sample("e_h", dist.Normal(torch.zeros(D, P, dtype=DTYPE), 1.0).to_event(2))
        h = h + sd_h * e_h
    if setup.scale_prior is not None:
        shape0, rate0 = (torch.full((D,), float(v), dtype=DTYPE) for v in setup.scale_prior)
        s_h = pyro.sample("s_h", dist.Gamma(shape0, rate0).to_event(1))
        h = h / s_h.sqrt()[:, None]
    if Phi_w is None:
        w = pyro.sample("w", dist.Normal(torch.zeros(U, D, dtype=DTYPE), 1.0).to_event(2))
    else:
        b = pyro.sample("b", dist.Normal(torch.zeros(D, Phi_w.shape[1], dtype=DTYPE), 1.0).to_event(2))
        w = Phi_w @ b.T  # (U, D)
        if sd_w is not None:
            e_w = pyro.sample("e_w", dist.Normal(torch.zeros(U, D, dtype=DTYPE), 1.0).to_event(2))
            w = w + sd_w[:, None] * e_w
    with pyro.plate("labels", setup.L, subsample_size=subsample_size) as idx:
        g = (w[setup.u[idx]] * h[:, setup.z[idx]].T).sum(-1)
        y = 0.5 * (setup.t[idx] + 1.0)
        pyro.sample("y", dist.Bernoulli(logits=probit_logits(g)), obs=y if obs else None)


# ---------------------------------------------------------------------- length-scales as random variables
@dataclass
class SideARD:
    """One side's prior basis as a function of its ARD length-scales ℓ (..., D), batched over ℓ's
    leading dimensions (one ℓ per posterior draw): the items' h over pairs (pseudo-inputs items
    ``Za``, or item pairs (``Za``, ``Zb``), supplement a Eq. 1) or the users' w (pseudo users ``Za``).
    The pseudo-inputs are the base setup's. K_zz is factorised with a fixed jitter (``jitter`` × the
    kernel's variance on the diagonal), as :class:`~crowdzoo.gp.learn.ARDGP` does: smooth in ℓ, with no
    Python branch on tensor values, so NUTS can trace it; a draw's algebra is :meth:`side`'s at that ℓ."""

    name: str
    variance: float
    Za: torch.Tensor
    Zb: torch.Tensor | None
    items: bool
    jitter: float

    @classmethod
    def of(cls, kernel, setup: CollabSetup, items: bool, jitter: float, what: str) -> SideARD:
        """The ARD algebra of ``setup``'s item (``items``) or user side, whose kernel argument is
        ``kernel``; a DataError naming ``what`` when that side has no length-scales the model sets."""
        side = setup.items if items else setup.users
        named = isinstance(kernel, str) or (isinstance(kernel, Kernel) and kernel.lengthscale is None)
        if side is None or getattr(side.kernel, "name", None) == "identity" or not named:
            where = "item" if items else "user"
            raise DataError(f"{what}: needs a named {where} kernel ('se', 'matern32') whose length-scales "
                            f"the model sets, on {where}s with features; the {where} side has none (pass "
                            f"{'kernel' if items else 'user_kernel'}='se' and {where} features, or drop "
                            f"{what})")
        name, variance = (kernel, 1.0) if isinstance(kernel, str) else (kernel.name, float(kernel.variance))
        Kernel(name)  # the kernel's name is checked here
        return cls(name, variance, side.Za if items else side.Z, side.Zb if items else None, items,
                   float(jitter))

    @property
    def D(self) -> int:
        return self.Za.shape[1]

    def k(self, x1, x2, ell):
        """k(x1, x2) at every ℓ: x1 (n, D), x2 (m, D), ℓ (..., D) → (..., n, m)."""
        return ard_k(self.name, self.variance, x1, x2, ell)

    def chol(self, ell):
        """L_zz (..., M, M) at every ℓ: L_zz L_zzᵀ = K_zz + jitter·variance·I (K_zz of the pseudo
        items, pseudo pairs under k_pref, or pseudo users)."""
        if self.items and self.Zb is not None:
            K = self._pref(self.Za, self.Zb, self.Za, self.Zb, ell)
        else:
            K = self.k(self.Za, self.Za, ell)
        return fixed_jitter_chol(K, self.jitter * self.variance)

    def _pref(self, xa, xb, za, zb, ell):
        return pref_kernel(lambda x1, x2: self.k(x1, x2, ell), xa, xb, za, zb)

    def basis(self, ell, xa, xb=None, L=None):
        """(Φ (..., n, M), δ (..., n)) at every ℓ: :meth:`ItemSide.basis` for the pairs (x_a, x_b), or
        :meth:`UserSide.basis` for the users x_a; ``L``: :meth:`chol`'s factors at ℓ when at hand."""
        L = self.chol(ell) if L is None else L
        if not self.items:
            K_nz, k_nn = self.k(xa, self.Za, ell), self.variance
        else:
            K_nz = (self.k(xa, self.Za, ell) - self.k(xb, self.Za, ell) if self.Zb is None
                    else self._pref(xa, xb, self.Za, self.Zb, ell))
            k_nn = 2.0 * self.variance - 2.0 * ard_k_pairs(self.name, self.variance, xa, xb, ell)
        Phi = solve_lower(L, K_nz.mT).mT
        return Phi, (k_nn - (Phi * Phi).sum(-1)).clamp_min(0.0)

    def side(self, ell, L=None):
        """The fixed-kernel path's :class:`ItemSide` / :class:`UserSide` at one ℓ (D,)."""
        kern = Kernel(self.name, ell, self.variance)
        L = self.chol(ell) if L is None else L
        return ItemSide(kern, self.Za, self.Zb, L) if self.items else UserSide(kern, self.Za, L)


@dataclass
class CollabSpace:
    """A collabGP setup as a function of its length-scales: the item and user sides' ARD algebra
    (``items``, ``users``; None: that side stays the base setup's) and their priors (event shape
    (D,)). A side with an algebra and a prior has its ℓ sampled (svi and nuts); without a prior ℓ is a
    ``pyro.param`` (svi's ``learn_kernel``). ``e_h``, ``e_w``: whether the base setup samples the
    FITC residuals (δ > 0 somewhere), decided once so that the program's sites do not depend on ℓ."""

    base: CollabSetup
    items: SideARD | None
    users: SideARD | None
    prior: object = None
    user_prior: object = None
    e_h: bool = False
    e_w: bool = False

    @classmethod
    def of(cls, base, items, users, prior=None, user_prior=None) -> CollabSpace:
        e_w = base.Phi_w is not None and bool((base.delta_w > 0).any())
        return cls(base, items, users, prior, user_prior, bool((base.delta_h > 0).any()), e_w)

    def __getattr__(self, name):  # D, P, L, Phi_h, n_users ...: the base setup's (what guides read)
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def sides(self):
        """(site name, ARD algebra, prior, start ℓ) of each side whose length-scales vary."""
        from ...gp.learn import varying_sides

        return varying_sides(self)

    def item_basis(self, ell, L=None):
        """(Φ_h (..., P, M), δ_h (..., P)) at the training pairs at every ℓ (δ_h = 0 where the base
        setup's is: every item a pseudo-input)."""
        P = self.base.pairs
        Phi, delta = self.items.basis(ell, self.base.X[P[:, 0]], self.base.X[P[:, 1]], L)
        return Phi, (delta if self.e_h else torch.zeros_like(delta))

    def user_basis(self, ell_u, L=None):
        """(Φ_w (..., U, M_u), δ_w (..., U)) at the training users at every ℓᵘ (δ_w = 0 where the base
        setup's is: every user a pseudo-input)."""
        Phi, delta = self.users.basis(ell_u, self.base.user_X, L=L)
        return Phi, (delta if self.e_w else torch.zeros_like(delta))

    def setup_at(self, ell=None, ell_u=None) -> CollabSetup:
        """The setup at item ARD length-scales ``ell`` (D,) and user ``ell_u`` (None: that side's base)."""
        st = self.base
        items, Phi_h, delta_h = st.items, st.Phi_h, st.delta_h
        if self.items is not None and ell is not None:
            L = self.items.chol(ell)
            items = self.items.side(ell, L)
            Phi_h, delta_h = self.item_basis(ell, L)
        users, Phi_w, delta_w = st.users, st.Phi_w, st.delta_w
        if self.users is not None and ell_u is not None:
            L = self.users.chol(ell_u)
            users = self.users.side(ell_u, L)
            Phi_w, delta_w = self.user_basis(ell_u, L)
        return dataclasses.replace(st, items=items, users=users, Phi_h=Phi_h, delta_h=delta_h, Phi_w=Phi_w,
                                   delta_w=delta_w)


_TINY = 1e-30  # floor under δ before √: the gradient of √δ stays finite where δ is 0 to round-off


def collabgp_lengthscale_model(space: CollabSpace, subsample_size: int | None = None, obs: bool = True):
    """:func:`collabgp_model` with the item (and user) ARD length-scales ("lengthscale",
    "user_lengthscale") drawn first under their priors, or ``pyro.param`` s (positive) where a side has
    none, and the prior bases Φ_h, δ_h (Φ_w, δ_w) rebuilt from them (module docstring)."""
    from pyro.distributions import constraints

    ell = {}
    for name, _, prior, start in space.sides():
        ell[name] = (pyro.param(name, start.detach().clone(), constraint=constraints.positive)
                     if prior is None else pyro.sample(name, prior))
    st = space.base
    Phi_h, delta_h = st.Phi_h, st.delta_h
    if space.items is not None:
        Phi_h, delta_h = space.item_basis(ell["lengthscale"])
    Phi_w, delta_w = st.Phi_w, st.delta_w
    if space.users is not None:
        Phi_w, delta_w = space.user_basis(ell["user_lengthscale"])
    sd_h = delta_h.clamp_min(_TINY).sqrt() if space.e_h else None
    sd_w = delta_w.clamp_min(_TINY).sqrt() if space.e_w else None
    collab_story(st, Phi_h, sd_h, Phi_w, sd_w, subsample_size, obs)


#: the paper's settings (main paper §5; supplement a §4.4): :meth:`CollabGP.paper`
PAPER = dict(n_latent=20, learn_scale=False, lengthscale=MEDIAN_DISTANCE, user_lengthscale=MEDIAN_DISTANCE,
             n_pseudo_pairs=25, n_pseudo_users=25)

__all__ = ["CollabGP", "CollabSetup", "CollabSpace", "SideARD", "collabgp_model",
           "collabgp_lengthscale_model", "collab_story", "pref_kernel", "canonical_pairs", "median_distance"]
