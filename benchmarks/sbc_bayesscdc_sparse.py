"""BayesSCDC's SBC split by whether a simulation's partition has a cluster of fewer than 2 items
(docs/sbc-bayesscdc.md): the simulations of ``crowdzoo compare sbc bayesscdc --out`` are drawn again
from their seeds (the design and the prior draw only, no fit) to find their clusters' sizes, and the
table of docs/sbc.md is printed for each part.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/sbc_bayesscdc_sparse.py docs/sbc-bayesscdc.csv
"""
import sys

import numpy as np
import pandas as pd

from crowdzoo.comparisons import sbc


def smallest_cluster(seed: int, check: sbc.Check) -> int:
    """The number of items in the smallest of the K clusters of simulation ``seed`` (0: one is empty)."""
    model = check.spec.model(check.problem)
    design = check.spec.design(check.problem, np.random.default_rng([seed, 2018]))
    _, (_, _, z) = check.spec.simulate(model, design, seed)
    return int(np.bincount(z, minlength=model.n_clusters).min())


def main(path: str) -> None:
    df = pd.read_csv(path)
    check = sbc.Check("bayesscdc", "natgrad")
    smallest = {s: smallest_cluster(int(s), check) for s in df["sim"].unique()}
    few = df["sim"].map(smallest) < 2
    for name, part in (("every cluster 2 items or more", df[~few]),
                       ("a cluster of 0 or 1 items", df[few])):
        part = part.assign(route=f"natgrad, {name}")
        print(f"\n{name}: {part['sim'].nunique()} simulations\n")
        print(sbc.summarise(part))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/sbc-bayesscdc.csv")
