"""Shared fixtures: one small simulated GPPL problem fitted once by every route."""
import numpy as np
import pytest
import torch

import crowdzoo as cz

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def problem():
    """≈30 items, 300 training pairs, 100 held-out pairs, simulated from GPPL itself."""
    data, f_true = cz.simulate_gppl(n_items=30, n_pairs=400, n_features=2, s=1.0, seed=3)
    train, test = cz.split_pairs(data, test_fraction=0.25, seed=0)
    return {"train": train, "test": test, "f": f_true, "model": cz.GPPL()}


@pytest.fixture(scope="session")
def fits(problem):
    """Posteriors of the same exact GPPL by NUTS, EP, Pyro SVI and both natgrad variants."""
    m, d = problem["model"], problem["train"]
    return {
        "nuts": cz.fit(m, d, method="nuts", num_samples=500, warmup_steps=400, num_chains=2),
        "ep": cz.fit(m, d, method="ep"),
        "svi": cz.fit(m, d, method="svi", num_steps=2500, lr=0.02),
        "natgrad": cz.fit(m, d, method="natgrad"),
        "natgrad_exact": cz.fit(m, d, method="natgrad", likelihood="exact"),
    }


def heldout_probs(post, test):
    ids = test.item_ids
    return post.predict_proba(ids[test.a], ids[test.b])


@pytest.fixture(scope="session")
def gaps(fits, problem):
    """Mean |P_route − P_NUTS| on held-out pairs, for each route."""
    ref = heldout_probs(fits["nuts"], problem["test"])
    return {k: float(np.abs(heldout_probs(p, problem["test"]) - ref).mean())
            for k, p in fits.items() if k != "nuts"}
