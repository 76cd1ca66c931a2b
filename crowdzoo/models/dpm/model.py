"""DPM communities: users fall into an unbounded number of communities, each with its own GP utility
over item features (Abbasnejad, Sanner, Bonilla & Poupart, IJCAI 2013; the supplement's symbols in
brackets).

Generative story:

    λ            ~ Gamma(a_λ, b_λ)             optional (``concentration_prior``); else λ = ``concentration``
    π            ~ GEM(λ)                      stick-breaking weights of the communities        [π, λ]
    c_u | π      ~ Cat(π)                      community of user u                               [c_u]
    f^c          ~ GP(0, K_x / s)              one utility function per community                [f^c, K_x]
    y_p | u      ~ Bernoulli(Φ((f^{c_u}_a − f^{c_u}_b) / α))   each label p = (a, b) of user u   [α]

Integrating π out gives the Chinese restaurant process used by the sampler: user u joins an
existing community c with probability n_{−u,c} / (U − 1 + λ) and a new one with λ / (U − 1 + λ)
(supplement Eq. 20–21, with the count N read as the number of users U, not of communities).

Convention beside GPPL's: GPPL writes P(a ≻ b) = Φ(f_a − f_b) (Simpson & Gurevych's Eq. 2 with
σ² = ½) and carries the function scale in s; here P(a ≻ b | u) = Φ((f_a − f_b) / α) with the
supplement's α (``probit_scale``, 1 by default, so that α = 1 is GPPL's link exactly).

The item GP is GPPL's (``GPPL(...).setup_features(item_features)``: kernel objects, the median
heuristic, optional inducing items with the sparse conditional of Eq. 19). Every route fixes the
inverse scale s at its prior mean (the paper conditions on the kernel hyper-parameters).

The Pyro program (:func:`dpm_model`, for the generic ``svi`` and ``nuts`` engines) truncates the
stick-breaking at T = ``truncation`` communities:

    β_k          ~ Beta(1, λ),  k < T            sticks; π_k = β_k Π_{l<k} (1 − β_l), π_T the rest
    u_c          ~ N(0, I_M),   c ≤ T            whitened inducing utilities, f_m^c = L_mm u_c / √s
    p(y_p | u_c) = Φ(± d_pᵀ u_c / √s / √(α² + c_p / s))   the sparse conditional variance c_p / s folded
                                                 into the probit, as in GPPL's model (c_p = 0 when exact)

and sums every membership out exactly: user u's labels are a product under u's community, so
p(D_u | π, u_{1:T}) = Σ_c π_c Π_{p ∈ D_u} p(y_p | u_c), added per user as a ``pyro.factor``
(logsumexp over the T communities) inside ``pyro.plate("users", U, subsample_size=...)``. This is
the enumeration of c_u done by hand rather than by ``TraceEnum_ELBO``: the same objective, but it
runs under the generic engines' ``Trace_ELBO`` and NUTS with any guide (AutoNormal, ...), which
then sees only (λ, β, u); a label of weight w (``PairwiseData.weights``) counts w times in Π_{p ∈ D_u}
(its log-likelihood times w). The memberships come back per draw in the posterior (their conditional
p(c_u = c | π, u, D_u) ∝ π_c p(D_u | u_c)). With ``concentration_prior`` λ is sampled too.

Ties (labels y = ½ of ``PairwiseData.from_frame(..., ties="model")``; every route): a third outcome
under the ordered probit of :mod:`crowdzoo.gp.ordinal` (Glenn & David 1960; the ordinal-regression
likelihood of Chu & Ghahramani 2005, "Gaussian processes for ordinal regression", JMLR 6,
P(y | f) = Φ(z₁) − Φ(z₂) between adjacent thresholds, here three ordered outcomes split at ±τ), on
the same probit argument z = Δ/α as a decided label:

    τ            ~ ``tie_prior``               default LogNormal(log ½, 1)                       (site "tau")
    P(a ≻ b | u) = Φ(Δ/α − τ),   P(b ≻ a | u) = Φ(−Δ/α − τ),   P(tie | u) = Φ(τ − Δ/α) − Φ(−τ − Δ/α)

so that τ reads as GPPL's (a tie of two equal items has probability 2Φ(τ) − 1 whatever α). With the
sparse conditional variance folded in, Δ/α and τ are both rescaled by α/√(α² + c_p/s): the threshold
of label p is τ_p = τ · α/√(α² + c_p/s) (:func:`tie_scale`), the argument G_p·u_c as above. Decided
labels keep log Φ(±G_p·u_c − τ_p); without ties τ is not sampled and the program is the one above. The
Gibbs route fits each community by EP with the ordered probit's sites (the same thresholds τ_p), scores
memberships with the three-outcome predictive, and samples τ by a random-walk Metropolis step on log τ
against the communities' EP evidence once per sweep (:mod:`crowdzoo.models.dpm.gibbs`).

A threshold per user (``tie_threshold="per_user"``; every route): τ_u for each user u, iid under
``tie_prior`` in a plate of users (site "tau", shape (U,)), label p of user u at τ_u · tie scale; the
predictions of a training user use that user's τ_u, those of a new user (and ``users=None``) the median
of the users' τ_u per draw. The Gibbs route takes one Metropolis step on each log τ_u per sweep,
against the EP evidence of u's community.

Item residual (``item_residual=True``; every route): each community's utility is a GP over the
features plus an item effect of its own, f^c ~ GP(0, K_x / s + σ_r² I) — r^c_i ~ N(0, σ_r²) independent
across items and communities — so that a community can hold the utilities of items that the features do
not explain (on the calibration battery's many-per-item crowd, item effects of sd 1 that no feature
carries). σ_r² = 1/E[s_r] under GPPL's residual prior Gamma(α_r, β_r) (``item_gp.shape_r0``,
``rate_r0``: ¼ by default), fixed as s is. The algebra is exact where every item is inducing: K_mm
gains σ_r² s on its diagonal and every route's whitened directions, EP and posterior follow from its
Cholesky factor; a new item has the cross-covariance k(x, X)/s of the features alone and its own
variance k(x, x)/s + σ_r² (:class:`~crowdzoo.models.dpm.setup.ResidualKernel`). ``item_residual=True``
refuses a sparse item side (its conditional would need the residual of items outside the inducing set)
and inferred length-scales (the kernel with the residual is built once). ``item_residual="auto"`` (the
command line's ``--item-residual auto``) has the residual where it applies and leaves it out, silently,
elsewhere (:meth:`DPMCommunities.uses_residual`): on with an exact item side over item features and
fixed length-scales; off on a sparse item side, under ``lengthscale_prior``, with svi's
``learn_kernel=True`` (its program rebuilds the kernel from ℓ without the residual, and so does the
posterior), and for items without features — there the kernel is already the identity, one independent
utility per item, and K/s + σ_r² I would only rescale that prior's variance (what ``shape_s0`` and
``rate_s0`` set), not add an item effect the kernel lacks. The posterior's model records which it used
(``post.model.item_residual`` True or False). With σ_r² fixed at ¼ the residual is ahead on the
calibration battery where items carry effects of their own (many-per-item) but behind, by less than
.01 nats at most seeds, on crowds whose utilities the features explain with a weak signal or
irrelevant features (docs/dpm.md, "Item residual"), so the default learns σ_r² (below).

``item_residual="learned"`` (``--item-residual learned``) has the residual where "auto" does, with σ_r²
learned instead of fixed at ¼: before inference, the type-II maximum over σ_r² ∈ {0, 2⁻⁸, 2⁻⁷, …, 4} of
the EP evidence log Z_EP(y | σ_r²) of one GP with the residual over all the crowd's labels pooled
(:func:`~crowdzoo.models.dpm.setup.learn_residual_variance`), then fixed as s is, for every route. 0 is
on the grid, so a crowd whose items have no effects of their own switches the residual off (the fit is
then the one without it). Pooled, because the communities do not exist before the sampler: an effect
the crowd shares shows in the pooled labels, one that only a community has is averaged out. Fixed rather
than sampled (a Metropolis step on log σ_r² against the communities' EP evidence, as τ's): σ_r² changes
each community's prior Cholesky factor and the posterior's projection to new items, which the sampler's
posterior holds once for all samples. This is the default: paired over five seeds of the battery's
crowds it is ahead on many-per-item (−.037 ± .007 nats, every seed) and behind on none beyond noise
(docs/dpm.md, "σ_r² learned"); ``item_residual=False`` is the paper's model. The setup keeps the grid
and its evidences
(``residual_grid``, ``residual_log_evidence``), the posterior's model says ``item_residual="learned"``.

Length-scales (the paper conditions on them): with ``lengthscale_prior=`` the program of the
svi and nuts routes samples the item kernel's ARD length-scales first, ℓ_d ~ ``lengthscale_prior``
(site "lengthscale"), shared by every community's GP, and builds K_mm, L_mm and G from them inside the
model (:func:`dpm_lengthscale_model`; the inducing items stay those of the median-heuristic setup), so
that NUTS samples ℓ and svi's guide covers it; ``learn_kernel=True`` (svi, no prior) makes ℓ a
``pyro.param`` instead. The Gibbs route keeps the kernel fixed and refuses a prior.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pyro
import pyro.distributions as dist
import torch
from torch.special import log_ndtr

from ...errors import DataError
from ...gp.conditional import probit_rows
from ...gp.linalg import DTYPE
from ...gp.ordinal import default_tie_prior, outcome_log_probs
from ...gp.priors import check_priors
from ..gppl.model import GPPL
from .setup import (
    DPMSetup,
    LengthscaleSpace,
    ResidualKernel,
    check_data,
    learn_residual_variance,
    user_labels,
    with_item_residual,
)

#: the settings of the communities' item GP, a :class:`~crowdzoo.models.gppl.model.GPPL` (``item_gp``),
#: which the constructor also takes by name and the model reads back by name (``model.kernel``)
ITEM_GP_SETTINGS = ("n_inducing", "kernel", "lengthscale", "scaled_lengthscale", "shape_s0", "rate_s0",
                    "s_prior", "jitter", "lengthscale_prior")


class _ItemGPs:
    """The default of an item-GP keyword of :class:`DPMCommunities`: ``item_gp``'s setting."""

    def __repr__(self):
        return "item_gp's"


