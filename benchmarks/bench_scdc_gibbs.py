"""The cost of BayesSCDC's end-of-fit Gibbs sampler of the workers (crowdzoo.models.scdc.gibbs) on a
random annotation graph: seconds to colour the graph and to sort its annotations by colour, and seconds
per sweep with the mixture drawn at each sweep (:func:`~crowdzoo.models.scdc.gibbs.mixture_unaries`),
one torch thread; and the sampler's peak memory over its inputs (``peak_mib``: the resident set's
high-water mark during the colouring, the sort and the chains, less the resident set before them).

The data: N items in K clusters with d-dimensional recognition potentials about the clusters' means,
A annotations on uniformly random pairs by W two-coin workers (α = β = 0.9).

Run: ``.venv/bin/python benchmarks/bench_scdc_gibbs.py --annotations 1000 1000000 10000000``
(``--items``, ``--clusters``, ``--dim``, ``--sweeps``: the graph and the chain's length timed).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_distributed import _hwm_mb, _reset_hwm, _rss_mb  # noqa: E402


def graph(N: int, K: int, d: int, A: int, W: int, seed: int = 0):
    from crowdzoo.models.scdc.bayes import F64

    g = torch.Generator().manual_seed(seed)
    z = torch.randint(0, K, (N,), generator=g)
    i = torch.randint(0, N, (A,), generator=g)
    j = (i + torch.randint(1, N, (A,), generator=g)) % N
    w = torch.randint(0, W, (A,), generator=g)
    L = ((z[i] == z[j]) ^ (torch.rand(A, generator=g) > 0.9)).to(F64)
    mu = 4 * torch.randn(K, d, dtype=F64, generator=g)
    lam = torch.full((N, d), 4.0, dtype=F64)
    h = lam * (mu[z] + 0.5 * torch.randn(N, d, dtype=F64, generator=g))
    return z, i, j, w, L, mu, h, lam


def time_one(N: int, K: int, d: int, A: int, W: int, sweeps: int) -> dict:
    from crowdzoo.models.scdc import gibbs
    from crowdzoo.models.scdc.bayes import F64, BayesSCDC

    z, i, j, w, L, mu, h, lam = graph(N, K, d, A, W)
    prior = BayesSCDC(n_clusters=K, latent_dim=d).prior(W)
    start = prior._replace(m=mu, nu=prior.nu + N / K, S=prior.S + (N / K) * torch.eye(d, dtype=F64))
    torch.manual_seed(0)
    before = _rss_mb()
    _reset_hwm()
    t0 = time.perf_counter()
    colour = gibbs.colour_items(i, j, N)
    colour_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    gibbs._groups(colour, i, j, 2 * w + L.long())
    groups_s = time.perf_counter() - t0
    runs = {}
    for n in (sweeps, 2 * sweeps):  # the difference leaves out the colouring and the sort
        t0 = time.perf_counter()
        gibbs.gibbs_workers(gibbs.mixture_unaries(h, lam, prior, start), i, j, w, L, prior.alpha, prior.beta,
                            z.clone(), K, n_sweeps=n, burn=n // 5)
        runs[n] = time.perf_counter() - t0
    return dict(items=N, clusters=K, dim=d, annotations=A, colours=int(colour.max()) + 1,
                colour_s=colour_s, groups_s=groups_s, sweep_s=(runs[2 * sweeps] - runs[sweeps]) / sweeps,
                peak_mib=round(_hwm_mb() - before))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--annotations", type=int, nargs="+", default=[1000, 10**6])
    ap.add_argument("--items", type=int, default=10**4)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--dim", type=int, default=4)
    ap.add_argument("--workers", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=10)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for A in args.annotations:
        row = time_one(args.items, args.clusters, args.dim, A, args.workers, args.sweeps)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
