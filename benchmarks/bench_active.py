"""What ``post.suggest`` costs: a batch of 20 queries out of about 10⁵ candidates.

For each model, on one torch thread: the seconds to read the candidates' joint Gaussian (the model's
``utility_gaussian``, one per asked user, and every candidate's mean and variance), and the seconds of
the greedy batch of 20 (each step rescoring every candidate and one fantasy step, O(k · #candidates) for
the k-th), for BALD, maximum entropy, Thompson and random queries. The problems:

* GPPL: 448 items with 2-D features (100,128 pairs), 2000 labels, natgrad (the probit's closed form);
* crowdGPPL: 100 items × 20 users (99,000 queries), 2000 labels, natgrad (every user's queries in one
  joint Gaussian from 1000 posterior draws);
* crowdBT–GP: 100 items × 20 workers (99,000 queries), 2000 labels (the worker-flip link's
  Gauss–Hermite sums, 20 nodes).

Run with ``make bench`` or ``.venv/bin/python benchmarks/bench_active.py --out docs/benchmarks.md``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
HEAD = "<!-- bench_active.py: this section is rewritten by it -->"


def problems():
    import crowdzoo as cz

    g, _ = cz.simulate_gppl(n_items=448, n_pairs=2000, seed=0)
    crowd, _ = cz.simulate_crowd(n_items=100, n_users=20, n_pairs=2000, seed=0)
    settings = dict(progress_bar=False)
    return [("GPPL", lambda: cz.fit(cz.GPPL(), g, seed=0, **settings)),
            ("crowdGPPL", lambda: cz.fit(cz.CrowdGPPL(), crowd, seed=0, **settings)),
            ("crowdBT–GP", lambda: cz.fit(cz.CrowdBTGP(), crowd, seed=0))]


def measure(n: int = 20):
    import numpy as np
    import torch

    from crowdzoo.core.suggest import candidates, greedy

    torch.set_num_threads(1)
    rows = []
    for name, fit in problems():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = fit()
        items, users = post._query_ids()
        a, b, u = candidates(items, users)
        for strategy in ("bald", "entropy", "thompson", "random"):
            t0 = time.perf_counter()
            q = post._queries(a, b, u)
            t1 = time.perf_counter()
            pick, _ = greedy(q, n, strategy, seed=0)
            t2 = time.perf_counter()
            assert len(np.unique(pick)) == n
            rows.append({"model": name, "candidates": len(a), "strategy": strategy,
                         "gaussian": t1 - t0, "batch": t2 - t1, "total": t2 - t0})
            print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/benchmarks.md")
    args = ap.parse_args()
    from harness import machine, replace_section

    rows = measure()
    head = "## Active learning: 20 queries out of 10⁵ candidates"
    lines = [HEAD, "", head, "",
             f"Machine: {machine()}; one torch thread; load average {os.getloadavg()[0]:.1f} when it "
             "started (other jobs on the cores slow it). Command: `.venv/bin/python "
             "benchmarks/bench_active.py --out docs/benchmarks.md` (part of `make bench`). *Gaussian*: "
             "reading the candidates' joint "
             "Gaussian from the posterior (GPPL: exact, Eq. 19; crowdGPPL: one joint Gaussian over users, "
             "from 1000 draws); *batch*: "
             "the greedy batch of 20, each step rescoring every candidate and conditioning on the chosen "
             "query's expected label (docs/active.md).", "",
             "| model | candidates | strategy | Gaussian s | batch of 20 s | total s |",
             "|---|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['candidates']:,} | {r['strategy']} | {r['gaussian']:.2f} | "
                     f"{r['batch']:.2f} | {r['total']:.2f} |")
    replace_section(args.out, HEAD, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
