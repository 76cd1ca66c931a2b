"""crowdzoo: a Pyro model zoo of Bayesian models of what crowds say about pairs of things.

Names are imported on first use (PEP 562), so ``import crowdzoo`` and the command line's ``--help``
do not pay for torch and Pyro until a model or a fit is asked for. The models' names (``crowdzoo.GPPL``
…) are those of the classes of crowdzoo's models in the zoo's table (:data:`crowdzoo.zoo.ZOO`).
"""
# ruff: noqa: F401  (the imports below are re-exports: __all__ is built on demand, from the zoo's table)
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__
from .errors import (
    CollapseWarning,
    ConvergenceWarning,
    DataError,
    DataWarning,
    NumericalError,
    OverconfidenceWarning,
)

if TYPE_CHECKING:  # what the lazy names below resolve to (for type checkers and the API docs)
    from .comparisons.comparison import Comparison
    from .data import (
        ChoiceData,
        LinkData,
        PairwiseData,
        digits_links,
        simulate_collab,
        simulate_crowd,
        simulate_gppl,
        simulate_links,
        split_each_user,
        split_pairs,
        split_users,
    )
    from .diagnostics.compare import compare_posteriors
    from .zoo import ZOO, Entry, Example, fit, load, register


_LAZY = {
    "PairwiseData": ".data", "ChoiceData": ".data", "simulate_collab": ".data", "simulate_crowd": ".data",
    "simulate_gppl": ".data", "split_each_user": ".data", "split_pairs": ".data", "split_users": ".data",
    "LinkData": ".data", "simulate_links": ".data", "digits_links": ".data",
    "compare_posteriors": ".diagnostics.compare", "Comparison": ".comparisons.comparison",
    "ZOO": ".zoo", "Entry": ".zoo", "Example": ".zoo", "fit": ".zoo", "load": ".zoo", "register": ".zoo",
}


_SUBPACKAGES = ("active", "cli", "cluster_metrics", "comparisons", "core", "data", "diagnostics", "gp",
                "inference", "metrics", "models", "zoo")

_NAMES = ["PairwiseData", "ChoiceData", "LinkData", "simulate_gppl", "simulate_crowd", "simulate_collab",
          "simulate_links", "digits_links", "split_pairs", "split_users", "split_each_user", "DataError",
          "NumericalError", "ConvergenceWarning", "CollapseWarning", "DataWarning", "OverconfidenceWarning",
          "fit", "load", "report", "compare_posteriors", "Comparison", "register", "Entry", "Example", "ZOO"]


def _models() -> dict:
    """{class name: "module:name"} of the models of crowdzoo in the zoo's table (a model registered
    from a package of one's own is imported from there)."""
    from .zoo import ZOO

    return {e.model.rpartition(":")[2]: e.model for e in ZOO if e.model.startswith(__name__ + ".")}


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    if name == "__all__":  # read afresh: a registered model joins it
        return _NAMES + list(_models())
    path = _models().get(name)
    if path is not None:
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'crowdzoo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_models()))


def report(posterior, path, **kwargs):
    """Write a posterior diagnostic report (HTML or Markdown by the suffix of ``path``); see
    :func:`crowdzoo.diagnostics.report.report` for the arguments. Returns the
    :class:`~crowdzoo.diagnostics.report.Report` (its ``checks`` and overall ``verdict``)."""
    from .diagnostics.report import report as _report

    return _report(posterior, path, **kwargs)
