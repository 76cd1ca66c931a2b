"""Figures of the diagnostic report (matplotlib, Agg), each returned as PNG bytes.

``rank`` (MCMC: rank histograms per chain, arviz-plots ``plot_rank``) or ``optimisation`` (the
loss / bound / EP change per iteration), ``ppc`` (observed win rates against their replicated 90 %
intervals), ``reliability`` (the calibration diagram), ``utilities`` (posterior means with 95 %
intervals of the identified item utilities), ``component_scales`` (crowdGPPL's Fig. 3: how much
each latent component contributes) and ``coclustering`` (a heat map of P(c_u = c_v), for posteriors
over communities of users).
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def rank(dt, max_quantities: int = 4) -> bytes:
    """Rank plots (arviz-plots, ECDF-difference form) of the log-likelihood of the labels whose r̂
    is largest: uniform ranks in every chain mean the chains agree."""
    import arviz_plots as azp
    import arviz_stats as azs

    r = azs.rhat(dt, group="log_likelihood")["y"]
    dim = r.dims[0]
    worst = np.argsort(np.nan_to_num(r.values, nan=0.0))[::-1][:max_quantities]
    coords = {dim: r[dim].values[worst]}
    pc = azp.plot_rank(dt, group="log_likelihood", coords=coords, backend="matplotlib")
    fig = pc.viz["figure"].item()
    return _png(fig)


def optimisation(dt) -> bytes | None:
    if "optimisation" not in dt.children:
        return None
    ds = dt.optimisation.to_dataset()
    names = list(ds.data_vars)
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3), squeeze=False)
    for ax, name in zip(axes[0], names):
        v = ds[name]
        x = v[v.dims[0]].values
        y = np.asarray(v.values, dtype=float)
        if name == "max_change":
            ax.semilogy(x, y)
        else:
            ax.plot(x, y)
        ax.set_xlabel(v.dims[0])
        ax.set_ylabel(name)
    fig.suptitle("optimisation trace")
    return _png(fig)


def ppc(check, max_points: int = 60) -> bytes:
    """Observed statistic (dots) against its replicated 90 % interval (bars), sorted; red where
    the posterior predictive p-value is extreme."""
    e = check.extra
    order = np.argsort(e["observed"])
    if order.size > max_points:  # the extreme ones and an even spread of the rest
        keep = np.unique(np.concatenate([np.flatnonzero((e["p"] < 0.025) | (e["p"] > 0.975)),
                                         order[np.linspace(0, order.size - 1, max_points).astype(int)]]))
        order = order[np.isin(order, keep)]
    x = np.arange(order.size)
    fig, ax = plt.subplots(figsize=(max(5, 0.12 * order.size + 2), 3))
    ax.vlines(x, e["lo"][order], e["hi"][order], color="0.6", lw=3, label="replicated 90 %")
    bad = (e["p"][order] < 0.025) | (e["p"][order] > 0.975)
    ax.scatter(x[~bad], e["observed"][order][~bad], s=12, color="k", zorder=3, label="observed")
    ax.scatter(x[bad], e["observed"][order][bad], s=16, color="tab:red", zorder=3, label="extreme")
    ax.set_xticks([])
    ax.set_ylabel("rate")
    ax.set_title(check.name)
    ax.legend(fontsize=7, loc="upper left")
    return _png(fig)


def reliability(checks) -> bytes:
    """Calibration diagram: observed frequency of y = 1 against mean predicted P(y = 1) per bin."""
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1)
    for c in checks:
        e = c.extra
        m = e["n"] > 0
        ax.plot(e["confidence"][m], e["frequency"][m], "o-", label=f"{c.name[12:-1]} (ECE {e['ece']:.3f})")
    ax.set_xlabel("predicted P(a ≻ b)")
    ax.set_ylabel("observed frequency")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("calibration")
    return _png(fig)


def utilities(dt, var: str, max_items: int = 40) -> bytes:
    """Posterior means and central 95 % intervals of an item utility variable, best first."""
    v = dt.posterior[var]
    draws = np.asarray(v.values).reshape(-1, v.shape[-1])
    ids = v[v.dims[-1]].values
    mean = draws.mean(0)
    lo, hi = np.quantile(draws, [0.025, 0.975], 0)
    order = np.argsort(mean)[::-1]
    if order.size > max_items:
        order = np.concatenate([order[: max_items // 2], order[-max_items // 2:]])
    y = np.arange(order.size)[::-1]
    fig, ax = plt.subplots(figsize=(5, 0.18 * order.size + 1))
    ax.hlines(y, lo[order], hi[order], color="tab:blue", lw=2)
    ax.plot(mean[order], y, "k|", ms=8)
    ax.set_yticks(y)
    ax.set_yticklabels([str(i) for i in ids[order]], fontsize=6)
    ax.set_xlabel(f"{var} (posterior mean, 95 % interval)")
    title = f"item utilities {var}" + (f": best and worst {max_items // 2}" if ids.size > max_items else "")
    ax.set_title(title)
    return _png(fig)


def component_scales(dt) -> bytes | None:
    """crowdGPPL (Simpson & Gurevych 2020, Fig. 3): each component's contribution to the personal
    utilities, var_items(v_c) · mean_users(w_c²), per posterior draw; surplus components sit near
    zero."""
    if "V" not in dt.posterior or "W" not in dt.posterior:
        return None
    V = np.asarray(dt.posterior["V"].values)
    W = np.asarray(dt.posterior["W"].values)
    V = V.reshape(-1, *V.shape[2:])  # (S, C, items)
    W = W.reshape(-1, *W.shape[2:])  # (S, C, users)
    contrib = V.var(-1) * (W ** 2).mean(-1)  # (S, C)
    order = np.argsort(np.median(contrib, 0))[::-1]
    fig, ax = plt.subplots(figsize=(max(4, 0.35 * contrib.shape[1] + 1), 3))
    ax.boxplot(contrib[:, order], showfliers=False)
    ax.set_xticks(np.arange(1, order.size + 1), [str(c) for c in order], fontsize=7)
    ax.set_xlabel("component (by median contribution)")
    ax.set_ylabel("var(v_c) · mean(w_c²)")
    ax.set_yscale("log")
    ax.set_title("latent component scales")
    return _png(fig)


def coclustering_order(P, partition=None) -> np.ndarray:
    """An order of the users that shows the blocks of a co-clustering matrix ``P`` (U, U): by the
    point partition's communities (largest first; ``partition`` (U,) labels), and within a community by
    the mean co-clustering with its other members (the most typical first). Without a partition,
    greedily: each next user is the one most often clustered with the previous."""
    P = np.asarray(P, dtype=float)
    U = P.shape[0]
    if partition is None:
        order, left = [int(np.argmax(P.sum(1)))], set(range(U))
        left.discard(order[0])
        while left:
            rest = np.fromiter(left, dtype=int)
            nxt = int(rest[np.argmax(P[order[-1], rest])])
            order.append(nxt)
            left.discard(nxt)
        return np.asarray(order)
    z = np.asarray(partition).reshape(-1)
    labels, sizes = np.unique(z, return_counts=True)
    rank = {lab: r for r, lab in enumerate(labels[np.argsort(-sizes, kind="stable")])}
    typical = np.array([P[u, z == z[u]].mean() for u in range(U)])
    return np.lexsort((-typical, np.array([rank[c] for c in z])))


def coclustering(P, partition=None, user_ids=None, max_labels: int = 40) -> bytes:
    """Heat map of the posterior co-clustering P(c_u = c_v) (U, U), users ordered by the point
    partition (:func:`coclustering_order`) so that communities show as blocks; the partition's
    communities are outlined."""
    from matplotlib.patches import Rectangle

    P = np.asarray(P, dtype=float)
    U = P.shape[0]
    order = coclustering_order(P, partition)
    size = min(7.0, 3.0 + 0.06 * U)
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    im = ax.imshow(P[np.ix_(order, order)], vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="P(same community)")
    if partition is not None:
        z = np.asarray(partition).reshape(-1)[order]
        edges = np.flatnonzero(z[1:] != z[:-1]) + 1
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, U]):
            ax.add_patch(Rectangle((lo - 0.5, lo - 0.5), hi - lo, hi - lo, fill=False, edgecolor="white",
                                   lw=1.2))
    if user_ids is not None and U <= max_labels:
        names = [str(user_ids[i]) for i in order]
        ax.set_xticks(np.arange(U), names, rotation=90, fontsize=6)
        ax.set_yticks(np.arange(U), names, fontsize=6)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_xlabel("user (ordered by the point partition)" if partition is not None else "user")
    ax.set_title("co-clustering of users")
    return _png(fig)


def clusters(x, z, workers, max_points: int = 5000) -> bytes:
    """Clustering from links (SCDC): the latent points x (their first two dimensions, or the two
    leading principal components when d > 2) coloured by cluster; the cluster sizes; each worker's
    sensitivity α against specificity β."""
    import matplotlib.pyplot as plt

    x = np.asarray(x)[:max_points]
    z = np.asarray(z)[:max_points]
    if x.shape[1] > 2:
        xc = x - x.mean(0)
        x = xc @ np.linalg.svd(xc, full_matrices=False)[2][:2].T
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].scatter(x[:, 0], x[:, 1], c=z, cmap="tab20", s=6)
    ax[0].set_title("latent x by cluster")
    vals, n = np.unique(z, return_counts=True)
    order = np.argsort(-n)
    ax[1].bar(np.arange(vals.size), n[order])
    ax[1].set_xticks(np.arange(vals.size), [str(v) for v in vals[order]], fontsize=7)
    ax[1].set_title("cluster sizes (clusters in use)")
    ax[2].scatter(workers["beta"], workers["alpha"], s=12 + 2 * np.sqrt(workers["annotations"]))
    ax[2].set_xlabel("specificity β")
    ax[2].set_ylabel("sensitivity α")
    ax[2].set_xlim(0, 1.02)
    ax[2].set_ylim(0, 1.02)
    ax[2].set_title("workers (size: annotations)")
    return _png(fig)

