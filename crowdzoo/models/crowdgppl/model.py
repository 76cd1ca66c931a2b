"""crowdGPPL: consensus and personal preferences of a crowd (Simpson & Gurevych 2020, §3.2).

Generative story (Eq. 5–6, sparse as in §4.3), for C components, M inducing items, M_u
inducing users, and label p by user j = u_p on items a = a_p, b = b_p:

    s_t   ~ Gamma(α₀ᵗ, β₀ᵗ),   t_m   ~ N(0, K_mm / s_t)              consensus at inducing items
    s_v,c ~ Gamma(α₀ᵛ, β₀ᵛ),   v_m,c ~ N(0, K_mm / s_v,c)    c=1..C   item components
    s_w,c ~ Gamma(α₀ʷ, β₀ʷ),   w_m,c ~ N(0, L_mm / s_w,c)    c=1..C   user components
    z_p   = (t_a − t_b) + Σ_c (v_c,a − v_c,b) w_c,j                   F = VᵀW + t1ᵀ (Eq. 5)
    y_p   ~ Bernoulli(Φ(z_p))                                         probit, Eq. 2 with σ² = ½

Item and user values are GP conditionals of the inducing values (t = A t_m + noise with
A = K_nm K_mm⁻¹, and likewise w with A_w = L_um L_mm⁻¹). As in GPPL, the conditional noise is
integrated into the probit: given the inducing values, z_p has mean z̄_p (the projected values)
and variance σ²_p = c_p/s_t + Σ_c [c_p/s_v,c (w̄²_c,j + d_j/s_w,c) + Δv̄²_c d_j/s_w,c] (the
same second moments as Eq. 25), and p(y_p = 1 | inducing) = Φ(z̄_p / √(1 + σ²_p)) — exact for the
``\\inducing`` variant (c_p = d_j = 0), the Gaussian closure of Eq. 25 otherwise. Inducing values
are written non-centred (t_m = L_mm u_t / √s_t, ...), which is what NUTS and Pyro's guides see.

Variants of Table 2: ``n_inducing=None`` (``\\inducing``), ``user_features=False`` (``\\u``: L = I,
one independent w per user), ``item_features=False`` (``\\u\\x``: K = I too), ``consensus=False``
(``\\u\\t``). Without user features q(w) is kept diagonal per user, so memory is O(C·U).

Ties (labels y = ½ of ``PairwiseData.from_frame(..., ties="model")``) are a third outcome, the
ordinal probit of :mod:`crowdzoo.gp.ordinal` with one threshold τ for the crowd:

    τ     ~ tie_prior                     default LogNormal(log ½, 1)   (site "tau")
    P(a ≻ b | inducing, τ) = Φ((z̄_p − τ)/√(1 + σ²_p)),  P(b ≻ a) = Φ((−z̄_p − τ)/√(1 + σ²_p)),  tie the rest

Weighted labels (``PairwiseData.weights``: counts per pair, ``ties="half"``'s halves): a label of weight
w_p enters as w_p copies of it, its log-likelihood times w_p (``poutine.scale`` on the observed site
inside the pairs plate, so within a mini-batch too: :func:`~crowdzoo.data.tensors.label_scale`).

An item-level residual (:mod:`crowdzoo.gp.residual`; by default where the item side is sparse, M < N)
adds to the consensus each item's own utility, which the sparse conditional cannot carry:

    s_r   ~ Gamma(α_r, β_r),   r_i ~ N(0, 1/s_r)                       (sites "s_r", "u_r" = r √s_r)
    z_p   = (t_a + r_a − t_b − r_b) + Σ_c (v_c,a − v_c,b) w_c,j

An order effect (``order_effect=True``; :mod:`crowdzoo.gp.order`): the item a label lists first (column
``a``: the home side, the item shown first) gains an advantage δ shared by the crowd,

    δ     ~ order_prior                   default N(0, 1)   (site "order")
    z_p   = (t_a − t_b) + Σ_c (v_c,a − v_c,b) w_c,j + δ,   P(y_p = 1 | inducing, δ) = Φ((z̄_p + δ)/√(1 + σ²_p))

With user features x_j the user components are a GP over them plus each user's own part
(``user_individual`` = λ; every user inducing):

    w_c,j = g_c(x_j) + ε_c,j,   g_c ~ GP(0, L / s_w,c),   ε_c,j ~ N(0, λ / s_w,c)   (L_mm + λ I)

Length-scales under a prior (the paper fixes them by the median heuristic, §6): with
``lengthscale_prior=`` (and ``user_lengthscale_prior=`` when there is a user kernel) the svi and nuts
routes' program samples the ARD length-scales first,

    ℓ_d   ~ lengthscale_prior,  d = 1..D      item kernel (site "lengthscale")
    ℓᵘ_e  ~ user_lengthscale_prior, e = 1..E  user kernel (site "user_lengthscale")

and builds K_mm, L_mm and the projections of that side from them inside the model, the inducing inputs
staying those of the median-heuristic setup (:func:`crowdgppl_lengthscale_model`, as GPPL's
``gppl_lengthscale_model``). The same program with ``learn_kernel=True`` (svi, no prior) makes them
``pyro.param`` s instead. natgrad with ``learn_kernel=True`` adds log p(ℓ) to its objective (type-II MAP).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from functools import partial

import pyro
import pyro.distributions as dist
import torch

from ...data.tensors import label_scale, label_tensors, user_tensor, weight_tensor, weighted
from ...errors import DataError
from ...gp import order
from ...gp.conditional import identity_gp
from ...gp.kernels import Kernel
from ...gp.linalg import DTYPE
from ...gp.ordinal import default_tie_prior, outcome_codes, outcome_distribution
from ...gp.priors import check_priors
from ...gp.probit import probit_logits
from ...gp.residual import prior_gamma, resolve
from ..gppl.model import GPPL, residual
from .setup import CrowdSetup, LengthscaleSpace, _has_kernel, global_sites


class _class_or_instance:
    """A method that gets (cls, instance-or-None): callable on the class and on an instance."""

    def __init__(self, f):
        self.f = f
        self.__doc__ = f.__doc__

    def __get__(self, obj, cls):
        return partial(self.f, cls, obj)


@dataclass
class CrowdGPPL:
    """GP matrix factorisation for crowds of preference labellers (Eq. 5–6).

    Parameters
    ----------
    n_components : C latent components (extra ones are shrunk away by their scales, §3.2).
    n_inducing : M inducing items by k-means++; None: every item, the ``\\inducing`` variant;
        "auto" (default): every item up to :data:`~crowdzoo.gp.inducing.AUTO_INDUCING`, then that many,
        and fewer with many labels — √(PASS_BUDGET / (P (C + 1))), at least 100 — so that a pass over
        10⁶ labels (M = 200 at C = 20) takes minutes (:func:`~crowdzoo.gp.inducing.auto_inducing`).
    n_inducing_users : M_u inducing users, the same way over users.
    item_features, user_features : use the features (False: identity kernel, the ``\\u\\x`` and
        ``\\u`` variants). Without user features in the data, users are always independent.
    consensus : include the consensus t (False: the ``\\t`` variant).
    kernel, user_kernel, lengthscale, user_lengthscale, scaled_lengthscale : as for :class:`GPPL`
        (a name, a kernel object or a callable; ``user_kernel`` None: the item kernel if it is a
        name, else "matern32"); the
        length-scales default to the median heuristic (Eq. 26) per feature set.
    shape_t0, rate_t0, shape_v0, rate_v0, shape_w0, rate_w0 : Gamma priors (shape, rate) on the
        inverse scales s_t, s_v,c, s_w,c (Eq. 6). The defaults are weakly informative on the probit
        scale: Gamma(2, 2) on s_t (the consensus's sd mostly between 0.6 and 3, as GPPL's), Gamma(2,
        2/√C) on s_v,c and s_w,c (``rate_v0``/``rate_w0`` None: :meth:`component_rate`). The paper's
        Sushi settings (§5.2; :meth:`paper`), Gamma(1, 100) and Gamma(1, 10), put most of their mass
        on utilities so large that every label is near certain: with every item inducing the
        consensus scale then ran away (E[s_t] ≈ 10⁻³, worse than a coin on held-out labels; NUTS
        agrees that s_t sits at the prior's edge). docs/crowdgppl.md ("Defaults") has the evidence
        and ``crowdzoo compare calibration`` the battery that chose them.
    prior_t, prior_v, prior_w : any positive Pyro distribution replacing those Gammas (svi and
        nuts; natgrad's conjugate updates of Eq. 15 need Gammas and say so).
    lengthscale_prior, user_lengthscale_prior : positive Pyro distributions over the item and user
        length-scales (as GPPL's ``lengthscale_prior``: over one, iid over the dimensions, or with
        batch shape (D,)), in the features' units. The svi and nuts routes then infer those
        length-scales with the rest (module docstring; the posterior predicts with each draw's
        kernels); natgrad with ``learn_kernel=True`` adds log p(ℓ) to its objective (type-II MAP).
        Each needs its side's named kernel ("se", "matern32"): item features for
        ``lengthscale_prior``, user features for ``user_lengthscale_prior``. Without priors svi
        learns the length-scales as ``pyro.param`` s with ``learn_kernel=True``.
    tie_prior : the prior of the crowd's tie threshold τ > 0 (probit scale), used when the data have
        ties (``ties="model"``); None: :func:`~crowdzoo.gp.ordinal.default_tie_prior`, LogNormal(log ½, 1).
        natgrad finds τ's mode on the log scale (a point estimate), svi and nuts its posterior.
    tie_threshold : "crowd" (default): one τ for every user; "per_user": a τ_j per user, each under
        ``tie_prior`` independently (users who call more pairs even get a larger τ_j; a user with few
        labels keeps near the prior's). Predictions of the consensus (no ``users``) then use the median
        of the users' τ_j.
    item_residual : an item-level residual r_i ~ N(0, 1/s_r) in the consensus (module docstring;
        :mod:`crowdzoo.gp.residual`): True, False, or "auto" (default) — where the item side is sparse,
        whose conditional cannot carry items' own utilities (at hundreds of labels per item crowdGPPL
        then fell behind per-item win rates: docs/benchmarks.md, "A large crowd through the command
        line"). Needs the consensus.
    shape_r0, rate_r0 : α_r, β_r of the Gamma prior on s_r (default 2, ½, as GPPL's).
    user_individual : with user features, each user's own part of w beside the user GP, as a share of
        the GP's variance: w_c,j = g_c(x_j) + ε_c,j, ε_c,j ~ N(0, λ / s_w,c) (module docstring), so users
        with equal covariates keep tastes of their own and a new user gets the covariates' prediction
        with the individual part's variance. 0: w is the user GP alone (the paper's). With fewer
        inducing users than users, the individual part is the conditional variance alone. A named user
        kernel (or a :class:`~crowdzoo.gp.kernels.Kernel`) carries it; other kernel objects do not.
    order_effect : a learned advantage δ of the item each label lists first (column ``a``: the home side,
        the item shown first; module docstring, :mod:`crowdzoo.gp.order`), one for the crowd, which every
        route infers; ``posterior.order_effect()`` reports it and ``predict_proba(..., order=False)``
        predicts without it. Data whose order is their outcome (winner-first) are refused.
    order_prior : the Normal prior of δ on the probit scale (None: N(0, 1)); with ``order_effect`` only.
    """

    n_components: int = 20
    n_inducing: int | str | None = "auto"
    n_inducing_users: int | str | None = "auto"
    item_features: bool = True
    user_features: bool = True
    consensus: bool = True
    kernel: object = "matern32"
    user_kernel: object = None
    lengthscale: object = None
    user_lengthscale: object = None
    scaled_lengthscale: bool = False
    shape_t0: float = 2.0
    rate_t0: float = 2.0
    shape_v0: float = 2.0
    rate_v0: float | None = None
    shape_w0: float = 2.0
    rate_w0: float | None = None
    prior_t: object = None
    prior_v: object = None
    prior_w: object = None
    jitter: float = 1e-6
    lengthscale_prior: object = None
    user_lengthscale_prior: object = None
    tie_prior: object = None
    tie_threshold: str = "crowd"
    item_residual: bool | str = "auto"
    shape_r0: float = 2.0
    rate_r0: float = 0.5
    user_individual: float = 1.0
    order_effect: bool = False
    order_prior: object = None

    def __post_init__(self):
        resolve(self.item_residual, False)  # a bad setting fails here, by name
        order.check_settings(self.order_effect, self.order_prior)
        if self.tie_threshold not in ("crowd", "per_user"):
            raise DataError(f"tie_threshold: expected 'crowd' or 'per_user', got {self.tie_threshold!r}",
                            arg="tie_threshold")
        if self.item_residual is True and not self.consensus:
            raise DataError("item_residual: the residual is part of the consensus (each item's own "
                            "utility, shared by the crowd); with consensus=False set item_residual=False "
                            "or 'auto'", arg="item_residual")
        check_priors(self, {f"{p}_{v}0": f"a positive Gamma {what} (of the prior on s_{v})"
                            for v in "tvwr" for p, what in (("shape", "shape"), ("rate", "rate"))},
                     scale_priors=("prior_t", "prior_v", "prior_w"),
                     lengthscale_priors=("lengthscale_prior", "user_lengthscale_prior"),
                     positive_priors={"tie_prior": "tie thresholds"})
        try:
            ok = float(self.user_individual) >= 0 and math.isfinite(float(self.user_individual))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise DataError(f"user_individual: expected a number ≥ 0 (each user's own variance beside "
                            f"the user GP; 0: none), got {self.user_individual!r}", arg="user_individual")
        if int(self.n_components) < 1:
            raise DataError(f"n_components: must be at least 1, got {self.n_components} "
                            "(for the consensus alone fit GPPL to the pooled labels)")

    @classmethod
    def paper(cls, **kw) -> CrowdGPPL:
        """The paper's Sushi settings (§5.2): M = M_u = 25 inducing items and users, Gamma(1, 100) on s_t
        and Gamma(1, 10) on s_v,c and s_w,c (``kw`` replaces any of them). The zoo's defaults differ
        (the class docstring says why); the paper reproductions pin these."""
        return cls(**{**PAPER, **kw})

    def component_rate(self) -> float:
        """The default rate of the Gamma(2, ·) priors on s_v,c and s_w,c: 2 / √C. With shape 2,
        E[1/s] is the rate, so the personal part's prior variance Σ_c E[1/s_v,c] E[1/s_w,c] = C (2/√C)²
        = 4 whatever C is: more components split the personal part finer instead of making it larger
        (with a rate that ignores C, 20 components gave the personal part 20 times the consensus's
        prior variance, and crowdGPPL fell behind pooled GPPL on crowds whose tastes are shared)."""
        return 2.0 / math.sqrt(int(self.n_components))

    def priors(self) -> dict:
        def g(a, b):
            return dist.Gamma(torch.tensor(float(a), dtype=DTYPE), torch.tensor(float(b), dtype=DTYPE))

        rate_v = self.component_rate() if self.rate_v0 is None else self.rate_v0
        rate_w = self.component_rate() if self.rate_w0 is None else self.rate_w0
        return {"t": self.prior_t if self.prior_t is not None else g(self.shape_t0, self.rate_t0),
                "v": self.prior_v if self.prior_v is not None else g(self.shape_v0, rate_v),
                "w": self.prior_w if self.prior_w is not None else g(self.shape_w0, rate_w)}

    def setup(self, data, seed: int = 0) -> CrowdSetup:
        """Fix kernels, inducing items/users and projections for ``data`` (a PairwiseData)."""
        if data.users is None:
            raise DataError("users: crowdGPPL needs a user per label (PairwiseData(..., users=...)); "
                            "use GPPL for single-user data")
        if self.order_effect:
            order.check_data(data)
        N, C = data.n_items, int(self.n_components)
        P = (data.n_rows if hasattr(data, "sets")  # choices: a row per label
             else data.label_range[2] if data.label_range is not None else len(data.a))  # every rank's labels
        # "auto" inducing reads the work of a pass: labels × the factors over each side
        items = (self.item_gp().setup_features(data.item_features, seed=seed, work=P * (C + self.consensus))
                 if self.item_features else identity_gp(N, self.jitter))
        users = None
        if self.user_features and data.user_features is not None and data.user_features.shape[1] > 0:
            users = self.user_gp().setup_features(data.user_features, seed=seed + 1, work=P * C)
        has_residual = self.consensus and resolve(self.item_residual, not items.exact)
        return CrowdSetup(items=items, users=users, n_users=data.n_users, C=int(self.n_components),
                          consensus=bool(self.consensus), priors=self.priors(),
                          tie_prior=self.prior_tau() if data.has_ties else None,
                          tie_per_user=data.has_ties and self.tie_threshold == "per_user",
                          residual_prior=prior_gamma(self.shape_r0, self.rate_r0) if has_residual else None,
                          order_prior=order.prior_of(self))

    def prior_tau(self):
        """The prior of the tie threshold τ (``tie_prior`` or the default)."""
        return default_tie_prior() if self.tie_prior is None else self.tie_prior

    def item_gp(self) -> GPPL:
        """The GP over item features (its kernel, length-scales, inducing items): the item side."""
        return GPPL(n_inducing=self.n_inducing, kernel=self.kernel, lengthscale=self.lengthscale,
                    scaled_lengthscale=self.scaled_lengthscale, jitter=self.jitter)

    def user_gp(self) -> GPPL:
        """The GP over user features: ``user_kernel``, or the item kernel when that is named (a kernel
        object is built for the item features' dimensions, so the users then get Matérn 3/2), with each
        user's own part of variance ``user_individual`` (a named kernel's ``white``)."""
        kern = self.user_kernel
        if kern is None:
            kern = self.kernel if isinstance(self.kernel, str) else "matern32"
        if self.user_individual:
            if isinstance(kern, str):
                kern = Kernel(kern, white=float(self.user_individual))
            elif isinstance(kern, Kernel):
                kern = dataclasses.replace(kern, white=float(self.user_individual))
        return GPPL(n_inducing=self.n_inducing_users, kernel=kern, lengthscale=self.user_lengthscale,
                    jitter=self.jitter)

    def program(self, setup: CrowdSetup, data, subsample_size=None, learn_kernel: bool = False):
        """The Pyro model and its arguments for ``data`` (for the generic svi/nuts engines):
        :func:`crowdgppl_model` with the kernels fixed; :func:`crowdgppl_lengthscale_model` with
        ``lengthscale_prior`` / ``user_lengthscale_prior`` (those sides' ℓ sampled) or ``learn_kernel``
        (the item and user ℓ ``pyro.param`` s started at ``setup``'s, svi's type-II maximum
        likelihood): :meth:`lengthscale_space`."""
        if hasattr(data, "sets"):  # a ChoiceData: the probit choice on each user's utilities
            from .choices import choice_program
            return choice_program(self, setup, data, subsample_size, learn_kernel)
        a, b, y = label_tensors(data)
        args = (a, b, user_tensor(data), y, subsample_size)
        from ...gp.learn import varying_space

        space = varying_space(self, setup, learn_kernel)
        w = weight_tensor(data)
        if space is None:
            return weighted(crowdgppl_model, w), (setup, *args)
        return weighted(crowdgppl_lengthscale_model, w), (space, *args)

    def lengthscale_space(self, setup: CrowdSetup, prior: bool = False) -> LengthscaleSpace:
        """The setup as a function of the item and user length-scales (:class:`LengthscaleSpace`). With
        ``prior``: the sides whose length-scales are random variables (svi and nuts), the item side under
        ``lengthscale_prior`` and the user side under ``user_lengthscale_prior``, each with its ARD
        algebra and its prior as a distribution with event shape (D,), the other sides keeping
        ``setup``'s. Without: both sides' algebra, their ℓ ``pyro.param`` s (``learn_kernel``)."""
        from ...gp.learn import ARDGP, lengthscale_prior_of

        if not prior:
            if not _has_kernel(setup.items):
                raise DataError("learn_kernel: the model has no item kernel (item_features=False or items "
                                "without features); set item_features=True or {learn_kernel=False}",
                                arg="learn_kernel", settings=("learn_kernel",))
            items = ARDGP.of(self.item_gp(), setup.items, "learn_kernel")
            users = None if setup.users is None else ARDGP.of(self.user_gp(), setup.users, "learn_kernel")
            return LengthscaleSpace(setup, items, users)
        items = users = prior_items = prior_users = None
        if self.lengthscale_prior is not None:
            if not _has_kernel(setup.items):
                raise DataError("lengthscale_prior: the model has no item kernel (item_features=False or "
                                "items without features), so there are no item length-scales to infer; "
                                "drop lengthscale_prior or set item_features=True")
            items = ARDGP.of(self.item_gp(), setup.items, "lengthscale_prior")
            prior_items = lengthscale_prior_of(self.lengthscale_prior, items.D)
        if self.user_lengthscale_prior is not None:
            if setup.users is None:
                raise DataError("user_lengthscale_prior: the model has no user kernel (user_features=False "
                                "or no user features in the data), so there are no user length-scales to "
                                "infer; drop user_lengthscale_prior")
            users = ARDGP.of(self.user_gp(), setup.users, "user_lengthscale_prior")
            prior_users = lengthscale_prior_of(self.user_lengthscale_prior, users.D, "user_lengthscale_prior")
        return LengthscaleSpace(setup, items, users, prior_items, prior_users)

    def with_lengthscales(self, setup: CrowdSetup, ell, ell_u=None):
        """(the model, its setup) at item length-scales ``ell`` (and user ``ell_u``)."""
        space = self.lengthscale_space(setup)
        model = dataclasses.replace(self, lengthscale=ell)
        if ell_u is not None:
            model = dataclasses.replace(model, user_lengthscale=ell_u)
        return model, space.setup_at(ell, ell_u)

    @_class_or_instance
    def variant(cls, self, name: str, **kw) -> CrowdGPPL:
        """The Table 2 variants by name: "", "\\inducing", "\\u", "\\u\\x", "\\u\\t".

        ``CrowdGPPL.variant("\\u", n_components=5)`` starts from the defaults;
        ``model.variant("\\u")`` keeps every other setting of ``model`` (priors, C, M, ...)."""
        table = {"": {}, "\\inducing": {"n_inducing": None, "n_inducing_users": None},
                 "\\u": {"user_features": False},
                 "\\u\\x": {"user_features": False, "item_features": False, "n_inducing": None},
                 "\\u\\t": {"user_features": False, "consensus": False}}
        if name not in table:
            raise DataError(f"variant: unknown crowdGPPL variant {name!r}; choose one of {list(table)}")
        base = {} if self is None else {f.name: getattr(self, f.name) for f in fields(self)}
        return cls(**{**base, **table[name], **kw})


#: the paper's Sushi settings (§5.2), :meth:`CrowdGPPL.paper`
PAPER = dict(n_inducing=25, n_inducing_users=25, shape_t0=1.0, rate_t0=100.0, shape_v0=1.0, rate_v0=10.0,
             shape_w0=1.0, rate_w0=10.0, item_residual=False)


def z_moments(dt, dv, w, c, d, s_t, s_v, s_w):
    """Mean and conditional variance of z_p given the inducing values (module docstring).

    dt (..., P) consensus difference or None; dv, w (..., P, C) component differences and user
    weights; c (P,), d (P,) conditional variances (× 1/s); s_t (...), s_v, s_w (..., C).
    """
    cross = (dv * w).sum(-1)
    var_w = d[:, None] / s_w[..., None, :]
    var = (c[:, None] / s_v[..., None, :] * (w * w + var_w) + dv * dv * var_w).sum(-1)
    if dt is None:
        return cross, var
    return dt + cross, var + c / s_t[..., None]


def crowdgppl_lengthscale_model(space: LengthscaleSpace, a, b, j, y, subsample_size: int | None = None,
                                weights=None):
    """:func:`crowdgppl_model` with the item (and user) ARD length-scales ("lengthscale",
    "user_lengthscale") random under their priors, or ``pyro.param`` s (positive) where a side has none,
    optimised by svi's ELBO with the guide (module docstring)."""
    from pyro.distributions import constraints

    ell = {}
    for name, _, prior, start in space.sides():
        ell[name] = (pyro.param(name, start.detach().clone(), constraint=constraints.positive)
                     if prior is None else pyro.sample(name, prior))
    crowdgppl_model(space.setup_at(ell.get("lengthscale"), ell.get("user_lengthscale")), a, b, j, y,
                    subsample_size, weights)


def crowdgppl_model(setup: CrowdSetup, a, b, j, y, subsample_size: int | None = None, weights=None):
    """The Pyro model of crowdGPPL (module docstring). ``a``, ``b``, ``j`` (users), ``y``: (P,);
    ``weights`` (P,) (None: every label 1): each label's log-likelihood times its weight, as that many
    copies of it."""
    u_t, s_t, u_v, s_v, u_w, s_w = global_sites(setup)
    tau = tie_thresholds(setup)
    r = residual(setup)
    delta = order.sample(getattr(setup, "order_prior", None))
    with pyro.plate("pairs", a.shape[0], subsample_size=subsample_size, dim=-1) as idx:
        dd, c = setup.items.pair_terms(a[idx], b[idx])  # (P, M), (P,)
        dv = (dd @ u_v.T) / s_v.sqrt()  # (P, C)
        e, d = setup.user_terms(j[idx])
        w = (u_w[:, j[idx]].T if e is None else e @ u_w.T) / s_w.sqrt()  # (P, C)
        dt = None if u_t is None else (dd @ u_t) / s_t.sqrt()
        if r is not None:
            dt = dt + r[a[idx]] - r[b[idx]]
        zbar, var = z_moments(dt, dv, w, c, d, s_t, s_v, s_w)
        if delta is not None:  # the first item's advantage
            zbar = zbar + delta
        sd = torch.sqrt(1.0 + var)
        with label_scale(weights, idx):
            if tau is None:
                pyro.sample("y", dist.Bernoulli(logits=probit_logits(zbar / sd)),
                            obs=None if y is None else y[idx])
            else:  # three outcomes (k = 2y)
                tau_p = tau[j[idx]] if setup.tie_per_user else tau
                pyro.sample("y", outcome_distribution(zbar / sd, tau_p / sd),
                            obs=None if y is None else outcome_codes(y[idx]))


def tie_thresholds(setup: CrowdSetup):
    """The tie threshold (site "tau"): None without ties, one τ for the crowd, or (U,) one per user
    (``tie_threshold="per_user"``, iid under the prior in a plate of users)."""
    if setup.tie_prior is None:
        return None
    if not setup.tie_per_user:
        return pyro.sample("tau", setup.tie_prior)
    with pyro.plate("users", setup.n_users, dim=-1):
        return pyro.sample("tau", setup.tie_prior)


def inducing_values(setup: CrowdSetup, sites: dict, L=None, L_u=None) -> dict:
    """Map whitened draws {"u_t", "s_t", "u_v", "s_v", "u_w", "s_w"} with a leading draw
    dimension to inducing values t_m (G, M), v_m (G, C, M), w_m (G, C, M_u) and scales:
    t_m = L_mm u_t / √s_t, ... ``L`` (G, M, M), ``L_u`` (G, M_u, M_u): each draw's own factors (its
    length-scales drawn with the rest) in place of the setup's."""
    L = setup.items.L_mm if L is None else L
    out = {"s_v": sites["s_v"], "s_w": sites["s_w"]}
    out["v_m"] = _times(L, sites["u_v"]) / sites["s_v"].sqrt()[..., None]
    Lu = L_u if L_u is not None else (None if setup.users is None else setup.users.L_mm)
    uw = sites["u_w"] if Lu is None else _times(Lu, sites["u_w"])
    out["w_m"] = uw / sites["s_w"].sqrt()[..., None]
    if setup.consensus:
        out["s_t"] = sites["s_t"]
        out["t_m"] = _times(L, sites["u_t"]) / sites["s_t"].sqrt()[..., None]
    return out


def _times(L, u):
    """L u for a factor L (M, M), or one per draw (G, M, M), and whitened draws u (G, ..., M)."""
    if L.dim() == 2:
        return u @ L.T
    return torch.einsum("gij,g...j->g...i", L, u)

