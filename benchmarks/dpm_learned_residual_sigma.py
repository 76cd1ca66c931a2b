"""The item residual's variance σ_r² that ``DPMCommunities(item_residual="learned")`` picks on each
calibration-battery crowd (the type-II maximum of one pooled GP's EP evidence over its grid), with the
log evidence at every σ_r² tried; crowds where the residual does not apply (items without features) are
left out. Only the setup runs (no sampler), a few seconds a crowd.

    python benchmarks/dpm_learned_residual_sigma.py --seeds 0 1 \\
        --out benchmarks/results/dpm_learned_residual_sigma.csv
"""
from __future__ import annotations

import argparse

import pandas as pd


def main(argv=None):
    import crowdzoo as cz
    from crowdzoo.comparisons.calibration import CROWDS, _as_data, crowd_data

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--crowds", default=",".join(c for c in CROWDS if c != "sparse-big"))
    ap.add_argument("--out", default="benchmarks/results/dpm_learned_residual_sigma.csv")
    args = ap.parse_args(argv)
    rows = []
    for crowd in args.crowds.split(","):
        for seed in args.seeds:
            train, _, items, users, *_ = crowd_data(crowd, seed)
            st = cz.DPMCommunities(item_residual="learned").setup(_as_data(train, items, users, True))
            if st.residual_grid is None:
                continue
            row = {"crowd": crowd, "seed": seed, "learned": st.residual_variance}
            row.update({f"log Z at {v:g}": float(z) for v, z in zip(st.residual_grid.tolist(),
                                                                     st.residual_log_evidence)})
            rows.append(row)
            print(crowd, seed, st.residual_variance, flush=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
