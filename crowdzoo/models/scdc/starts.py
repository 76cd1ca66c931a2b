"""Several initialisations and the check for a collapsed mixture, shared by SCDC and BayesSCDC.

A deep clustering fit depends on its start: the paper reports, for each run, the best of 10
initialisations by the final bound (Luo et al. 2018, §5.2). ``n_init`` fits run from the seeds
:func:`init_seeds` — the first is the fit's own seed, so that ``n_init=1`` is the single fit of that seed —
and :func:`best_of` keeps the one with the highest final bound: the ELBO (SCDC) or the bound J of Eq. 16
less the globals' KL (BayesSCDC), averaged over the last epoch's steps and divided by N. Each
initialisation is a whole fit, so ``n_init`` multiplies the time of a fit.

A mixture has collapsed when its clusters emptied or merged: :func:`check_collapse` counts the clusters
that hold at least ``MIN_MASS`` of the items' responsibility mass Σ_n q(z_n = k) / N and their
effective number exp(H(mass)), and warns (:class:`~crowdzoo.errors.CollapseWarning`) when fewer than K
hold that much, or when the bound ended more than ``FALL`` (relative) below its best. Each epoch's bound
is a mini-batch estimate, noisy from epoch to epoch, so both ends are means over windows of a tenth of
the epochs (at least one): the last window against the best window.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ...errors import CollapseWarning, DataError

MIN_MASS = 0.01  # a cluster in use holds at least 1 % of the items' responsibility mass
FALL = 0.05  # a final bound this far (relative) below the fit's best epoch: the mixture degenerated


def check_n_init(n_init) -> int:
    if int(n_init) != n_init or n_init < 1:
        raise DataError(f"n_init: expected an integer ≥ 1, got {n_init!r}", arg="n_init")
    return int(n_init)


def init_seeds(seed: int, n_init: int) -> list[int]:
    """The seeds of ``n_init`` initialisations: ``seed`` itself, then seeds drawn from a
    ``numpy.random.SeedSequence`` of (seed, r), distinct from other fits' seeds (below 2³²)."""
    return [int(seed)] + [int(np.random.SeedSequence([int(seed) % 2**63, r]).generate_state(1)[0])
                          for r in range(1, n_init)]


class Best(NamedTuple):
    """The kept fit, its position among the initialisations and every initialisation's final bound."""

    fit: object
    index: int
    bounds: list


def best_of(fit_one: Callable, n_init: int, bound_of: Callable, bounds=(), best=None) -> Best:
    """Run ``fit_one(r, bounds, best)`` for the initialisations r = len(``bounds``) … ``n_init`` − 1 (the
    ones before are done: their final ``bounds`` and the best of them, ``best``) and keep the fit whose
    ``bound_of(fit)`` is highest (the first of equals). Only the kept fit's warnings are shown: the others'
    (unconverged, say) concern fits that are thrown away."""
    bounds = list(bounds)
    index = int(np.argmax(bounds)) if bounds else -1
    shown: list = []
    for r in range(len(bounds), n_init):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_one(r, list(bounds), best)
        bounds.append(float(bound_of(fit)))
        if index < 0 or bounds[-1] > bounds[index]:
            best, index, shown = fit, r, list(caught)
    for w in shown:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return Best(best, index, bounds)


def init_settings(n_init: int, best: Best, seeds: list) -> dict:
    """What a posterior's settings record of its initialisations (``seeds``: theirs)."""
    return dict(n_init=n_init, init_seeds=list(seeds), init_bounds=list(best.bounds), init_kept=best.index,
                init_seed=seeds[best.index])


def occupancy(probs: torch.Tensor) -> tuple[int, float]:
    """(clusters holding ≥ ``MIN_MASS`` of the responsibility mass, effective number exp(H(mass)))."""
    mass = probs.double().mean(0)
    mass = mass / mass.sum()
    entropy = -(mass * torch.log(mass.clamp_min(1e-300))).sum()
    return int((mass >= MIN_MASS).sum()), float(torch.exp(entropy))


def check_collapse(probs: torch.Tensor, trace, what: str, retry: str, retry_settings=()) -> dict:
    """Warn (:class:`~crowdzoo.errors.CollapseWarning`) when fewer than K clusters hold ≥ 1 % of the
    responsibility mass of ``probs`` (N, K), or the per-epoch bound ``trace`` ended more than ``FALL``
    below its best (means over a tenth of the epochs, module docstring); ``retry`` names what to try,
    with the fit settings ``retry_settings`` by placeholders (:class:`~crowdzoo.errors.Advises`).
    Returns the settings to record: clusters in use and their effective number."""
    K = probs.shape[-1]
    used, effective = occupancy(probs)
    trace = np.asarray(trace, dtype=float)
    said = []
    if used < K:
        said.append(f"only {used} of its K = {K} clusters hold ≥ {MIN_MASS:.0%} of the items "
                    f"(effective number {effective:.1f}): clusters emptied or merged. If the data have about "
                    f"{used} clusters, K is larger than they need ({{n_clusters={used}}} fits them without "
                    "this warning); if they have more, the mixture collapsed")
    if trace.size >= 2 and np.isfinite(trace).all():
        k = max(trace.size // 10, 1)
        window = np.convolve(trace, np.ones(k) / k, mode="valid")  # means over k consecutive epochs
        top, last = window.max(), window[-1]
        if top - last > FALL * abs(top):
            fall = 100 * (top - last) / abs(top)
            at = int(window.argmax()) + 1
            said.append(f"the bound ended at {last:.4g}, {fall:.0f} % below its best "
                        f"({top:.4g}, epochs {at}–{at + k - 1}; means over {k} epoch(s)): the mixture "
                        "degenerated")
    if said:
        warnings.warn(CollapseWarning(f"{what}: {'; and '.join(said)}. Try: {retry}",
                                      settings=("n_clusters", *retry_settings)), stacklevel=5)
    return dict(clusters_used=used, clusters_effective=round(effective, 4) if math.isfinite(effective)
                else effective)
