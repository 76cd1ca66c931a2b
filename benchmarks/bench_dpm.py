"""DPM community model benchmarks: the speed of the Gibbs route.

Time per Gibbs sweep against the number of users (500 → 5000 users, 50 items with 2-D features,
20 labels each; ``crowdzoo.data.simulate_dpm.simulate_communities`` with the ``dpm-simulation``
comparison's settings at d = 1), and
the svi route's time per epoch (one pass over the users in mini-batches of 100 users) at the same
sizes. Each timing is a difference of two fits that differ only in the number of sweeps (steps), so
that setting up, building the posterior and the first sweep's community fits are not counted (after
one untimed warm-up of each route).

Run with ``make bench`` (replaces this script's section of docs/benchmarks.md); ``--quick`` uses
100–400 users.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

BATCH = 100  # users per svi mini-batch


def _data(n_users, n_items=50, n_labels=20, seed=0):
    from crowdzoo.data.simulate_dpm import simulate_communities

    return simulate_communities(n_users=n_users, n_items=n_items, n_labels=n_labels, n_communities=4,
                                scale=1.5, lengthscale=0.3, deviation=1.0, seed=seed)[0]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def gibbs_size(n_users, sweeps=3, seed=0):
    """Seconds per Gibbs sweep (one chain) and the number of communities at the end."""
    import crowdzoo as cz

    data = _data(n_users, seed=seed)
    model = cz.DPMCommunities()
    kw = dict(method="gibbs", n_chains=1, burn_in=1, seed=seed, progress_bar=False)
    t1, _ = _timed(lambda: cz.fit(model, data, n_sweeps=2, **kw))
    t2, post = _timed(lambda: cz.fit(model, data, n_sweeps=2 + sweeps, **kw))
    k = int(post.n_communities().idxmax())
    return {"users": n_users, "labels": data.n_pairs, "s_per_sweep": (t2 - t1) / sweeps, "communities": k}


def svi_size(n_users, steps=200, seed=0):
    """Seconds per svi epoch (U / BATCH steps of BATCH users)."""
    import crowdzoo as cz

    data = _data(n_users, seed=seed)
    model = cz.DPMCommunities()
    batch = min(BATCH, n_users)
    kw = dict(method="svi", subsample_size=batch, n_draws=10, seed=seed, progress_bar=False)
    t1, _ = _timed(lambda: cz.fit(model, data, num_steps=5, **kw))
    t2, _ = _timed(lambda: cz.fit(model, data, num_steps=5 + steps, **kw))
    per_step = (t2 - t1) / steps
    return {"users": n_users, "s_per_step": per_step, "s_per_epoch": per_step * n_users / batch}


HEAD = "<!-- bench_dpm.py: this section is rewritten by it -->"


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md", help="markdown file to write the section to")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    sizes = [100, 200, 400] if args.quick else [500, 1000, 2000, 5000]
    gibbs_size(20, sweeps=1), svi_size(20, steps=2)  # warm-up: lazy imports and first calls not timed
    gibbs = [gibbs_size(u, sweeps=2 if args.quick else 3) for u in sizes]
    svi = {r["users"]: r for r in (svi_size(u, steps=60 if args.quick else 200) for u in sizes)}
    L = [HEAD, "", f"Machine: {machine()}, 2 torch threads. Reproduce with `python benchmarks/bench_dpm.py "
         "--out docs/benchmarks.md` (part of `make bench`; replaces this section).", "",
         "## DPM communities: time per Gibbs sweep and per svi epoch against users", "",
         "50 items (2-D features), 20 labels per user, simulated communities (4 communities, d = 1 of "
         "`dpm-simulation`); `DPMCommunities()` defaults (exact item GP, λ = 1). Gibbs: one chain, "
         "`membership=\"marginal\"`, seconds per sweep over the sweeps after the second (a sweep "
         "redraws every user's community and refits the communities whose members changed). svi: "
         f"T = 10, mini-batches of {BATCH} users, AutoNormal; an epoch is U / {BATCH} steps. The "
         "paper's claim is a sweep linear in users: compare *ms per user* down the rows.", "",
         "| users | labels | Gibbs s / sweep | Gibbs ms / user | communities (end) | svi ms / step | "
         "svi s / epoch |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in gibbs:
        s = svi[r["users"]]
        L.append(f"| {r['users']:,} | {r['labels']:,} | {r['s_per_sweep']:.2f} | "
                 f"{1000 * r['s_per_sweep'] / r['users']:.2f} | {r['communities']} | "
                 f"{1000 * s['s_per_step']:.1f} | "
                 f"{s['s_per_epoch']:.3f} |")
    text = "\n".join(L) + "\n"
    replace_section(args.out, HEAD, text)  # this script's section only; the others stay
    print(text)


if __name__ == "__main__":
    main()
