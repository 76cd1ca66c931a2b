"""Data-parallel crowdGPPL natgrad at P = 10⁶ and 10⁷ labels on 1 and 2 ranks.

The crowd: 10⁴ items (2-D features), 10⁵ users (independent, no features), C = 20 components,
M = 100 inducing items; labels (a, b, user, y) from a consensus utility plus a per-user shift. Each
rank *generates* only its own contiguous share of the labels (seeded blocks of 10⁵, so that the
shards of any number of ranks are the same labels), as a rank that read its shard with
:meth:`crowdzoo.PairwiseData.read_shard` would hold them, and fits it with
``crowdzoo.fit(..., method="natgrad", distributed=True)`` under ``torchrun`` (gloo, loopback), one
torch thread per rank. Reported per rank: the labels it holds, the median wall time of an iteration
(after two warm-up iterations), its resident memory after the imports, after building its shard,
and at peak (``ru_maxrss``).

Run with ``make bench`` (writes its section of docs/benchmarks.md) or
``.venv/bin/python benchmarks/bench_distributed.py --out docs/benchmarks.md`` (``--quick``: P = 10⁵
and 10⁶, a smoke run).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
HEAD = "<!-- bench_distributed.py: this section is rewritten by it -->"
N_ITEMS, N_USERS, C, M, BLOCK = 10**4, 10**5, 20, 100, 10**5


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def shard_labels(P: int, lo: int, hi: int, seed: int = 0):
    """Labels lo..hi-1 of the benchmark's P: blocks of BLOCK labels, each from its own seed, written
    into arrays of the shard's size (no second copy)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(N_ITEMS, 2))
    t = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1])
    shift = np.random.default_rng(seed + 1).normal(0.0, 0.5, size=N_USERS)
    out = [np.empty(hi - lo, dtype=np.int64) for _ in range(3)] + [np.empty(hi - lo)]
    for k in range(lo // BLOCK, (hi - 1) // BLOCK + 1):
        g = np.random.default_rng([seed, k])
        n = min(BLOCK, P - k * BLOCK)
        a = g.integers(0, N_ITEMS, n)
        b = (a + g.integers(1, N_ITEMS, n)) % N_ITEMS
        j = g.integers(0, N_USERS, n)
        f = (t[a] - t[b]) * (1.0 + shift[j])
        y = (g.uniform(size=n) < 0.5 * (1.0 + np.tanh(f))).astype(np.float64)
        s, e = max(lo - k * BLOCK, 0), min(hi - k * BLOCK, n)
        for dst, src in zip(out, (a, b, j, y)):
            dst[k * BLOCK + s - lo:k * BLOCK + e - lo] = src[s:e]
    return X, out


def _hwm_mb() -> float:
    """The resident set's high-water mark (VmHWM) since the last :func:`_reset_hwm`."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def _reset_hwm() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def concurrency_probe() -> dict:
    """ms per float64 (100 × 5000)·(5000 × 100) product on one thread, alone and with a second process
    doing the same at once: whether this machine's cores compute independently."""
    code = ("import time, torch; torch.set_num_threads(1); A = torch.randn(5000, 100, dtype=torch.float64); "
            "(A.T * A[:, 0]) @ A; t0 = time.perf_counter()\nfor _ in range(300): (A.T * A[:, 0]) @ A\n"
            "print((time.perf_counter() - t0) / 300 * 1e3)")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    alone = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                 check=True).stdout)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    pair = [float(p.communicate()[0]) for p in procs]
    return {"alone_ms": alone, "pair_ms": max(pair)}


