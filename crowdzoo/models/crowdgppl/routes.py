"""crowdGPPL's natgrad route, :func:`fit_natgrad`, as the zoo's table names it: the paper's Alg. 2 on
labelled pairs (the algorithm of :mod:`crowdzoo.models.crowdgppl.natgrad`: its problem, ``init``,
``step`` and ``bound``, run by :func:`crowdzoo.inference.natgrad.run`) and the probit choice's sweep on
choices among k items (:mod:`crowdzoo.models.crowdgppl.natgrad_choices`). The route sits above both
algorithm modules, since the choices' sweep is built from the pairwise one's pieces."""
from __future__ import annotations

import torch

from ...data.tensors import label_tensors, user_tensor, weight_tensor
from ...errors import DataError
from ...gp.conjugate import require_gamma
from ...gp.learn import at_learning_start
from ...inference import natgrad as loop
from ...inference.distributed import shard
from ...inference.hyper import default_batch_size, rho_floor, state_gain
from . import natgrad as ng
from . import natgrad_choices, scales
from .members import sides
from .posterior import CrowdGPPLPosterior


def fit_natgrad(model, data, seed: int = 0, likelihood: str | None = None,
                batch_size: int | None = None, delay: float = 1.0, forgetting_rate: float | None = None,
                max_iter: int = 1000, min_iter: int = 10, tol: float = 1e-3, eval_every: int = 5,
                eval_size: int = 2000, n_gh: int = 20, init_var: float | None = None,
                learn_kernel: bool | None = None, kernel_lr: float = 0.1, kernel_batch: int | None = None,
                rho_min: float | None = None, distributed: bool = False, progress_bar: bool | None = None,
                setup=None, resume=None, checkpoint=None, checkpoint_every: int = 0,
                callback=None, n_points: int = 64,
                select_scales: bool | str | None = None) -> CrowdGPPLPosterior:
    """Fit crowdGPPL by the paper's natural-gradient SVI (Alg. 2; settings, ``checkpoint`` and
    ``resume`` as for GPPL's :func:`~crowdzoo.models.gppl.natgrad.fit_natgrad`). ``batch_size`` P_i:
    by default the paper's 1000 labels, or P / 200 above 2·10⁵ labels
    (:func:`~crowdzoo.inference.hyper.default_batch_size`).

    ``init_var``: initial covariance of q(v_c), q(w_c) as a fraction of the prior's (default 1, the
    prior; 0.01 for ``"exact"`` on a full batch, whose full Gauss–Hermite steps feel the variance of z
    and otherwise spend many iterations shrinking the prior's variance of every unused component). On
    mini-batches the small start left the personal part collapsed: on the 600-item crowd of
    :func:`default_likelihood` E[s_w,c] ≈ 136 and personal predictions equal to the consensus's (held-out
    log loss .449 both), against .439 personal and .449 consensus from the prior's start.

    ``forgetting_rate`` r of ρ_i = (i + ε)^(−r): the paper's 0.9 by default; for the ``"exact"``
    likelihood on full batches (P ≤ P_i), where no gradient noise needs averaging out, r = 0 (full
    natural-gradient steps, ρ = 1), which reaches the optimum in a few tens of iterations and is
    then as close to NUTS as Pyro SVI (tests/models/crowdgppl/test_crowdgppl.py,
    docs/crowdgppl-routes.md). Full steps can overshoot where the data are sparse (5 pairs per user:
    the bound peaked, then fell, and a user weight ran to ~10⁶); the stop rule then halves ρ and says so
    (:class:`~crowdzoo.inference.natgrad.StopRule`).

    ``tol``: stop when the bound (Eq. 31) changes by less than this fraction between evaluations
    ``eval_every`` iterations apart. 10⁻³ by default: with ρ_i decaying as i^−0.9 the bound keeps
    creeping up long after the predictions have settled (10⁻⁴ ran out of 500 iterations on the
    synthetic Sushi-A-small files, where the authors' code stops after ~40). On sparse personal data
    the mean-field optimum itself is over-confident (docs/crowdgppl.md, "Sparse personal data"), so
    a much smaller tol trades calibration for bound. ``max_iter`` 1000: with the linearised likelihood
    a crowd of 15 raters × 30 items (docs/crowdgppl.md, "The default route on a user's first crowd")
    needs 255–345 iterations to meet tol (docs/crowdgppl-defaults.md), so 500 left little headroom.

    ``likelihood``: ``"linearised"`` (the paper's Eq. 7–11) or ``"exact"``; by default the one that
    :func:`default_likelihood` picks for the data.

    ``learn_kernel``, ``kernel_lr``, ``rho_min``: as for GPPL's natgrad (module docstring); the
    likelihood is then "exact" unless given. ``kernel_batch``: the labels of each batch whose gradient
    moves the length-scales (:func:`default_kernel_batch`; by default the paper's 1000). Unset,
    :func:`learns` decides (where the item side is sparse); ``False`` keeps the median heuristic, the
    paper's kernel. The model's ``lengthscale_prior`` (items) and ``user_lengthscale_prior`` (users)
    add log p(ℓ) to the length-scales' objective (type-II MAP).

    ``distributed``: data-parallel over the ranks of a ``torchrun`` launch
    (:mod:`crowdzoo.inference.distributed`), as for GPPL: each rank keeps a shard of the labels
    (``data`` may itself be a shard, :meth:`~crowdzoo.PairwiseData.read_shard`); every factor's
    statistics (Eq. 32–37), the likelihood's pull on q(s), the bound and, with ``learn_kernel``, the
    length-scales' gradient are summed across ranks, so every rank takes the single-process step.

    ``data`` a :class:`~crowdzoo.data.ChoiceData` (a user per row): the probit choice's
    natural-gradient route (:func:`~crowdzoo.models.crowdgppl.natgrad_choices.fit_choices`, the exact
    likelihood, fixed length-scales, one process); ``n_points``: the antithetic pairs of its rule over
    rows of more than two items.

    ``select_scales``: choose how large the personal part may be from the data
    (:mod:`crowdzoo.models.crowdgppl.scales`: the weakly informative component priors, or the scale of
    the side with fewer inducing values held broad, by the held-out log loss of a fit to 80 % of the
    labels); None (default): wherever the model leaves the component priors at their defaults, on one
    process, up to :data:`~crowdzoo.models.crowdgppl.scales.MAX_LABELS` labels. What was compared is in
    ``posterior.settings["scales"]``. ``"held"``: the held scale without a choice; False: the model's
    priors as given."""
    if hasattr(data, "sets"):  # a ChoiceData: the probit choice's route
        return natgrad_choices.fit_choices(
            model, data, seed=seed, likelihood=likelihood, batch_size=batch_size, delay=delay,
            forgetting_rate=forgetting_rate, max_iter=max_iter, min_iter=min_iter, tol=tol,
            eval_every=eval_every, eval_size=eval_size, n_gh=n_gh, init_var=init_var,
            learn_kernel=learn_kernel, rho_min=rho_min, distributed=distributed, progress_bar=progress_bar,
            setup=setup, resume=resume, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
            callback=callback, n_points=n_points)
    if select_scales not in (None, True, False, "held"):
        raise DataError(f"select_scales: expected None, True, False or 'held', got {select_scales!r}",
                        arg="select_scales")
    if select_scales is not False and resume is None and setup is None and not distributed:
        def candidate(m, train):
            return fit_natgrad(m, train, seed=seed, likelihood=likelihood, batch_size=batch_size, delay=delay,
                               forgetting_rate=forgetting_rate, max_iter=min(max_iter, scales.MAX_ITER),
                               min_iter=min_iter, tol=tol, eval_every=eval_every, eval_size=eval_size,
                               n_gh=n_gh, init_var=init_var,
                               learn_kernel=learn_kernel, kernel_lr=kernel_lr, kernel_batch=kernel_batch,
                               rho_min=rho_min, progress_bar=False, select_scales=False)

        model, chosen = scales.select(model, data, candidate, seed, select_scales)
    else:
        chosen = {"choice": "prior", "skipped": "select_scales=False" if select_scales is False else
                  "a caller's setup, a resumed or a distributed fit"}
    held = getattr(data, "label_range", None)
    batch_size = default_batch_size(batch_size, False, held[2] if held is not None else len(data.a))
    given = setup is not None  # a caller's setup keeps its kernel
    resume, setup = loop.resume_setup(resume, setup, lambda: model.setup(data, seed=seed))
    sh = shard(data, distributed)
    learn_kernel_given = learn_kernel
    learn_kernel = ng.learns(model, data, setup, learn_kernel, resume)
    before = {}
    if learn_kernel == ng.POOLED and given:
        if learn_kernel_given == ng.POOLED:
            raise DataError("learn_kernel: 'pooled' builds the setup at the length-scales it learns; drop "
                            "setup= or pass {learn_kernel=True}", arg="learn_kernel",
                            settings=("learn_kernel",))
        learn_kernel = False
    if learn_kernel == ng.POOLED:
        model, setup, before = ng.pooled(model, data, setup, seed, sh, resume is not None)
        learn_kernel = False
    if learn_kernel and not given and resume is None:  # learned from the median heuristic: median r = 1
        start = at_learning_start(model, data.item_features,
                                  data.user_features if setup.users is not None else None)
        if start is not model:
            setup = start.setup(data, seed=seed)
    if likelihood is None:
        likelihood = ng.default_likelihood(learn_kernel, batch_size, data, setup)
    if likelihood not in ("linearised", "exact"):
        raise DataError(f"likelihood: expected 'linearised' or 'exact', got {likelihood!r}", arg="likelihood")
    ties = data.has_ties if sh.world == 1 else bool(sh.sum(torch.tensor(float(data.has_ties))) > 0)
    if ties and likelihood != "exact":
        raise DataError("likelihood: the labels have ties (y = 0.5), which only the exact likelihood models "
                        "(the ordinal probit); pass {likelihood='exact'} or leave it unset", arg="likelihood",
                        settings=("likelihood",))
    if init_var is None:  # a small start feels no pull on mini-batches: the components stay collapsed
        init_var = 0.01 if likelihood == "exact" and batch_size >= (held[2] if held is not None
                                                                    else len(data.a)) else 1.0
    if not init_var > 0:
        raise DataError(f"init_var: must be positive, got {init_var}", arg="init_var")
    pri = {k: require_gamma(d, f"prior_{k}") for k, d in setup.priors.items()
           if k != "t" or setup.consensus}
    pri.setdefault("t", (1.0, 1.0))
    a, b, y = label_tensors(data)
    j = user_tensor(data)
    w = weight_tensor(data)
    a, b, j, y = (x[sh.lo - sh.offset:sh.hi - sh.offset] for x in (a, b, j, y))  # this rank's labels
    w = None if w is None else w[sh.lo - sh.offset:sh.hi - sh.offset]
    P = sh.n_labels
    if forgetting_rate is None:
        forgetting_rate = 0.0 if likelihood == "exact" and min(batch_size, P) == P else 0.9
    space = ng.CrowdKernels.of(model, data, setup, seed) if learn_kernel else None
    E0 = {k: s / r for k, (s, r) in pri.items()}
    # Q of Eq. 8 from the prior variance of z (independent items: 2/s per function, Eq. 6)
    res_prior = (None if setup.residual_prior is None
                 else require_gamma(setup.residual_prior, "shape_r0, rate_r0"))
    prior_var_z = 2.0 * setup.C / (E0["v"] * E0["w"]) + (2.0 / E0["t"] if setup.consensus else 0.0)
    if res_prior is not None:
        prior_var_z += 2.0 * res_prior[1] / res_prior[0]
    conditional = not setup.items.exact or (setup.users is not None and not setup.users.exact)
    problem = ng.Problem(a, b, j, y, sh, pri, E0, prior_var_z, sides(setup, space is not None),
                         conditional, likelihood, n_gh, init_var, space,
                         None if space is None else space.log_prior(model, counted=sh.lead), kernel_lr,
                         kernel_batch=ng.default_kernel_batch(kernel_batch),
                         tie_prior=model.prior_tau() if ties else None, residual=res_prior, w=w)
    if space is None and max(batch_size, eval_size) >= P:  # the steps or evaluations take every label
        problem = problem._replace(every=ng._labels(problem, torch.arange(a.shape[0]), problem.sides))
    settings = loop.Settings(batch_size=batch_size, delay=delay, forgetting_rate=forgetting_rate,
                             max_iter=max_iter, min_iter=min_iter, tol=tol, eval_every=eval_every,
                             eval_size=eval_size,
                             rho_min=rho_floor(rho_min, space is not None, batch_size >= P),
                             progress_bar=progress_bar, checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every, callback=callback)
    algorithm = loop.algorithm(ng.init, ng.step, ng.bound, problem, P, state_gain(space is not None))
    res = loop.run(algorithm, settings,
                   shard=sh, seed=seed, what=f"natgrad crowdGPPL ({likelihood})",
                   advice="a larger {delay} ε or {forgetting_rate} r (smaller steps), a larger {batch_size}, "
                          "{likelihood='exact'}, or fewer components ({n_components})",
                   advice_settings=("delay", "forgetting_rate", "batch_size", "likelihood", "n_components"),
                   resume=resume, meta=dict(model=model, method="natgrad"), setup=setup)
    return ng._posterior(model, data, res, problem, dict(likelihood=likelihood, init_var=init_var,
                                                       learn_kernel=ng.POOLED if before else learn_kernel,
                                                       ranks=sh.world, scales=chosen, **before))
