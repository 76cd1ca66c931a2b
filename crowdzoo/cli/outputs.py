"""The tables a pairs fit writes beside its posterior: utilities.csv, utilities_personal.csv and
predictions.csv (the rows of ``--pairs`` in their order, with their own columns, plus ``p``, and
``p_tie`` for a fit that models ties), with
the training and held-out scores, each written in pieces so that 10⁶ labels cost no more memory
than the fit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError

#: the largest items × users table fit writes as utilities_personal.csv (about 25 MB of text)
PERSONAL_CELLS = 10**6


#: rows of --pairs predicted and written at a time (a 10⁶-row file is scored in pieces)
CHUNK = 100_000


SPLITS = ("train", "test", "dropped")


def _fresh(name: str, columns) -> str:
    """``name``, or ``name_crowdzoo`` where the user's file already has a column ``name``."""
    return name if name not in columns else f"{name}_crowdzoo"


def _predict(post, a, b, users=None) -> np.ndarray:
    """(n, 3): P(a ≻ b), P(tie), P(b ≻ a) over ``CHUNK`` pairs at a time: ``post.predict_proba`` (and no
    tie), or ``post.predict_outcomes`` for a fit that models ties."""
    out = np.empty((len(a), 3))
    for lo in range(0, len(a), CHUNK):
        part = slice(lo, lo + CHUNK)
        kw = {} if users is None else {"users": users[part]}
        if getattr(post, "tau", None) is not None:
            out[part] = post.predict_outcomes(a[part], b[part], **kw).to_numpy()
        else:
            p = post.predict_proba(a[part], b[part], **kw)
            out[part] = np.column_stack([p, np.zeros_like(p), 1.0 - p])
    return out


def _row_labels(data, n_rows: int):
    """For each row of --pairs: its number of labels in ``data`` (1: decided, or a tie under --ties
    model; 2: a tie under --ties half; 0: a tie left out by --ties drop) and its first label (-1 where
    none), which has the row's own order of the two items (``data.source_rows`` maps labels to rows;
    a row's labels are consecutive; a row of counts holds up to four)."""
    src = data.source_rows
    count = np.bincount(src, minlength=n_rows)
    first = np.full(n_rows, -1)
    start = np.r_[True, src[1:] != src[:-1]]
    first[src[start]] = np.flatnonzero(start)
    return count, first


def _row_p(post, data, pairs, first, args, crowd) -> np.ndarray:
    """(n_rows, 3): P(the row's first item ≻ its second), P(tie), P(second ≻ first) for each row of
    --pairs (:func:`_predict`), by the row's user for crowd models: from the row's first label, or, for
    a tie left out (--ties drop), from its ids where the fit knows them (NaN where it does not)."""
    p = np.full((len(first), 3), np.nan)
    has = np.flatnonzero(first >= 0)
    lab = first[has]
    users = data.user_ids[data.users[lab]] if crowd else None
    p[has] = _predict(post, data.item_ids[data.a[lab]], data.item_ids[data.b[lab]], users)
    left = np.flatnonzero(first < 0)
    if left.size:
        a, b = pairs[args.a_col].to_numpy()[left], pairs[args.b_col].to_numpy()[left]
        known = ((pd.Index(data.item_ids).get_indexer(a) >= 0) & (pd.Index(data.item_ids).get_indexer(b) >= 0)
                 & (a != b))
        users = pairs[_user_col(args)].to_numpy()[left] if crowd else None
        if crowd:
            known &= pd.Index(data.user_ids).get_indexer(users) >= 0
        if known.any():
            p[left[known]] = _predict(post, a[known], b[known], users[known] if crowd else None)
    return p


def _scores(y, p, w=None) -> dict:
    """Accuracy and log loss (CEE) of the decided labels, each by its weight ``w``, or None for both when
    there are none."""
    from ..metrics import accuracy, cross_entropy

    if len(y) == 0:
        return {"accuracy": None, "cee": None}
    return {"accuracy": accuracy(y, p, weights=w), "cee": cross_entropy(y, p, weights=w)}


def _three_way_cee(y, probs, w=None) -> float | None:
    """Mean −log P(observed outcome) over labels y ∈ {0, ½, 1} with probabilities (n, 3) of
    (a ≻ b, tie, b ≻ a), each by its weight ``w``; None for no labels."""
    if len(y) == 0:
        return None
    k = np.rint(2.0 * (1.0 - np.asarray(y))).astype(np.int64)  # a ≻ b: column 0, a tie 1, b ≻ a 2
    return float(-np.average(np.log(np.clip(probs[np.arange(len(y)), k], 1e-15, 1.0)), weights=w))


