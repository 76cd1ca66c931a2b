"""crowdGPPL's natgrad route on choices against its svi (and nuts) route and pooled GPPL.

A crowd of 15 items and 6 users with two components of taste (crowdGPPL's own simulation, s_t = 2),
700 best-of-4 choices, each row's user drawn uniformly and the best by the probit on that user's
utilities; 400 train, 300 held out (the crowd of tests/models/crowdgppl/test_crowdgppl_choices.py).
``--crowd`` sets the crowd's items, users, rows and training rows.
Prints each route's seconds, its personal utilities' correlation with the simulated ones, the largest
and mean gaps between natgrad's and the reference's posterior means and held-out choice probabilities,
the ratio of their posterior sds, and the held-out log loss of each beside pooled GPPL's (natgrad).

``--memory``: the peak resident memory of natgrad fits at a fixed batch of 200 rows (of 2 to 5 items,
best–worst) as the rows grow, each in a fresh process.

    python benchmarks/bench_crowdgppl_choices.py                  # natgrad against svi
    python benchmarks/bench_crowdgppl_choices.py --refs svi nuts --crowd 10 4 250 150
        # a smaller crowd, natgrad and svi against nuts (200 + 200 draws)
    python benchmarks/bench_crowdgppl_choices.py --memory
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

import crowdzoo as cz
from crowdzoo.data import ChoiceData, simulate_crowd_choices
from crowdzoo.models import GPPL, CrowdGPPL


def crowd(n_items=15, n_users=6, n_rows=700, seed=5):
    return simulate_crowd_choices(n_items, n_users, n_rows, seed=seed)


def log_loss(post, held, personal=True):
    p = post.predict_choice([held.item_ids[row[row >= 0]] for row in held.sets],
                            **({"users": held.user_ids[held.users]} if personal else {}))
    return -np.mean(np.log(p[np.arange(held.n_rows), held.best]))


def compare(refs, n_items=15, n_users=6, n_rows=700, n_train=400):
    data, F = crowd(n_items, n_users, n_rows)
    train, held = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, n_rows))
    model = CrowdGPPL(n_components=2, n_inducing=None)
    quiet = dict(progress_bar=False, check_confidence=False)
    settings = {"natgrad": {}, "svi": dict(num_steps=1000, n_draws=100),
                "nuts": dict(num_samples=200, warmup_steps=200)}
    fits, seconds = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        for name in ("natgrad", *refs):
            t = time.time()
            fits[name] = cz.fit(model, train, method=name, **settings[name], **quiet)
            seconds[name] = time.time() - t
        pooled = cz.fit(GPPL(n_inducing=None), train, method="natgrad", **quiet)
    query = [held.item_ids[row[row >= 0]] for row in held.sets]
    users = held.user_ids[held.users]
    util = {k: tuple(x.to_numpy() for x in p.utilities(users=train.user_ids)) for k, p in fits.items()}
    prob = {k: p.predict_choice(query, users=users) for k, p in fits.items()}
    print(f"{n_items} items, {n_users} users, {n_train} training and {n_rows - n_train} held-out "
          "best-of-4 rows")
    for name, (m, _) in util.items():
        r = [np.corrcoef(m[:, u], F[:, u])[0, 1] for u in range(F.shape[1])]
        print(f"{name}: {seconds[name]:.1f} s, correlation with F per user {np.round(r, 3).tolist()}, "
              f"held-out log loss {log_loss(fits[name], held):.3f}")
    print(f"pooled GPPL (natgrad): held-out log loss {log_loss(pooled, held, personal=False):.3f}")
    pairs = [(a, b) for a in fits for b in refs if a != b and not (a == "nuts" and b == "svi")]
    for a, b in pairs:
        (m1, v1), (m2, v2) = util[a], util[b]
        ratio = np.sqrt(v1 / v2)
        gap = np.abs(prob[a] - prob[b])
        print(f"{a} - {b}: posterior means max {np.abs(m1 - m2).max():.3f}, "
              f"mean {np.abs(m1 - m2).mean():.3f}; "
              f"sd ratio {ratio.min():.2f}-{ratio.max():.2f} (median {np.median(ratio):.2f}); "
              f"held-out choice probabilities max {gap.max():.3f}, mean {gap.mean():.3f}")


def memory_one(R: int):
    rng = np.random.default_rng(0)
    N, U = 30, 50
    sizes = rng.integers(2, 6, R)  # rows of 2 to 5 items
    sets = np.full((R, 5), -1)
    for r, k in enumerate(sizes):
        sets[r, :k] = rng.choice(N, k, replace=False)
    worst = np.where(sizes > 2, sets[np.arange(R), sizes - 1], -1)
    data = ChoiceData.from_arrays(sets, sets[:, 0], rng.uniform(0, 10, (N, 2)), users=rng.integers(0, U, R),
                                  worst=worst)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        cz.fit(CrowdGPPL(n_components=3, n_inducing=None), data, method="natgrad", batch_size=200, max_iter=4,
               min_iter=1, eval_size=200, n_points=16, progress_bar=False, check_confidence=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{R} rows: peak resident memory {peak:.0f} MiB ({peak - before:.0f} MiB over the data), "
          f"{(time.time() - t) / 4:.2f} s an iteration of 200 rows")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", nargs="+", choices=("svi", "nuts"), default=["svi"])
    ap.add_argument("--crowd", nargs=4, type=int, default=[15, 6, 700, 400],
                    metavar=("ITEMS", "USERS", "ROWS", "TRAIN"))
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rows is not None:
        memory_one(args.rows)
    elif args.memory:
        for R in (1_000, 10_000, 100_000):
            subprocess.run([sys.executable, __file__, "--rows", str(R)], check=True)
    else:
        compare(args.refs, *args.crowd)
