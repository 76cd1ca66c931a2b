"""Why crowdGPPL's consensus ran away under the paper's priors, and what the default priors do.

Two crowds of :mod:`crowdzoo.comparisons.calibration`'s kind (one-hot and raw-unit features, taste
communities): a coffee panel (40 items, 24 users, ~24 training labels each) and a shrunken one for
NUTS (15 items, 6 users, ~19 training labels each, C = 2). crowdGPPL is fitted with every item
inducing (c_p = 0) under the paper's Sushi priors (Gamma(1, 100) on s_t, Gamma(1, 10) on s_v, s_w)
and under the zoo's defaults (Gamma(2, 2) on s_t, Gamma(2, 2/√C) on s_v, s_w).

Measured: natgrad's E[s_t] and ‖m_t‖ (the consensus mean at the inducing items) after iterations 1,
10, 25 and at the end (the trace of the runaway), the held-out log loss, and, on the shrunken crowd,
NUTS's posterior of s_t (median and 90 % interval) beside natgrad's E[s_t]: whether the posterior
itself sits at the prior's edge, or only the mean-field approximation.

``crowdzoo compare crowdgppl-scale-prior --out docs/crowdgppl-scale-prior.md`` (NUTS under the
paper's priors takes about 10 minutes; ``--quick`` leaves it out).
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from ..data.simulate_panel import Panel, simulate_panel
from .markdown import cell

COFFEE = Panel(n_items=40, n_users=24, labels_per_user=30, features="one-hot", tie_rate=0.05)
SMALL = Panel(n_items=15, n_users=6, labels_per_user=24, features="one-hot")
TRACE_AT = (1, 10, 25)


def _priors(which: str) -> dict:
    from ..models import CrowdGPPL

    if which == "paper":
        return {k: v for k, v in CrowdGPPL.paper().__dict__.items() if k.startswith(("shape_", "rate_"))}
    return {}


def _data(panel, seed):
    from .calibration import _as_data

    train, test, items, users, truth = simulate_panel(panel, seed=seed)
    return _as_data(train, items, users, True), test[test["tie"] == "no"], truth["oracle"]


def _log_loss(post, test) -> float:
    p = np.clip(post.predict_proba(test["winner"].to_numpy(), test["loser"].to_numpy(),
                                   users=test["taster"].to_numpy()), 1e-12, 1)
    return float(-np.log(p).mean())


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    rows = []
    for crowd, panel, C in (("coffee panel", COFFEE, 20), ("shrunken", SMALL, 2)):
        data, test, oracle = _data(panel, seed)
        for prior in ("paper", "default"):
            model = cz.CrowdGPPL(n_components=C, n_inducing=None, n_inducing_users=None, **_priors(prior))
            trace = []

            def cb(i, st, trace=trace):
                if i in TRACE_AT:
                    trace.append((float(st.gam["t"][0] / st.gam["t"][1]), float(st.t.m.norm())))

            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = cz.fit(model, data, seed=seed, callback=cb, progress_bar=False)
            row = {"seed": seed, "crowd": crowd, "prior": prior, "route": "natgrad",
                   "oracle": oracle, "held-out log loss": _log_loss(post, test),
                   "E[s_t] end": float(post.s_t), "‖m_t‖ end": float(post.t_m[0].norm()),
                   "iterations": post.settings["iterations"], "seconds": time.perf_counter() - t0}
            for i, (s, m) in zip(TRACE_AT, trace):
                row[f"E[s_t] at {i}"], row[f"‖m_t‖ at {i}"] = s, m
            rows.append(row)
            if crowd == "shrunken" and not (quick and prior == "paper"):
                t0 = time.perf_counter()
                nuts = cz.fit(model, data, method="nuts", seed=seed, num_samples=400, warmup_steps=400,
                              num_chains=2)
                s_t = nuts.s_t.numpy()
                rows.append({"seed": seed, "crowd": crowd, "prior": prior, "route": "nuts", "oracle": oracle,
                             "held-out log loss": _log_loss(nuts, test), "s_t median": float(np.median(s_t)),
                             "s_t 5%": float(np.quantile(s_t, 0.05)),
                             "s_t 95%": float(np.quantile(s_t, 0.95)),
                             "seconds": time.perf_counter() - t0})
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> str:
    cols = [c for c in df.columns if c not in ("seed", "crowd", "prior", "route")]
    g = df.groupby(["crowd", "prior", "route"], sort=False)[cols].mean()
    lines = ["| crowd | prior | route | " + " | ".join(cell(c) for c in cols) + " |",
             "|---|---|---|" + "---:|" * len(cols)]
    for (crowd, prior, route), r in g.iterrows():
        cells = ["" if not np.isfinite(r[c]) else f"{r[c]:.4g}" for c in cols]
        lines.append(f"| {crowd} | {prior} | {route} | " + " | ".join(cells) + " |")
    n = df["seed"].nunique()
    return "\n".join(lines) + (f"\n\nMeans over {n} seed{'s' * (n > 1)}; empty cells: not measured for that "
                               "route.")
