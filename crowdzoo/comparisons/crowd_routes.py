"""crowdGPPL inference routes side by side against NUTS on a tiny simulated crowd.

For each repeat: simulate crowdGPPL (12 items with 2-D features, 6 independent users, one true
component, 400 labels), hold out 25 %, fit the exact model (C = 2, Gamma(2, 2) on every scale) by
NUTS (the reference), Pyro SVI with the structured mean-field guide of Eq. 20, and natgrad with the
paper's linearised likelihood and with the exact one. Measured against NUTS on held-out pairs: mean
|P − P_NUTS| for personal and consensus predictions; plus held-out accuracy and fit time.
V and W are not identified (sign and rotation), so routes are compared on predictions only.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .gppl_routes import summarise  # noqa: F401  (same table layout)

ROUTES = {
    "nuts": {"method": "nuts", "num_samples": 500, "warmup_steps": 300, "num_chains": 2, "max_tree_depth": 7},
    "svi (mean-field, Eq. 20)": {"method": "svi", "num_steps": 2000, "lr": 0.02},
    "natgrad (linearised, paper)": {"method": "natgrad", "likelihood": "linearised"},
    "natgrad (exact likelihood)": {"method": "natgrad", "likelihood": "exact"},
}


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    data, _ = cz.simulate_crowd(n_items=12, n_users=6, n_pairs=400, n_components=1, n_user_features=0,
                                seed=seed)
    train, test = cz.split_pairs(data, 0.25, seed=seed)
    model = cz.CrowdGPPL(n_components=2, n_inducing=None, shape_t0=2, rate_t0=2, shape_v0=2, rate_v0=2,
                         shape_w0=2, rate_w0=2)
    ids, users = test.item_ids, test.user_ids[test.users]
    probs, seconds = {}, {}
    for name, kw in ROUTES.items():
        kw = dict(kw)
        if quick and kw["method"] == "nuts":
            kw.update(num_samples=200, warmup_steps=200, num_chains=1, max_tree_depth=6)
        t0 = time.perf_counter()
        post = cz.fit(model, train, seed=seed, progress_bar=False, **kw)
        seconds[name] = time.perf_counter() - t0
        probs[name] = (post.predict_proba(ids[test.a], ids[test.b], users=users),
                       post.predict_proba(ids[test.a], ids[test.b]))
    ref = probs["nuts"]
    rows = [{"seed": seed, "route": name,
             "personal mean |P - P_nuts|": float(np.abs(p - ref[0]).mean()),
             "consensus mean |P - P_nuts|": float(np.abs(pc - ref[1]).mean()),
             "held-out acc": float(((p > 0.5) == (test.y == 1)).mean()),
             "seconds": seconds[name]} for name, (p, pc) in probs.items()]
    return pd.DataFrame(rows)
