"""A crowd with hundreds of labels per item, shared by the tests of how a mini-batch fit of GPPL ends."""
import numpy as np
import pytest

import crowdzoo as cz
from crowdzoo.data.simulate_panel import Panel, simulate_panel


@pytest.fixture(scope="module")
def many_per_item():
    """40 items with effects of their own, about 240 labels each, for a GP of 10 inducing items."""
    panel = Panel(n_items=40, n_users=200, labels_per_user=30, features="irrelevant", n_features=4,
                  taste="shared", residual=1.0)
    train, _, items, _, _ = simulate_panel(panel, seed=3)
    ids = items.index
    return cz.PairwiseData.from_arrays(ids.get_indexer(train["winner"]), ids.get_indexer(train["loser"]),
                                       np.ones(len(train)), items.to_numpy(dtype=float))
