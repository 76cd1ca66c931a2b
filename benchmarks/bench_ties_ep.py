"""Ties through EP: the measurements behind docs/dpm.md, docs/gppl.md and docs/ties.md on the EP routes
with ties (GPPL's ``ep``, the DPM's ``gibbs``) and the DPM's threshold per user.

* ``gppl``: GPPL by ep and by natgrad on 25 items, 600 labels at τ = .6 (s = .5; seeds 7 and 8): τ, and
  the three outcome probabilities of all item pairs, mean and largest gap;
* ``dpm``: the DPM by gibbs (40 sweeps, 15 burn-in, one chain), svi (T = 4, 1000 steps) and, with
  ``--nuts``, NUTS (T = 2, 300 + 300) on two communities of 5 users × 50 labels at τ = .6 (seeds 0–2), a
  fifth held out: τ and the held-out three-way log loss;
* ``per-user``: the DPM with ``tie_threshold="per_user"`` and "crowd" by svi and gibbs on 4 users in two
  communities whose thresholds are .2, .6, 1.6 and 1.0 (150 labels each, a fifth held out; seed 0).

    python benchmarks/bench_ties_ep.py [--nuts] [--only gppl|dpm|per-user]

About 2 minutes without NUTS on a quiet machine; NUTS adds about 2 minutes a seed.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch

import crowdzoo as cz
from crowdzoo.gp.ordinal import sample_outcomes

USER_TAUS = np.array([0.2, 0.6, 1.6, 1.0])


def crowd(taus, per_user, n_items=12, seed=0):
    """Users u in two communities (u even, odd) with utilities ±1.5 x over one feature, each label from
    the ordered probit at its user's threshold ``taus[u]`` (as tests/models/dpm/test_dpm_ties.py)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, size=(n_items, 1))
    f = np.stack([1.5 * X[:, 0], -1.5 * X[:, 0]])
    c = np.arange(len(taus)) % 2
    u = np.repeat(np.arange(len(taus)), per_user)
    a = rng.integers(0, n_items, u.size)
    b = (a + rng.integers(1, n_items, u.size)) % n_items
    delta = torch.as_tensor(f[c[u], a] - f[c[u], b])
    y = sample_outcomes(delta, torch.as_tensor(np.asarray(taus, dtype=float)[u]), "probit",
                        torch.Generator().manual_seed(seed))
    return cz.PairwiseData.from_arrays(a, b, y.numpy(), X, users=u, ties="model")


def split(data):
    rows = np.arange(data.n_pairs)
    held = rows % 5 == 4
    return data.subset(rows[~held]), data.subset(rows[held])


def log_loss(post, data):
    """Held-out three-way log loss (b ≻ a, tie, a ≻ b)."""
    a, b, u = data.item_ids[data.a], data.item_ids[data.b], data.user_ids[data.users]
    p = post.predict_outcomes(a, b, users=u)[["p_b", "p_tie", "p_a"]].to_numpy()
    k = np.round(2 * data.y).astype(int)
    return -np.mean(np.log(p[np.arange(data.n_pairs), k]))


def fit(model, data, method, **kw):
    defaults = {"gibbs": dict(n_sweeps=40, burn_in=15, n_chains=1),
                "svi": dict(num_steps=1000, lr=0.05, n_draws=200, check_confidence=False),
                "nuts": dict(num_samples=300, warmup_steps=300, check_confidence=False)}[method]
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cz.ConvergenceWarning)
        post = cz.fit(model, data, method=method, progress_bar=False, **{**defaults, **kw})
    return post, time.time() - t


def gppl():
    print("| seed | τ natgrad | τ ep | mean gap | largest gap | natgrad s | ep s |\n" + "|---" * 7 + "|")
    for seed in (7, 8):
        data, _ = cz.simulate_gppl(n_items=25, n_pairs=600, s=0.5, tau=0.6, seed=seed)
        i, j = np.triu_indices(25, 1)
        p, took = {}, {}
        for method in ("natgrad", "ep"):
            t = time.time()
            post = cz.fit(cz.GPPL(), data, method=method, check_confidence=False)
            took[method] = time.time() - t
            probs = post.predict_outcomes(data.item_ids[i], data.item_ids[j]).to_numpy()
            p[method] = (float(post.tau[0]), probs)
        gap = np.abs(p["ep"][1] - p["natgrad"][1])
        print(f"| {seed} | {p['natgrad'][0]:.4f} | {p['ep'][0]:.4f} | {gap.mean():.4f} | {gap.max():.4f} | "
              f"{took['natgrad']:.1f} | {took['ep']:.1f} |", flush=True)


def dpm(nuts: bool):
    routes = [("gibbs", cz.DPMCommunities(lengthscale=[1.5])),
              ("svi", cz.DPMCommunities(truncation=4, lengthscale=[1.5]))]
    if nuts:
        routes.append(("nuts", cz.DPMCommunities(truncation=2, lengthscale=[1.5])))
    print("| seed | route | τ | held-out three-way log loss | seconds |\n|---|---|---|---|---|")
    for seed in (0, 1, 2):
        train, test = split(crowd([0.6] * 10, 50, seed=seed))
        for method, model in routes:
            post, took = fit(model, train, method)
            tau = float(post.tau.mean())
            print(f"| {seed} | {method} | {tau:.3f} | {log_loss(post, test):.4f} | {took:.1f} |", flush=True)


def per_user():
    train, test = split(crowd(USER_TAUS, 150))
    print("| route | tie_threshold | τ | held-out three-way log loss | seconds |\n|---|---|---|---|---|")
    for method, T in (("svi", dict(truncation=3)), ("gibbs", {})):
        for tt in ("per_user", "crowd"):
            post, took = fit(cz.DPMCommunities(lengthscale=[1.5], tie_threshold=tt, **T), train, method)
            tau = ", ".join(f"{t:.3f}" for t in np.atleast_1d(post.tau.mean(0).numpy()))
            print(f"| {method} | {tt} | {tau} | {log_loss(post, test):.4f} | {took:.1f} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nuts", action="store_true", help="add NUTS to the DPM's routes (slow)")
    parser.add_argument("--only", choices=("gppl", "dpm", "per-user"))
    args = parser.parse_args(argv)
    if args.only in (None, "gppl"):
        gppl()
    if args.only in (None, "dpm"):
        dpm(args.nuts)
    if args.only in (None, "per-user"):
        per_user()


if __name__ == "__main__":
    main()
