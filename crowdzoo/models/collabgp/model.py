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

Length-scales under a prior (the paper picks them by a grid on the evidence, supplement a
§9): with ``lengthscale_prior=`` (and ``user_lengthscale_prior=`` when there is a user GP) the svi and
nuts routes' program samples the ARD length-scales first,

    ℓ_d   ~ lengthscale_prior,  d = 1..D        item kernel k (site "lengthscale")
    ℓᵘ_e  ~ user_lengthscale_prior, e = 1..E    user kernel (site "user_lengthscale")

and the rest of the story is :func:`collabgp_model`'s on the prior bases rebuilt at ℓ
(:mod:`crowdzoo.models.collabgp.lengthscales`). The same program with ``learn_kernel=True`` (svi, no
prior) makes the ARD length-scales ``pyro.param`` s (type-II maximum likelihood inside VI).

A label of weight w (``PairwiseData.weights``; the setup's ``w``) enters as w copies of it: its
log-likelihood times w in the program, and w copies of its sites in EP–VB
(:mod:`crowdzoo.models.collabgp.ep_vb`).

The setup (pairs, kernels, FITC pseudo-inputs and the prior bases Φ, δ the story is written on) is
:mod:`crowdzoo.models.collabgp.setup`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch

from ...data.tensors import label_scale
from ...errors import DataError
from ...gp.linalg import DTYPE
from ...gp.priors import check_priors
from ...gp.probit import probit_logits
from . import lengthscales
from .lengthscales import LengthscaleSpace
from .setup import MEDIAN_DISTANCE, CollabSetup, build_setup


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

    def program(self, setup: CollabSetup, data, subsample_size=None, learn_kernel: bool = False):
        """The Pyro model and its arguments (the labels live in ``setup``): :func:`collabgp_model` with
        the kernels fixed; :func:`collabgp_lengthscale_model` with ``lengthscale_prior`` /
        ``user_lengthscale_prior`` (those sides' ℓ sampled) or ``learn_kernel`` (the item and user ARD ℓ
        ``pyro.param`` s started at ``setup``'s, svi's type-II maximum likelihood):
        :meth:`lengthscale_space`."""
        from ...gp.learn import varying_space

        space = varying_space(self, setup, learn_kernel)
        if space is None:
            return collabgp_model, (setup, subsample_size)
        return collabgp_lengthscale_model, (space, subsample_size)

    def lengthscale_space(self, setup: CollabSetup, prior: bool = False) -> LengthscaleSpace:
        """The setup as a function of the item and user ARD length-scales: with ``prior`` the sides under
        a length-scale prior (svi and nuts sample them), without every side (``learn_kernel``'s
        ``pyro.param`` s); :func:`~crowdzoo.models.collabgp.lengthscales.lengthscale_space`."""
        return lengthscales.lengthscale_space(self, setup, prior)

    def with_lengthscales(self, setup: CollabSetup, ell=None, ell_u=None):
        """(the model, its setup) at item ARD length-scales ``ell`` (D,) and user ``ell_u`` (E,)
        (:func:`~crowdzoo.models.collabgp.lengthscales.with_lengthscales`)."""
        return lengthscales.with_lengthscales(self, setup, ell, ell_u)


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
    (site "s_h"). Labels, pairs, users and the labels' weights are ``setup``'s (a label's
    log-likelihood times its weight, as that many copies of it)."""
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
        with label_scale(setup.w, idx):
            pyro.sample("y", dist.Bernoulli(logits=probit_logits(g)), obs=y if obs else None)


_TINY = 1e-30  # floor under δ before √: the gradient of √δ stays finite where δ is 0 to round-off


def collabgp_lengthscale_model(space: LengthscaleSpace, subsample_size: int | None = None, obs: bool = True):
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

__all__ = ["CollabGP", "collabgp_model", "collabgp_lengthscale_model", "collab_story", "PAPER"]
