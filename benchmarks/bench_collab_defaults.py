"""collabGP's defaults on the calibration battery's crowds: the paper's unit scales against learned ones.

Each option is a ``CollabGP`` fitted by its default route (EP + VB) through
:func:`crowdzoo.comparisons.calibration.score_models`, beside pooled GPPL's default (the battery's
bound: a crowd model should reach GPPL's held-out log loss + 0.01). Rows are printed as they come
(crowd, seed, option, log loss, seconds) and a table of means over the seeds ends the run; ``--csv``
keeps the rows. What chose collabGP's ``learn_scale`` and its Gamma(1, 10⁻³) prior
(docs/collabgp.md, "Defaults").

    python benchmarks/bench_collab_defaults.py --seeds 0 1
    python benchmarks/bench_collab_defaults.py --crowds noisy one-rater --options paper-scale learned \
        --seeds 0
    python benchmarks/bench_collab_defaults.py --crowds one-rater noisy irrelevant --ell-grid
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import pandas as pd
import torch

import crowdzoo as cz
from crowdzoo.comparisons.calibration import CROWDS, TOO_SLOW, score_models
from crowdzoo.gp.kernels import Kernel

#: option → the model (None: pooled GPPL's default, the bound)
OPTIONS = {
    "gppl": None,
    # the zoo's earlier default: the paper's prior on H (unit scales), per-dimension length-scales
    "paper-scale": lambda: cz.CollabGP(learn_scale=False),
    # the default: learned scales under the vague Gamma(1, 1e-3)
    "learned": lambda: cz.CollabGP(),
    # a prior holding each s_d near D/2 (as crowdGPPL's Gamma(2, 2/√C) holds its components')
    "learned, Gamma(2, 2/D)": lambda: cz.CollabGP(shape_s0=2.0, rate_s0=2.0 / 20),
    "learned, Gamma(1, 0.01)": lambda: cz.CollabGP(rate_s0=0.01),
    "learned, D = 5": lambda: cz.CollabGP(n_latent=5),
    # the paper's unit scales with a smaller fixed amplitude: what the noisy crowd alone would pick
    "amplitude 0.05": lambda: cz.CollabGP(learn_scale=False, kernel=Kernel("se", variance=0.05)),
}
#: factors of the per-dimension median heuristic searched by ``--ell-grid``
ELL_FACTORS = (0.5, 1.0, 2.0, 4.0)


def ell_grid(crowd: str, seed: int) -> list[dict]:
    """The default with its item length-scales c × the median heuristic for c in :data:`ELL_FACTORS`
    (supplement a §9's grid on the evidence, along one direction): each c's held-out log loss and EP
    evidence, and which c the evidence picks."""
    from crowdzoo.comparisons import calibration as cal
    from crowdzoo.gp.kernels import median_heuristic

    train, test, items, users, truth, _ = cal.crowd_data(crowd, seed)
    data = cal._as_data(train, items, users, True)
    held = test[test["tie"] == "no"]
    med = median_heuristic(torch.as_tensor(data.item_features, dtype=torch.float64))
    rows = []
    for c in ELL_FACTORS:
        post = cz.fit(cz.CollabGP(lengthscale=(c * med).numpy()), data, method="ep", seed=seed,
                      progress_bar=False)
        p = post.predict_proba(held["winner"].to_numpy(), held["loser"].to_numpy(),
                               users=held["taster"].to_numpy())
        ll = float(-np.log(p.clip(1e-12)).mean())
        rows.append({"crowd": crowd, "seed": seed, "factor": c, "log loss": ll,
                     "log evidence": post.log_evidence})
    best = max(rows, key=lambda r: r["log evidence"])
    for r in rows:
        r["picked"] = r is best
    return rows


def crowds_run() -> list[str]:
    """The battery's crowds collabGP's default runs on (:data:`TOO_SLOW` leaves out the largest)."""
    limit = TOO_SLOW["collabgp"][0]
    return [c for c, (panel, _) in CROWDS.items() if panel.n_users <= limit]


def markdown(df: pd.DataFrame) -> str:
    """A Markdown table of ``df`` (index first)."""
    head = ["crowd", *map(str, df.columns)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(df.columns)]
    for idx, row in df.iterrows():
        lines.append(f"| {idx} | " + " | ".join("" if pd.isna(v) else f"{v:g}" for v in row) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crowds", nargs="+", default=None,
                    help="battery crowds (default: every one collabGP runs on)")
    ap.add_argument("--options", nargs="+", default=["gppl", "paper-scale", "learned"], choices=list(OPTIONS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--csv", default=None, help="write the rows here")
    ap.add_argument("--ell-grid", action="store_true",
                    help="instead: the default at c × the median heuristic's length-scales, c in 0.5 1 2 4")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if a.ell_grid:
        df = pd.DataFrame([r for seed in a.seeds for crowd in a.crowds or crowds_run()
                           for r in ell_grid(crowd, seed)])
        print(df.round(4).to_string(index=False))
        picked = df[df["picked"]].groupby("crowd", sort=False)["log loss"].mean()
        print("\nlog loss at the evidence's pick, mean over seeds\n" + picked.round(3).to_string())
        return
    rows = []
    for seed in a.seeds:
        for crowd in a.crowds or crowds_run():
            for name in a.options:
                make = OPTIONS[name]
                spec = ("gppl", None, {}) if make is None else ("collabgp", make(), {})
                r = score_models({name: spec}, crowds=[crowd], seed=seed).iloc[0].to_dict()
                rows.append(r)
                print(f"{crowd},{seed},{name},{r.get('log loss', math.nan):.4f},{r['seconds']:.1f},"
                      f"{r.get('error', '') if isinstance(r.get('error'), str) else ''}", flush=True)
    df = pd.DataFrame(rows)
    if a.csv:
        df.to_csv(a.csv, index=False)
    table = df.pivot_table(index="crowd", columns="model", values="log loss", aggfunc="mean", sort=False)
    secs = df.pivot_table(index="crowd", columns="model", values="seconds", aggfunc="mean", sort=False)
    if "gppl" in table:
        table["GPPL + 0.01"] = table.pop("gppl") + 0.01
    print("\nheld-out log loss, mean over seeds", a.seeds)
    print(markdown(table.round(3)))
    print("\nseconds per fit, mean over seeds")
    print(markdown(secs.round(1)))


if __name__ == "__main__":
    main()