ITEM_GPS = _ItemGPs()


def _item_gp_setting(name: str) -> property:
    return property(lambda self: getattr(self.item_gp, name),
                    doc=f"``item_gp.{name}``: the communities' item GP's setting.")


@dataclass(init=False)
class DPMCommunities:
    """Dirichlet-process mixture of GP preference models (module docstring).

    Parameters
    ----------
    concentration : λ > 0 of the Dirichlet process (larger: more communities).
    concentration_prior : None (λ fixed) or a Pyro ``Gamma`` prior on λ, resampled by Escobar & West
        (1995) in the Gibbs route.
    probit_scale : α > 0 of P(a ≻ b | u) = Φ((f_a − f_b) / α).
    truncation : T, the number of communities of the stick-breaking truncation in the Pyro program
        (the ``svi`` and ``nuts`` routes; the Gibbs route is not truncated).
    item_gp : the item GP every community's utility is drawn from, a
        :class:`~crowdzoo.models.gppl.model.GPPL` whose item-GP settings (:data:`ITEM_GP_SETTINGS`)
        apply: ``n_inducing``, ``kernel``, ``lengthscale``, ``scaled_lengthscale``, ``shape_s0``,
        ``rate_s0``, ``s_prior`` and ``jitter`` as in GPPL, with s fixed at the prior mean; and
        ``lengthscale_prior``, a positive Pyro distribution over the item length-scales (over one, iid
        over the D feature dimensions, or with batch shape (D,)), in the features' units: the svi and
        nuts routes then infer ℓ with the rest (module docstring), the posterior predicting with each
        draw's kernel; needs a named kernel ("se", "matern32"); the Gibbs route refuses it. Without it
        ℓ is fixed (``lengthscale`` or the median heuristic), or learned by svi's
        ``learn_kernel=True``. Default ``GPPL(item_residual=False)``; the communities' GP has no item
        residual, and its ``tie_prior`` stays None (ties are this model's ``tie_prior``).
    n_inducing, kernel, lengthscale, scaled_lengthscale, shape_s0, rate_s0, s_prior, jitter,
    lengthscale_prior : each replaces that setting of ``item_gp`` (``DPMCommunities(kernel="se")``
        is ``DPMCommunities(item_gp=GPPL(kernel="se", item_residual=False))``).
    tie_prior : the prior of the tie threshold τ > 0 (probit scale, module docstring), used by every
        route when the data have ties (``ties="model"``); None:
        :func:`~crowdzoo.gp.ordinal.default_tie_prior`, LogNormal(log ½, 1).
    tie_threshold : "crowd" (default): one τ for every user; "per_user": a τ_u per user, each under
        ``tie_prior`` independently (users who call more pairs even get a larger τ_u; a user with few
        labels keeps near the prior's). Predictions of a new user (and ``users=None``)
        then use the median of the users' τ_u.
    item_residual : "learned" (default), False (the paper's model, without it), True or "auto". True: each
        community's utility gets an item residual, f^c ~ GP(0, K_x / s + σ_r² I) — an effect of each
        item of its own, which the features need not explain (module docstring, "Item residual");
        needs an exact item side (every item inducing) and fixed length-scales (no
        ``lengthscale_prior``, no ``learn_kernel``), refused otherwise. "auto": True where it applies
        — an exact item side over item features with fixed length-scales — and False elsewhere
        (:meth:`uses_residual`). "learned": where "auto" has the residual, with σ_r² the type-II maximum
        of one pooled GP's EP evidence over a grid that includes 0 (module docstring; the setup's
        ``residual_variance``), fixed before inference.
    """

    concentration: float = 1.0
    concentration_prior: object = None
    probit_scale: float = 1.0
    truncation: int = 10
    item_gp: GPPL = field(default_factory=lambda: GPPL(item_residual=False))
    tie_prior: object = None
    tie_threshold: str = "crowd"
    item_residual: bool | str = "learned"

    def __init__(self, concentration: float = 1.0, concentration_prior=None, n_inducing=ITEM_GPS,
                 kernel=ITEM_GPS, lengthscale=ITEM_GPS, scaled_lengthscale=ITEM_GPS, shape_s0=ITEM_GPS,
                 rate_s0=ITEM_GPS, s_prior=ITEM_GPS, probit_scale: float = 1.0, jitter=ITEM_GPS,
                 truncation: int = 10, lengthscale_prior=ITEM_GPS, item_gp: GPPL | None = None,
                 tie_prior=None, tie_threshold: str = "crowd", item_residual: bool | str = "learned"):
        given = dict(n_inducing=n_inducing, kernel=kernel, lengthscale=lengthscale,
                     scaled_lengthscale=scaled_lengthscale, shape_s0=shape_s0, rate_s0=rate_s0,
                     s_prior=s_prior, jitter=jitter, lengthscale_prior=lengthscale_prior)
        given = {k: v for k, v in given.items() if v is not ITEM_GPS}
        if item_gp is None:
            item_gp = GPPL(item_residual=False, **given)
        elif not isinstance(item_gp, GPPL):
            raise DataError(f"item_gp: expected a crowdzoo.GPPL (the communities' item GP), got "
                            f"{type(item_gp).__name__}", arg="item_gp")
        elif given:
            item_gp = dataclasses.replace(item_gp, **given)
        if item_gp.order_effect:
            raise DataError("item_gp: the communities' item GP has no order effect (order_effect=True is "
                            "GPPL's, crowdGPPL's and Bradley–Terry's); pass a GPPL without it",
                            arg="item_gp")
        self.concentration, self.concentration_prior = concentration, concentration_prior
        self.probit_scale, self.truncation, self.item_gp = probit_scale, truncation, item_gp
        self.tie_prior, self.tie_threshold = tie_prior, tie_threshold
        self.item_residual = item_residual
        self.__post_init__()

    n_inducing = _item_gp_setting("n_inducing")
    kernel = _item_gp_setting("kernel")
    lengthscale = _item_gp_setting("lengthscale")
    scaled_lengthscale = _item_gp_setting("scaled_lengthscale")
    shape_s0 = _item_gp_setting("shape_s0")
    rate_s0 = _item_gp_setting("rate_s0")
    s_prior = _item_gp_setting("s_prior")
    jitter = _item_gp_setting("jitter")
    lengthscale_prior = _item_gp_setting("lengthscale_prior")

    def __post_init__(self):
        if self.item_gp.item_residual is True or self.item_gp.tie_prior is not None:
            raise DataError("item_gp: the communities' item GP has neither an item residual nor ties of "
                            "its own; pass a GPPL with item_residual=False and no tie_prior (the tie "
                            "threshold's prior is DPMCommunities(tie_prior=...))", arg="item_gp")
        check_priors(self, positive_priors={"tie_prior": "tie thresholds"})
        if not (isinstance(self.item_residual, bool) or isinstance(self.item_residual, str)
                and self.item_residual in ("auto", "learned")):
            raise DataError(f"item_residual: expected 'auto', 'learned', True or False, got "
                            f"{self.item_residual!r}", arg="item_residual")
        if self.tie_threshold not in ("crowd", "per_user"):
            raise DataError(f"tie_threshold: expected 'crowd' or 'per_user', got {self.tie_threshold!r}",
                            arg="tie_threshold")
        lam = float(self.concentration)
        if not lam > 0 or lam == float("inf"):
            raise DataError(f"concentration: the DP concentration λ must be a positive finite number, got "
                            f"{self.concentration!r}")
        if self.concentration_prior is not None and not isinstance(self.concentration_prior, dist.Gamma):
            raise DataError("concentration_prior: Escobar–West resampling of λ needs a Gamma prior "
                            f"(pyro.distributions.Gamma), got {type(self.concentration_prior).__name__}")
        if not float(self.probit_scale) > 0:
            raise DataError(f"probit_scale: α must be positive, got {self.probit_scale!r}")
        if int(self.truncation) != self.truncation or self.truncation < 1:
            raise DataError(f"truncation: expected an integer ≥ 1 (communities), got {self.truncation!r}")

    def prior_tau(self) -> dist.Distribution:
        """The prior of the tie threshold τ (``tie_prior`` or the default)."""
        return default_tie_prior() if self.tie_prior is None else self.tie_prior

    @property
    def residual_variance(self) -> float:
        """σ_r² of each community's item residual: 1/E[s_r] under GPPL's residual prior
        Gamma(α_r, β_r) of ``item_gp`` (``shape_r0``, ``rate_r0``; ¼ by default), s_r fixed at its prior
        mean as s is."""
        return float(self.item_gp.rate_r0) / float(self.item_gp.shape_r0)

    def uses_residual(self, gp) -> bool:
        """Whether the communities' kernel has the item residual on item GP ``gp`` (GPPL's setup, before
        the residual): ``item_residual`` when it is True or False; under "auto", where the residual
        applies — every item inducing, items with features (not the identity kernel) and length-scales
        fixed (no ``lengthscale_prior``; svi's ``learn_kernel`` drops it in :meth:`with_lengthscale`);
        "learned" applies where "auto" does."""
        if isinstance(self.item_residual, bool):
            return self.item_residual
        return (bool(gp.exact) and getattr(gp.kernel, "name", None) != "identity"
                and self.lengthscale_prior is None)

    def resolved(self, setup: DPMSetup) -> DPMCommunities:
        """The model with ``item_residual`` as ``setup`` has it (True or False; "learned" where σ_r² was
        learned, ``setup.residual_variance`` its value, 0 when the evidence switched it off): what a
        posterior keeps, so that its model says which kernel it was fitted with."""
        used = "learned" if setup.residual_grid is not None else isinstance(setup.gp.kernel, ResidualKernel)
        return self if self.item_residual is used else dataclasses.replace(self, item_residual=used)

    def setup(self, data, seed: int = 0) -> DPMSetup:
        """The item GP (GPPL's), s fixed at its prior mean, α, the EP direction of every label, and τ's
        prior for data with ties (else None)."""
        gp = self.item_gp.setup_features(data.item_features, seed=seed)
        s = float(gp.s_prior.mean)
        if not s > 0 or s == float("inf"):
            raise DataError(f"s_prior: the Gibbs route fixes s at the prior mean, which is {s}")
        alpha = float(self.probit_scale)
        grid = log_z = None
        if self.uses_residual(gp):
            v = self.residual_variance
            if self.item_residual == "learned":
                v, grid, log_z = learn_residual_variance(gp, data, s, alpha)
            if v > 0:
                gp = with_item_residual(gp, s * v)
        a = torch.as_tensor(data.a, dtype=torch.long)
        b = torch.as_tensor(data.b, dtype=torch.long)
        return DPMSetup(gp=gp, s=s, alpha=alpha, H=probit_rows(gp, a, b, s, alpha),
                        tie_prior=self.prior_tau() if data.has_ties else None,
                        tie_per_user=data.has_ties and self.tie_threshold == "per_user",
                        residual_grid=grid, residual_log_evidence=log_z)

    def program(self, setup: DPMSetup, data, subsample_size=None, learn_kernel: bool = False):
        """The Pyro model :func:`dpm_model` and its arguments (module docstring): whitened directions
        G (P, M) with P(y_p = 1 | u_c) = Φ(G_p·u_c), the labels' signs, and each user's labels as a
        padded (U, L) table of label indices with its mask. With ``lengthscale_prior`` or
        ``learn_kernel``: :func:`dpm_lengthscale_model` instead, whose item length-scales (ARD) are
        sampled under the prior, or a ``pyro.param`` started at ``setup``'s. Data with ties (a
        ``tie_prior`` in ``setup``) add τ's prior and each label's :func:`tie_scale` as the last two
        arguments (with ``tie_threshold="per_user"`` a third, each label's user)."""
        check_data(self, data)
        a = torch.as_tensor(data.a, dtype=torch.long)
        b = torch.as_tensor(data.b, dtype=torch.long)
        sgn = 2.0 * torch.as_tensor(data.y, dtype=DTYPE) - 1.0
        lab, mask = user_labels(data.users, data.n_users, data.weights)  # the mask holds the weights
        rest = (sgn, lab, mask, int(self.truncation), self._concentration(), subsample_size)
        if learn_kernel and self.lengthscale_prior is not None:
            raise DataError("learn_kernel: with lengthscale_prior the length-scales are already inferred "
                            "(a posterior under the prior); pass one of the two", arg="learn_kernel")
        if learn_kernel or self.lengthscale_prior is not None:
            space = self.lengthscale_space(setup, prior=not learn_kernel)
            return dpm_lengthscale_model, (space, a, b, *rest, setup.tie_prior, self._tie_users(setup, data))
        d, c = setup.gp.pair_terms(a, b)
        ties = () if setup.tie_prior is None else (setup.tie_prior, tie_scale(c, setup.s, setup.alpha),
                                                   self._tie_users(setup, data))
        return dpm_model, (directions(d, c, setup.s, setup.alpha), *rest, *ties)

    @staticmethod
    def _tie_users(setup: DPMSetup, data):
        """Each label's user (P,) under ``tie_threshold="per_user"``, else None (one τ)."""
        return torch.as_tensor(data.users, dtype=torch.long) if setup.tie_per_user else None

    def lengthscale_space(self, setup: DPMSetup, prior: bool = False) -> LengthscaleSpace:
        """The item GP's algebra as a function of its length-scales (:class:`LengthscaleSpace`): with
        ``prior`` ℓ sampled under ``lengthscale_prior`` (its prior with event shape (D,); svi and nuts),
        without a ``pyro.param`` (what ``learn_kernel`` moves)."""
        from ...gp.learn import ARDGP, lengthscale_prior_of

        what = "lengthscale_prior" if prior else "learn_kernel"
        if self.item_residual is True:
            raise DataError(f"{what}: the length-scales are fixed with the item residual (its kernel "
                            "K/s + σ_r² I is built once); pass item_residual=False to infer them",
                            arg="item_residual")

        if getattr(setup.gp.kernel, "name", None) == "identity":  # items without features
            raise DataError(f"{what}: the items have no features, so there are no length-scales to "
                            "learn")
        ard = ARDGP.of(self.item_gp, setup.gp, what)
        ell_prior = lengthscale_prior_of(self.lengthscale_prior, ard.D) if prior else None
        return LengthscaleSpace(ard, setup, ell_prior)

    def with_lengthscale(self, setup: DPMSetup, ell, a, b):
        """(the model, its setup) with the item length-scales ``ell`` (D,)."""
        space = self.lengthscale_space(setup)
        gp = space.gp(ell)
        return (dataclasses.replace(self, lengthscale=ell, item_residual=False),
                DPMSetup(gp=gp, s=setup.s, alpha=setup.alpha, H=probit_rows(gp, a, b, setup.s, setup.alpha),
                         tie_prior=setup.tie_prior, tie_per_user=setup.tie_per_user))

    def _concentration(self):
        if self.concentration_prior is not None:
            return self.concentration_prior
        return torch.tensor(float(self.concentration), dtype=DTYPE)


