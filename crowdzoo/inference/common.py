"""Small pieces every route shares: progress bars and NaN checks."""
from __future__ import annotations

import sys

from tqdm.auto import tqdm

from ..data.tensors import label_tensors  # noqa: F401  (re-exported for the routes)
from ..errors import NumericalError


def progress(total: int, desc: str, enabled: bool | None):
    """A tqdm bar; shown by default only when stderr is a terminal (``bar.shown`` says whether)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    bar = tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
    bar.shown = bool(enabled)
    return bar


def check_finite(value: float, what: str, step: int, advice: str) -> None:
    if value != value or value in (float("inf"), float("-inf")):
        raise NumericalError(f"{what} became {value} at iteration {step}. Try: {advice}")


def summary(bar, line: str) -> None:
    """End a shown progress bar with one summary line on stderr (nothing when the bar is hidden)."""
    if getattr(bar, "shown", False):
        print(line, file=sys.stderr)
