"""Active learning of preferences: BALD, maximum entropy and random queries (Houlsby et al. 2012).

BALD (main paper §4, Eq. 12; Eq. 13 its probit form) scores a candidate pair by the mutual information
between its label and the latent function, H[y | D] − E_g[H[y | g]]. With a Gaussian N(μ, σ²) for g at
the candidate (for collabGP, the moments of supplement a Eq. 12–13) and the approximation h[Φ(x)] ≈
exp(−x²/(π ln 2)) of supplement a §3 (Eq. 4; error below 3·10⁻³), both terms are closed-form (in bits):

    BALD(μ, σ²) = h[Φ(μ/√(σ² + 1))] − C/√(σ² + C²) · exp(−μ² / (2(σ² + C²))),   C² = π ln 2 / 2.

Maximum-entropy sampling (Sebastiani & Wynn 2000) keeps only the first term; random sampling
scores uniformly (the scores live in :mod:`crowdzoo.core.suggest`, which every posterior's
``suggest`` uses). :func:`next_queries` picks the best candidate per user; :func:`active_learning`
runs the paper's loop (§4.2): fit, score every user's pool, move each user's best pair into the
training set, refit, for ``n_queries`` rounds, recording the test error after each fit.
:func:`suggest_run` is ``post.suggest`` for a run folder written by ``crowdzoo fit``, in the run's
own column names.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .core.suggest import C2, STRATEGIES, bald_score, binary_entropy, check_strategy, entropy_score
from .errors import DataError


def query_scores(posterior, a, b, users, strategy: str = "bald", seed: int = 0, **kw) -> np.ndarray:
    """Score candidate pairs (a, b) for ``users`` under a fitted posterior (higher = ask first).
    Mixture posteriors (NUTS/SVI draws) are moment-matched to one Gaussian per candidate."""
    if check_strategy(strategy) == "thompson":
        raise DataError("strategy: 'thompson' scores only through post.suggest (it draws per batch)")
    n = np.size(a)
    if strategy == "random":
        return np.random.default_rng(seed).random(n)
    mean, var = posterior.latent_moments(a, b, users, **kw)
    w = posterior.weights[:, None]
    m = (w * mean).sum(0)
    v = (w * (var + mean * mean)).sum(0) - m * m
    score = bald_score(m, v) if strategy == "bald" else entropy_score(m, v)
    return score.numpy()


def next_queries(posterior, candidates: pd.DataFrame, strategy: str = "bald", per_user: int = 1,
                 seed: int = 0) -> pd.DataFrame:
    """The ``per_user`` best candidates of each user. ``candidates``: columns ``user``, ``a``,
    ``b`` (ids). Returns those rows (original index kept) with a ``score`` column."""
    missing = [c for c in ("user", "a", "b") if c not in candidates.columns]
    if missing:
        raise DataError(f"candidates: missing column(s) {missing}; need user, a, b")
    s = query_scores(posterior, candidates["a"].to_numpy(), candidates["b"].to_numpy(),
                     candidates["user"].to_numpy(), strategy, seed=seed)
    out = candidates.assign(score=s)
    # highest score first within each user (ties broken by a seeded shuffle)
    order = np.random.default_rng(seed).permutation(len(out))
    out = out.iloc[order].sort_values(["user", "score"], ascending=[True, False], kind="stable")
    return out.groupby("user", sort=False).head(per_user)


def active_learning(model, data, train, pool, test, strategy: str = "bald", n_queries: int = 10,
                    method: str = "ep", seed: int = 0, **fit_settings) -> pd.DataFrame:
    """The loop of §4.2: rows ``train``, ``pool``, ``test`` index ``data`` (e.g. from
    :func:`crowdzoo.split_each_user`; ``test`` may instead be a PairwiseData of its own). Each
    round fits ``model`` to the training rows, records the test error, then moves each user's best
    pool pair (by ``strategy``) into the training rows. Returns one row per round: queries made so
    far, test error, fit seconds, training size."""
    from .data import PairwiseData
    from .zoo import fit

    train, pool = np.asarray(train), np.asarray(pool)
    ids, uids = data.item_ids, data.user_ids
    te = test if isinstance(test, PairwiseData) else data.subset(test)
    rows = []
    for q in range(n_queries + 1):
        t0 = time.perf_counter()
        post = fit(model, data.subset(train), method=method, seed=seed, progress_bar=False, **fit_settings)
        secs = time.perf_counter() - t0
        p = post.predict_proba(ids[te.a], ids[te.b], users=uids[te.users])
        rows.append({"queries": q, "error": float(np.mean((p > 0.5) != (te.y > 0.5))), "seconds": secs,
                     "n_train": int(train.size), "strategy": strategy})
        if q == n_queries or pool.size == 0:
            break
        cand = pd.DataFrame({"user": uids[data.users[pool]], "a": ids[data.a[pool]], "b": ids[data.b[pool]]},
                            index=pool)
        chosen = next_queries(post, cand, strategy, seed=seed + q).index.to_numpy()
        train = np.sort(np.r_[train, chosen])
        pool = np.setdiff1d(pool, chosen)
    return pd.DataFrame(rows)


def _run_columns(run: dict, kind: str) -> tuple[str, str, str]:
    """The run's names for the columns a, b and user (the worker, for links and worker pairs)."""
    user = run.get("worker_col") if kind == "links" else run.get("user_col")
    return run.get("a_col", "a"), run.get("b_col", "b"), user or ("worker" if kind == "links" else "user")


def suggest_run(run_dir, n: int, users=None, candidates=None, strategy: str = "bald",
                seed: int = 0) -> pd.DataFrame:
    """``post.suggest`` for the run folder ``run_dir`` of ``crowdzoo fit`` (its posterior.pt, and its
    run.json for the column names): the next ``n`` queries as a DataFrame in the run's own column names
    (a, b and, for models that ask a particular user or worker, that column) with ``score``.
    ``candidates``: a DataFrame or a CSV path (the run's separator) with those columns, or None for
    every pair of the training items; ``users``: keep only these user (worker) ids."""
    from . import zoo
    from .core.io import load

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a folder: {run_dir}")
    if not (run_dir / "posterior.pt").is_file():
        raise DataError(f"run_dir: {run_dir} has no posterior.pt (write one with `crowdzoo fit ... --out "
                        f"{run_dir}`)")
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    kind = zoo.entry(run.get("model", "gppl")).data
    a_col, b_col, user_col = _run_columns(run, kind)
    post = load(run_dir / "posterior.pt")
    names = {a_col: "a", b_col: "b", user_col: "user"}
    if candidates is not None:
        if not isinstance(candidates, pd.DataFrame):
            path = candidates
            candidates = pd.read_csv(path, sep=run.get("sep") or ",")
            where = f" of {path}"
        else:
            where = ""
        for col in (a_col, b_col):
            if col not in candidates.columns:
                raise DataError(f"candidates: column {col!r} (the run's) not found{where} (columns: "
                                f"{list(candidates.columns)})")
        keep = [c for c in (user_col, a_col, b_col) if c in candidates.columns]
        candidates = candidates[keep].rename(columns=names)
    try:
        out = post.suggest(n, candidates=candidates, users=users, strategy=strategy, seed=seed)
    except DataError as err:  # the message in the run's column names
        msg = str(err)
        for col, role in names.items():
            msg = msg.replace(f"column {role!r}", f"column {col!r}")
        raise DataError(msg) from None
    return out.rename(columns={v: k for k, v in names.items()})


__all__ = ["bald_score", "entropy_score", "binary_entropy", "query_scores", "next_queries",
           "active_learning", "suggest_run", "STRATEGIES", "C2"]
