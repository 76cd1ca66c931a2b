"""Data-parallel BayesSCDC natgrad on 1 and 2 ranks, each reading its shard of the annotations.

The data: N = 10⁴ items with 20-D observations from 10 Gaussian clusters, and A = 10⁶ or 10⁷ crowd
annotations (worker, i, j, same) by 100 two-coin workers (α = β = 0.9) on random pairs, written once to
a CSV. Each rank reads only its rows with :meth:`crowdzoo.LinkData.read_shard` and fits
``crowdzoo.fit(cz.BayesSCDC(...), links, distributed=True)`` under ``torchrun`` (gloo, loopback), one
torch thread per rank: one epoch of 10 steps (1000 items and 2000 annotations a step, no warm-up,
``init="random"``), then the final encoding of every item on the whole annotation graph, whose
messages cross the ranks, and the workers' Gibbs sampler (:mod:`crowdzoo.models.scdc.gibbs`, 500 sweeps).
Reported per rank: the annotations it holds, the seconds its read took, the
resident memory of its annotations (the LinkData's arrays), its resident set after the read and at
peak (VmHWM) during the fit, and the fit's seconds.

Run with ``make bench`` (writes its section of docs/benchmarks.md) or
``.venv/bin/python benchmarks/bench_distributed_scdc.py --out docs/benchmarks.md`` (``--quick``:
A = 10⁵ and 10⁶, a smoke run).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_distributed import _hwm_mb, _reset_hwm, _rss_mb, launch  # noqa: E402

HEAD = "<!-- bench_distributed_scdc.py: this section is rewritten by it -->"
N, D, K, W, BLOCK = 10**4, 20, 10, 100, 10**6


def observations(seed: int = 0):
    """(O (N, D), true clusters (N,)): 10 well-separated Gaussian clusters."""
    import numpy as np

    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, N)
    centres = rng.normal(0.0, 4.0, size=(K, D))
    return centres[z] + rng.normal(size=(N, D)), z


def write_links(path: str, A: int, z, seed: int = 0) -> None:
    """A annotations in blocks of BLOCK rows: random pairs, random workers, two-coin labels."""
    import numpy as np
    import pandas as pd

    for k, lo in enumerate(range(0, A, BLOCK)):
        g = np.random.default_rng([seed, k])
        n = min(BLOCK, A - lo)
        i = g.integers(0, N, n)
        j = (i + g.integers(1, N, n)) % N
        truth = z[i] == z[j]
        flip = g.uniform(size=n) > 0.9
        same = (truth ^ flip).astype(np.int64)
        pd.DataFrame({"worker": g.integers(0, W, n), "i": i, "j": j, "same": same}).to_csv(
            path, mode="a" if k else "w", header=not k, index=False)


def worker(args) -> None:
    """One rank (under torchrun): read its shard, fit one epoch, write its figures."""
    import torch

    torch.set_num_threads(1)
    import warnings

    import crowdzoo as cz
    from crowdzoo.inference.distributed import rank_and_world

    rank, world = rank_and_world()
    O, _ = observations()
    rss_import = _rss_mb()
    t0 = time.perf_counter()
    links = cz.LinkData.read_shard(args.csv, O)
    read_s = time.perf_counter() - t0
    rss_data = _rss_mb()
    warnings.simplefilter("ignore")
    _reset_hwm()
    t0 = time.perf_counter()
    post = cz.fit(cz.BayesSCDC(n_clusters=K, latent_dim=4, hidden=(64, 64)), links, distributed=True,
                  n_epochs=1, warmup=0, init="random", batch_size=1000, annotation_batch=2000,
                  n_init=1, progress_bar=False)
    fit_s = time.perf_counter() - t0
    out = dict(rank=rank, world=world, annotations=links.n_annotations, read_s=read_s, fit_s=fit_s,
               annotation_mb=sum(getattr(links, k).nbytes for k in ("i", "j", "worker", "same")) / 2**20,
               rss_import_mb=rss_import, rss_data_mb=rss_data, peak_mb=_hwm_mb(),
               clusters=int(len(post.clusters_in_use())))
    with open(os.path.join(args.dir, f"rank{rank}.json"), "w") as fh:
        json.dump(out, fh)


def run(csv: str, ranks: int) -> list[dict]:
    return launch(__file__, ranks, ["--csv", csv], csv)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--csv", default="")
    ap.add_argument("--dir", default=".")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    from harness import machine, replace_section

    sizes = [10**5, 10**6] if args.quick else [10**6, 10**7]
    rows = []
    _, z = observations()
    with tempfile.TemporaryDirectory() as d:
        for A in sizes:
            csv = os.path.join(d, f"links{A}.csv")
            write_links(csv, A, z)
            for R in (1, 2):
                for r in run(csv, R):
                    rows.append(dict(A=A, **r))
                    print(json.dumps(rows[-1]), flush=True)
            os.remove(csv)
    lines = [HEAD, "", "## Data-parallel BayesSCDC natgrad: each rank reads its shard of the annotations", "",
             f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/bench_distributed_scdc.py --out "
             f"docs/benchmarks.md` (part of `make bench`). N = {N:,} items (20-D observations, 10 "
             f"clusters), {W} two-coin workers (α = β = 0.9) on random pairs, A annotations in a CSV that "
             "each rank reads with `LinkData.read_shard` (only its rows). BayesSCDC(K = 10, d = 4, hidden "
             "(64, 64)), one epoch of 10 steps (1000 items and 2000 annotations a step), then every item "
             "encoded on the whole annotation graph (messages summed over the ranks) and the workers' Gibbs "
             "sampler (500 sweeps over every annotation, each colour's messages summed over the ranks); "
             "gloo over loopback, "
             "one torch thread per rank. *annotations MiB*: the rank's LinkData arrays (i, j, worker, "
             "same); *after read*: its resident set then; *fit peak*: its resident high-water mark during "
             "the fit (VmHWM, reset before it; the observations, the networks and the encoding's N × K "
             "messages are on every rank).", "",
             "| A | ranks | rank | annotations held | read s | annotations MiB | after read MiB | "
             "fit peak MiB | fit s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['A']:,} | {r['world']} | {r['rank']} | {r['annotations']:,} | "
                     f"{r['read_s']:.1f} | {r['annotation_mb']:.0f} | {r['rss_data_mb']:.0f} | "
                     f"{r['peak_mb']:.0f} | {r['fit_s']:.1f} |")
    text = "\n".join(lines) + "\n"
    replace_section(args.out, HEAD, text)
    print(text)


if __name__ == "__main__":
    main()
