"""SCDC's and BayesSCDC's sizes left unset come from the data by the rule of
crowdzoo/models/scdc/defaults.py; the paper's MNIST settings are one argument away."""
import math

import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.models.scdc.defaults import PAPER_MNIST, default_sizes

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("N, D", [(30, 2), (400, 64), (600, 5), (1797, 64), (70000, 784)])
def test_rule_keeps_its_documented_bounds(N, D):
    """d never above D or 8; widths a power of two in [64, 512] growing with D; pretraining and
    training steps within the documented targets (clipped to 10–200 and 20–200 epochs)."""
    s = default_sizes(N, D, 10)
    steps = math.ceil(N / 128)
    assert s.latent_dim == min(D, 8) and len(s.hidden) == 2 and s.hidden[0] == s.hidden[1]
    w = s.hidden[0]
    assert 64 <= w <= 512 and w & (w - 1) == 0
    assert w in (64, 512) or 2 * D / math.sqrt(2) <= w <= 2 * D * math.sqrt(2)
    assert 10 <= s.pretrain <= 200
    assert s.pretrain in (10, 200) or 1500 <= s.pretrain * steps < 1500 + steps
    assert 20 <= s.n_epochs <= 200 and (s.n_epochs in (20, 200) or 1000 <= s.n_epochs * steps < 1000 + steps)


def test_unset_sizes_come_from_the_data_and_explicit_ones_win():
    data, _ = cz.simulate_links(n_arms=3, n_per_arm=10, n_annotated=20, n_workers=2, window=8, seed=0)
    rule = default_sizes(data.n_items, data.O.shape[1], 3, batch_size=30)
    for cls in (cz.SCDC, cz.BayesSCDC):
        model = cls(n_clusters=3)
        post = cz.fit(model, data, n_epochs=1, batch_size=30, n_init=1, progress_bar=False)
        assert (post.model.latent_dim, post.model.hidden) == (rule.latent_dim, rule.hidden)
        assert post.settings["pretrain"] == rule.pretrain
        assert model.latent_dim is None  # the caller's model is unchanged
        post = cz.fit(cls(n_clusters=3, latent_dim=1, hidden=(4,)), data, n_epochs=1, pretrain=0,
                      batch_size=30, n_init=1, progress_bar=False)
        assert (post.model.latent_dim, post.model.hidden, post.settings["pretrain"]) == (1, (4,), 0)
        assert post.predict().shape == (data.n_items,)


def test_paper_settings_are_one_argument_away():
    data, _ = cz.simulate_links(n_arms=3, n_per_arm=10, n_annotated=20, n_workers=2, window=8, seed=0)
    for cls in (cz.SCDC, cz.BayesSCDC):
        m = cls.paper_mnist()
        assert (m.n_clusters, m.latent_dim, m.hidden, m.settings) == (50, 8, (500, 500), "paper")
        assert default_sizes(30, 2, 3, settings="paper") == PAPER_MNIST
        small = cls(n_clusters=3, hidden=(4,), settings="paper")  # the paper's schedule, sizes as given
        post = cz.fit(small, data, n_epochs=1, batch_size=30, n_init=1, progress_bar=False)
        assert post.model.latent_dim == 8 and post.settings["pretrain"] == 0
        with pytest.raises(cz.DataError, match="settings"):
            cls(settings="fast")
    assert np.isfinite(post.trace["elbo"]).all()
