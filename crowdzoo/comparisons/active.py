"""``active``: learning curves of BALD, maximum-entropy and random queries at equal label budgets.

Every repeat (one seed) simulates four problems, each with an oracle that answers any query from the
simulated truth, a random start, and held-out labels drawn from the same truth:

* **GPPL**: 40 items with 2-D features, f ~ GP (``simulate_gppl``, Matérn-3/2), y ~ Bernoulli(Φ(f_a −
  f_b)); start 20 random labels, then 8 rounds of 10 queries (100 labels);
* **crowdGPPL**: 30 items × 10 users from crowdGPPL's own prior (``simulate_crowd``, C = 3 components,
  no user features); start 30 random labels (3 per user), then 8 rounds of 15 queries (150 labels);
  the model has C = 3 components;
* **DPM**: 30 items × 12 users in 3 communities (``simulate_communities``, d = 1); start 36 random
  labels, then 8 rounds of 15 queries (156 labels); Gibbs, one chain of 60 sweeps (30 burn-in);
* **SCDC**: a pinwheel of 3 arms × 20 points, 4 two-coin workers (α = β = 0.85); start 20 random
  links, then 8 rounds of 15 links (140 links); svi, 100 epochs from one initialisation.

Each round fits the model (its default route, the zoo's defaults otherwise) to the labels so far,
scores it, and asks ``post.suggest(n, strategy=…)`` for the next batch over every pair of the items (and
every user or worker): one greedy batch with fantasy steps (docs/active.md), answered by the oracle.
Random queries are uniform over the same candidates. Scores on 400 held-out queries (uniform pairs and
users): log loss (nats) and accuracy of the predicted label (for SCDC: P(same cluster) against the true
arms), and Kendall's τ between the posterior mean utilities and the truth (each user's, averaged over
users, for the crowd models; for SCDC the adjusted Rand index of the most probable clusters).

``active-gppl`` runs the GPPL and crowdGPPL problems alone (about 30 s a seed), for more seeds.
``--quick``: GPPL (15 items, start 10, 2 rounds of 5) and SCDC (24 points, 20 epochs, start 10, 2
rounds of 5) only (a test runs it). The default run takes about 10 minutes with ``--jobs 2``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

STRATEGIES = ("bald", "entropy", "random")
N_TEST = 400


@dataclass
class Problem:
    """A simulated problem: ``make(a, b, u, y)`` builds its data from label arrays (positions),
    ``answer(rng, a, b, u)`` draws the oracle's labels, ``truth`` what τ (or ARI) is scored against,
    the item (and user) ids, the start, the rounds and the batch size."""

    name: str
    model: object
    fit_kw: dict
    make: object
    answer: object
    prob: object
    n_items: int
    n_users: int
    start: int
    rounds: int
    batch: int
    truth: np.ndarray
    links: bool = False


def _pairs(rng, n_items, n_users, n):
    a = rng.integers(0, n_items, n)
    b = (a + rng.integers(1, n_items, n)) % n_items
    return a, b, rng.integers(0, max(1, n_users), n)


def _start(rng, n_items, n_users, n):
    """Random starting queries, every user (worker) among them."""
    a, b, u = _pairs(rng, n_items, n_users, n)
    if n_users:
        u[:n_users] = np.arange(n_users)
    return a, b, u


def problems(seed: int, quick: bool = False) -> list[Problem]:
    import torch
    from torch.special import ndtr

    import crowdzoo as cz
    from crowdzoo.data.simulate_dpm import simulate_communities

    rounds = 2 if quick else 8
    out = []

    def pairwise(X, item_ids, user_ids):
        def make(a, b, u, y):
            kw = {} if user_ids is None else {"users": u, "user_ids": user_ids}
            return cz.PairwiseData.from_arrays(a, b, y, X, item_ids=item_ids, **kw)
        return make

    def oracle(prob):
        def answer(rng, a, b, u):
            return (rng.uniform(size=len(a)) < prob(a, b, u)).astype(np.float64)
        return answer

    # GPPL
    n = 15 if quick else 40
    g, f = cz.simulate_gppl(n_items=n, n_pairs=2, seed=seed)
    X = np.asarray(g.item_features)
    prob = (lambda f: lambda a, b, u: ndtr(torch.as_tensor(f[a] - f[b])).numpy())(f)
    # the median heuristic (learn_kernel=False), the kernel the truth is drawn with: the curves compare
    # query rules, not kernels
    out.append(Problem("GPPL", cz.GPPL(), {"progress_bar": False, "learn_kernel": False},
                       pairwise(X, np.arange(n), None),
                       oracle(prob), prob, n, 0, 10 if quick else 20, rounds, 5 if quick else 10, f))
    if not quick:
        # crowdGPPL
        c, tr = cz.simulate_crowd(n_items=30, n_users=10, n_pairs=2, n_components=3, n_user_features=0,
                                  seed=seed)
        F = tr["F"]
        prob = (lambda F: lambda a, b, u: ndtr(torch.as_tensor(F[a, u] - F[b, u])).numpy())(F)
        Xc = np.asarray(c.item_features)
        out.append(Problem("crowdGPPL", cz.CrowdGPPL(n_components=3), {"progress_bar": False},
                           pairwise(Xc, np.arange(30), np.arange(10)), oracle(prob), prob, 30, 10, 30,
                           rounds, 15, F))
        # DPM
        d, tr = simulate_communities(n_users=12, n_items=30, n_labels=1, n_communities=3, scale=1.5,
                                     lengthscale=0.3, kernel="se", deviation=1.0, seed=seed)
        Fd = tr["f"][tr["communities"]].T  # (N, U) each user's community utility
        prob = (lambda F: lambda a, b, u: ndtr(torch.as_tensor(F[a, u] - F[b, u])).numpy())(Fd)
        # the paper's model: the simulated communities have no item effects beside their GPs
        out.append(Problem("DPM", cz.DPMCommunities(item_residual=False),
                           {"n_sweeps": 60, "burn_in": 30, "n_chains": 1, "progress_bar": False},
                           pairwise(np.asarray(d.item_features), d.item_ids, d.user_ids), oracle(prob), prob,
                           30, 12, 36, rounds, 15, Fd))
    # SCDC
    arms, per = (3, 8) if quick else (3, 20)
    L, tr = cz.simulate_links(n_arms=arms, n_per_arm=per, n_annotated="all", n_workers=4, window=3,
                              alpha=0.85, beta=0.85, seed=seed)
    labels = tr["labels"]
    O = L.O.numpy() if hasattr(L.O, "numpy") else np.asarray(L.O)

    def make_links(a, b, u, y):
        return cz.LinkData.from_arrays(a, b, y.astype(bool), O, workers=u, worker_ids=np.arange(4))

    def link_prob(a, b, u):
        same = labels[a] == labels[b]
        return np.where(same, 0.85, 0.15)

    out.append(Problem("SCDC", cz.SCDC(n_clusters=6), {"n_epochs": 20 if quick else 100, "n_init": 1},
                       make_links, oracle(link_prob), link_prob, arms * per, 4, 10 if quick else 20, rounds,
                       5 if quick else 15, labels, links=True))
    return out


def _scores(post, p: Problem, test) -> dict:
    """Held-out log loss and accuracy, and τ (ARI for SCDC)."""
    from crowdzoo import metrics

    a, b, u, y, truth_p = test
    if p.links:
        from sklearn.metrics import adjusted_rand_score

        same = (p.truth[a] == p.truth[b]).astype(float)
        q = post.predict_proba(a, b)
        return {"log_loss": metrics.cross_entropy(same, q), "accuracy": metrics.accuracy(same, q),
                "tau": float(adjusted_rand_score(p.truth, post.predict().to_numpy()))}
    items, users = post.data.item_ids, post.data.user_ids
    kw = {} if p.n_users == 0 else {"users": users[u]}
    q = post.predict_proba(items[a], items[b], **kw)
    if p.n_users == 0:
        tau = metrics.kendall_tau(p.truth, post.utility_gaussian()[0].numpy())
    else:
        means = [m.numpy() for m, _ in post.utility_gaussians(users, n_draws=300)]
        tau = float(np.mean([metrics.kendall_tau(p.truth[:, j], m) for j, m in enumerate(means)]))
    return {"log_loss": metrics.cross_entropy(y, q), "accuracy": metrics.accuracy(y, q), "tau": tau}


def curve(p: Problem, strategy: str, seed: int) -> list[dict]:
    """One learning curve: the scores after the start and after each round of ``strategy``'s queries."""
    import crowdzoo as cz

    rng = np.random.default_rng([seed, 1])
    test_a, test_b, test_u = _pairs(np.random.default_rng([seed, 2]), p.n_items, p.n_users, N_TEST)
    test = (test_a, test_b, test_u, p.answer(np.random.default_rng([seed, 3]), test_a, test_b, test_u), None)
    a, b, u = _start(rng, p.n_items, p.n_users, p.start)
    y = p.answer(rng, a, b, u)
    rows = []
    for r in range(p.rounds + 1):
        data = p.make(a, b, u, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(p.model, data, seed=seed, **p.fit_kw)
        rows.append({"model": p.name, "strategy": strategy, "seed": seed, "round": r, "labels": len(a),
                     **_scores(post, p, test)})
        if r == p.rounds:
            break
        nxt = post.suggest(p.batch, strategy=strategy, seed=seed * 1000 + r)
        items = pd.Index(data.item_ids)
        na, nb = items.get_indexer(nxt["a"]), items.get_indexer(nxt["b"])
        nu = (pd.Index(post._query_ids()[1]).get_indexer(nxt["user"]) if "user" in nxt
              else np.zeros(len(nxt), dtype=np.int64))
        a, b, u = np.r_[a, na], np.r_[b, nb], np.r_[u, nu]
        y = np.r_[y, p.answer(rng, na, nb, nu)]
    return rows


def run_one(seed: int, quick: bool = False, models=None) -> pd.DataFrame:
    """Every strategy's curve on each problem of this seed (``models``: only these problems)."""
    rows = []
    for p in problems(seed, quick):
        if models is None or p.name in models:
            for s in STRATEGIES:
                rows += curve(p, s, seed)
    return pd.DataFrame(rows)


class Pairwise:
    """``active-gppl``: the GPPL and crowdGPPL problems alone, cheap enough for more seeds (the
    comparison the 70 % bar is read from)."""

    @staticmethod
    def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
        return run_one(seed, quick, models=("GPPL", "crowdGPPL"))

    summarise = staticmethod(lambda df: summarise(df))
    figure = staticmethod(lambda df, path: figure(df, path))


pairwise = Pairwise()


def labels_to_reach(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and strategy: the fewest labels at which the mean log loss (over seeds) is at or
    below random's final mean log loss, and that as a share of random's final budget."""
    mean = df.groupby(["model", "strategy", "labels"], sort=False)["log_loss"].mean().reset_index()
    out = []
    for model, g in mean.groupby("model", sort=False):
        rnd = g[g["strategy"] == "random"].sort_values("labels")
        target, budget = float(rnd["log_loss"].iloc[-1]), int(rnd["labels"].iloc[-1])
        for s, h in g.groupby("strategy", sort=False):
            h = h.sort_values("labels")
            hit = h[h["log_loss"] <= target]
            n = int(hit["labels"].iloc[0]) if len(hit) else None
            out.append({"model": model, "strategy": s, "target": target, "labels": n,
                        "share": None if n is None else n / budget})
    return pd.DataFrame(out)


def summarise(df: pd.DataFrame) -> str:
    g = df.groupby(["model", "strategy", "labels"], sort=False)
    mean, sd = g[["log_loss", "accuracy", "tau"]].mean(), g[["log_loss", "accuracy", "tau"]].std().fillna(0.0)
    lines = ["| model | strategy | labels | log loss | accuracy | τ (SCDC: ARI) |",
             "|---|---|---:|---:|---:|---:|"]
    for key in mean.index:
        m, s = mean.loc[key], sd.loc[key]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {m['log_loss']:.3f} ± {s['log_loss']:.3f} | "
                     f"{m['accuracy']:.3f} ± {s['accuracy']:.3f} | {m['tau']:.3f} ± {s['tau']:.3f} |")
    reach = labels_to_reach(df)
    final = df[df["labels"] == df.groupby("model")["labels"].transform("max")]
    wide = final.pivot_table(index=["model", "seed"], columns="strategy", values="log_loss")
    gap = (wide["bald"] - wide["random"]).groupby("model")
    lines += ["", "Labels to reach random's final mean log loss (share of random's budget), and BALD's final "
              "log loss minus random's, seed by seed (mean ± sd over seeds; negative: BALD better):", "",
              "| model | random's final log loss | bald | entropy | random | bald − random, final |",
              "|---|---:|---:|---:|---:|---:|"]
    for model, r in reach.groupby("model", sort=False):
        cells = []
        for s in STRATEGIES:
            row = r[r["strategy"] == s]
            n = None if row.empty else row["labels"].iloc[0]
            reached = n is not None and not pd.isna(n)
            cells.append(f"{int(n)} ({row['share'].iloc[0]:.0%})" if reached else "not reached")
        d = gap.get_group(model)
        cells.append(f"{d.mean():+.3f} ± {d.std() if len(d) > 1 else 0.0:.3f}")
        lines.append(f"| {model} | {r['target'].iloc[0]:.3f} | " + " | ".join(cells) + " |")
    seeds = ", ".join(f"{m} {n}" for m, n in df.groupby("model", sort=False)["seed"].nunique().items())
    lines += ["", f"Seeds: {seeds}; mean ± sd over seeds of the held-out scores after each round "
              "(crowdzoo.comparisons.active)."]
    return "\n".join(lines)


def figure(df: pd.DataFrame, path) -> None:
    """Held-out log loss against labels, one panel per model, one line per strategy (mean ± sd)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(df["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.2), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for s in STRATEGIES:
            g = df[(df["model"] == model) & (df["strategy"] == s)].groupby("labels")["log_loss"]
            m, sd = g.mean(), g.std().fillna(0.0)
            ax.plot(m.index, m.values, marker="o", ms=3, label=s)
            ax.fill_between(m.index, m - sd, m + sd, alpha=0.15)
        ax.set_title(model)
        ax.set_xlabel("labels")
    axes[0][0].set_ylabel("held-out log loss (nats)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
