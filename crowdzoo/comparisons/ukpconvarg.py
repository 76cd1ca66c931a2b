"""Table 3 of Simpson & Gurevych (2020): UKPConvArgCrowdSample, leave one fold out (§5.3).

Repeat r holds out fold r (of 32, in file-name order; ``--repeats 32`` runs them all) and trains
on the crowd labels of the other 31. Item features: TF-IDF + truncated SVD of the argument texts
(:func:`crowdzoo.data.ukpconvarg.text_features`), computed for every argument; the test fold's
arguments are new items to the models (no labels), which is what the task asks.

* ``ukpconvarg-consensus``: predict the gold pairs of the held-out fold (accuracy, CEE) and rank its
  arguments against their gold scores (Kendall τ). GPPL pooled over workers, crowdGPPL (its
  consensus t), crowdBT–GP.
* ``ukpconvarg-personal``: predict each held-out crowd label of a worker who has training labels
  (accuracy, CEE), and Kendall τ between each such worker's predicted utilities and their own
  scores of the fold's arguments (UKPConvArg1-crowdsample-ranking), averaged over workers. GPPL,
  crowdGPPL, crowdGPPL\\t. Workers have no features (the ``\\u`` form).

Settings (§5.3): C = 50, M = 500, P_i = 200, ε = 10, r = 0.9; priors Gamma(2, 200) for GPPL, t and
v, Gamma(1, 10) for w; length-scales by the scaled median heuristic (20√D · ℓ_MH, §5.3).
``--quick`` uses C = 10, M = 100 and at most 300 iterations (the tables in docs/ say which).
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .. import metrics
from ._paper import PaperComparison

# the project's copy (../shared/data/ukpconvarg beside the repository) unless --data-dir or
# $CROWDZOO_UKPCONVARG says otherwise
DATA_DIR = os.environ.get("CROWDZOO_UKPCONVARG",
                          str(Path(__file__).resolve().parents[3] / "shared" / "data" / "ukpconvarg"))
PAPER = {
    "ukpconvarg-consensus": {"GPPL": (.77, .51, .50), "crowdGPPL": (.79, .52, .53),
                             "crowdBT-GP": (.75, .53, .45)},
    "ukpconvarg-personal": {"GPPL": (.71, .56, .31), "crowdGPPL": (.72, .58, .33),
                            "crowdGPPL\\t": (.68, .63, .23)},
}


@lru_cache(maxsize=2)
def _load(data_dir: str, n_features: int):
    from ..data.ukpconvarg import load_ukpconvarg, text_features

    u = load_ukpconvarg(data_dir)
    return u, text_features(u.texts, n_features=n_features)


def _settings(quick):
    return dict(C=10, M=100, max_iter=300) if quick else dict(C=50, M=500, max_iter=500)


def methods(personal: bool, quick: bool):
    import crowdzoo as cz

    st = _settings(quick)
    ng = dict(batch_size=200, delay=10.0, forgetting_rate=0.9, max_iter=st["max_iter"],
              likelihood="linearised", learn_kernel=False)  # the paper's (its scaled median heuristic)
    crowd = dict(n_components=st["C"], n_inducing=st["M"], user_features=False, scaled_lengthscale=True,
                 item_residual=False,
                 shape_t0=2, rate_t0=200, shape_v0=2, rate_v0=200, shape_w0=1, rate_w0=10)
    out = {"GPPL": (cz.GPPL(n_inducing=st["M"], shape_s0=2.0, rate_s0=200.0, scaled_lengthscale=True,
                            item_residual=False),
                    "natgrad", ng),
           "crowdGPPL": (cz.CrowdGPPL(**crowd), "natgrad", ng)}
    if personal:
        out["crowdGPPL\\t"] = (cz.CrowdGPPL(**{**crowd, "consensus": False}), "natgrad", ng)
    else:
        out["crowdBT-GP"] = (cz.CrowdBTGP.paper(n_inducing=st["M"], scaled_lengthscale=True), "map", {})
    return out


def training_data(u, F, fold):
    """PairwiseData of the crowd labels of every fold but ``fold``: all arguments as items (features
    ``F``), all workers as users, both by their own ids."""
    import crowdzoo as cz

    train = u.crowd[u.crowd.fold != fold]
    ids = F.index.to_numpy()
    workers = np.unique(u.crowd.worker)
    item, worker = pd.Index(ids), pd.Index(workers)
    return cz.PairwiseData.from_arrays(item.get_indexer(train.a), item.get_indexer(train.b),
                                       train.y.to_numpy(), F.to_numpy(),
                                       users=worker.get_indexer(train.worker), item_ids=ids, user_ids=workers)


def run_one(seed: int, name: str, quick: bool = False, data_dir=None) -> pd.DataFrame:
    import crowdzoo as cz

    u, F = _load(str(data_dir or DATA_DIR), 64)
    fold = u.folds[seed % len(u.folds)]
    train = u.crowd[u.crowd.fold != fold]
    data = training_data(u, F, fold)
    personal = name.endswith("personal")
    if personal:
        test = u.crowd[(u.crowd.fold == fold) & u.crowd.worker.isin(set(train.worker))]
    else:
        test = u.gold[u.gold.fold == fold]
    gold = u.scores[u.scores.fold == fold]
    rows = []
    for method, (model, route, kw) in methods(personal, quick).items():
        post = cz.fit(model, data, method=route, seed=seed, progress_bar=False, **kw)
        # the paper predicts a worker's labels with crowdBT–GP's consensus (differences treated as noise)
        if personal and method not in ("GPPL", "crowdBT-GP"):
            p = post.predict_proba(test.a.to_numpy(), test.b.to_numpy(), users=test.worker.to_numpy())
        else:
            p = post.predict_proba(test.a.to_numpy(), test.b.to_numpy())
        y = test.y.to_numpy()
        vals = {"acc": metrics.accuracy(y, p), "CEE": metrics.cross_entropy(y, p)}
        if not personal:
            util = post.utilities()[0].reindex(gold.id.to_numpy()).to_numpy()
            vals["tau"] = metrics.kendall_tau(gold.score.to_numpy(), util)
        else:
            vals["tau"] = _personal_tau(post, method, u.worker_scores, fold, test.worker.unique())
        rows += [{"seed": seed, "dataset": name, "fold": fold, "method": method, "metric": k, "value": v,
                  "n_test": len(test)} for k, v in vals.items()]
    return pd.DataFrame(rows)


def _personal_tau(post, method, worker_scores, fold, workers) -> float:
    """Mean over the test workers of Kendall τ between their predicted personal utilities (GPPL:
    the pooled utilities) and their own scores of the arguments they judged in the fold."""
    ws = worker_scores[(worker_scores.fold == fold) & worker_scores.worker.isin(set(workers))]
    if method == "GPPL":
        mean = post.utilities()[0]
        F = pd.DataFrame({w: mean for w in workers})
    else:
        F = post.utilities(users=np.asarray(workers))[0]
    taus = [metrics.kendall_tau(g.score.to_numpy(), F[w].reindex(g.id.to_numpy()).to_numpy())
            for w, g in ws.groupby("worker") if g.score.nunique() > 1]
    return float(np.nanmean(taus)) if taus else float("nan")


NOTE = ("{folds} held-out fold(s) of 32 (± is the sd over folds); features: TF-IDF + truncated SVD (64 "
        "dims) of the argument texts, not the paper's 32k linguistic + GloVe features.")
consensus, personal = (PaperComparison(name, run_one, PAPER[name], NOTE) for name in PAPER)
