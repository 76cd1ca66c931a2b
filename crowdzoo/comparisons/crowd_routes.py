"""crowdGPPL inference routes and guides side by side against NUTS on a tiny simulated crowd.

For each repeat: simulate crowdGPPL (12 items with 2-D features, 6 independent users, one true
component, 400 labels), hold out 25 %, fit the exact model (C = 2, Gamma(2, 2) on every scale) by
NUTS (the reference); Pyro SVI with the structured mean-field guide of Eq. 20 (crowdGPPL's svi
default), a diagonal Gaussian (AutoNormal), a rank-5 plus diagonal Gaussian and a full Gaussian
(AutoMultivariateNormal); natgrad with the exact likelihood (its default) and the paper's linearised
one. Against NUTS: mean |P − P_NUTS| of personal and consensus predictions on held-out pairs, and,
for the consensus t (items) and the personal utilities F = t + VᵀW (items × users), the median sd
ratio sd_route / sd_NUTS and the share of NUTS draws inside the route's 90 % interval (0.90 when
the two agree; :func:`crowdzoo.diagnostics.checks.agreement_of`, the report's per-variable check).
V and W alone are not identified (sign and rotation), so they are compared through F. Held-out log
loss, accuracy and seconds beside them.

``crowdzoo compare crowdgppl-routes --repeats 3 --jobs 2 --out docs/crowdgppl-routes.md``
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .gppl_routes import summarise  # noqa: F401  (same table layout)

N_DRAWS = 1000


def _guide(name):
    from pyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoMultivariateNormal, AutoNormal

    return {"AutoNormal": AutoNormal, "AutoMultivariateNormal": AutoMultivariateNormal,
            "low-rank(5)": lambda model: AutoLowRankMultivariateNormal(model, rank=5)}[name]


SVI = {"method": "svi", "num_steps": 2000, "lr": 0.02}
ROUTES = {
    "nuts": {"method": "nuts", "num_samples": 500, "warmup_steps": 300, "num_chains": 2, "max_tree_depth": 7},
    "svi (mean-field, Eq. 20; default)": SVI,
    "svi (AutoNormal)": dict(SVI, guide="AutoNormal"),
    "svi (low-rank(5) + diagonal)": dict(SVI, guide="low-rank(5)"),
    "svi (AutoMultivariateNormal)": dict(SVI, guide="AutoMultivariateNormal"),
    "natgrad (exact likelihood; default)": {"method": "natgrad", "likelihood": "exact"},
    "natgrad (linearised, paper)": {"method": "natgrad", "likelihood": "linearised"},
}


def _draws(post, seed):
    """Draws of the consensus t (S, N) and of the personal utilities F = t + VᵀW (S, N·U)."""
    import torch

    dr = post.sample(N_DRAWS, seed=seed)
    F = dr["t"][:, :, None] + torch.einsum("scn,scu->snu", dr["V"], dr["W"])
    return dr["t"].numpy(), F.reshape(F.shape[0], -1).numpy()


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz
    from crowdzoo.diagnostics.checks import agreement_of
    from crowdzoo.metrics import cross_entropy

    data, _ = cz.simulate_crowd(n_items=12, n_users=6, n_pairs=400, n_components=1, n_user_features=0,
                                seed=seed)
    train, test = cz.split_pairs(data, 0.25, seed=seed)
    model = cz.CrowdGPPL(n_components=2, n_inducing=None, shape_t0=2, rate_t0=2, shape_v0=2, rate_v0=2,
                         shape_w0=2, rate_w0=2)
    ids, users = test.item_ids, test.user_ids[test.users]
    out = {}
    for name, kw in ROUTES.items():
        kw = dict(kw)
        if quick and kw["method"] == "nuts":
            kw.update(num_samples=200, warmup_steps=200, num_chains=1, max_tree_depth=6)
        if quick and kw["method"] == "svi":
            kw.update(num_steps=300)
        if "guide" in kw:
            kw["guide"] = _guide(kw["guide"])
        t0 = time.perf_counter()
        post = cz.fit(model, train, seed=seed, progress_bar=False, **kw)
        seconds = time.perf_counter() - t0
        out[name] = (post.predict_proba(ids[test.a], ids[test.b], users=users),
                     post.predict_proba(ids[test.a], ids[test.b]), _draws(post, seed), seconds)
    p_ref, pc_ref, (t_ref, F_ref), _ = out["nuts"]
    rows = []
    for name, (p, pc, (t, F), seconds) in out.items():
        at, aF = agreement_of(t, t_ref), agreement_of(F, F_ref)
        rows.append({"seed": seed, "route": name,
                     "personal mean |P - P_nuts|": float(np.abs(p - p_ref).mean()),
                     "consensus mean |P - P_nuts|": float(np.abs(pc - pc_ref).mean()),
                     "consensus sd ratio": float(np.median(at["ratio"])),
                     "consensus cov90": float(at["cov90"].mean()),
                     "personal sd ratio": float(np.median(aF["ratio"])),
                     "personal cov90": float(aF["cov90"].mean()),
                     "held-out log loss": cross_entropy(test.y, p),
                     "held-out acc": float(((p > 0.5) == (test.y == 1)).mean()),
                     "seconds": seconds})
    return pd.DataFrame(rows)
