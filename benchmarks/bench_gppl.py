"""GPPL natgrad benchmarks: time per iteration and per-step memory against P; time to converge.

Run with ``make bench`` (writes docs/benchmarks.md). Each size runs in a fresh subprocess so that
its peak memory is its own. Peak memory is read from /proc (VmHWM, reset through clear_refs after
the data are built), so "step memory" is what the fit adds on top of the labels it holds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, proc_mib, replace_section  # noqa: E402

HEAD = "<!-- bench_gppl.py: this section is rewritten by it -->"


def _problem(n_items, n_pairs, seed=0):
    import torch

    import crowdzoo as cz
    from crowdzoo.data.simulate import random_pairs

    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n_items, 2))
    # a smooth utility (no N×N Cholesky needed at large N)
    f = np.sin(X[:, 0]) + 0.5 * np.cos(1.3 * X[:, 1]) + 0.1 * X[:, 0]
    a, b = random_pairs(rng, n_items, n_pairs)
    p = torch.special.ndtr(torch.tensor(2.0 * (f[a] - f[b]))).numpy()
    y = (rng.uniform(size=n_pairs) < p).astype(np.float64)
    return cz.PairwiseData.from_arrays(a, b, y, X), f


def one_size(n_pairs, M, batch, iters, likelihood):
    import torch

    import crowdzoo as cz

    torch.set_num_threads(2)
    data, _ = _problem(1000, n_pairs)
    model = cz.GPPL(n_inducing=M)
    setup = model.setup(data)
    cz.fit(model, data, method="natgrad", setup=setup, max_iter=3, tol=0, batch_size=batch,
           likelihood=likelihood, learn_kernel=False, progress_bar=False)  # warm-up
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    rss0 = proc_mib("VmRSS")
    t0 = time.perf_counter()
    cz.fit(model, data, method="natgrad", setup=setup, max_iter=iters, min_iter=iters, tol=0,
           batch_size=batch, likelihood=likelihood, learn_kernel=False, progress_bar=False)
    dt = (time.perf_counter() - t0) / iters
    labels_mib = (data.a.nbytes + data.b.nbytes + data.y.nbytes) / 2**20
    return {"P": n_pairs, "M": M, "P_i": batch, "likelihood": likelihood,
            "ms_per_iter": 1000 * dt, "step_peak_mib": proc_mib("VmHWM") - rss0,
            "labels_mib": labels_mib}


def converge(n_pairs, M, batch, likelihood):
    import torch

    import crowdzoo as cz

    torch.set_num_threads(2)
    data, f = _problem(1000, n_pairs)
    train, test = cz.split_pairs(data, 0.1, seed=0)
    model = cz.GPPL(n_inducing=M)
    t0 = time.perf_counter()
    post = cz.fit(model, train, method="natgrad", batch_size=batch, likelihood=likelihood,
                  max_iter=2000, learn_kernel=False, progress_bar=False)
    sec = time.perf_counter() - t0
    p = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b])
    from scipy.stats import kendalltau

    tau = kendalltau(f, post.utilities()[0].values).statistic
    return {"P": n_pairs, "M": M, "P_i": batch, "likelihood": likelihood, "seconds": sec,
            "iterations": post.settings["iterations"], "converged": post.settings["converged"],
            "heldout_acc": float(((p > 0.5) == (test.y == 1)).mean()), "tau": float(tau)}


def _sub(fn, **kw):
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import bench_gppl as b; print(json.dumps(b.{fn}(**{kw!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = ap.parse_args(argv)
    sizes = [10**3, 10**4] if args.quick else [10**4, 10**5, 10**6]
    rows = [_sub("one_size", n_pairs=P, M=100, batch=1000, iters=30, likelihood=lik)
            for P in sizes for lik in ("linearised", "exact")]
    conv = [_sub("converge", n_pairs=10**4 if args.quick else 10**5, M=50 if args.quick else 200,
                 batch=1000, likelihood=lik) for lik in ("linearised", "exact")]
    lines = [
        HEAD, "",
        f"Machine: {machine()}.", "",
        "Reproduce with `make bench` (runs `python benchmarks/bench_gppl.py --out docs/benchmarks.md`).",
        "", "## GPPL natgrad: cost per iteration against the number of labels P", "",
        "N = 1000 items (2-D features), M = 100 inducing items, P_i = 1000 pairs per mini-batch. "
        "*Step peak* is the peak resident memory a fit adds on top of the data it was given "
        "(VmHWM after a reset, minus VmRSS before the fit); *labels* is the size of a, b, y.", "",
        "| P | likelihood | ms / iteration | step peak (MiB) | labels (MiB) |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['P']:,} | {r['likelihood']} | {r['ms_per_iter']:.1f} | "
                     f"{r['step_peak_mib']:.1f} | {r['labels_mib']:.1f} |")
    lines += ["", "## GPPL natgrad: time to converge", "",
              "N = 1000 items, 90 % of the pairs for training, M and P_i as given; held-out accuracy "
              "on the other 10 %, Kendall τ of the posterior mean against the simulated utility.", "",
              "| P (train+test) | M | P_i | likelihood | seconds | iterations | converged "
              "| held-out acc | τ |",
              "|---:|---:|---:|---|---:|---:|---|---:|---:|"]
    for r in conv:
        lines.append(f"| {r['P']:,} | {r['M']} | {r['P_i']} | {r['likelihood']} | {r['seconds']:.1f} | "
                     f"{r['iterations']} | {r['converged']} | {r['heldout_acc']:.3f} | {r['tau']:.3f} |")
    text = "\n".join(lines) + "\n"
    replace_section(args.out, HEAD, text)
    print(text)


if __name__ == "__main__":
    main()
