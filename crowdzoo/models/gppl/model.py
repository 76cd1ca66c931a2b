"""GPPL: Gaussian-process preference learning for one user (Simpson & Gurevych 2020, §3.1).

Generative story (Eq. 4, with the sparse approximation of §4.2):

    s            ~ Gamma(α₀, β₀)                       inverse function scale (shape, rate)
    f_m          ~ N(0, K_mm / s)                      utilities of M inducing items
    f_a − f_b    | f_m, s ~ N(d_pᵀ f_m, c_p / s)        each pair's utility difference
    y_p          ~ Bernoulli(Φ(f_a − f_b))             probit likelihood, Eq. 2 with σ² = ½

Integrating each pair's difference over its conditional Gaussian gives the likelihood used
below, p(y_p = 1 | f_m, s) = Φ(d_pᵀ f_m / √(1 + c_p / s)) (the probit–Gaussian identity behind
Eq. 3). With ``n_inducing=None`` the inducing items are the training items, c_p = 0 and the model
is the exact GPPL of Eq. 4. f_m is written non-centred, f_m = L_mm u / √s with u ~ N(0, I), which
is what NUTS and Pyro's guides see.

Ties (labels y = ½ of ``PairwiseData.from_frame(..., ties="model")``) are a third outcome of each
pair, the ordinal probit of :mod:`crowdzoo.gp.ordinal` with a threshold τ under ``tie_prior``:

    τ            ~ tie_prior                           default LogNormal(log ½, 1)   (site "tau")
    P(a ≻ b | f_m, s, τ) = Φ((d_pᵀ f_m − τ) / √(1 + c_p / s))
    P(b ≻ a | f_m, s, τ) = Φ((−d_pᵀ f_m − τ) / √(1 + c_p / s)),   P(tie) the rest

(the same integral over the pair's conditional Gaussian as above: with τ = 0 and no ties, the
model without them).

Weighted labels (``PairwiseData.weights``: counts per pair, ``ties="half"``'s halves): a label of weight
w_p enters as w_p copies of it, its log-likelihood times w_p (``poutine.scale`` on the observed site
inside the pairs plate, so within a mini-batch too: :func:`~crowdzoo.data.tensors.label_scale`).

Choices (a :class:`~crowdzoo.data.ChoiceData`: a set of k items per row, the best and optionally the
worst) take the same utilities through Thurstone's multinomial probit (:mod:`crowdzoo.gp.choice`),
each member's noise ε_j ~ N(0, ½) widened by its conditional variance c_j / s given f_m (the members'
conditional covariances are left out; an exact GP, every item inducing, has none):

    f            = K_nm K_mm⁻¹ f_m                       the items' conditional means
    best_r       ~ P(i best) = ∫ φ(x) Π_{j ≠ i} Φ((f_i − f_j + σ_i x)/σ_j) dx,   σ_j² = ½ + c_j / s
    worst_r      | best_r ~ the same with f → −f among the rest (best–worst, MaxDiff)

A set of two items is Φ(f_a − f_b), the pairwise likelihood above, exactly (exact GP).

An item-level residual (:mod:`crowdzoo.gp.residual`; by default where the GP is sparse, M < N) gives
each item a utility of its own beside the GP's, which the sparse conditional cannot carry:

    s_r          ~ Gamma(α_r, β_r)                      (site "s_r")
    r_i          ~ N(0, 1/s_r),  i = 1..N               (site "u_r", r = u_r / √s_r)
    f_a − f_b    | f_m, r, s ~ N(d_pᵀ f_m + r_a − r_b, c_p / s)

An order effect (``order_effect=True``; :mod:`crowdzoo.gp.order`): the item a label lists first (column
``a``: the home side, the item shown first) gains an advantage δ shared by every label,

    δ            ~ order_prior                          default N(0, 1)   (site "order")
    f_a − f_b + δ | f_m, s, δ ~ N(d_pᵀ f_m + δ, c_p / s),   y_p ~ Bernoulli(Φ(f_a − f_b + δ))

so that p(y_p = 1 | f_m, s, δ) = Φ((d_pᵀ f_m + δ) / √(1 + c_p / s)) (with ties, Δ = d_pᵀ f_m + δ in the
ordinal probit above).

Learned length-scales (the paper fixes them by the median heuristic, §6): with
``lengthscale_prior=`` the model also samples the ARD length-scales first,

    ℓ_d          ~ lengthscale_prior                    d = 1..D (site "lengthscale")

and builds K_mm, L_mm and the pair rows from them inside the model (:func:`gppl_lengthscale_model`,
the inducing inputs Z staying those of the median-heuristic setup), so that NUTS samples ℓ and svi's
guide covers it (Pyro's AutoGuides work on log ℓ). ``fit(..., method="svi", learn_kernel=True)``
without a prior makes ℓ a ``pyro.param`` instead, point-estimated by the ELBO from the median heuristic.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro.distributions import constraints

from ...data.tensors import choice_tensors, label_scale, label_tensors, weight_tensor, weighted
from ...errors import DataError
from ...gp import order
from ...gp.choice import observe_choices
from ...gp.conditional import SparseGP, identity_gp
from ...gp.inducing import kmeanspp_inducing, resolve_inducing
from ...gp.kernels import as_kernel, median_heuristic
from ...gp.learn import ARDGP, at_learning_start, lengthscale_prior_of
from ...gp.linalg import DTYPE
from ...gp.ordinal import default_tie_prior, outcome_codes, outcome_distribution
from ...gp.priors import check_priors
from ...gp.probit import probit_logits
from ...gp.residual import prior_gamma, resolve


@dataclass
class GPPL:
    """Single-user GP preference model.

    Parameters
    ----------
    n_inducing : M inducing items chosen by k-means++; None: exact, every item is inducing; "auto"
        (default): every item up to :data:`~crowdzoo.gp.inducing.AUTO_INDUCING` items, then that many.
    kernel : "matern32" (default, as in the paper), "se", a kernel object (``Kernel("se") +
        Kernel("matern32")``, see :mod:`crowdzoo.gp.kernels`) or any callable ``k(X1, X2)``.
        Data without item features (an items frame with no columns) get the identity kernel:
        independent utilities per item, every item inducing.
    lengthscale : (D,) length-scales for the kernel's unset ones; None uses the median heuristic (Eq. 26),
        the start of the length-scales that the default natgrad route learns (``learn_kernel=False``
        keeps it; docs/gppl.md, "The default kernel").
    scaled_lengthscale : use the high-dimensional variant 20√D · ℓ_MH (§5.3).
    shape_s0, rate_s0 : α₀, β₀ of the Gamma prior on the inverse scale s (Eq. 4, 15).
    s_prior : any positive Pyro distribution replacing Gamma(α₀, β₀) (not for ``natgrad``,
        whose q(s) update of Eq. 15 needs the conjugate Gamma).
    jitter : relative jitter added to K_mm.
    lengthscale_prior : a positive Pyro distribution over the length-scales (over one, iid over the D
        feature dimensions, or with batch shape (D,)), in the features' units: the svi and nuts routes
        then infer ℓ with the utilities (module docstring), natgrad with ``learn_kernel=True`` adds
        log p(ℓ) to its objective (type-II MAP); needs a named kernel ("se", "matern32").
        None (default): ℓ is ``lengthscale``, or the median heuristic, from which natgrad learns it
        unless ``learn_kernel=False`` (the other routes with ``learn_kernel=True``).
    tie_prior : the prior of the tie threshold τ > 0 (probit scale), used when the data have ties
        (``ties="model"``); None: :func:`~crowdzoo.gp.ordinal.default_tie_prior`, LogNormal(log ½, 1).
        natgrad finds τ's mode on the log scale under it (a point estimate), svi and nuts its posterior.
    item_residual : an item-level residual r_i ~ N(0, 1/s_r) beside the GP (module docstring;
        :mod:`crowdzoo.gp.residual`): True, False, or "auto" (default) — where the GP is sparse, the
        case in which the conditional cannot carry items' own utilities (with hundreds of labels per
        item GPPL then fell behind per-item win rates: docs/benchmarks.md, "A large crowd through the
        command line"). natgrad, svi and nuts fit it; ep fits without it.
    shape_r0, rate_r0 : α_r, β_r of the Gamma prior on s_r (default 2, ½: a residual sd of about 0.7
        probit units a priori, :func:`~crowdzoo.gp.residual.default_prior`).
    order_effect : a learned advantage δ of the item each label lists first (column ``a``: the home side,
        the item shown first; module docstring, :mod:`crowdzoo.gp.order`), which every route infers;
        ``posterior.order_effect()`` reports it and ``predict_proba(..., order=False)`` predicts without
        it. Data whose order is their outcome (winner-first) are refused.
    order_prior : the Normal prior of δ on the probit scale (None: N(0, 1)); with ``order_effect`` only.
    """

    n_inducing: int | str | None = "auto"
    kernel: object = "matern32"
    lengthscale: object = None
    scaled_lengthscale: bool = False
    shape_s0: float = 2.0
    rate_s0: float = 2.0
    s_prior: object = None
    jitter: float = 1e-6
    lengthscale_prior: object = None
    tie_prior: object = None
    item_residual: bool | str = "auto"
    shape_r0: float = 2.0
    rate_r0: float = 0.5
    order_effect: bool = False
    order_prior: object = None

    def __post_init__(self):
        resolve(self.item_residual, False)  # a bad setting fails here, by name
        order.check_settings(self.order_effect, self.order_prior)
        check_priors(self, {"shape_s0": "a positive Gamma shape α₀ (of the prior on the inverse scale s)",
                            "rate_s0": "a positive Gamma rate β₀ (of the prior on the inverse scale s)",
                            "shape_r0": "a positive Gamma shape α_r (of the prior on the residual's s_r)",
                            "rate_r0": "a positive Gamma rate β_r (of the prior on the residual's s_r)"},
                     scale_priors=("s_prior",), lengthscale_priors=("lengthscale_prior",),
                     positive_priors={"tie_prior": "tie thresholds"})

    def prior_tau(self) -> dist.Distribution:
        """The prior of the tie threshold τ (``tie_prior`` or the default)."""
        return default_tie_prior() if self.tie_prior is None else self.tie_prior

    def prior_s(self) -> dist.Distribution:
        if self.s_prior is not None:
            return self.s_prior
        return dist.Gamma(torch.tensor(float(self.shape_s0), dtype=DTYPE),
                          torch.tensor(float(self.rate_s0), dtype=DTYPE))

    def setup(self, data, seed: int = 0, inducing=None) -> GPPLSetup:
        """Fix the kernel, inducing inputs and the projections every route shares (and τ's prior, for
        data with ties; the residual's prior where the model has one; δ's with the order effect)."""
        if self.order_effect:
            order.check_data(data)
        setup = self.setup_features(data.item_features, seed=seed, inducing=inducing)
        setup.order_prior = order.prior_of(self)
        if data.has_ties:
            setup.tie_prior = self.prior_tau()
        if resolve(self.item_residual, not setup.exact):
            setup.residual_prior = prior_gamma(self.shape_r0, self.rate_r0)
        return setup

    def setup_features(self, item_features, seed: int = 0, inducing=None,
                       work: float | None = None) -> GPPLSetup:
        """:meth:`setup` from a feature matrix (N, D) alone (crowdGPPL's sides, crowdBT–GP); ``work``:
        labels × Gaussian factors over these items, which ``n_inducing="auto"`` reads
        (:func:`~crowdzoo.gp.inducing.resolve_inducing`).

        Items without features (D = 0) get the identity kernel over their row index: independent
        utilities per item, every item inducing (``kernel``, ``lengthscale`` and ``n_inducing`` do
        not apply)."""
        X = torch.as_tensor(np.asarray(item_features), dtype=DTYPE)
        if X.ndim == 2 and X.shape[1] == 0:
            side = identity_gp(X.shape[0], self.jitter)
            return GPPLSetup(**{f.name: getattr(side, f.name) for f in fields(side)}, s_prior=self.prior_s())
        ell = self.lengthscale
        if ell is None:
            ell = median_heuristic(X, scaled=self.scaled_lengthscale)
        ell = torch.as_tensor(ell, dtype=DTYPE).reshape(-1).expand(X.shape[1]).clone()
        kern = as_kernel(self.kernel, ell)
        if inducing is not None:
            Z = inducing if torch.is_tensor(inducing) else torch.as_tensor(np.asarray(inducing), dtype=DTYPE)
        elif (M := resolve_inducing(self.n_inducing, X.shape[0], work=work)) is None or M >= X.shape[0]:
            Z = X
        else:
            Z = kmeanspp_inducing(X.numpy(), M, seed=seed)
        return GPPLSetup.build(kern, X, Z, self.jitter, exact=Z is X, s_prior=self.prior_s())

    def program(self, setup: GPPLSetup, data, subsample_size=None, learn_kernel: bool = False):
        """The Pyro model and its arguments for ``data`` (what the generic svi/nuts/map engines run):
        :func:`gppl_model` with ℓ fixed, :func:`gppl_lengthscale_model` with ``lengthscale_prior`` or
        ``learn_kernel`` (ℓ a ``pyro.param`` started at ``setup``'s length-scales)."""
        if hasattr(data, "sets"):  # a ChoiceData
            if self.lengthscale_prior is not None or learn_kernel:
                raise DataError("lengthscale_prior: choices are fitted with fixed length-scales (the median "
                                "heuristic or lengthscale=); drop lengthscale_prior and {learn_kernel}",
                                arg="lengthscale_prior", settings=("learn_kernel",))
            return gppl_choice_model, (setup, *choice_tensors(data), subsample_size)
        a, b, y = label_tensors(data)
        w = weight_tensor(data)
        if self.lengthscale_prior is None and not learn_kernel:
            return weighted(gppl_model, w), (setup, a, b, y, subsample_size)
        if self.lengthscale_prior is not None and learn_kernel:
            raise DataError("learn_kernel: with lengthscale_prior the length-scales are already inferred "
                            "(a posterior under the prior); pass one of the two", arg="learn_kernel")
        if np.asarray(data.item_features).shape[1] == 0:  # the setup's X is then the row index
            what = "learn_kernel" if learn_kernel else "lengthscale_prior"
            raise DataError(f"{what}: the items have no features, so there are no length-scales to learn")
        return weighted(gppl_lengthscale_model, w), (self.lengthscale_space(setup, prior=not learn_kernel), a,
                                                     b, y, subsample_size)

    def lengthscale_space(self, setup: GPPLSetup, prior: bool = False) -> LengthscaleSpace:
        """The setup as a function of the ARD length-scales (:class:`LengthscaleSpace`): with ``prior``
        ℓ sampled under ``lengthscale_prior`` (svi and nuts), without a ``pyro.param`` started at
        ``setup``'s (``learn_kernel``)."""
        ard = ARDGP.of(self, setup, "lengthscale_prior" if prior else "learn_kernel")
        ell_prior = lengthscale_prior_of(self.lengthscale_prior, ard.D) if prior else None
        ell0 = setup.kernel.lengthscale.detach().clone()
        if not prior:  # learned from the median heuristic: start where the median pair is at r = 1
            ell0 = learning_start_of(self, setup).detach().clone()
        return LengthscaleSpace(ard, ell_prior, ell0, self.prior_s(), setup.tie_prior, setup.residual_prior,
                                setup.order_prior)

    def ard(self, setup: GPPLSetup) -> ARDGP:
        """The sparse-GP algebra of this model's kernel as a function of ℓ, on ``setup``'s items and
        inducing inputs (what a posterior with per-draw length-scales predicts with)."""
        return ARDGP.of(self, setup)



def learning_start_of(model, setup) -> torch.Tensor:
    """Where ``model``'s learned length-scales start on ``setup``'s items: the rescaled median heuristic
    (:func:`~crowdzoo.gp.learn.at_learning_start`) where the model leaves them to the heuristic, else the
    setup's."""
    start = at_learning_start(model, setup.X.numpy())
    return setup.kernel.lengthscale if start is model else torch.as_tensor(start.lengthscale, dtype=DTYPE)


@dataclass
class GPPLSetup(SparseGP):
    """What is fixed before inference: the sparse GP over items (kernel, items X (N, D), inducing
    inputs Z (M, D), K_mm, L_mm, B = L_mm⁻¹ K_mn; :class:`~crowdzoo.gp.SparseGP`), the prior of s and,
    for labels with ties the prior of the tie threshold τ (None: no ties), the prior of the item
    residual's s_r (None: no residual) and the prior of the order effect δ (None: none)."""

    s_prior: object = None
    tie_prior: object = None
    residual_prior: object = None
    order_prior: object = None

    @property
    def N(self) -> int:
        return self.X.shape[0]


def residual(setup: GPPLSetup):
    """The item residual r (N,) = u_r / √s_r under ``setup.residual_prior`` (sites "s_r", "u_r"), or None."""
    if setup.residual_prior is None:
        return None
    s_r = pyro.sample("s_r", setup.residual_prior)
    u_r = pyro.sample("u_r", dist.Normal(torch.zeros(setup.N, dtype=DTYPE), 1.0).to_event(1))
    return u_r / s_r.sqrt()


def gppl_model(setup: GPPLSetup, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor | None,
               subsample_size: int | None = None, weights: torch.Tensor | None = None):
    """The Pyro model of GPPL (module docstring). ``a``, ``b``, ``y``: (P,) tensors; ``weights`` (P,)
    (None: every label 1): each label's log-likelihood times its weight, as that many copies of it."""
    s = pyro.sample("s", setup.s_prior)
    u = pyro.sample("u", dist.Normal(torch.zeros(setup.M, dtype=DTYPE), 1.0).to_event(1))
    pyro.deterministic("f_m", setup.L_mm @ u / s.sqrt())
    tau = None if setup.tie_prior is None else pyro.sample("tau", setup.tie_prior)
    r = residual(setup)
    delta = order.sample(setup.order_prior)
    with pyro.plate("pairs", a.shape[0], subsample_size=subsample_size) as idx:
        d, c = setup.pair_terms(a[idx], b[idx])
        sd = torch.sqrt(s * (1.0 + c / s))  # √s · √(1 + c/s)
        z = (d @ u) / sd
        if r is not None:
            z = z + (r[a[idx]] - r[b[idx]]) * s.sqrt() / sd
        if delta is not None:  # the first item's advantage, over the same √(1 + c/s)
            z = z + delta * s.sqrt() / sd
        with label_scale(weights, idx):
            if tau is None:
                pyro.sample("y", dist.Bernoulli(logits=probit_logits(z)), obs=None if y is None else y[idx])
            else:  # three outcomes (k = 2y) with Δ and τ both over √(1 + c/s)
                pyro.sample("y", outcome_distribution(z, tau * s.sqrt() / sd),
                            obs=None if y is None else outcome_codes(y[idx]))


@dataclass
class LengthscaleSpace:
    """What :func:`gppl_lengthscale_model` needs: the ARD algebra as a function of ℓ, the prior of ℓ
    (event shape (D,); None: ℓ is a ``pyro.param`` started at ``ell0``), the prior of s and τ's (None:
    no ties), the residual's and δ's (None: none)."""

    ard: ARDGP
    prior: object
    ell0: torch.Tensor
    s_prior: object
    tie_prior: object = None
    residual_prior: object = None
    order_prior: object = None

    def setup_at(self, ell) -> GPPLSetup:
        """The model's setup at length-scales ``ell`` (D,), differentiable in ℓ."""
        return self.ard.sparse_gp(ell, GPPLSetup, s_prior=self.s_prior, tie_prior=self.tie_prior,
                                  residual_prior=self.residual_prior, order_prior=self.order_prior)


def gppl_lengthscale_model(space: LengthscaleSpace, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor | None,
                           subsample_size: int | None = None, weights: torch.Tensor | None = None):
    """GPPL with the length-scales ℓ (D,) a random variable (site "lengthscale", under
    ``space.prior``) or, without a prior, a ``pyro.param`` (module docstring); the rest is
    :func:`gppl_model` on the setup built from ℓ."""
    if space.prior is None:
        ell = pyro.param("lengthscale", space.ell0.clone(), constraint=constraints.positive)
    else:
        ell = pyro.sample("lengthscale", space.prior)
    gppl_model(space.setup_at(ell), a, b, y, subsample_size, weights)


def gppl_choice_model(setup: GPPLSetup, items, mask, best, worst, subsample_size=None):
    """The Pyro model of GPPL on choices (module docstring): ``items`` (R, k_max) item positions,
    ``mask`` the slots that hold one, ``best`` (R,) and ``worst`` (R,; −1 none) slots, or None."""
    s = pyro.sample("s", setup.s_prior)
    u = pyro.sample("u", dist.Normal(torch.zeros(setup.M, dtype=DTYPE), 1.0).to_event(1))
    pyro.deterministic("f_m", setup.L_mm @ u / s.sqrt())
    f = (setup.B.T @ u) / s.sqrt()  # K_nm K_mm⁻¹ f_m, with f_m = L_mm u / √s
    r = residual(setup)
    if r is not None:
        f = f + r
    c = None if setup.exact else setup.conditional_variance() / s
    with pyro.plate("choices", items.shape[0], subsample_size=subsample_size) as idx:
        rows = items[idx]
        observe_choices(f[rows], mask[idx], None if best is None else best[idx],
                        None if worst is None else worst[idx], "probit", None if c is None else c[rows])
