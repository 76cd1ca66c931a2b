"""The diagnostic report on real crowd data: UKPConvArgCrowdSample, one held-out fold (§5.3).

Repeat r trains on the crowd labels of every fold but fold r, as ``ukpconvarg-consensus`` does,
fits GPPL (pooled), crowdGPPL, GPPL-per-user and crowdBT–GP with the same settings, and writes each
fit's :func:`crowdzoo.report` — held-out calibration on the fold's gold pairs — to
``runs/ukpconvarg-diagnostics/<fold>/<method>.html`` (or under ``$CROWDZOO_REPORT_DIR``). The
table gives each check's verdict and value per method, the CSV beside it also each check's detail:
how the report's thresholds read real labels, where simulated data cannot say. ``--quick``:
C = 10, M = 100, at most 300 iterations.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .ukpconvarg import DATA_DIR, _load, _settings, methods, training_data

needs_data_dir = True  # optional here: the project's copy of the data is the default


def _data(u, F, fold):
    """The training labels (every other fold) and the held-out fold's gold pairs."""
    import crowdzoo as cz

    item = pd.Index(F.index.to_numpy())
    gold = u.gold[u.gold.fold == fold]
    test = cz.PairwiseData.from_arrays(item.get_indexer(gold.a), item.get_indexer(gold.b), gold.y.to_numpy(),
                                       F.to_numpy(), item_ids=item.to_numpy())
    return training_data(u, F, fold), test


def run_one(seed: int, quick: bool = False, data_dir=None) -> pd.DataFrame:
    import crowdzoo as cz

    u, F = _load(str(data_dir or DATA_DIR), 64)
    fold = u.folds[seed % len(u.folds)]
    data, test = _data(u, F, fold)
    out = Path(os.environ.get("CROWDZOO_REPORT_DIR", "runs")) / "ukpconvarg-diagnostics" / str(fold)
    st = _settings(quick)
    fits = dict(methods(personal=False, quick=quick))
    fits["GPPL-per-user"] = (cz.GPPLPerUser(n_inducing=min(st["M"], 50), shape_s0=2.0, rate_s0=200.0,
                                            scaled_lengthscale=True), "natgrad", {"max_iter": st["max_iter"]})
    rows = []
    for method, (model, route, kw) in fits.items():
        post = cz.fit(model, data, method=route, seed=seed, progress_bar=False, **kw)
        name = method.replace("\\", "").replace(" ", "_")
        rep = cz.report(post, out / f"{name}.html", test=test,
                        title=f"{method} on UKPConvArg (fold {fold} held out)")
        rows += [{"seed": seed, "fold": fold, "method": method, "check": c.name, "verdict": c.verdict,
                  "value": c.value, "detail": c.detail, "report": str(rep.path)} for c in rep.checks]
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> str:
    """Checks (rows) × methods (columns): ``verdict (value)`` for one fold, or the count of each
    verdict over folds."""
    meths = list(dict.fromkeys(df["method"]))
    checks = list(dict.fromkeys(df["check"]))
    one = df["fold"].nunique() == 1
    lines = ["| check | " + " | ".join(meths) + " |", "|---|" + "---|" * len(meths)]
    for c in checks:
        cells = []
        for m in meths:
            g = df[(df["check"] == c) & (df["method"] == m)]
            if g.empty:
                cells.append("–")
            elif one:
                cells.append(f"**{g.verdict.iloc[0]}** {g.value.iloc[0]}")
            else:
                cells.append(", ".join(f"{k} {v}" for k, v in g.verdict.value_counts().items()))
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    folds = ", ".join(map(str, dict.fromkeys(df["fold"])))
    reports = sorted(set(Path(p).parent.as_posix() for p in df["report"]))
    return "\n".join(lines + ["", f"Held-out fold(s): {folds}. The HTML reports: {', '.join(reports)}."])
