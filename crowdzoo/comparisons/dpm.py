"""``dpm-simulation``: DPM communities against the zoo's other personal models on simulated communities.

Every repeat (one seed) simulates, at each of three community strengths, K = 4 communities of 10
users each (40 users) over 30 items with 2-D features (uniform on the unit square). Each community's
utility is a shared part plus its own deviation,

    f^c = scale · (g + d · h_c) / √(1 + d²),      g, h_c ~ GP(0, SE, ℓ = 0.3),  scale = 1.5,

so every community's utility has the same variance (scale²) and two communities' utilities have
correlation 1 / (1 + d²): d = 0.5 (0.8, weak communities), 1 (0.5), 3 (0.1, strong communities).
Each user labels 30 random pairs, y = 1[f^c_a − f^c_b + ε > 0], ε ~ N(0, 1) (the probit of the DPM
model with α = 1); 20 of each user's labels are for training and 10 are held out
(``split_each_user``), the same split for every method.

Methods, each with the zoo's default settings unless said:

* **DPM (gibbs)**: ``DPMCommunities(item_residual=False)``, the paper's model (λ = 1,
  Matérn-3/2 kernel with the median heuristic, s fixed at its prior mean 1, no item residual),
  300 sweeps (100 burn-in) × 2 chains (quick: 100 sweeps, 50 burn-in); the adjusted Rand index
  (ARI) of the Binder-optimal point partition against the true communities and the posterior mode
  of the number of communities (4 true);
* **GPPL pooled**: one GPPL over every user's labels (exact-likelihood natgrad);
* **GPPL-per-user**: one GPPL per user (natgrad);
* **crowdGPPL**: C = 20 components (quick: 5), exact-likelihood natgrad (no user features: the
  users are independent in the prior of w);
* **collabGP\\u**: Houlsby et al.'s model without user features (there are none), D = 20 latent
  functions (quick: 5), 25 pseudo pairs, EP.

Metrics on each user's held-out labels: accuracy and cross-entropy error (CEE, nats), over all
held-out labels.
"""
from __future__ import annotations

import pandas as pd

STRENGTHS = (0.5, 1.0, 3.0)
N_USERS, N_ITEMS, N_COMM, N_TRAIN, N_TEST = 40, 30, 4, 20, 10
SCALE = 1.5


def simulate(seed: int, d: float, n_users: int = N_USERS, n_items: int = N_ITEMS, n_comm: int = N_COMM,
             n_labels: int = N_TRAIN + N_TEST, scale: float = SCALE):
    """Simulated communities (module docstring; :func:`crowdzoo.data.simulate_dpm.simulate_communities`
    with ``deviation=d``): ``(data, truth)``, truth the community of each user (by position)."""
    from crowdzoo.data.simulate_dpm import simulate_communities

    data, truth = simulate_communities(n_users=n_users, n_items=n_items, n_labels=n_labels,
                                       n_communities=n_comm, scale=scale, lengthscale=0.3, kernel="se",
                                       deviation=d,
                                       seed=[seed, int(round(100 * d))])
    return data, truth["communities"]


def methods(quick: bool = False):
    """name → (model, fit keyword arguments)."""
    import crowdzoo as cz

    sweeps = dict(n_sweeps=100, burn_in=50) if quick else dict(n_sweeps=300, burn_in=100)
    C = 5 if quick else 20
    return {
        "DPM (gibbs)": (cz.DPMCommunities(item_residual=False),  # the paper's model
                        {"method": "gibbs", "n_chains": 2, **sweeps}),
        "GPPL pooled": (cz.GPPL(), {"method": "natgrad", "likelihood": "exact", "learn_kernel": False}),
        "GPPL-per-user": (cz.GPPLPerUser(), {"method": "natgrad"}),
        "crowdGPPL": (cz.CrowdGPPL(n_components=C), {"method": "natgrad", "likelihood": "exact"}),
        "collabGP\\u": (cz.CollabGP(n_latent=C, n_pseudo_pairs=25, user_features=False,
                                    lengthscale="median distance", learn_scale=False), {"method": "ep"}),
    }


def run_one(seed: int, quick: bool = False, strengths=STRENGTHS, **sizes) -> pd.DataFrame:
    """One repeat: every strength, every method, on the same simulated data and split. ``sizes``
    (tests only): ``n_users``, ``n_items``, ``n_labels`` passed to :func:`simulate`, and
    ``n_train`` (training labels per user, default 20)."""
    import crowdzoo as cz
    from crowdzoo import metrics

    n_train = sizes.pop("n_train", N_TRAIN)
    rows = []
    for d in strengths:
        data, truth = simulate(seed, d, **sizes)
        tr, te = cz.split_each_user(data, (n_train, None), seed=seed)
        train, test = data.subset(tr), data.subset(te)
        ids, users = test.item_ids, test.user_ids[test.users]
        a, b = ids[test.a], ids[test.b]
        base = {"seed": seed, "d": d, "corr": round(1.0 / (1.0 + d * d), 2)}
        for name, (model, kw) in methods(quick).items():
            post = cz.fit(model, train, seed=seed, progress_bar=False, **kw)
            p = post.predict_proba(a, b) if name == "GPPL pooled" else post.predict_proba(a, b, users=users)
            vals = {"acc": metrics.accuracy(test.y, p), "CEE": metrics.cross_entropy(test.y, p)}
            if name.startswith("DPM"):
                from sklearn.metrics import adjusted_rand_score

                _, partition = post.memberships()
                part = partition.reindex(train.user_ids).to_numpy()
                true = truth[pd.Index(data.user_ids).get_indexer(train.user_ids)]
                vals["ARI"] = float(adjusted_rand_score(true, part))
                vals["communities"] = float(post.n_communities().idxmax())
            rows += [{**base, "method": name, "metric": k, "value": float(v)} for k, v in vals.items()]
    return pd.DataFrame(rows)


METRICS = ("acc", "CEE", "ARI", "communities")


def summarise(df: pd.DataFrame) -> str:
    """One row per (strength, method): mean ± sd over repeats of each metric ("–" where a method
    has none)."""
    g = df.groupby(["d", "corr", "method", "metric"], sort=False)["value"]
    mean, sd = g.mean(), g.std().fillna(0.0)
    n = df.groupby(["d", "method"], sort=False)["seed"].nunique()
    head = ["d", "corr(f^c, f^c')", "method", "held-out acc", "held-out CEE", "ARI", "communities (mode)",
            "repeats"]
    lines = ["| " + " | ".join(head) + " |", "|---:|---:|---|" + "---:|" * (len(head) - 3)]
    for (d, corr, method) in dict.fromkeys(zip(df["d"], df["corr"], df["method"], strict=True)):
        cells = []
        for m in METRICS:
            key = (d, corr, method, m)
            cells.append(f"{mean[key]:.3f} ± {sd[key]:.3f}" if key in mean.index and m != "communities"
                         else f"{mean[key]:.1f} ± {sd[key]:.1f}" if key in mean.index else "–")
        lines.append(f"| {d:g} | {corr:.2f} | {method} | " + " | ".join(cells) + f" | {n[(d, method)]} |")
    note = (f"{df['seed'].nunique()} repeat(s). {N_COMM} true communities of {N_USERS // N_COMM} users; "
            "ARI of the DPM's Binder-optimal partition; communities: the posterior mode of their number, "
            "mean ± sd over repeats.")
    return "\n".join(lines + ["", note])
