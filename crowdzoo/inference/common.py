"""Small pieces every route shares: progress bars and NaN checks."""
from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm

from ..errors import NumericalError


class LogLines:
    """The progress bar's stand-in where stderr is a log file, not a terminal: one line at most every
    ``every`` seconds (``desc: n / total, postfix, elapsed``), so a long fit says it is alive."""

    shown = True

    def __init__(self, total: int, desc: str, every: float = 30.0):
        self.total, self.desc, self.every, self.n, self.post = total, desc, every, 0, ""
        self.t0 = self.last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            print(f"crowdzoo: {self.desc}: {self.n} / {self.total}{', ' + self.post if self.post else ''}, "
                  f"{now - self.t0:.0f} s", file=sys.stderr, flush=True)

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.post = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in items.items())

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def progress(total: int, desc: str, enabled: bool | str | None):
    """A tqdm bar; shown by default only when stderr is a terminal (``bar.shown`` says whether);
    ``enabled="log"``: a line every 30 s instead (:class:`LogLines`), for stderr written to a file."""
    if enabled == "log":
        return LogLines(total, desc)
    if enabled is None:
        enabled = sys.stderr.isatty()
    bar = tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
    bar.shown = bool(enabled)
    return bar


def check_finite(value: float, what: str, step: int, advice: str, settings=()) -> None:
    """A NumericalError when ``value`` is NaN or infinite; ``advice`` names the fit settings
    ``settings`` by placeholders (:class:`~crowdzoo.errors.Advises`)."""
    if value != value or value in (float("inf"), float("-inf")):
        raise NumericalError(f"{what} became {value} at iteration {step}. Try: {advice}", settings=settings)


def summary(bar, line: str) -> None:
    """End a shown progress bar with one summary line on stderr (nothing when the bar is hidden)."""
    if getattr(bar, "shown", False):
        print(line, file=sys.stderr)
