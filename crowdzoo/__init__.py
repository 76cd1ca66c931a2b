"""crowdzoo: a Pyro model zoo of Bayesian models of what crowds say about pairs of things.

Names are imported on first use (PEP 562), so ``import crowdzoo`` and the command line's ``--help``
do not pay for torch and Pyro until a model or a fit is asked for.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__  # noqa: F401  (crowdzoo.__version__)
from .errors import (
    CollapseWarning,
    ConvergenceWarning,
    DataError,
    DataWarning,
    NumericalError,
    OverconfidenceWarning,
)

if TYPE_CHECKING:  # what the lazy names below resolve to (for type checkers and the API docs)
    from .data import (
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
    from .models import (
        GPPL,
        SCDC,
        BayesSCDC,
        BradleyTerry,
        CollabGP,
        CrowdBTGP,
        CrowdGPPL,
        DPMCommunities,
        GPPLPerUser,
    )
    from .zoo import ZOO, fit, load


_LAZY = {
    "PairwiseData": ".data", "simulate_collab": ".data", "simulate_crowd": ".data",
    "simulate_gppl": ".data", "split_each_user": ".data", "split_pairs": ".data", "split_users": ".data",
    "GPPL": ".models", "BradleyTerry": ".models", "CollabGP": ".models", "CrowdBTGP": ".models",
    "CrowdGPPL": ".models", "GPPLPerUser": ".models", "DPMCommunities": ".models", "SCDC": ".models",
    "BayesSCDC": ".models",
    "LinkData": ".data", "simulate_links": ".data", "digits_links": ".data",
    "ZOO": ".zoo", "fit": ".zoo", "load": ".zoo",
}


_SUBPACKAGES = ("active", "cli", "cluster_metrics", "comparisons", "core", "data", "diagnostics", "gp",
                "inference", "metrics", "models", "zoo")


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crowdzoo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def report(posterior, path, **kwargs):
    """Write a posterior diagnostic report (HTML or Markdown by the suffix of ``path``); see
    :func:`crowdzoo.diagnostics.report.report` for the arguments. Returns the
    :class:`~crowdzoo.diagnostics.report.Report` (its ``checks`` and overall ``verdict``)."""
    from .diagnostics.report import report as _report

    return _report(posterior, path, **kwargs)


__all__ = ["PairwiseData", "simulate_gppl", "simulate_crowd", "split_pairs", "split_users", "DataError",
           "NumericalError", "ConvergenceWarning", "CollapseWarning", "DataWarning", "OverconfidenceWarning",
           "fit", "load",
           "GPPL", "CrowdGPPL", "GPPLPerUser", "CrowdBTGP", "CollabGP", "BradleyTerry", "ZOO",
           "simulate_collab", "split_each_user", "report", "DPMCommunities", "SCDC", "BayesSCDC", "LinkData",
           "simulate_links", "digits_links"]
