"""Small pieces every route shares: tensors from data, progress bars, NaN checks."""
from __future__ import annotations

import sys

import torch
from tqdm.auto import tqdm

from ..errors import NumericalError
from ..linalg import DTYPE


def label_tensors(data):
    """(a, b, y) of a PairwiseData as torch tensors (long, long, float64), sharing memory with
    the data's own arrays when their dtypes allow (the labels are held once, not copied)."""
    def view(x, dtype):
        t = torch.from_numpy(x) if x.flags.writeable else torch.tensor(x)
        return t.to(dtype)

    return view(data.a, torch.long), view(data.b, torch.long), view(data.y, DTYPE)


def progress(total: int, desc: str, enabled: bool | None):
    """A tqdm bar; shown by default only when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def check_finite(value: float, what: str, step: int, advice: str) -> None:
    if value != value or value in (float("inf"), float("-inf")):
        raise NumericalError(f"{what} became {value} at iteration {step}. Try: {advice}")
