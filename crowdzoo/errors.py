"""Errors crowdzoo raises on purpose: bad input and numerical failure; and how a value is shown in
their messages. The lowest module of the package: it imports nothing of crowdzoo."""


class DataError(ValueError):
    """Input data failed validation. The message names the argument/column, the row and the problem.

    The fields say the same for callers that speak another language than Python's (the command line
    builds its own message from them, naming its flags and the user's columns): ``arg``, the API
    argument at fault (a column's argument, such as ``"y"``, for a bad value in that column; two
    names joined by ", " when the fault is between them); ``row``, the row (position) of the first
    offending value; ``ids``, the offending ids where there are several; ``problem``, what is wrong,
    in words that name no Python argument, without the argument and the row, and without advice in
    Python's terms. ``problem`` defaults to the message less its leading ``"arg: "``, for messages
    that hold nothing else."""

    def __init__(self, message: str, *, arg: str | None = None, row: int | None = None, ids=None,
                 problem: str | None = None):
        super().__init__(message)
        if problem is None and arg is not None and message.startswith(f"{arg}: "):
            problem = message[len(arg) + 2:]
        self.arg, self.row, self.ids, self.problem = arg, row, ids, problem


class NumericalError(RuntimeError):
    """A numerical failure (indefinite matrix, NaN bound) with advice on what to try."""


class DistributedError(RuntimeError):
    """A collective operation across ranks failed: another rank stopped, or did not answer in time."""


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped before its convergence rule was met, or had to shrink its steps;
    the message says which setting to change."""


class OverconfidenceWarning(UserWarning):
    """A fit predicts with far more certainty than its data support: a refit without some of the labels
    scored them worse than a coin (:mod:`crowdzoo.diagnostics.confidence`); the message says what to try."""


class DataWarning(UserWarning):
    """Input data that is valid but will likely give a poor or misleading fit (a constant or
    duplicated feature column, items that share a feature vector); the message names the columns or
    ids and says what to change."""


class CollapseWarning(UserWarning):
    """A clustering fit ended with fewer clusters in use than it was given (clusters emptied or merged), or
    with a bound that fell well below its best during the fit; the message says what to try."""


def _show(x) -> str:
    """repr of a value as the user wrote it (numpy scalars shown as plain Python values), for an error
    message."""
    import numpy as np  # here, not at the top: ``import crowdzoo`` reads this module and stays light

    return repr(x.item() if isinstance(x, np.generic) else x)
