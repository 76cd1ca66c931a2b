"""Shared fixtures: one small simulated GPPL problem fitted once by every route, and a tiny crowd."""
import os

import numpy as np
import pytest
import torch

import crowdzoo as cz

# ``make test`` runs the files on two pytest-xdist workers (one per CI core), each on one torch thread;
# a plain ``pytest`` run has the two threads to itself. A worker's subprocesses (notebooks, CLI runs,
# NUTS chains, distributed ranks) inherit one thread too: with two workers on two cores, a child on a
# pool of two threads ran 8 times slower (a notebook's NUTS fit: 5.4 s on one thread, 44 s on two).
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
else:
    torch.set_num_threads(2)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny matrices: many small operations, far slower on a thread
    pool when the cores are busy (SCDC's quick pinwheel, measured under load: 1.9 s on one thread, 79 s
    on two). A module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def problem():
    """≈30 items, 300 training pairs, 100 held-out pairs, simulated from GPPL itself."""
    data, f_true = cz.simulate_gppl(n_items=30, n_pairs=400, n_features=2, s=1.0, seed=3)
    train, test = cz.split_pairs(data, test_fraction=0.25, seed=0)
    return {"train": train, "test": test, "f": f_true, "model": cz.GPPL()}


@pytest.fixture(scope="session")
def fits(problem):
    """Posteriors of the same exact GPPL by NUTS, EP, Pyro SVI and both natgrad variants, every one at
    the median heuristic's length-scales (natgrad would learn them unless told not to)."""
    m, d = problem["model"], problem["train"]
    return {
        "nuts": cz.fit(m, d, method="nuts", num_samples=300, warmup_steps=300, num_chains=2),
        "ep": cz.fit(m, d, method="ep"),
        "svi": cz.fit(m, d, method="svi", num_steps=1500, lr=0.02),
        "natgrad": cz.fit(m, d, method="natgrad", learn_kernel=False),
        "natgrad_exact": cz.fit(m, d, method="natgrad", likelihood="exact", learn_kernel=False),
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


@pytest.fixture(scope="session")
def blob_links():
    """Three well-separated 2-D blobs (150 points) and 5 MCVC workers × 2000 pairs with known α, β:
    (data, alpha, beta)."""
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 50)
    X = rng.normal(size=(150, 2)) * 0.4 + np.array([[0, 0], [4, 0], [0, 4]])[labels]
    alpha, beta = np.array([0.95, 0.9, 0.85, 0.8, 0.7]), np.array([0.9, 0.95, 0.75, 0.85, 0.8])
    df = cz.data.mcvc_workers(labels, 5, alpha, beta, n_pairs=2000, seed=0)
    return cz.LinkData.from_frame(df, X, labels=labels), alpha, beta


@pytest.fixture(scope="module")
def crowd():
    """A tiny crowd: 7 items with 2-D features and string ids, 3 named users, 40 labels."""
    rng = np.random.default_rng(0)
    N, U, P = 7, 3, 40
    X = rng.normal(size=(N, 2))
    f = np.sin(X[:, 0]) + X[:, 1]
    a = rng.integers(0, N, P)
    b = (a + rng.integers(1, N, P)) % N
    users = rng.integers(0, U, P)
    y = (f[a] - f[b] + rng.normal(size=P) > 0).astype(float)
    return cz.PairwiseData.from_arrays(a, b, y, X, users=users, item_ids=[f"item{i}" for i in range(N)],
                                       user_ids=["ann", "bob", "cat"])
