"""Guides side by side against NUTS: a :class:`~.comparison.Comparison` whose settings are guides.

    crowdzoo compare guides gppl --guides pyro.infer.autoguide:AutoNormal,mypkg.guides:my_guide

or, in Python, ``guides.sweep(["pyro.infer.autoguide:AutoNormal", my_guide], model="gppl").run(3)``.
On each repeat the model's tiny example (its ``Entry.example``, seeded by the repeat) is fitted by
NUTS (the reference, once per repeat) and by the svi route with each guide; the rows are
:func:`crowdzoo.compare_posteriors` of the guide's posterior against NUTS, one per variable group:
the mean error in NUTS sds, the sd ratio (below 1: over-confident), the Wasserstein-2 distance in
NUTS sds and the share of NUTS draws inside the guide's 90 % interval, with the fit's ELBO plateau
(relative change over the last tenth of the steps) and seconds. ``recorded`` is the guide as the
fit recorded it (``post.settings["guide"]``: name and shaping settings).

A guide is what ``crowdzoo.fit(..., method="svi", guide=...)`` takes (an AutoGuide class, a factory
``model → guide``, or a function with the model's own signature), its import path
``module:attribute`` (resolved where the fit runs, so a sweep named by paths runs in worker
processes), or ``"default"`` (the model's own default guide).
"""
from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..errors import DataError
from .comparison import Comparison, load

#: the reference's NUTS settings (``quick``: a smoke run's)
NUTS = {"num_samples": 500, "warmup_steps": 500, "num_chains": 1}
QUICK_NUTS = {"num_samples": 150, "warmup_steps": 150, "num_chains": 1}
#: the measures of :func:`crowdzoo.compare_posteriors` a row keeps
MEASURES = {"mean_error": "mean error / sd_nuts", "sd_ratio": "sd ratio", "w2": "W2 / sd_nuts",
            "cover90": "NUTS in 90 %"}


@dataclass(frozen=True)
class GuideFit:
    """One setting of a sweep: fit ``model`` (a zoo name) by svi with ``guide`` for ``num_steps``
    steps at learning rate ``lr`` (``quick``: ``quick_steps``)."""

    model: str
    guide: Any = "default"
    num_steps: int = 1500
    lr: float = 0.02
    quick_steps: int = 300


def guide_of(guide):
    """The ``guide=`` argument of a fit: None for ``"default"``, the object at an import path, or the
    guide itself."""
    if guide is None or guide == "default":
        return None
    return load(guide) if isinstance(guide, str) else guide


def label_of(guide) -> str:
    """A guide's label in the table: its import path as given, or its name."""
    if isinstance(guide, str):
        return guide
    fn = guide.func if isinstance(guide, functools.partial) else guide
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def sweep(guides: Iterable | Mapping, model: str = "gppl", num_steps: int = 1500, lr: float = 0.02,
          quick_steps: int = 300) -> Comparison:
    """The comparison of ``guides`` on ``model``'s svi route against NUTS (module docstring).
    ``guides``: guides or import paths (each labelled by :func:`label_of`), or a mapping label →
    guide."""
    from ..zoo import entry

    e = entry(model)  # a DataError naming the models there are
    for route in ("svi", "nuts"):
        if route not in e.routes:
            raise DataError(f"model: {e.name} has no {route} route (its routes are {list(e.routes)}); a "
                            "guide sweep fits svi with each guide and NUTS as the reference", arg="model")
    items = guides.items() if isinstance(guides, Mapping) else [(label_of(g), g) for g in guides]
    settings = {label: GuideFit(e.name, g, num_steps, lr, quick_steps) for label, g in items}
    if not settings:
        raise DataError("guides: give at least one guide (an import path module:attribute, or 'default')",
                        arg="guides")
    for s in settings.values():  # a path that does not load fails here, not after the first NUTS fit
        guide_of(s.guide)
    return Comparison(guide_rows, settings, column="guide")


@functools.lru_cache(maxsize=2)
def reference(model: str, seed: int, quick: bool):
    """The NUTS posterior of ``model``'s tiny example of repeat ``seed`` (and that example), kept for
    the repeat's other guides."""
    import crowdzoo as cz

    from ..zoo import entry

    ex = entry(model).make_example(seed)
    kw = {**ex.settings.get("nuts", {}), **(QUICK_NUTS if quick else NUTS)}
    return ex, cz.fit(ex.model, ex.data, method="nuts", seed=seed, check_confidence=False, **kw)


def guide_rows(fit: GuideFit, seed: int, quick: bool = False) -> pd.DataFrame:
    """One guide on repeat ``seed``: a row per variable group of :func:`crowdzoo.compare_posteriors`."""
    import crowdzoo as cz

    ex, ref = reference(fit.model, seed, quick)
    t0 = time.perf_counter()
    post = cz.fit(ex.model, ex.data, method="svi", guide=guide_of(fit.guide), seed=seed, lr=fit.lr,
                  num_steps=fit.quick_steps if quick else fit.num_steps, progress_bar=False,
                  check_confidence=False)
    seconds = time.perf_counter() - t0
    table = cz.compare_posteriors(post, ref, seed=seed)
    out = table[list(MEASURES)].rename(columns=MEASURES)
    out.insert(0, "variable", table.index.astype(str))
    out.insert(0, "recorded", str(post.settings["guide"]))
    out["ELBO rel. change"] = post.settings.get("elbo_rel_change", float("nan"))
    out["seconds"] = seconds
    return out.reset_index(drop=True)
