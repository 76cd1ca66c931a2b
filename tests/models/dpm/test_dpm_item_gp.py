"""The DPM's communities share one item GP, a GPPL (``item_gp``): the keywords users pass for it
(``kernel=``, ``n_inducing=``, ...) build the same GPPL, whose setup is the DPM's item GP, and a fit
through either spelling is the same posterior."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import crowdzoo as cz
from crowdzoo.data.simulate import simulate_crowd


def test_keywords_and_item_gp_are_one_model_with_gppl_s_item_gp():
    data, _ = simulate_crowd(n_items=9, n_users=3, n_pairs=50, n_components=2, n_user_features=0, seed=4)
    kw = dict(kernel="se", lengthscale=[0.4, 0.6], n_inducing=5, shape_s0=1.0, rate_s0=4.0)
    by_name = cz.DPMCommunities(concentration=0.5, **kw)
    composed = cz.DPMCommunities(concentration=0.5, item_gp=cz.GPPL(item_residual=False, **kw))
    assert by_name == composed and by_name.kernel == "se" and by_name.n_inducing == 5
    gp = cz.GPPL(**kw).setup_features(data.item_features, seed=2)
    st = by_name.setup(data, seed=2)
    assert torch.equal(st.gp.K_mm, gp.K_mm) and torch.equal(st.gp.B, gp.B)
    assert st.s == 1.0 / 4.0  # s fixed at the mean of the item GP's Gamma(1, 4)
    fits = [cz.fit(m, data, method="gibbs", seed=1, n_sweeps=4, burn_in=1, progress_bar=False,
                   check_confidence=False) for m in (by_name, composed)]
    p = [f.predict_proba(data.item_ids[data.a], data.item_ids[data.b], users=data.user_ids[data.users])
         for f in fits]
    np.testing.assert_array_equal(p[0], p[1])


def test_a_keyword_replaces_that_setting_of_a_given_item_gp_and_replace_keeps_the_rest():
    m = cz.DPMCommunities(item_gp=cz.GPPL(kernel="se", n_inducing=7, item_residual=False), jitter=1e-5)
    assert (m.kernel, m.n_inducing, m.jitter) == ("se", 7, 1e-5)
    moved = dataclasses.replace(m, lengthscale=torch.tensor([0.5, 2.0]))
    assert moved.kernel == "se" and moved.n_inducing == 7 and moved.jitter == 1e-5
    assert torch.equal(moved.lengthscale, torch.tensor([0.5, 2.0])) and m.lengthscale is None


def test_an_item_gp_the_communities_cannot_use_is_refused():
    with pytest.raises(cz.DataError, match="item_gp: the communities' item GP has neither"):
        cz.DPMCommunities(item_gp=cz.GPPL(item_residual=True))
    with pytest.raises(cz.DataError, match="item_gp: expected a crowdzoo.GPPL"):
        cz.DPMCommunities(item_gp="se")
    with pytest.raises(cz.DataError, match="rate_s0"):
        cz.DPMCommunities(rate_s0=0.0)


def test_the_command_line_fills_the_item_gp_from_its_flags(tmp_path):
    """``crowdzoo fit dpm --kernel se --n-inducing 5`` sets those settings of the DPM's item GP (the
    command line takes the settings the model's constructor takes by name)."""
    from crowdzoo.cli import main

    data, _ = simulate_crowd(n_items=9, n_users=3, n_pairs=50, n_components=2, n_user_features=0, seed=4)
    data.to_frame().to_csv(tmp_path / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(tmp_path / "items.csv")
    out = tmp_path / "run"
    code = main(["fit", "dpm", "--pairs", str(tmp_path / "pairs.csv"), "--items", str(tmp_path / "items.csv"),
                 "--kernel", "se", "--n-inducing", "5", "--n-sweeps", "3", "--burn-in", "1",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    post = cz.load(out / "posterior.pt")
    assert post.model.item_gp == cz.GPPL(kernel="se", n_inducing=5, item_residual=False)
    assert post.setup.gp.M == 5
