"""``scdc-crowd``: how much the crowd's links lift SCDC and BayesSCDC where the features alone are
ambiguous, beside a pairwise-constrained k-means given the same links and two feature-only baselines.

Link sets (each repeat simulates its own from its seed; two-coin workers, Luo et al. 2018 Eq. 1, with
α_m, β_m drawn uniformly from [0.7, 0.95]):

* ``overlapping``: 500 items, 3 spherical Gaussian groups in 4-D whose means lie 2 sd apart
  (features alone: about 70 % accuracy); 20 workers × 49 links (windows of 50, the paper's protocol).
* ``elongated``: 600 items, 4 groups in 5-D, each stretched (sd 2.5) along its own random direction
  around means 3 apart (sd 0.5 across): k-means's isotropic distance cuts the long groups, a
  full-covariance mixture does not; 5 workers × 300 links (the user's set of the issue this answers).
* ``elongated, 1 worker``: the same groups with one worker and 100 links.
* ``overlapping, 5,000 links``: the overlapping groups, 1,000 items, 10 workers × 500 links.
* ``overlapping, raw units``: groups, workers and links drawn as the overlapping set's (a draw of
  their own), with two of the four features in raw units, as a user's table has them:
  5,000 + 200 x₃ (a price in euros) and 2,000 + 10 x₄ (a year). The deep models standardise such
  features by default (``standardise``), and PCKMeans standardises them; k-means and the Gaussian
  mixture (started by scikit-learn from k-means) read them as given, as a user's first try would.

Methods: SCDC and BayesSCDC with their defaults (``cz.SCDC(n_clusters=K)``: sizes from the data,
:mod:`crowdzoo.models.scdc.defaults`; the best of their default 3 initialisations by the final bound),
each with the links and without
(``data.without_annotations()``); PCKMeans (:func:`pckmeans`) with the same links; a full-covariance
Gaussian mixture (scikit-learn, 3 initialisations) and k-means (10 initialisations) on the features.
Metrics: Hungarian accuracy and NMI (:mod:`crowdzoo.cluster_metrics`), seconds, and for BayesSCDC with
links the share of the workers' true α_m, β_m inside their 90 % intervals.

``SCDC_ALONE``: the same without BayesSCDC (``crowdzoo compare
crowdzoo.comparisons.scdc_crowd:SCDC_ALONE``), for a rerun after a change to SCDC alone.

``--quick``: 120 items per set, 3 epochs of training after 2 of pretraining, networks of one layer of 8.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from .comparison import Comparison

SETS = ("overlapping", "elongated", "elongated, 1 worker", "overlapping, 5,000 links",
        "overlapping, raw units")
#: the raw-units set's features: o ↦ RAW_LOC + RAW_SCALE · o
RAW_LOC, RAW_SCALE = np.array([0.0, 0.0, 5000.0, 2000.0]), np.array([1.0, 1.0, 200.0, 10.0])
MODELS = ("SCDC", "BayesSCDC")


# ---------------------------------------------------------------- data
def overlapping_groups(n: int, rng, K: int = 3, D: int = 4, gap: float = 2.0):
    """K spherical unit Gaussian groups in D dimensions whose means lie ``gap`` apart (a regular simplex
    scaled so), n items in random groups: (O, labels)."""
    y = rng.integers(K, size=n)
    mu = np.eye(K, D) * gap / np.sqrt(2.0)
    return mu[y] + rng.standard_normal((n, D)), y


def elongated_groups(n: int, rng, K: int = 4, D: int = 5, sep: float = 3.0, long_sd: float = 2.5,
                     sd: float = 0.5):
    """K Gaussian groups in D dimensions, means at distance ``sep`` from 0 in random directions, each
    stretched to sd ``long_sd`` along its own random direction (``sd`` across): (O, labels)."""
    y = rng.integers(K, size=n)
    mu = rng.standard_normal((K, D))
    mu *= sep / np.linalg.norm(mu, axis=1, keepdims=True)
    v = rng.standard_normal((K, D))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    O = mu[y] + sd * rng.standard_normal((n, D)) + long_sd * rng.standard_normal((n, 1)) * v[y]
    return O, y


def link_set(name: str, seed: int, quick: bool = False):
    """(LinkData with the true groups as labels, K, the workers' true α, β) of set ``name``."""
    from ..data.links import LinkData
    from ..data.simulate_links import two_coin_workers

    rng = np.random.default_rng([seed, SETS.index(name)])
    n, workers, window = {"overlapping": (500, 20, 50), "elongated": (600, 5, 301),
                          "elongated, 1 worker": (600, 1, 101),
                          "overlapping, 5,000 links": (1000, 10, 501),
                          "overlapping, raw units": (500, 20, 50)}[name]
    if quick:
        n, window = 120, min(window, 41)
    O, y = (elongated_groups if name.startswith("elongated") else overlapping_groups)(n, rng)
    if name.endswith("raw units"):
        O = RAW_LOC + RAW_SCALE * O
    a, b = rng.uniform(0.7, 0.95, workers), rng.uniform(0.7, 0.95, workers)
    df = two_coin_workers(y, workers, a, b, window=window, seed=rng)
    data = LinkData.from_arrays(df["i"].to_numpy(), df["j"].to_numpy(), df["same"].to_numpy(), O,
                                workers=df["worker"].to_numpy(), worker_ids=np.arange(workers), labels=y)
    return data, int(y.max()) + 1, a, b


# ---------------------------------------------------------------- PCKMeans
def pckmeans(X, K: int, i, j, same, w: float = 1.0, n_iter: int = 50, seed: int = 0):
    """Pairwise-constrained k-means (PCKMeans; Basu, Banerjee & Mooney, "Active semi-supervision for
    pairwise constrained clustering", SDM 2004, Eq. 1): minimise

        Σ_n ½‖x_n − μ_{l_n}‖² + w Σ_{must-links (n, n')} 1[l_n ≠ l_n'] + w Σ_{cannot-links} 1[l_n = l_n']

    alternating the assignments and the means. Each annotation is one constraint of weight ``w`` (a
    pair labelled both ways by different workers carries both); the features are standardised first,
    so that ``w`` = 1 weighs a violated link like half a squared standard deviation. Departures from
    the paper, for noisy crowds: the means start from k-means (10 starts), not from the neighbourhoods
    of the must-links' transitive closure (which a few wrong must-links join into one), and every
    point is reassigned at once against the others' previous labels (the paper reassigns in a random
    order, one point at a time); iterations stop when no label changes. Returns the labels."""
    from scipy.sparse import coo_matrix
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    N = X.shape[0]
    same = np.asarray(same, dtype=bool)

    def adjacency(mask):
        a, b = np.asarray(i)[mask], np.asarray(j)[mask]
        m = coo_matrix((np.full(2 * a.size, w), (np.r_[a, b], np.r_[b, a])), shape=(N, N))
        return m.tocsr()

    ml, cl = adjacency(same), adjacency(~same)
    ml_deg = np.asarray(ml.sum(1)).ravel()
    mu = KMeans(K, n_init=10, random_state=seed).fit(X).cluster_centers_
    labels = np.full(N, -1)
    for _ in range(n_iter):
        onehot = np.zeros((N, K)) if labels[0] < 0 else np.eye(K)[labels]
        cost = (0.5 * ((X[:, None, :] - mu[None]) ** 2).sum(-1)
                + (ml_deg[:, None] - ml @ onehot if labels[0] >= 0 else 0.0) + cl @ onehot)
        new = cost.argmin(1)
        if (new == labels).all():
            break
        labels = new
        for k in range(K):
            if (labels == k).any():
                mu[k] = X[labels == k].mean(0)
    return labels


# ---------------------------------------------------------------- one repeat
def _fit(cls_name: str, data, K: int, seed: int, quick: bool):
    import crowdzoo as cz

    model = getattr(cz, cls_name)(n_clusters=K, **(dict(latent_dim=2, hidden=(8,)) if quick else {}))
    kw = dict(n_epochs=3, pretrain=2, n_init=1) if quick else {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the table reports the fits; their warnings are not its subject
        post = cz.fit(model, data, seed=seed, progress_bar=False, **kw)
    return post, time.perf_counter() - t0


def run_one(seed: int, quick: bool = False, sets=SETS, models=MODELS) -> pd.DataFrame:
    """One repeat: every link set of ``sets``, the deep models of ``models`` and every baseline (module
    docstring). Tidy rows (seed, dataset, method, annotations, metric, value)."""
    from sklearn.cluster import KMeans
    from sklearn.mixture import GaussianMixture

    from ..cluster_metrics import hungarian_accuracy, nmi

    rows = []

    def add(dataset, method, ann, labels, pred, secs, extra=None):
        vals = {"acc": hungarian_accuracy(labels, pred), "NMI": nmi(labels, pred), "seconds": secs,
                **(extra or {})}
        rows.extend({"seed": seed, "dataset": dataset, "method": method, "annotations": ann, "metric": k,
                     "value": float(v)} for k, v in vals.items())

    for name in sets:
        data, K, a, b = link_set(name, seed, quick)
        y = data.labels
        ann = f"{data.n_annotations} links, {data.n_workers} worker{'s' if data.n_workers > 1 else ''}"
        for method in models:
            for d, what in ((data, ann), (data.without_annotations(), "none")):
                post, secs = _fit(method, d, K, seed, quick)
                extra = {}
                if method == "BayesSCDC" and what != "none":
                    w = post.workers()
                    inside = np.r_[(w["alpha_lo"] <= a) & (a <= w["alpha_hi"]),
                                   (w["beta_lo"] <= b) & (b <= w["beta_hi"])]
                    extra["worker coverage"] = inside.mean()
                add(name, method, what, y, post.predict().to_numpy(), secs, extra)
        t0 = time.perf_counter()
        pred = pckmeans(data.O, K, data.i, data.j, data.same, seed=seed)
        add(name, "PCKMeans", ann, y, pred, time.perf_counter() - t0)
        for method, est in (("Gaussian mixture (full)", GaussianMixture(K, covariance_type="full", n_init=3,
                                                                        random_state=seed)),
                            ("k-means", KMeans(K, n_init=10, random_state=seed))):
            t0 = time.perf_counter()
            pred = est.fit(data.O).predict(data.O)
            add(name, method, "none", y, pred, time.perf_counter() - t0)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the table
def summarise(df: pd.DataFrame) -> str:
    g = df.groupby(["dataset", "method", "annotations", "metric"], sort=False)["value"]
    mean, sd = g.mean(), g.std().fillna(0.0)
    n = df["seed"].nunique()
    head = ["link set", "method", "links", "accuracy", "NMI", "workers' truth in 90 % intervals",
            "s per fit"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * (len(head) - 3)]

    def cell(key, fmt="{:.3f}"):
        if key not in mean.index:
            return "–"
        return fmt.format(mean[key]) + (f" ± {fmt.format(sd[key])}" if n > 1 else "")

    for ds, method, ann in dict.fromkeys(zip(df["dataset"], df["method"], df["annotations"], strict=True)):
        k = (ds, method, ann)
        lines.append(f"| {ds} | {method} | {ann} | {cell((*k, 'acc'))} | {cell((*k, 'NMI'))} | "
                     f"{cell((*k, 'worker coverage'), '{:.2f}')} | {cell((*k, 'seconds'), '{:.1f}')} |")
    verdicts = []
    for ds in dict.fromkeys(df["dataset"]):
        sub = mean.xs(ds, level="dataset").xs("acc", level="metric")
        pck = sub.xs("PCKMeans", level="method").iloc[0]
        for method in [m for m in MODELS if m in sub.index.get_level_values("method")]:
            m = sub.xs(method, level="method")
            crowd = m[[a for a in m.index if a != "none"]].iloc[0]
            alone = m["none"]
            verdicts.append(f"{ds}, {method}: {crowd:.3f} with links against {alone:.3f} without "
                            f"({'beats' if crowd > alone else 'does not beat'} its own fit) and "
                            f"{pck:.3f} for PCKMeans ({'beats' if crowd > pck else 'does not beat'} it)")
    fitted = " and ".join(m for m in MODELS if m in set(df["method"]))
    note = (f"{n} repeat(s): each simulates its own link sets from its seed. {fitted} with "
            f"{'their' if ' and ' in fitted else 'its'} defaults (sizes from the data, the best of 3 "
            "initialisations by the bound); PCKMeans (Basu, Banerjee & Mooney 2004) with the same links, "
            "weight 1 per link on standardised features; a full-covariance Gaussian mixture (3 starts) "
            "and k-means (10 starts) on the features alone.")
    return "\n".join(lines + ["", note, "", "With links against without, and against PCKMeans (accuracy, "
                              "mean over repeats):", "", *[f"* {v}" for v in verdicts]])


def _scdc_alone(seed: int, quick: bool = False) -> pd.DataFrame:
    return run_one(seed, quick, models=("SCDC",))


#: the comparison without BayesSCDC (a third of the time): every set, SCDC and the baselines;
#: ``crowdzoo compare crowdzoo.comparisons.scdc_crowd:SCDC_ALONE --repeats 3 --jobs 3``
SCDC_ALONE = Comparison(_scdc_alone, summary=summarise)

__all__ = ["run_one", "summarise", "SCDC_ALONE", "MODELS", "pckmeans", "link_set", "overlapping_groups",
           "elongated_groups", "SETS"]
