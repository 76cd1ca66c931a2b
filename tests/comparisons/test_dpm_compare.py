"""The dpm-simulation comparison runs end to end in quick mode on a tiny setting."""
import numpy as np

from crowdzoo.comparisons import REGISTRY, dpm


def test_dpm_simulation_run_one_quick_tiny():
    df = dpm.run_one(0, quick=True, strengths=(3.0,), n_users=8, n_items=10, n_labels=8, n_train=5)
    assert set(df["method"]) == {"DPM (gibbs)", "GPPL pooled", "GPPL-per-user", "crowdGPPL", "collabGP\\u"}
    acc = df[df["metric"] == "acc"]["value"]
    assert len(acc) == 5 and ((acc >= 0) & (acc <= 1)).all()
    dpm_rows = df[df["method"] == "DPM (gibbs)"].set_index("metric")["value"]
    assert -1 <= dpm_rows["ARI"] <= 1 and dpm_rows["communities"] >= 1
    assert np.isfinite(df["value"]).all()
    table = REGISTRY["dpm-simulation"].summarise(df)
    assert "DPM (gibbs)" in table and "communities (mode)" in table


def test_dpm_sushi_a_has_a_dpm_row_on_the_fixture(tmp_path):
    from crowdzoo.comparisons import sushi
    from crowdzoo.data.sushi import write_sushi_fixture

    data_dir = write_sushi_fixture(tmp_path, n_users=60, seed=3)
    df = REGISTRY["dpm-sushi-a"].run_one(0, quick=True, data_dir=str(data_dir))
    assert list(dict.fromkeys(df["method"])) == [m for m in sushi.methods(200) if m in sushi.DPM_ROWS]
    dpm_rows = df[df["method"] == "DPM (gibbs)"].set_index("metric")["value"]
    assert set(dpm_rows.index) == {"acc", "CEE", "tau"} and 0 <= dpm_rows["acc"] <= 1
    assert "DPM (gibbs)" in REGISTRY["dpm-sushi-a"].summarise(df)
