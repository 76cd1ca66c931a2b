"""The ``active`` comparison's quick run: equal label budgets per strategy, every round scored, a
table with the labels each strategy needs to reach random's final log loss, and its figure."""
from __future__ import annotations

import numpy as np
import pandas as pd

from crowdzoo.comparisons import REGISTRY, active


def test_quick_learning_curves(tmp_path):
    assert REGISTRY["active"] is active
    df = active.run_one(0, quick=True)
    assert set(df["model"]) == {"GPPL", "SCDC"} and set(df["strategy"]) == set(active.STRATEGIES)
    for _, g in df.groupby("model"):
        budgets = g.pivot_table(index="round", columns="strategy", values="labels")
        assert (budgets.nunique(axis=1) == 1).all()  # every strategy at the same budget each round
        assert (np.diff(budgets.iloc[:, 0].to_numpy()) > 0).all()
    assert np.isfinite(df[["log_loss", "accuracy", "tau"]].to_numpy()).all()
    table = active.summarise(df)
    assert "Labels to reach random's final mean log loss" in table and "| GPPL | bald |" in table
    reach = active.labels_to_reach(df)
    rnd = reach[reach["strategy"] == "random"]
    assert (rnd["share"] <= 1.0).all()  # random reaches its own final loss by its budget at the latest
    # a hand-made frame: a strategy at the target halfway is reported at 50 %
    toy = pd.DataFrame({"model": "m", "seed": 0, "labels": [10, 20] * 3, "accuracy": 0.5, "tau": 0.0,
                        "strategy": ["bald"] * 2 + ["entropy"] * 2 + ["random"] * 2,
                        "log_loss": [0.5, 0.4, 0.7, 0.69, 0.6, 0.5]})
    r = active.labels_to_reach(toy).set_index("strategy")
    assert r.loc["bald", "labels"] == 10 and r.loc["bald", "share"] == 0.5
    assert pd.isna(r.loc["entropy", "labels"])
    active.figure(df, tmp_path / "active.png")
    assert (tmp_path / "active.png").stat().st_size > 0
