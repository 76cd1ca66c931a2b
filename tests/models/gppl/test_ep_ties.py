"""GPPL's EP route with ties as a third outcome: τ (the mode of log τ under the EP evidence) and the
three-outcome predictions against natgrad's on the same simulated labels, and the learn-kernel path."""
from __future__ import annotations

import numpy as np

import crowdzoo as cz


def _pairs(post, n):
    i, j = np.triu_indices(n, 1)
    return post.predict_outcomes(post.data.item_ids[i], post.data.item_ids[j]).to_numpy()


def test_ep_finds_natgrads_tie_threshold_and_predictions():
    """Measured (25 items, 600 labels at τ = .6, s = .5, seeds 7 and 8): τ .5991 against natgrad's .5975
    and .5866 against .5847; the three probabilities of all 300 item pairs differ by .0023 and .0029 on
    average, .015 and .020 at most."""
    data, f = cz.simulate_gppl(n_items=25, n_pairs=600, s=0.5, tau=0.6, seed=8)
    natgrad = cz.fit(cz.GPPL(), data, method="natgrad", check_confidence=False)
    ep = cz.fit(cz.GPPL(), data, method="ep", check_confidence=False)
    assert abs(float(ep.tau[0]) - 0.6) < 0.1
    assert abs(float(ep.tau[0]) - float(natgrad.tau[0])) < 0.01
    assert (ep.tau == ep.tau[0]).all() and ep.settings["tau"] == float(ep.tau[0])
    gap = np.abs(_pairs(ep, 25) - _pairs(natgrad, 25))
    assert gap.mean() < 0.01 and gap.max() < 0.05, (gap.mean(), gap.max())
    assert np.corrcoef(ep.utilities()[0].to_numpy(), f)[0, 1] > 0.95
    p = ep.predict_outcomes(data.item_ids[:5], data.item_ids[5:10]).to_numpy()
    assert np.allclose(p.sum(1), 1.0) and (p[:, 1] > 0).all()


def test_ep_learns_the_length_scales_and_the_threshold_together():
    data, _ = cz.simulate_gppl(n_items=15, n_pairs=300, s=0.5, tau=0.6, seed=3)
    post = cz.fit(cz.GPPL(kernel="se"), data, method="ep", learn_kernel=True, kernel_iter=30,
                  check_confidence=False)
    assert abs(float(post.tau[0]) - 0.6) < 0.2
    assert post.settings["learned_lengthscale"] != post.settings["start_lengthscale"]
    assert post.settings["tau"] == float(post.tau[0])