def worker(args) -> None:
    """One rank (under torchrun): build its shard, fit a few iterations, write its figures."""
    import torch

    torch.set_num_threads(1)
    import dataclasses
    import warnings

    import numpy as np

    import crowdzoo as cz
    from crowdzoo.inference.distributed import bounds, rank_and_world

    rank, world = rank_and_world()
    if args.untrimmed:  # the loop without its heap trimming, to show what the trimming holds back
        import crowdzoo.inference.natgrad as loop

        loop.trimming = lambda callback=None: callback
    rss_import = _rss_mb()
    lo, hi = bounds(args.P, rank, world)
    X, (a, b, j, y) = shard_labels(args.P, lo, hi)
    data = cz.PairwiseData.from_arrays(a, b, y, X, users=j, user_ids=np.arange(N_USERS))
    data = dataclasses.replace(data, label_range=(lo, hi, args.P))
    del a, b, j, y
    rss_data = _rss_mb()
    stamps = []
    warnings.simplefilter("ignore")
    _reset_hwm()
    t0 = time.perf_counter()
    cz.fit(cz.CrowdGPPL(n_inducing=M, n_components=C), data, method="natgrad", distributed=True,
           batch_size=args.batch, max_iter=args.iters, tol=0.0, eval_every=10**6, eval_size=args.batch,
           progress_bar=False, callback=lambda i, s: stamps.append(time.perf_counter()))
    total = time.perf_counter() - t0
    steps = np.diff(stamps)[2:]
    out = dict(rank=rank, world=world, labels=hi - lo, s_per_iter=float(np.median(steps)), total_s=total,
               rss_import_mb=rss_import, rss_data_mb=rss_data, peak_mb=_hwm_mb(),
               label_mb=(data.a.nbytes + data.b.nbytes + data.y.nbytes + data.users.nbytes) / 2**20)
    with open(os.path.join(args.dir, f"rank{rank}.json"), "w") as fh:
        json.dump(out, fh)


