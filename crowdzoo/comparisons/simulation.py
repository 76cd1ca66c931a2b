"""The simulations of Simpson & Gurevych (2020), §5.1 (Fig. 1a, 1b, 1c).

Items on a 20 × 20 grid split 50/50 into training and test items; U = 20 users with 2-D
features; labels drawn from crowdGPPL (§5.1): C_true = 5 components with s_v,c uniform in
[0.1, 10] and s_w,c = 1.

* ``simulation-consensus`` (Fig. 1a): vary the variance 1/s_t of the consensus against the personal
  components (a small 1/s_t is a noisy consensus); Kendall τ between the true and inferred consensus
  utilities of the test items.
* ``simulation-personal`` (Fig. 1b): s_t = 5, vary the variance 1/s_v,c of every component (a small
  1/s_v is little personal signal); Kendall τ of each user's test-item utilities, averaged over users.
* ``simulation-components`` (Fig. 1c): s_t = s_v = s_w = 1; vary the number of training labels
  and C_true ∈ {1, 3, 10}; mean |Pearson r| between greedily matched true and inferred item
  components v_c (the matching of §5.1; |r| because v_c and w_c are identified up to sign).

Methods (Fig. 1a/b): crowdGPPL (C = 20, M = 25 inducing items, the paper's linearised natgrad), GPPL
pooled over users, GPPL-per-user (its consensus is the mean of the users' utilities). Priors
Gamma(1, 100) everywhere as in §5.1. The paper does not list its noise levels or label counts in the
text and gives the results only as plots, so this table states ours and has no published numbers
beside it; compare shapes (crowdGPPL's advantage as the consensus or personal signal weakens) with Fig. 1.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from .markdown import cell

N_LABELS = 2000
VARIANCE = (0.1, 0.3, 1.0, 3.0)
LABELS = (250, 500, 1000, 2000)
C_TRUE = (1, 3, 10)


def _methods(C=20, M=25):
    import crowdzoo as cz

    prior = dict(shape_s0=1.0, rate_s0=100.0)
    crowd = cz.CrowdGPPL(n_components=C, n_inducing=M, shape_t0=1, rate_t0=100, shape_v0=1, rate_v0=100,
                         shape_w0=1, rate_w0=100, item_residual=False)
    return {"crowdGPPL": (crowd, {"likelihood": "linearised", "learn_kernel": False}),  # the paper's
            "GPPL": (cz.GPPL(n_inducing=M, item_residual=False, **prior), {"likelihood": "exact",
                                                                           "learn_kernel": False}),
            "GPPL-per-user": (cz.GPPLPerUser(n_inducing=M, **prior), {})}


def _simulate(seed, n_labels, s_t, s_v, s_w=1.0, C_true=5):
    import crowdzoo as cz

    rng = np.random.default_rng(10_000 + seed)
    s_v = rng.uniform(0.1, 10.0, size=C_true) if s_v is None else s_v
    data, truth = cz.simulate_crowd(n_items=400, n_users=20, n_pairs=4 * n_labels, n_components=C_true,
                                    s_t=s_t, s_v=s_v, s_w=s_w, grid=True, seed=seed)
    train_items = rng.permutation(400)[:200]
    in_train = np.isin(data.a, train_items) & np.isin(data.b, train_items)
    rows = np.flatnonzero(in_train)[:n_labels]
    test_items = np.setdiff1d(np.arange(400), train_items)
    return data.subset(rows), truth, test_items


def _fit(model, kw, train, seed):
    import crowdzoo as cz

    return cz.fit(model, train, method="natgrad", seed=seed, progress_bar=False, **kw)


def run_consensus(seed, quick=False):
    rows = []
    for var in VARIANCE[:2] if quick else VARIANCE:
        train, truth, test_items = _simulate(seed, 500 if quick else N_LABELS, s_t=1.0 / var, s_v=None)
        for name, (model, kw) in _methods().items():
            post = _fit(model, kw, train, seed)
            mean = post.utilities()[0].to_numpy()
            tau = kendalltau(mean[test_items], truth["t"][test_items]).statistic
            rows.append({"seed": seed, "consensus variance 1/s_t": var, "method": name,
                         "tau consensus": float(tau)})
    return pd.DataFrame(rows)


def run_personal(seed, quick=False):
    rows = []
    for var in VARIANCE[:2] if quick else VARIANCE:
        train, truth, test_items = _simulate(seed, 500 if quick else N_LABELS, s_t=5.0, s_v=1.0 / var)
        users = train.user_ids
        for name, (model, kw) in _methods().items():
            post = _fit(model, kw, train, seed)
            if name == "GPPL":
                F = np.repeat(post.utilities()[0].to_numpy()[:, None], len(users), axis=1)
            else:
                F = post.utilities(users=users)[0].to_numpy()
            taus = [kendalltau(F[test_items, u], truth["F"][test_items, u]).statistic
                    for u in range(len(users))]
            rows.append({"seed": seed, "personal variance 1/s_v": var, "method": name,
                         "tau personal": float(np.nanmean(taus))})
    return pd.DataFrame(rows)


def match_components(V_true, V_hat) -> float:
    """Greedy matching of §5.1: repeatedly pair the unmatched true and inferred components with
    the highest |Pearson r|; the mean |r| over the true components."""
    C_t = V_true.shape[0]
    R = np.abs(np.corrcoef(V_true, V_hat)[:C_t, C_t:])
    R = np.nan_to_num(R)
    scores = []
    for _ in range(min(C_t, V_hat.shape[0])):
        i, k = np.unravel_index(np.argmax(R), R.shape)
        scores.append(R[i, k])
        R[i, :] = -1
        R[:, k] = -1
    return float(np.mean(scores))


def run_components(seed, quick=False):
    rows = []
    crowd, _ = _methods()["crowdGPPL"]
    for C_true in C_TRUE[:2] if quick else C_TRUE:
        for n in LABELS[:2] if quick else LABELS:
            train, truth, _ = _simulate(seed, n, s_t=1.0, s_v=1.0, s_w=1.0, C_true=C_true)
            post = _fit(crowd, {}, train, seed)
            V_hat = (post.v_m[0] @ _item_rows(post).T).numpy()  # posterior means of v_c per item
            rows.append({"seed": seed, "C_true": C_true, "labels": n, "method": "crowdGPPL",
                         "component |r|": match_components(truth["V"], V_hat)})
    return pd.DataFrame(rows)


def _item_rows(post):
    A, _ = post.setup.items.item_terms()
    return A


def summarise(df: pd.DataFrame) -> str:
    metric = df.columns[-1]
    keys = [c for c in df.columns[:-1] if c not in ("seed", "method")] + ["method"]
    g = df.groupby(keys, sort=False)[metric]
    mean, sd, n = g.mean(), g.std().fillna(0.0), g.size()
    lines = [f"| {' | '.join(keys)} | {cell(metric)} (mean ± sd) | repeats |", "|" + "---|" * (len(keys) + 2)]
    for k in mean.index:
        k = k if isinstance(k, tuple) else (k,)
        lines.append("| " + " | ".join(str(x) for x in k) + f" | {mean[k]:.3f} ± {sd[k]:.3f} | {n[k]} |")
    return "\n".join(lines)


def figure(df: pd.DataFrame, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setting = [c for c in df.columns if "variance" in c or c == "labels"][0]
    metric = df.columns[-1]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    group = "C_true" if "C_true" in df.columns else "method"
    for name, sub in df.groupby(group, sort=False):
        m = sub.groupby(setting)[metric].agg(["mean", "std"]).fillna(0.0)
        ax.errorbar(m.index, m["mean"], yerr=m["std"], marker="o", capsize=3,
                    label=f"{group}={name}" if group == "C_true" else name)
    ax.set_xscale("log")
    ax.set_xlabel(setting)
    ax.set_ylabel(metric)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


class _Comparison:
    """A registry entry: run_one(seed, quick) → tidy DataFrame; summarise; figure."""

    def __init__(self, fn):
        self.__name__ = f"{__name__}:{fn.__name__}"
        self.run_one = fn
        self.summarise = summarise
        self.figure = figure


consensus = _Comparison(run_consensus)
personal = _Comparison(run_personal)
components = _Comparison(run_components)
