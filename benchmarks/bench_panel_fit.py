"""crowdGPPL through the Python API on a panel of ``bench_scale.py``'s kind at a size of your choice,
scored on its held-out decided pairs: personal and consensus predictions beside the items' win rates,
with each fit's route settings (the likelihood, init_var, ...) given as Python dicts (a ``model`` key
holds CrowdGPPL's own fields, e.g. ``dict(model=dict(n_inducing=800))``).

    python benchmarks/bench_panel_fit.py 600 4000 "dict(likelihood='linearised')" \\
        "dict(likelihood='exact')" "dict(likelihood='exact', init_var=1.0)"

(the comparison behind crowdGPPL's ``default_likelihood`` and ``init_var`` at scale: 600 items, 4,000
users with low-rank tastes, 62 labels each, 197,839 training labels).
"""
from __future__ import annotations

import ast
import sys
import time
import warnings

import numpy as np

import crowdzoo as cz
from crowdzoo.data.simulate_panel import Panel, simulate_panel


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    N, U, settings = int(argv[0]), int(argv[1]), argv[2:] or ["dict()"]
    panel = Panel(n_items=N, n_users=U, labels_per_user=62, features="irrelevant", n_features=16,
                  taste="low-rank", rank=3, personal=0.7, residual=1.0)
    train, test, items, _, truth = simulate_panel(panel, seed=0)
    test = test[test["tie"].astype(str).str.lower().isin(["no", "false", "0"])]
    print(f"{len(train)} labels; oracle log loss {truth['oracle']}")
    data = cz.PairwiseData.from_frame(train.drop(columns=["p_winner", "tie"]).assign(y=1), items, a="winner",
                                      b="loser", y="y", user="taster")
    wins = train["winner"].value_counts()
    games = wins.add(train["loser"].value_counts(), fill_value=0)
    rate = (wins.reindex(games.index, fill_value=0) + 1) / (games + 2)
    ra, rb = (rate.reindex(test[c]).fillna(0.5).to_numpy() for c in ("winner", "loser"))
    p = ra / (ra + rb)
    print(f"win rate: log loss {-np.log(p).mean():.4f}, accuracy {(p > .5).mean():.3f}")
    a, b, users = test["winner"].to_numpy(), test["loser"].to_numpy(), test["taster"].to_numpy()
    for text in settings:
        kw = ast.literal_eval(text) if text.startswith("{") else eval(text, {"dict": dict})  # noqa: S307
        model = cz.CrowdGPPL(**kw.pop("model", {}))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(model, data, progress_bar=False, **kw)
        secs = time.perf_counter() - t0
        p, p0 = post.predict_proba(a, b, users=users), post.predict_proba(a, b)
        print(f"{kw}: personal log loss {-np.log(np.clip(p, 1e-12, 1)).mean():.4f} (accuracy "
              f"{(p > .5).mean():.3f}), consensus {-np.log(np.clip(p0, 1e-12, 1)).mean():.4f} "
              f"({(p0 > .5).mean():.3f}); {secs:.0f} s, {post.settings.get('iterations')} iterations, "
              f"likelihood {post.settings.get('likelihood')}, E[s_w] {np.round(post.s_w[0].numpy()[:4], 2)}",
              flush=True)


if __name__ == "__main__":
    main()
