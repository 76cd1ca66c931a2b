"""A comparison as data: settings → rows, repeated over seeds, summarised as mean ± sd.

    from crowdzoo.comparisons import Comparison

    def rows(guide, seed, quick=False):              # one setting on one repeat → a row (or rows)
        post = cz.fit(cz.GPPL(), data_of(seed), method="svi", guide=guide, seed=seed)
        return {"sd ratio": ..., "seconds": ...}

    my_guides = Comparison(rows, settings={"diagonal": AutoNormal, "full": AutoMultivariateNormal},
                           column="guide")
    result = crowdzoo.comparisons.run(my_guides, repeats=5)   # or: crowdzoo compare mymodule:my_guides
    result.markdown, result.latex, result.frame       # the page's table, a paper's, the tidy rows

Every comparison of the zoo is one (:func:`crowdzoo.comparisons.as_comparison` wraps the zoo's
modules, whose ``run_one`` makes a repeat's rows for all their settings at once and whose
``summarise`` writes their page), and ``crowdzoo compare module:attribute`` runs one's own, found by
its import path (:func:`load`).
"""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from ..errors import DataError
from .markdown import latex_tables, markdown_table


@dataclass(frozen=True)
class Comparison:
    """A comparison: ``rows`` measured under each of ``settings``, on repeats 0, 1, ….

    ``rows(setting, seed, quick=False)`` → a row (a dict of measures), rows (a list of dicts) or a
    DataFrame: what one setting gives on repeat ``seed`` (``quick``: a smoke run's smaller sizes; it is
    passed only where ``rows`` takes it). ``settings``: label → setting (a guide, a prior, a route's
    keyword arguments …); each row gets the label in column ``column`` and the repeat in ``seed``.
    ``settings=None``: ``rows(seed, quick=False, **opts)`` gives a repeat's whole frame at once (how
    the zoo's comparisons are wrapped).

    ``summary(frame)`` → Markdown: the page; default :meth:`summarise`'s mean ± sd over the repeats.
    ``figure(frame, path)``: a figure written beside the page (optional). ``needs_data_dir``: ``rows``
    takes ``data_dir=`` (where data the zoo cannot ship lies). ``digits``: decimals in the table."""

    rows: Callable[..., Any]
    settings: Mapping[str, Any] | None = None
    column: str = "setting"
    summary: Callable[[pd.DataFrame], str] | None = None
    figure: Callable[[pd.DataFrame, Any], None] | None = None
    needs_data_dir: bool = False
    digits: int = 3

    def __post_init__(self):
        if not callable(self.rows):
            raise DataError(f"rows: expected a function (setting, seed, quick) → rows, got "
                            f"{type(self.rows).__name__}", arg="rows")
        if self.settings is not None and not isinstance(self.settings, Mapping):
            raise DataError("settings: expected a mapping label → setting (e.g. {'diagonal': AutoNormal}), "
                            f"got {type(self.settings).__name__}", arg="settings")
        if self.settings is not None and not self.settings:
            raise DataError("settings: empty; give at least one label → setting", arg="settings")

    @classmethod
    def of(cls, obj) -> Comparison:
        """``obj`` as a Comparison: itself if it is one; else an object with ``run_one(seed,
        quick=...)`` → DataFrame and ``summarise(df)`` → Markdown (a zoo comparison's module, or one's
        own written that way), whose ``figure`` and ``needs_data_dir`` are kept."""
        if isinstance(obj, Comparison):
            return obj
        missing = [m for m in ("run_one", "summarise") if not callable(getattr(obj, m, None))]
        if missing:
            raise DataError(f"comparison: {type(obj).__name__} object has no {' or '.join(missing)}; a "
                            "comparison is a crowdzoo.comparisons.Comparison, or an object with "
                            "run_one(seed, quick=...) returning a tidy DataFrame and summarise(df) "
                            "returning Markdown")
        return cls(obj.run_one, summary=obj.summarise, figure=getattr(obj, "figure", None),
                   needs_data_dir=bool(getattr(obj, "needs_data_dir", False)))

    def run_one(self, seed: int, quick: bool = False, **opts) -> pd.DataFrame:
        """Repeat ``seed``: every setting's rows, in the order of ``settings``."""
        if self.settings is None:
            return self.rows(seed, quick=quick, **opts)
        kw = {**({"quick": quick} if _takes(self.rows, "quick") else {}), **opts}
        frames = []
        for label, setting in self.settings.items():
            frame = _frame(self.rows(setting, seed, **kw), label)
            if self.column not in frame:
                frame.insert(0, self.column, str(label))
            if "seed" not in frame:
                frame.insert(0, "seed", seed)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)

    def table(self, df: pd.DataFrame) -> pd.DataFrame:
        """The summary table: one row per distinct value of the label columns (every column that is
        not a number, in order), and for each measure (every numeric column but ``seed``) its mean
        over the repeats, ``mean ± sd`` (sd with n − 1) where a row has more than one value."""
        return mean_sd(df, self.digits)

    def summarise(self, df: pd.DataFrame) -> str:
        """The page: ``summary(df)`` if given, else :meth:`table` as Markdown, measures right-aligned."""
        if self.summary is not None:
            return self.summary(df)
        table = self.table(df)
        n = df["seed"].nunique() if "seed" in df else 1
        head = f"Mean ± sd over {n} repeats.\n\n" if n > 1 else ""
        return head + markdown_table(table, right=set(table.columns) - set(label_columns(df)))


