"""The example tables of ``crowdzoo.compare_posteriors`` in docs/guides/read-a-report.md: GPPL on 200
simulated labels of 20 items, fitted by NUTS (the reference) and by natgrad, EP and svi with two guides
(the full-covariance default and mean-field AutoNormal); one table per route, and NUTS against a second
NUTS run of another seed (what agreement looks like). About two minutes on one core.

Run with ``.venv/bin/python benchmarks/compare_posteriors_example.py``.
"""
from __future__ import annotations

import warnings

import torch
from pyro.infer.autoguide import AutoNormal

import crowdzoo as cz


def markdown(table) -> str:
    """The table as Markdown (numbers to 3 decimals), without pandas' optional tabulate."""
    cols = [table.index.name] + list(table.columns)
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    rows = [[str(i)] + [fmt(v) for v in row] for i, row in zip(table.index, table.itertuples(index=False))]
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", cz.ConvergenceWarning)
    data, _ = cz.simulate_gppl(n_items=20, n_pairs=200, seed=0)
    nuts = dict(method="nuts", num_samples=500, warmup_steps=500, num_chains=2)
    ref = cz.fit(cz.GPPL(), data, seed=0, **nuts)
    fits = {"NUTS, seed 1": cz.fit(cz.GPPL(), data, seed=1, **nuts),
            "natgrad": cz.fit(cz.GPPL(), data, method="natgrad", learn_kernel=False, progress_bar=False),
            "ep": cz.fit(cz.GPPL(), data, method="ep"),
            "svi (AutoMultivariateNormal)": cz.fit(cz.GPPL(), data, method="svi", num_steps=3000,
                                                   progress_bar=False),
            "svi (AutoNormal)": cz.fit(cz.GPPL(), data, method="svi", guide=AutoNormal, num_steps=3000,
                                       progress_bar=False)}
    for name, post in fits.items():
        table = cz.compare_posteriors(post, ref)
        print(f"\n{name} against NUTS (seed 0)\n")
        print(markdown(table))


if __name__ == "__main__":
    main()