def whitened_directions(setup: DPMSetup, a, b) -> torch.Tensor:
    """G (P, M) with P(a ≻ b | u_c) = Φ(G_p·u_c): d_p / √s / √(α² + c_p / s) (GPPL's pair terms)."""
    return directions(*setup.gp.pair_terms(a, b), setup.s, setup.alpha)


def directions(d, c, s: float, alpha: float) -> torch.Tensor:
    """G = d / √s / √(α² + c / s) (..., P, M) from whitened pair rows d (..., P, M) and their conditional
    variances c (..., P) (× 1/s): :func:`whitened_directions`, also per draw of the length-scales."""
    return d / (s ** 0.5 * torch.sqrt(alpha ** 2 + c / s))[..., None]


def tie_scale(c, s: float, alpha: float) -> torch.Tensor:
    """α/√(α² + c/s) (..., P): the factor from τ to label p's threshold τ_p on the scale of G_p·u_c
    (module docstring); 1 for the training pairs of an exact GP."""
    return alpha / torch.sqrt(alpha ** 2 + c / s)


def stick_weights(beta: torch.Tensor) -> torch.Tensor:
    """log π (..., T) from the sticks β (..., T − 1): π_k = β_k Π_{l<k} (1 − β_l), π_T = Π (1 − β)."""
    log_rest = torch.cumsum(torch.log1p(-beta), -1)
    zero = torch.zeros_like(beta[..., :1])
    return torch.cat([torch.log(beta), zero], -1) + torch.cat([zero, log_rest], -1)


