"""How close a natgrad iteration comes to its arithmetic (what the Python around the tensors costs).

For crowdGPPL's speed-target crowd (50 items, 20 users with 2-D features, 1000 labels, C = 20,
M = 25, every user inducing) and for GPPL (N = 100, M = 25, 1000 pairs), on one torch thread:

* the floating-point work of one iteration, counted from the algebra (matrix products and
  factorisations; :func:`crowd_flops`), and the special-function evaluations of the exact likelihood's
  Gauss–Hermite quadrature (erfc, log, exp per node);
* the machine's rate for each: a float64 matrix product at the iteration's own shapes and at
  512 × 512, and erfc + log + exp per element on arrays of the quadrature's size;
* the measured time per iteration (median of 5 runs of 30 iterations after a warm-up), and the same
  iteration's *floor*: its time on a problem so small (10 labels, M = 3) that the arithmetic is nil,
  which is what the rest is — Python and torch's dispatch, a few µs for each of the iteration's
  hundreds of small tensor operations.

Run with ``make bench`` or ``.venv/bin/python benchmarks/bench_overhead.py --out docs/benchmarks.md``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
HEAD = "<!-- bench_overhead.py: this section is rewritten by it -->"


def crowd_flops(P: int, M: int, M_u: int, C: int, consensus: bool = True, carried: bool = True) -> float:
    """Floating-point operations of one crowdGPPL sweep (Eq. 32–37) on P labels: each factor's
    statistics Aᵀ diag(λ) A (2PM²) and Aᵀν (2PM), its Cholesky and inverse (~M³), its mean (2M²), the
    labels' new moments A m (2PM) and row-wise A S Aᵀ (2PM² + 2PM); plus, unless ``carried`` over from
    the last sweep (the full batch), the iteration's first moments of every factor (2PMC + 2PM²C for
    v, the same in M_u for w)."""
    def factor(m):
        return 2 * P * m * m + 2 * P * m + m ** 3 + 2 * m * m + 2 * P * m + 2 * P * m * m + 2 * P * m

    sweep = C * (factor(M) + factor(M_u)) + (factor(M) if consensus else 0)
    first = 0 if carried else C * (2 * P * M + 2 * P * M * M + 2 * P * M_u + 2 * P * M_u * M_u)
    return float(sweep + first)


def gemm_rate(shape_a, shape_b, reps: int = 200) -> float:
    """FLOP/s of a float64 matrix product at these shapes (best of three timings)."""
    import torch

    a = torch.randn(*shape_a, dtype=torch.float64)
    b = torch.randn(*shape_b, dtype=torch.float64)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, (time.perf_counter() - t0) / reps)
    return 2 * shape_a[0] * shape_a[1] * shape_b[1] / best


def special_rate(n: int, reps: int = 50, log: bool = True) -> float:
    """Elements per second of log(½ erfc(x)) then exp (the quadrature's per-node special functions), or
    without ``log``, erfc and exp (the derivatives alone, :func:`crowdzoo.gp.probit.probit_grads`)."""
    import torch

    x = torch.randn(n, dtype=torch.float64)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            if log:
                lp = torch.log(0.5 * torch.special.erfc(x))
                torch.exp(-0.5 * x * x - lp)
            else:
                torch.exp(-0.5 * x * x) / torch.special.erfc(x)
        best = min(best, (time.perf_counter() - t0) / reps)
    return n / best


def _time_fit(fit, iters: int = 30, runs: int = 5) -> float:
    fit(3)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fit(iters)
        times.append((time.perf_counter() - t0) / iters)
    times.sort()
    return times[len(times) // 2]


def measure() -> list[dict]:
    import torch

    torch.set_num_threads(1)
    import warnings

    import crowdzoo as cz

    warnings.simplefilter("ignore")
    rows = []
    data, _ = cz.simulate_crowd(n_items=50, n_users=20, n_pairs=1250, n_components=3, seed=0)
    train, _ = cz.split_pairs(data, 0.2, seed=0)
    tiny_crowd = train.subset(range(10))
    model = cz.CrowdGPPL(n_components=20, n_inducing=25)
    tiny_model = cz.CrowdGPPL(n_components=20, n_inducing=3)
    setup, tiny_setup = model.setup(train), tiny_model.setup(tiny_crowd)
    P, M, M_u, C = train.n_pairs, setup.M, setup.M_u, setup.C
    g_data, _ = cz.simulate_gppl(n_items=100, n_pairs=1000, n_features=3, seed=0)
    g_tiny = g_data.subset(range(10))
    g_model, g_tiny_model = cz.GPPL(n_inducing=25), cz.GPPL(n_inducing=3)
    g_setup, g_tiny_setup = g_model.setup(g_data), g_tiny_model.setup(g_tiny)

    def timed(m, d, su, lik):  # at a fixed kernel: the arithmetic counted has no kernel step
        return _time_fit(lambda n: cz.fit(m, d, method="natgrad", likelihood=lik, setup=su, max_iter=n,
                                          min_iter=n, tol=0.0, eval_every=10**6, learn_kernel=False,
                                          progress_bar=False))

    for lik in ("linearised", "exact"):
        rows.append(dict(model="crowdGPPL", likelihood=lik, P=P, M=M, M_u=M_u, C=C,
                         seconds=timed(model, train, setup, lik),
                         floor=timed(tiny_model, tiny_crowd, tiny_setup, lik),
                         flops=crowd_flops(P, M, M_u, C),
                         nodes=20 * P * (2 * C + 2) if lik == "exact" else 0, rate_key="quotient"))
        inner = 3 if lik == "linearised" else 1
        flops = inner * (2 * 1000 * 25 * 25 + 4 * 1000 * 25) + 2 * 25 ** 3 + 2 * 1000 * 25 * 25
        rows.append(dict(model="GPPL", likelihood=lik, P=1000, M=25, M_u=0, C=1,
                         seconds=timed(g_model, g_data, g_setup, lik),
                         floor=timed(g_tiny_model, g_tiny, g_tiny_setup, lik), flops=flops,
                         nodes=20 * 1000 * (2 if lik == "exact" else 0), rate_key="special"))
    rates = {"gemm_own": gemm_rate((25, 1000), (1000, 25)), "gemm_512": gemm_rate((512, 512), (512, 512), 20),
             "special": special_rate(20 * 1000), "quotient": special_rate(20 * 1000, log=False)}
    for r in rows:
        r.update(rates)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md")
    args = ap.parse_args(argv)
    from harness import machine, replace_section

    rows = measure()
    r0 = rows[0]
    lines = [HEAD, "", "## A natgrad iteration against its arithmetic", "",
             f"Machine: {machine()}; one torch thread. Command: `.venv/bin/python "
             "benchmarks/bench_overhead.py --out docs/benchmarks.md` (part of `make bench`). crowdGPPL: "
             "the speed target's crowd (1000 "
             f"labels, C = {r0['C']}, M = {r0['M']}, M_u = {r0['M_u']}, full batch); GPPL: N = 100, M = 25, "
             "1000 pairs. *Arithmetic*: the iteration's matrix work at the machine's float64 rate for a "
             f"product of its own shapes ({r0['gemm_own'] / 1e9:.1f} GFLOP/s; "
             f"{r0['gemm_512'] / 1e9:.1f} at 512 × 512) plus its Gauss–Hermite nodes at "
             f"{r0['special'] / 1e6:.0f} M/s (erfc, log, exp: GPPL) or {r0['quotient'] / 1e6:.0f} M/s "
             "(erfc, exp: "
             "crowdGPPL's sweep, which needs only the derivatives; the moments the sweep starts from are "
             "the last sweep's on a full batch). *Floor*: the same iteration on 10 labels "
             "with M = 3 (arithmetic nil): Python and torch's dispatch.", "",
             "| model | likelihood | MFLOP | GH nodes | arithmetic ms | floor ms | measured ms | measured / "
             "arithmetic | measured / (arithmetic + floor) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        arith = r["flops"] / r["gemm_own"] + r["nodes"] / r[r["rate_key"]]
        lines.append(f"| {r['model']} | {r['likelihood']} | {r['flops'] / 1e6:.0f} | {r['nodes']:,} | "
                     f"{1e3 * arith:.1f} | {1e3 * r['floor']:.1f} | {1e3 * r['seconds']:.1f} | "
                     f"{r['seconds'] / arith:.1f} | {r['seconds'] / (arith + r['floor']):.1f} |")
    replace_section(args.out, HEAD, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
