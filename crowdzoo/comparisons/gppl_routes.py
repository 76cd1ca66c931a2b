"""GPPL inference routes side by side against NUTS on simulated problems.

For each repeat: simulate GPPL (40 items, 2-D features, 400 labelled pairs, s = 1), hold out 25 %
of the pairs, fit every route on the rest, and measure against NUTS (4 chains): the mean
|P_route − P_NUTS| on held-out pairs, the mean |E_route[f] − E_NUTS[f]| in NUTS posterior sds,
the sd ratio, E[s], Kendall τ of the posterior mean against the true utilities, held-out accuracy
and the fit time.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from .markdown import cell

ROUTES = {
    "nuts": {"method": "nuts", "num_samples": 1000, "warmup_steps": 500, "num_chains": 4},
    "ep": {"method": "ep"},
    "svi (AutoMultivariateNormal)": {"method": "svi", "num_steps": 3000, "lr": 0.02},
    "natgrad (linearised, paper)": {"method": "natgrad", "likelihood": "linearised", "learn_kernel": False},
    "natgrad (exact likelihood)": {"method": "natgrad", "likelihood": "exact", "learn_kernel": False},
}


def run_one(seed: int, n_items: int = 40, n_pairs: int = 400, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    data, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=int(n_pairs / 0.75), seed=seed)
    train, test = cz.split_pairs(data, test_fraction=0.25, seed=seed)
    ids = test.item_ids
    fits, seconds = {}, {}
    for name, kw in ROUTES.items():
        kw = dict(kw)
        if quick and kw["method"] == "nuts":
            kw.update(num_samples=300, warmup_steps=300, num_chains=2)
        t0 = time.perf_counter()
        fits[name] = cz.fit(cz.GPPL(), train, seed=seed, progress_bar=False, **kw)
        seconds[name] = time.perf_counter() - t0
    ref = fits["nuts"]
    p_ref = ref.predict_proba(ids[test.a], ids[test.b])
    m_ref, v_ref = ref.utilities()
    rows = []
    for name, post in fits.items():
        p = post.predict_proba(ids[test.a], ids[test.b])
        m, v = post.utilities()
        s_mean = float((post.weights * post.s).sum()) if post.s_shape is None else post.s_shape / post.s_rate
        rows.append({
            "seed": seed, "route": name,
            "mean |P - P_nuts|": float(np.abs(p - p_ref).mean()),
            "mean |Δf| / sd_nuts": float((np.abs(m - m_ref) / np.sqrt(v_ref)).mean()),
            "sd ratio": float(np.sqrt(v / v_ref).mean()),
            "E[s]": s_mean,
            "tau vs truth": float(kendalltau(f_true, m.values).statistic),
            "held-out acc": float(((p > 0.5) == (test.y == 1)).mean()),
            "seconds": seconds[name],
        })
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> str:
    cols = [c for c in df.columns if c not in ("seed", "route")]
    g = df.groupby("route", sort=False)[cols]
    mean, sd = g.mean(), g.std().fillna(0.0)
    n = df["seed"].nunique()
    lines = ["| route | " + " | ".join(cell(c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for route in mean.index:
        cells = [f"{mean.loc[route, c]:.3f}" + (f" ± {sd.loc[route, c]:.3f}" if n > 1 else "")
                 for c in cols]
        lines.append(f"| {cell(route)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