def user_loglik(G, sgn, lab, mask, u, tau=None) -> torch.Tensor:
    """log p(D_u | u_c) (..., n, T) for the users of ``lab``/``mask`` (n, L) under each community's
    whitened utilities u (..., T, M); G (P, M), or (..., P, M) per draw (length-scales drawn too).

    ``tau``: None (no ties: log Φ(±z)), or each label's threshold τ_p (P,) or (..., P) per draw
    (τ · :func:`tie_scale`), under which a label with ``sgn`` 0 is a tie and every label takes the
    ordered probit's log-probability of its outcome (:func:`~crowdzoo.gp.ordinal.outcome_log_probs`).
    ``mask`` holds each label's weight (0 in the padding; :func:`~crowdzoo.models.dpm.setup.user_labels`):
    a label of weight w counts as w copies of it."""
    z = torch.einsum("...nlm,...tm->...nlt", G[..., lab, :], u)
    if tau is None:
        ll = log_ndtr(sgn[lab][:, :, None] * z)
    else:
        k = (sgn[lab] + 1.0).long()  # 0, 1, 2: b ≻ a, a tie, a ≻ b
        logp = outcome_log_probs(z, tau[..., lab][..., None])  # (..., n, L, T, 3)
        ll = logp.gather(-1, k[:, :, None, None].expand(logp.shape[:-1] + (1,)))[..., 0]
    return (ll * mask[:, :, None]).sum(-2)


