"""crowdzoo: a Pyro model zoo of Bayesian models of what crowds say about pairs of things."""
from .data import (
                   PairwiseData,
                   simulate_collab,
                   simulate_crowd,
                   simulate_gppl,
                   split_each_user,
                   split_pairs,
                   split_users,
)
from .errors import DataError, NumericalError
from .models import GPPL, BradleyTerry, CollabGP, CrowdBTGP, CrowdGPPL, GPPLPerUser
from .zoo import ZOO, fit, load

__version__ = "0.1.0"


def report(posterior, path, **kwargs):
    """Write a posterior diagnostic report (HTML or Markdown by the suffix of ``path``); see
    :func:`crowdzoo.diagnostics.report.report` for the arguments. Returns the
    :class:`~crowdzoo.diagnostics.report.Report` (its ``checks`` and overall ``verdict``)."""
    from .diagnostics.report import report as _report

    return _report(posterior, path, **kwargs)


__all__ = ["PairwiseData", "simulate_gppl", "simulate_crowd", "split_pairs", "split_users", "DataError",
           "NumericalError", "fit", "load", "GPPL", "CrowdGPPL", "GPPLPerUser", "CrowdBTGP",
           "CollabGP", "BradleyTerry", "ZOO", "simulate_collab", "split_each_user", "report"]