def _write_predictions(path: Path, pairs: pd.DataFrame, data, test, post, args, crowd) -> dict:
    """predictions.csv: the rows of --pairs in their order, with their own columns and separator, plus
    ``p`` = P(first item ≻ second item) and, with a held-out share, ``split`` (train, test, or dropped:
    a tie left out by --ties drop). A fit that models ties (--ties model) writes ``p`` = P(first ≻
    second | not a tie) and ``p_tie`` = P(tie). Returns the metrics: accuracy and log loss over the
    decided labels of each split, each label counted by its weight (a row of counts: its wins and
    losses; a tie is neither a hit nor a miss, and the halves of a tie under --ties half are left out),
    with the rows that hold them (``scored_rows``) and, for weighted labels, their weight in all
    (``scored_weight``); for a fit that models ties the three-way log loss over every label
    (``cee_3way``, ties included). A row's labels other than the halves of a tie are in the row's own
    order, so each is scored by the row's probabilities. ``data``: every label read from ``pairs``;
    ``test``: the held-out ones (or None)."""
    n = len(pairs)
    count, first = _row_labels(data, n)
    probs = _row_p(post, data, pairs, first, args, crowd)
    ties = getattr(post, "tau", None) is not None
    p = probs[:, 0] / (probs[:, 0] + probs[:, 2]) if ties else probs[:, 0]
    code = np.zeros(n, dtype=np.int8)
    if test is not None:
        code[count == 0] = SPLITS.index("dropped")
        code[test.source_rows] = SPLITS.index("test")
    row, y, w = data.source_rows, data.y, data.weights  # per label (w None: every label 1)
    labelled = np.ones(data.n_pairs, dtype=bool) if data.tie_halves is None else ~data.tie_halves
    decided = labelled & (y != 0.5)
    metrics = {"n_rows": n, "n_ties": int(n - np.unique(row[decided]).size)}  # rows without a decided label
    for k, split in enumerate(SPLITS[:1 if test is None else 2]):
        lab = decided & (code[row] == k)
        metrics[f"{split}_scored_rows"] = int(np.unique(row[lab]).size)
        if w is not None:
            metrics[f"{split}_scored_weight"] = float(w[lab].sum())
        metrics.update({f"{split}_{m}": v for m, v in _scores(y[lab], p[row[lab]], _pick(w, lab)).items()})
        if ties:
            lab = labelled & (code[row] == k)
            metrics[f"{split}_cee_3way"] = _three_way_cee(y[lab], probs[row[lab]], _pick(w, lab))
    extra = {_fresh("p", pairs.columns): p}
    if ties:
        extra[_fresh("p_tie", pairs.columns)] = probs[:, 1]
    if test is not None:
        extra[_fresh("split", pairs.columns)] = pd.Categorical.from_codes(code, SPLITS)
    with open(path, "w", newline="") as f:
        for lo in range(0, n, CHUNK):
            part = pairs.iloc[lo:lo + CHUNK].assign(**{k: v[lo:lo + CHUNK] for k, v in extra.items()})
            part.to_csv(f, sep=args.sep, index=False, header=lo == 0)
    return metrics


def _pick(w, rows):
    return None if w is None else w[rows]


def _user_col(args) -> str:
    return getattr(args, "user_col", None) or "user"


def _write_personal(path: Path, post, train) -> bool:
    """utilities_personal.csv (items × users) where the model has personal utilities and the table
    holds at most :data:`PERSONAL_CELLS` numbers; says on stderr why it is left out when it is larger."""
    if train.n_items * len(train.user_ids) > PERSONAL_CELLS:
        print(f"crowdzoo: utilities_personal.csv not written: {train.n_items:,} items × "
              f"{len(train.user_ids):,} users is more than {PERSONAL_CELLS:,} numbers; predict the pairs "
              "you need with `crowdzoo predict`, or read post.utilities(users=[...]) from Python",
              file=sys.stderr)
        return False
    try:
        personal, _ = post.utilities(users=train.user_ids)
    except (TypeError, NotImplementedError, DataError):  # no personal utilities (collabGP)
        return False
    if not isinstance(personal, pd.DataFrame):
        return False
    personal.to_csv(path)
    return True


def write_utilities(out: Path, post, train, outputs: set, crowd: bool, seed: int, need_mean: bool):
    """utilities.csv (each item's posterior mean and variance, best first; for a model without a utility
    per item, its mean preferences) and, for crowd models, utilities_personal.csv, as ``outputs`` asks.
    Returns (the mean utilities or None, the files written); ``need_mean``: read them even when
    utilities.csv is not asked for."""
    mean, written = None, []
    if "utilities" in outputs or need_mean:
        try:
            mean, var = post.utilities()
        except (NotImplementedError, DataError):  # collabGP has no utility per item
            pass
    if mean is not None and "utilities" in outputs:
        table = pd.DataFrame({"item": mean.index, "mean": mean.values, "variance": var.values})
        table.sort_values("mean", ascending=False).to_csv(out / "utilities.csv", index=False)
        written.append("utilities.csv")
    elif hasattr(post, "mean_preferences") and "utilities" in outputs:  # no utility per item
        post.mean_preferences(seed=seed).to_csv(out / "utilities.csv", index=False)
        written.append("utilities.csv")
    if "personal" in outputs and crowd and train.user_ids is not None:
        if _write_personal(out / "utilities_personal.csv", post, train):
            written.append("utilities_personal.csv")
    return mean, written
