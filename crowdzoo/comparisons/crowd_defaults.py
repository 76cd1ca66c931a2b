"""crowdGPPL's default route on a crowd shaped like a user's first data set, to see that the default
fit is right or says it is not: 30 items with 4 features, 15 raters, 750 labels (600 for training),
simulated from crowdGPPL; the model with its defaults (C = 20, M = 25, the paper's Sushi priors),
fitted by natgrad with the paper's linearised likelihood and with the exact one (the default on a
crowd this dense: ``default_likelihood`` of crowdzoo/models/crowdgppl/natgrad.py). Measured: seconds,
iterations, whether the stop rule was met, held-out accuracy and CEE of personal predictions, the
share of held-out predictions beyond .01 / .99, and the range of the consensus variances over items.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from .gppl_routes import summarise  # noqa: F401  (same table layout)

LIKELIHOODS = ("linearised", "exact")


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz
    from crowdzoo import metrics

    data, _ = cz.simulate_crowd(n_items=30, n_users=15, n_pairs=750, n_features=4, seed=seed)
    train, test = cz.split_pairs(data, 0.2, seed=seed)
    fr = test.to_frame()
    rows = []
    for lik in LIKELIHOODS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            post = cz.fit(cz.CrowdGPPL(), train, method="natgrad", likelihood=lik, seed=seed,
                          progress_bar=False)
            seconds = time.perf_counter() - t0
        p = post.predict_proba(fr["a"].to_numpy(), fr["b"].to_numpy(), users=fr["user"].to_numpy())
        _, var = post.utilities()
        rows.append({"seed": seed, "route": f"natgrad ({lik})", "seconds": seconds,
                     "iterations": post.settings["iterations"],
                     "converged": float(post.settings["converged"]), "warnings": len(caught),
                     "held-out acc": metrics.accuracy(fr["y"], p),
                     "held-out CEE": metrics.cross_entropy(fr["y"], p),
                     "share P < .01 or > .99": float((np.abs(p - 0.5) > 0.49).mean()),
                     "consensus var min": float(var.min()), "consensus var max": float(var.max())})
    return pd.DataFrame(rows)