def dpm_model(G, sgn, lab, mask, T: int, concentration, subsample_size=None, tie_prior=None, tie_scale=None,
              tie_users=None):
    """The Pyro model of the truncated DPM with the memberships summed out (module docstring).

    ``G`` (P, M) whitened label directions, ``sgn`` (P,) ±1 outcomes (0 a tie), ``lab``/``mask``
    (U, L) each user's labels, ``T`` the truncation, ``concentration`` λ (a tensor) or its prior (a
    distribution); for data with ties τ's prior ``tie_prior``, each label's ``tie_scale`` (P,) and,
    for a τ per user, each label's user ``tie_users`` (P,)."""
    lam = (pyro.sample("concentration", concentration) if isinstance(concentration, dist.Distribution)
           else concentration)
    lam = torch.as_tensor(lam, dtype=DTYPE)
    M = G.shape[1]
    if T > 1:
        beta = pyro.sample("beta", dist.Beta(torch.ones(T - 1, dtype=DTYPE), lam.expand(T - 1)).to_event(1))
        log_pi = stick_weights(beta)
    else:
        log_pi = torch.zeros(1, dtype=DTYPE)
    u = pyro.sample("u", dist.Normal(torch.zeros(T, M, dtype=DTYPE), 1.0).to_event(2))
    tau = None if tie_prior is None else tie_thresholds(tie_prior, lab.shape[0], tie_users) * tie_scale
    with pyro.plate("users", lab.shape[0], subsample_size=subsample_size) as idx:
        ll = user_loglik(G, sgn, lab[idx], mask[idx], u, tau)  # (n, T)
        pyro.factor("labels", torch.logsumexp(log_pi + ll, -1))


