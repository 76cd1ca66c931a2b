"""UKPConvArgCrowdSample (Habernal & Gurevych 2016; Simpson & Gurevych 2018): crowd judgements of
which of two arguments is more convincing, 32 folds (16 topics × 2 stances). CC-BY 4.0; the
format is in ../shared/data/ukpconvarg/README.md. Read from a path; nothing is downloaded.

Item features are computed from the argument texts by TF-IDF (word 1–2-grams, sublinear tf) and
a truncated SVD to ``n_features`` dimensions (scikit-learn; offline, deterministic for a seed),
fitted on the texts of all folds — unsupervised and label-free, like the paper's linguistic and
GloVe features, which were also computed for every argument. The paper's 32k-dimensional features
are not in the data set, so numbers differ from Table 3.

Labels: ``a1`` (the first argument is more convincing) → y = 1, ``a2`` → y = 0; ``equal`` labels
are dropped and counted (the zoo's likelihood is for strict preferences).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError

CROWD = "UKPConvArgCrowdSample-new-CSV"
GOLD_PAIRS = "UKPConvArgAll-new-CSV"
GOLD_RANKS = "UKPConvArg1-Ranking-CSV"
WORKER_RANKS = "UKPConvArg1-crowdsample-ranking-CSV"
LABEL = {"a1": 1.0, "a2": 0.0}


@dataclass(frozen=True)
class UKPConvArg:
    """``crowd``: one row per crowd label (fold, a, b, worker, y); ``gold``: gold pairs (fold, a, b,
    y); ``scores``: gold convincingness of each argument (fold, id, score; higher is more
    convincing, see ``_score_sign``); ``worker_scores``: each worker's score of each argument they
    judged (fold, id, worker, score; oriented the same way against their own labels); ``texts``: argument
    text by id; ``folds``: the 32 fold names; ``n_equal``: dropped ``equal`` labels (crowd, gold)."""

    crowd: pd.DataFrame
    gold: pd.DataFrame
    scores: pd.DataFrame
    texts: pd.Series
    worker_scores: pd.DataFrame
    folds: list
    n_equal: tuple


def _read_pairs(path: Path, fold: str) -> tuple[pd.DataFrame, dict, int]:
    df = pd.read_csv(path, sep="\t", header=None, skiprows=1, quoting=csv.QUOTE_NONE, dtype=str,
                     names=["id", "worker", "label", "a1", "a2"], keep_default_na=False)
    bad = ~df["id"].str.contains("_", regex=False)
    if bad.any():
        r = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path}: row {r + 2}: column '#id' should be 'argA_argB', got {df['id'].iloc[r]!r}",
                        arg="path")
    ids = df["id"].str.split("_", n=1, expand=True)
    bad = ~df["label"].isin(["a1", "a2", "equal"])
    if bad.any():
        r = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path}: row {r + 2}: column 'label' must be a1, a2 or equal, "
                        f"got {df['label'].iloc[r]!r}", arg="path")
    texts = dict(zip(ids[0], df["a1"], strict=True)) | dict(zip(ids[1], df["a2"], strict=True))
    keep = df["label"] != "equal"
    out = pd.DataFrame({"fold": fold, "a": ids[0][keep].to_numpy(), "b": ids[1][keep].to_numpy(),
                        "worker": df["worker"][keep].to_numpy(),
                        "y": df["label"][keep].map(LABEL).to_numpy()})
    return out, texts, int((~keep).sum())


def load_ukpconvarg(data_dir) -> UKPConvArg:
    """Read the crowd labels, gold pairs and gold scores of all 32 folds from ``data_dir`` (the
    folder with the four ``UKPConvArg*`` sub-folders)."""
    root = Path(data_dir)
    crowd_dir = root / CROWD
    if not crowd_dir.is_dir():
        raise DataError(f"data_dir: {crowd_dir} not found; pass the folder that holds {CROWD}/, "
                        f"{GOLD_PAIRS}/ and {GOLD_RANKS}/ (../shared/data/ukpconvarg in this project)",
                        arg="data_dir")
    folds = sorted(p.stem for p in crowd_dir.glob("*.csv"))
    if not folds:
        raise DataError(f"data_dir: no .csv files in {crowd_dir}", arg="data_dir")
    crowd, gold, scores, wscores, texts, eq = [], [], [], [], {}, [0, 0]
    for fold in folds:
        c, t, n = _read_pairs(crowd_dir / f"{fold}.csv", fold)
        crowd.append(c)
        texts |= t
        eq[0] += n
        gp = root / GOLD_PAIRS / f"{fold}.csv"
        if gp.is_file():
            g, t, n = _read_pairs(gp, fold)
            gold.append(g.drop(columns="worker"))
            texts |= t
            eq[1] += n
        gr = root / GOLD_RANKS / f"{fold}.csv"
        if gr.is_file():
            r = pd.read_csv(gr, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
            scores.append(pd.DataFrame({"fold": fold, "id": r.iloc[:, 0].to_numpy(),
                                        "score": pd.to_numeric(r.iloc[:, 1], errors="coerce").to_numpy()}))
        wr = root / WORKER_RANKS / f"{fold}.csv"
        if wr.is_file():
            wscores.append(_read_worker_scores(wr, fold))
    cat = lambda x: pd.concat(x, ignore_index=True) if x else pd.DataFrame()  # noqa: E731
    crowd, gold, scores, wscores = cat(crowd), cat(gold), cat(scores), cat(wscores)
    if len(gold) and len(scores):
        scores["score"] *= _score_sign(gold, scores)
    if len(wscores):
        wscores["score"] *= _score_sign(crowd, wscores, by="worker")
    return UKPConvArg(crowd=crowd, gold=gold, scores=scores, worker_scores=wscores,
                      texts=pd.Series(texts, name="text").rename_axis("id").sort_index(), folds=folds,
                      n_equal=tuple(eq))


def _read_worker_scores(path: Path, fold: str) -> pd.DataFrame:
    """Per-worker scores: '#id, rank, argument, turkID', split on newlines only (the texts hold
    other line-break characters that a CSV reader would split on)."""
    rows = []
    for r, line in enumerate(path.read_text(encoding="utf-8").split("\n")[1:], start=2):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 4:
            raise DataError(f"{path}: row {r}: expected 4 tab-separated columns (#id, rank, argument, "
                            f"turkID), found {len(f)}", arg="path")
        try:
            rows.append((f[0], float(f[1]), f[3].strip()))
        except ValueError:
            raise DataError(f"{path}: row {r}: column 'rank' is not a number: {f[1]!r}", arg="path") from None
    ids, score, worker = zip(*rows, strict=True) if rows else ((), (), ())
    return pd.DataFrame({"fold": fold, "id": ids, "worker": worker, "score": score})


def _score_sign(pairs: pd.DataFrame, scores: pd.DataFrame, by: str | None = None) -> float:
    """+1 if the pairs' winners mostly have the higher score, else −1 (scores matched by id, and by
    ``by`` — the worker — when given). In the published files the winner of 87 % of the gold
    pairs has the *lower* ``rank`` value, so the loader negates it: scores are then higher for
    more convincing arguments, as utilities are."""
    keys = ["id"] + ([by] if by else [])
    s = scores.drop_duplicates(keys).set_index(keys)["score"]
    win = np.where(pairs.y == 1, pairs.a, pairs.b)
    lose = np.where(pairs.y == 1, pairs.b, pairs.a)
    if by:
        win = pd.MultiIndex.from_arrays([win, pairs[by]])
        lose = pd.MultiIndex.from_arrays([lose, pairs[by]])
    sw, sl = s.reindex(win).to_numpy(), s.reindex(lose).to_numpy()
    ok = np.isfinite(sw) & np.isfinite(sl) & (sw != sl)
    return 1.0 if np.mean(sw[ok] > sl[ok]) >= 0.5 else -1.0


def text_features(texts: pd.Series, n_features: int = 64, seed: int = 0) -> pd.DataFrame:
    """TF-IDF (word 1–2-grams, sublinear tf, min_df 2) → truncated SVD to ``n_features``
    dimensions, rows scaled to unit length. Returns a DataFrame indexed like ``texts``."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    clean = texts.str.replace("<br/>", " ", regex=False).str.strip('"')
    tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit_transform(clean)
    Z = TruncatedSVD(n_components=n_features, random_state=seed).fit_transform(tfidf)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True).clip(1e-12)
    return pd.DataFrame(Z, index=texts.index, columns=[f"svd{k}" for k in range(n_features)])