class Result(NamedTuple):
    """What a comparison's run gives: ``frame``, the tidy rows of every repeat, and ``markdown``, the
    page (it unpacks as the pair ``frame, markdown``)."""

    frame: pd.DataFrame
    markdown: str

    @property
    def latex(self) -> str:
        """The page's tables as LaTeX tabulars (:func:`~.markdown.latex_tables`), for a paper."""
        return latex_tables(self.markdown)

    def csv(self) -> str:
        """The tidy rows as CSV text."""
        return self.frame.to_csv(index=False)

    def write(self, out, made_by: str | None = None) -> list[Path]:
        """Write the page to ``out`` (Markdown; ``made_by``, the command that made it, on its first
        line), the tidy rows beside it as CSV and the tables as LaTeX (``.csv``, ``.tex``); returns the
        paths written."""
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        head = f"Made by `{made_by}`.\n\n" if made_by else ""
        out.write_text(f"{head}{self.markdown}\n")
        self.frame.to_csv(out.with_suffix(".csv"), index=False)
        written = [out, out.with_suffix(".csv")]
        if tex := self.latex:
            out.with_suffix(".tex").write_text(tex)
            written.append(out.with_suffix(".tex"))
        return written


def label_columns(df: pd.DataFrame) -> list[str]:
    """The columns that label rows: every column that is not numeric (booleans are measures: their
    mean is a share)."""
    return [c for c in df.columns if c != "seed" and not pd.api.types.is_numeric_dtype(df[c])]


def mean_sd(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Mean ± sd over the repeats of every numeric column of ``df`` (but ``seed``), by the label
    columns (:func:`label_columns`), as text: ``mean ± sd`` (the sample sd, n − 1) where a label's
    column holds more than one value, ``mean`` where it holds one, ``–`` where none."""
    keys = label_columns(df)
    measures = [c for c in df.columns if c != "seed" and c not in keys]
    if not keys:
        df, keys = df.assign(**{"": ""}), [""]
    g = df.groupby(keys, sort=False, dropna=False)[measures]
    mean, sd, n = g.mean(), g.std(ddof=1), g.count()
    text = pd.DataFrame(index=mean.index, columns=measures, dtype=object)
    for c in measures:
        m, s, k = mean[c].to_numpy(float), sd[c].to_numpy(float), n[c].to_numpy()
        text[c] = [("–" if ki == 0 else f"{mi:.{digits}f}" + (f" ± {si:.{digits}f}" if ki > 1 else ""))
                   for mi, si, ki in zip(m, s, k)]
    out = text.reset_index()
    return out.drop(columns=[""]) if "" in out and keys == [""] else out


def load(path: str):
    """The object at import path ``module:attribute`` (the attribute may be dotted,
    ``module:holder.attribute``), or a DataError naming the path and what failed."""
    module, sep, attr = str(path).partition(":")
    if not sep or not module or not attr:
        raise DataError(f"comparison: {path!r} is not an import path 'package.module:attribute'",
                        arg="comparison")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise DataError(f"comparison: cannot load {path!r}: {err}", arg="comparison") from None
    return obj


def _takes(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _frame(out, label) -> pd.DataFrame:
    """A setting's rows as a DataFrame: a dict is one row, a list of dicts or a DataFrame several."""
    if isinstance(out, pd.DataFrame):
        return out.reset_index(drop=True).copy()
    if isinstance(out, Mapping):
        return pd.DataFrame([dict(out)])
    if isinstance(out, (list, tuple)) and all(isinstance(r, Mapping) for r in out):
        return pd.DataFrame([dict(r) for r in out])
    raise DataError(f"rows: setting {label!r} gave a {type(out).__name__}; rows must return a dict (one "
                    "row), a list of dicts or a DataFrame", arg="rows")


__all__ = ["Comparison", "Result", "load", "mean_sd", "label_columns"]