def read_rate(P: int = 10**6) -> float:
    """Labels per second that :meth:`crowdzoo.PairwiseData.read_shard` reads from a pairs CSV of P
    rows (user, a, b, y; the items named by a table), as one process of one rank."""
    import numpy as np
    import pandas as pd

    import crowdzoo as cz

    X, (a, b, j, y) = shard_labels(P, 0, P)
    items = pd.DataFrame(X, columns=["x0", "x1"], index=pd.RangeIndex(N_ITEMS, name="item"))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pairs.csv")
        pd.DataFrame({"user": j, "a": a, "b": b, "y": y.astype(np.int64)}).to_csv(path, index=False)
        t0 = time.perf_counter()
        data = cz.PairwiseData.read_shard(path, items=items, user="user", rank=0, world=1)
        return data.n_pairs / (time.perf_counter() - t0)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script: str, ranks: int, args: list[str], what: str) -> list[dict]:
    """``script --worker ARGS --dir D`` on ``ranks`` local ranks under torchrun (one torch thread each);
    every rank's JSON figures (``D/rank{r}.json``), or a SystemExit naming ``what`` with the stderr."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-addr",
               "127.0.0.1", "--master-port", str(_port()), script, "--worker", *args, "--dir", d]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if done.returncode:
            err = done.stderr
            raise SystemExit(f"{what}, {ranks} ranks, failed:\n{err[:3000]}\n...\n{err[-2000:]}")
        return [json.load(open(os.path.join(d, f"rank{r}.json"))) for r in range(ranks)]


def run(P: int, ranks: int, batch: int, iters: int, untrimmed: bool = False) -> list[dict]:
    return launch(__file__, ranks, ["--P", str(P), "--batch", str(batch), "--iters", str(iters)]
                  + (["--untrimmed"] if untrimmed else []), f"P={P}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--P", type=int, default=10**6)
    ap.add_argument("--batch", type=int, default=10**4)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--dir", default=".")
    ap.add_argument("--untrimmed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    from harness import machine, replace_section

    sizes = [10**5, 10**6] if args.quick else [10**6, 10**7]
    rows = []
    for P in sizes:
        for R in (1, 2):
            for r in run(P, R, args.batch, args.iters):
                rows.append(dict(P=P, **r))
                print(json.dumps(rows[-1]), flush=True)
    trim_P, trim_iters = sizes[0], 40
    trim = {flag: [r["peak_mb"] for r in run(trim_P, 2, args.batch, trim_iters, untrimmed=flag)]
            for flag in (False, True)}
    print(json.dumps(trim), flush=True)
    probe = concurrency_probe()
    rate = read_rate()
    lines = [HEAD, "", "## Data-parallel crowdGPPL natgrad (torch.distributed)", "",
             f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/bench_distributed.py --out "
             f"docs/benchmarks.md` (part of `make bench`). {N_ITEMS:,} items (2-D features), {N_USERS:,} "
             f"independent users, C = {C}, M = {M}, P_i = {args.batch:,} labels per iteration, gloo over "
             "loopback, one torch thread per rank; each rank builds only its own shard. Time: median of "
             f"iterations 3–{args.iters}. Memory: the rank's label arrays, its resident set after the "
             "imports and after building its shard, and its peak during the fit (VmHWM, reset before "
             "it).", "",
             "| labels P | ranks | rank | labels on rank | label MB | s / iteration | RSS imports MB | "
             "RSS with shard MB | fit peak MB |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['P']:,} | {r['world']} | {r['rank']} | {r['labels']:,} | {r['label_mb']:.0f} | "
                     f"{r['s_per_iter']:.3f} | {r['rss_import_mb']:.0f} | {r['rss_data_mb']:.0f} | "
                     f"{r['peak_mb']:.0f} |")
    top = [r for r in rows if r["P"] == sizes[-1]]
    one = next(r["peak_mb"] for r in top if r["world"] == 1)
    two = [r["peak_mb"] for r in top if r["world"] == 2]
    falls = "falls" if max(two) < one else "does not fall"
    lines += ["", f"At {sizes[-1]:,} labels a rank's fit peak {falls}: {one:.0f} MB on one rank, "
              f"{min(two):.0f}–{max(two):.0f} MB on two; the labels' share halves "
              f"({top[0]['label_mb']:.0f} → {top[-1]['label_mb']:.0f} MB), what every rank "
              "repeats (torch, q(w)'s C × U arrays, the iteration's temporaries) does not. The loop "
              "trims the C heap after every iteration of a "
              f"distributed fit (`natgrad.trimming`): over {trim_iters} iterations at {trim_P:,} labels on "
              f"two ranks the peaks are {' / '.join(f'{x:.0f}' for x in trim[False])} MB with it and "
              f"{' / '.join(f'{x:.0f}' for x in trim[True])} MB without it (glibc keeps what each "
              "iteration freed between the collectives' buffers)."]
    ratio = probe["pair_ms"] / probe["alone_ms"]
    cores = (f"This machine's two cores do not compute independently: one float64 (100 × 5000)·(5000 × 100) "
             f"product takes {probe['alone_ms']:.2f} ms on one thread alone and {probe['pair_ms']:.2f} ms "
             "with a second process doing the same at once, so two ranks cannot finish an iteration "
             "sooner here." if ratio > 1.5 else
             f"A float64 (100 × 5000)·(5000 × 100) product takes {probe['alone_ms']:.2f} ms on one thread "
             f"alone and {probe['pair_ms']:.2f} ms with a second process doing the same at once, so the "
             "two cores compute independently during this run.")
    lines += ["", cores + " Two ranks halve the labels each holds and the label work each does (the "
              "matrix products over the batch's labels). What they do not divide is what every rank "
              "repeats: the O(C M³) factorisations and, for independent users, the O(C U) updates of "
              "q(w), memory-bound work on C × U arrays (2 · 10⁶ numbers here) that two ranks on one "
              "machine contend for. They also wait in the all-reduces, which for independent users "
              "carry only the batch's users (at most P_i per component, gathered once per iteration).", "",
              f"Reading: `PairwiseData.read_shard` reads {rate / 1e6:.2f} million labels a second from a "
              "10⁶-row pairs CSV (user, a, b, y; items named by a table) in one process, its two passes "
              "and the file's checks included.", ""]
    replace_section(args.out, HEAD, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
