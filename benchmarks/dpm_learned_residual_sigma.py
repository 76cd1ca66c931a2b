"""The item residual's variance σ_r² that ``DPMCommunities(item_residual="learned")`` picks on each
calibration-battery crowd (the type-II maximum of one pooled GP's EP evidence over its grid), with the
log evidence at every σ_r² tried; crowds where the residual does not apply (items without features) are
left out. Only the setup runs (no sampler), a few seconds a crowd.

    python benchmarks/dpm_learned_residual_sigma.py --seeds 0 1 2 3 4 \\
        --out benchmarks/results/dpm_learned_residual_sigma.csv

``--paired CACHE`` (bench_dpm_residual.py's CSV) instead draws, from that CSV of σ_r² and the cache, the
table of the learned residual's paired log-loss difference from the DPM without it per crowd and seed:
a fitted pair where the cache has both, and 0 where σ_r² = 0 was learned and neither was fitted (the
setup, hence the whole fit, is then the one without the residual: tests/models/dpm/test_dpm_residual.py
checks that the predictions are equal).
"""
from __future__ import annotations

import argparse

import pandas as pd


def paired(sigma_csv: str, cache: str, seeds) -> str:
    """The markdown table of ``--paired`` (module docstring): per crowd, each seed's σ_r² and Δ log loss
    (learned − none; "0*": σ_r² = 0, not fitted; "?": σ_r² > 0 and not fitted), the mean ± standard
    error over the seeds with a Δ, and at how many of them the learned residual is behind (Δ > 0)."""
    import numpy as np

    sig = pd.read_csv(sigma_csv)
    df = pd.read_csv(cache)
    ll = df.pivot_table(index=["crowd", "seed"], columns="model", values="log loss")
    lines = ["| crowd | " + " | ".join(f"seed {s}: σ_r², Δ" for s in seeds) + " | Δ mean ± SE | behind |",
             "|---|" + "---:|" * (len(seeds) + 2)]
    for crowd in dict.fromkeys(sig["crowd"]):
        cells, d = [], []
        for seed in seeds:
            row = sig[(sig["crowd"] == crowd) & (sig["seed"] == seed)]
            if row.empty:
                cells.append("–")
                continue
            v = float(row["learned"].iloc[0])
            key = (crowd, seed)
            if key in ll.index and {"dpm", "dpm + learned residual"} <= set(ll.columns) \
                    and ll.loc[key][["dpm", "dpm + learned residual"]].notna().all():
                x = float(ll.loc[key, "dpm + learned residual"] - ll.loc[key, "dpm"])
                d.append(x)
                cells.append(f"{v:g}, {x:+.4f}")
            elif v == 0:
                d.append(0.0)
                cells.append("0, 0*")
            else:
                cells.append(f"{v:g}, ?")
        x = np.array(d)
        se = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
        lines.append(f"| {crowd} | " + " | ".join(cells)
                     + f" | {x.mean():+.4f} ± {se:.4f} | {int((x > 1e-12).sum())} of {len(x)} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    import crowdzoo as cz
    from crowdzoo.comparisons.calibration import CROWDS, _as_data, crowd_data

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--crowds", default=",".join(c for c in CROWDS if c != "sparse-big"))
    ap.add_argument("--out", default="benchmarks/results/dpm_learned_residual_sigma.csv")
    ap.add_argument("--paired", default=None, metavar="CACHE",
                    help="print the paired table from --out (read, not written) and this cache")
    args = ap.parse_args(argv)
    if args.paired:
        print(paired(args.out, args.paired, args.seeds))
        return
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
