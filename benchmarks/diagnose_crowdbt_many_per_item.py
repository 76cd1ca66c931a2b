"""Where crowdBT–GP's held-out log loss goes on the calibration battery's many-per-item crowd, against
per-item Bradley–Terry: the default fit's per-worker and consensus predictions, a fit with every
reliability held at 1, and that fit's consensus computed three ways — E[σ(h_a − h_b)] by quadrature
(the default), the probit approximation Φ(μ / √(8/π + v)), and the plug-in σ(μ) at the mean.

    python benchmarks/diagnose_crowdbt_many_per_item.py --seeds 6

Differences from Bradley–Terry are paired by seed (mean ± standard error over seeds).
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import pandas as pd


def rows(seed: int) -> list[dict]:
    import torch
    from torch.special import ndtr

    import crowdzoo as cz
    from crowdzoo.comparisons.calibration import _as_data, crowd_data
    from crowdzoo.models.baselines.crowdbt_gp import CrowdBTGP, expected_sigmoid
    from crowdzoo.models.bradley_terry.model import BradleyTerry

    torch.set_num_threads(1)
    train, test, items, users, _, _ = crowd_data("many-per-item", seed)
    dec = test[test["tie"] == "no"]
    a, b, u = dec["winner"].to_numpy(), dec["loser"].to_numpy(), dec["taster"].to_numpy()
    data = _as_data(train, items, users, True)
    bt = cz.fit(BradleyTerry(), _as_data(train, items, users, False), seed=seed).predict_proba(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = cz.fit(CrowdBTGP(), data, seed=seed)
        trusting = cz.fit(CrowdBTGP(reliability_prior=(1e4, 1e-4), reliable_share=1.0), data, seed=seed)
    ids = pd.Index(data.item_ids)
    ia, ib = torch.as_tensor(ids.get_indexer(a)), torch.as_tensor(ids.get_indexer(b))
    W, m, e = trusting.item_terms()  # the consensus h = Wᵀu + m + N(0, diag e) (the posterior's own terms)
    d = (W[:, ia] - W[:, ib]).T
    mu = d @ trusting.mu_u + m[ia] - m[ib]
    var = ((d @ trusting.S_u) * d).sum(-1) + e[ia] + e[ib]
    preds = {
        "default, per worker": default.predict_proba(a, b, users=u),
        "default, consensus": default.predict_proba(a, b),
        "η = 1, per worker": trusting.predict_proba(a, b, users=u),
        "η = 1, consensus by quadrature": expected_sigmoid(mu, var).numpy(),
        "η = 1, consensus Φ(μ/√(8/π + v))": ndtr(mu / torch.sqrt(8.0 / math.pi + var)).numpy(),
        "η = 1, consensus Φ(μ √(π/8)) (v = 0)": ndtr(mu * math.sqrt(math.pi / 8.0)).numpy(),
        "η = 1, consensus σ(μ) (v = 0)": torch.sigmoid(mu).numpy(),
    }
    loss_bt = -np.log(bt)
    return [dict(seed=seed, fit=k, d_log_loss=float((-np.log(np.clip(p, 1e-12, 1.0)) - loss_bt).mean()),
                 d_acc=float(((p > 0.5).astype(float) - (bt > 0.5)).mean()),
                 workers_below_099=float((default.reliability.to_numpy() < 0.99).mean()))
            for k, p in preds.items()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=6)
    args = ap.parse_args(argv)
    df = pd.DataFrame([r for s in range(args.seeds) for r in rows(s)])
    g = df.groupby("fit", sort=False)
    n = g.size()
    out = pd.DataFrame({"log loss − BT": g.d_log_loss.mean(), "± se": g.d_log_loss.std(ddof=1) / np.sqrt(n),
                        "accuracy − BT": g.d_acc.mean(), "± se ": g.d_acc.std(ddof=1) / np.sqrt(n)})
    print(out.to_string(float_format=lambda x: f"{x:+.4f}"))
    print(f"workers with η < .99 under the default: {df['workers_below_099'].mean():.2%}")


if __name__ == "__main__":
    main()