def tie_thresholds(tie_prior, U: int, tie_users=None):
    """τ (site "tau"): one for the crowd, or with ``tie_users`` (each label's user) one per user, iid
    under the prior in a plate of users (not subsampled: a user's τ_u is a global of its labels),
    returned per label."""
    if tie_users is None:
        return pyro.sample("tau", tie_prior)
    with pyro.plate("tie_users", U, dim=-1):
        return pyro.sample("tau", tie_prior)[..., tie_users]


def dpm_lengthscale_model(space, a, b, sgn, lab, mask, T: int, concentration, subsample_size=None,
                          tie_prior=None, tie_users=None):
    """:func:`dpm_model` with the item GP's ARD length-scales ("lengthscale") random under
    ``space.prior`` (module docstring) or, without a prior, a ``pyro.param`` (positive), optimised by
    svi's ELBO with the guide (type-II maximum likelihood inside VI; the paper conditions on them)."""
    from pyro.distributions import constraints

    if space.prior is None:
        ell = pyro.param("lengthscale", space.ell0.clone(), constraint=constraints.positive)
    else:
        ell = pyro.sample("lengthscale", space.prior)
    st = space.setup_at(ell)
    d, c = st.gp.pair_terms(a, b)
    dpm_model(directions(d, c, st.s, st.alpha), sgn, lab, mask, T, concentration, subsample_size,
              tie_prior, None if tie_prior is None else tie_scale(c, st.s, st.alpha), tie_users)


__all__ = ["DPMCommunities", "directions", "dpm_model", "dpm_lengthscale_model", "stick_weights",
           "tie_scale", "tie_thresholds", "user_loglik", "whitened_directions"]
