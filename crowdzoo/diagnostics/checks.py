"""Posterior checks with stated thresholds, each returning a :class:`Check` with a verdict.

Every check reads an ArviZ ``DataTree`` from ``posterior.to_arviz()`` (see
:mod:`crowdzoo.diagnostics.arviz`), so it works for every model and route:

* :func:`convergence` — r̂ (rank-normalised split r̂, Vehtari et al. 2021) and bulk/tail ESS of the
  identified posterior variables and of every label's log-likelihood (MCMC only);
* :func:`optimisation` — whether an optimisation route met its stopping tolerance (svi: whether its
  ELBO reached a plateau);
* :func:`sampler` — NUTS divergences, trees that hit the maximum depth, E-BFMI;
* :func:`ppc_win_rates` — posterior predictive check of each item's win rate (and each user's
  rate of choosing the first item) against replicated labels; for choices among k items,
  :func:`ppc_choice_rates`, each item's rate of being chosen (and rejected as worst);
* :func:`calibration` — reliability of predicted probabilities, expected calibration error (ECE); for
  choices, :func:`choice_calibration` over every member of every set;
* :func:`loo` — PSIS-LOO (Vehtari et al. 2017) and its Pareto k̂;
* :func:`agreement` — an approximate route against a NUTS reference, group by group
  (:mod:`crowdzoo.diagnostics.compare`): mean |difference of posterior means| in NUTS posterior sds,
  the ratio of posterior sds, and the coverage of the approximation's 90 % intervals.

The orientation of a pair is often chosen by its outcome (a winner-first layout writes every label
as y = 1), so no check may depend on it: calibration counts each label both ways, (a, b, y) and
(b, a, 1 − y), and the first-item rate is skipped where every label has the same y (its only
meaning, position bias, needs pairs written in the order they were shown). Item win rates do not
depend on the orientation.

The thresholds are module constants, written into each check's ``rule``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import binom

from .compare import LOGLIK, compare_draws, per_element, same_data

VERDICTS = ("pass", "warn", "fail", "skip")

RHAT_PASS, RHAT_WARN = 1.01, 1.05
ESS_PER_CHAIN = 100  # Vehtari et al. (2021): bulk and tail ESS above 100 per chain
DIVERGENT_WARN = 0.01
TREE_DEPTH_WARN, TREE_DEPTH_FAIL = 0.05, 0.5  # shares of draws whose trajectory hit max_tree_depth
EBFMI_WARN = 0.3
PPC_TAIL = 0.025  # a posterior predictive p-value below this or above 1 − this is "extreme"
PPC_WARN_Q, PPC_FAIL_Q = 0.95, 0.999  # quantiles of Binomial(n, 2 × PPC_TAIL) for the count of extremes
K_GOOD = 0.7  # Pareto k̂ above min(this, 1 − 1/log10 S): PSIS-LOO unreliable for that label
DISCRETE_VALUES = 10  # a label's log-likelihood with at most this many distinct values gets plain IS
LOO_SPAN = 0.1  # nats: a label whose log-likelihood spans less cannot move its elpd term by more
K_SHARE_WARN = 0.05
AGREE_PASS, AGREE_WARN = 0.25, 0.5  # mean |Δ mean| / NUTS sd
# sd_approx / sd_NUTS: within 20 % passes; sds below two thirds of NUTS's (a mean-field guide's
# over-confidence: half of NUTS's fails) or above 1.5 times fail
SD_RATIO_PASS, SD_RATIO_WARN = (0.8, 1.25), (2 / 3, 1.5)
COVER_PASS, COVER_WARN = 0.8, 0.65  # share of NUTS draws inside an approximation's 90 % interval


@dataclass
class Check:
    """One diagnostic: ``verdict`` in pass/warn/fail/skip, the measured ``value``, the ``rule``
    that gave the verdict, a ``detail`` sentence and optional arrays for plots (``extra``)."""

    name: str
    verdict: str
    value: str
    rule: str
    detail: str = ""
    extra: dict = field(default_factory=dict, repr=False)


def _grade(x: float, pass_below: float, warn_below: float) -> str:
    return "pass" if x < pass_below else "warn" if x < warn_below else "fail"


def is_mcmc(dt) -> bool:
    """Whether the draws are Markov chains on the posterior: the root attribute ``approximate``
    (crowdzoo's converters), else whether the tree has a ``sample_stats`` group (a sampler's)."""
    if "approximate" in dt.attrs:
        return not int(dt.attrs["approximate"])
    return "sample_stats" in dt.children


def identified_vars(dt) -> list[str]:
    """Posterior variables that are identified (not up to sign/rotation), from the root attrs; every
    posterior variable of a tree that does not say (one made elsewhere)."""
    if "identified" not in dt.attrs:
        return list(dt.posterior.data_vars)
    names = str(dt.attrs.get("identified", "")).split()
    return [n for n in names if n in dt.posterior.data_vars]


def convergence(dt) -> list[Check]:
    """r̂ and bulk/tail ESS over the identified posterior variables and the per-label
    log-likelihood (identified for every model). Skipped for draws of an approximation."""
    if not is_mcmc(dt):
        msg = "draws of an approximate posterior are independent; r̂ and ESS do not apply"
        return [Check("r̂", "skip", "–", f"r̂ < {RHAT_PASS} pass, < {RHAT_WARN} warn", msg),
                Check("ESS (bulk, tail)", "skip", "–", f"≥ {ESS_PER_CHAIN} per chain", msg)]
    import arviz_stats as azs

    n_chains = int(dt.posterior.sizes["chain"])
    parts = [("log_likelihood", None)] + [("posterior", v) for v in identified_vars(dt)]
    rhat, bulk, tail = [], [], []
    for group, var in parts:
        kw = {"group": group, "var_names": [var] if var else None}
        with np.errstate(divide="ignore", invalid="ignore"):  # a quantity constant within chains: NaN
            rhat.append(_flat(azs.rhat(dt, **kw)))
            bulk.append(_flat(azs.ess(dt, method="bulk", **kw)))
            tail.append(_flat(azs.ess(dt, method="tail", **kw)))
    rhat, bulk, tail = (np.concatenate(x) for x in (rhat, bulk, tail))
    what = "the per-label log-likelihood" + "".join(f", {v}" for v in identified_vars(dt))
    out = []
    if n_chains < 2:
        out.append(Check("r̂", "warn", "–", f"r̂ < {RHAT_PASS} pass, < {RHAT_WARN} warn",
                         "one chain: r̂ needs at least two (run num_chains ≥ 2)"))
    else:
        worst = float(np.nanmax(rhat))
        undefined = int(np.isnan(rhat).sum())
        out.append(Check("r̂", _grade(worst, RHAT_PASS, RHAT_WARN), f"max {worst:.3f}",
                         f"max r̂ < {RHAT_PASS} pass, < {RHAT_WARN} warn, else fail",
                         f"over {rhat.size} quantities ({what})"
                         + (f"; {undefined} of them constant within the chains, where r̂ is undefined (not "
                            "counted)" if undefined else ""), {"rhat": rhat}))
    need = ESS_PER_CHAIN * n_chains
    low = float(min(np.nanmin(bulk), np.nanmin(tail)))
    verdict = "pass" if low >= need else "warn" if low >= need / 4 else "fail"
    value = f"min bulk {np.nanmin(bulk):.0f}, tail {np.nanmin(tail):.0f}"
    out.append(Check("ESS (bulk, tail)", verdict, value,
                     f"min ≥ {need} ({ESS_PER_CHAIN} per chain) pass, ≥ {need // 4} warn, else fail",
                     f"over {bulk.size} quantities ({what})", {"ess_bulk": bulk, "ess_tail": tail}))
    return out


def _flat(tree) -> np.ndarray:
    ds = tree.to_dataset() if hasattr(tree, "to_dataset") else tree
    return np.concatenate([np.ravel(ds[v].values) for v in ds.data_vars])


def optimisation(dt) -> list[Check]:
    """Whether an optimisation route (natgrad, EP) met its own stopping tolerance; for svi, which runs a
    fixed number of steps, whether its ELBO reached a plateau (:func:`crowdzoo.inference.svi.plateau`)."""
    if "converged" not in dt.attrs:
        return []
    ok = bool(int(dt.attrs["converged"]))
    if "elbo_rel_change" in dt.attrs:
        change, noise = float(dt.attrs["elbo_rel_change"]), float(dt.attrs["elbo_rel_noise"])
        return [Check("ELBO plateau", "pass" if ok else "warn",
                      f"rise {change:.2g} of |ELBO| over the last tenth of the steps (noise {noise:.2g})",
                      "the smoothed ELBO rose over the last tenth of the steps by at most twice its noise or "
                      "0.1 % pass, else warn",
                      "" if ok else "svi stopped before its ELBO levelled off: raise num_steps (or lr) and "
                      "refit; the draws are of a guide still moving")]
    return [Check("optimisation converged", "pass" if ok else "fail", "yes" if ok else "no",
                  "the route met its stopping tolerance pass, else fail",
                  "" if ok else "stopped at max_iter: raise max_iter (or loosen tol) and refit; the "
                  "posterior may be far from the route's fixed point")]


def sampler(dt) -> list[Check]:
    """NUTS's own warnings: divergent transitions, trees at the maximum depth, E-BFMI."""
    if "sample_stats" not in dt.children:
        return [Check("divergences", "skip", "–", "NUTS only", "not an MCMC run")]
    st = dt.sample_stats
    div = np.asarray(st["diverging"].values, dtype=bool)
    n_div, share = int(div.sum()), float(div.mean())
    out = [Check("divergences", "pass" if n_div == 0 else "warn" if share < DIVERGENT_WARN else "fail",
                 f"{n_div} of {div.size}", f"0 pass, < {DIVERGENT_WARN:.0%} warn, else fail",
                 "divergent transitions mean the sampler missed part of the posterior: raise "
                 "target_accept_prob or reparameterise" if n_div else "")]
    max_depth = int(dt.attrs.get("max_tree_depth", 0))
    if "tree_depth" in st and max_depth:
        hit = float((np.asarray(st["tree_depth"].values) >= max_depth).mean())
        verdict = _grade(hit, TREE_DEPTH_WARN, TREE_DEPTH_FAIL)
        out.append(Check("tree depth", verdict, f"{hit:.1%} at the maximum ({max_depth})",
                         f"< {TREE_DEPTH_WARN:.0%} of draws at max_tree_depth pass, < {TREE_DEPTH_FAIL:.0%} "
                         "warn, else fail",
                         "" if verdict == "pass" else "trajectories cut short: NUTS explores the posterior "
                         "as a random walk of short steps, so its draws mix slowly and may not have reached "
                         f"its tails; raise max_tree_depth (now {max_depth})"))
    if "energy" in st:
        import arviz_stats as azs

        bfmi = np.ravel(azs.bfmi(dt)["energy"].values)  # per chain
        low = float(bfmi.min())
        out.append(Check("E-BFMI", "pass" if low >= EBFMI_WARN else "warn", f"min {low:.2f} over chains",
                         f"≥ {EBFMI_WARN} pass, else warn (Betancourt 2016)",
                         "low E-BFMI: momentum resampling explores the energy poorly; the posterior "
                         "may have heavy tails" if low < EBFMI_WARN else "", {"bfmi": bfmi}))
    return out


def _labels(dt):
    """Observed y (L,), the labels' items a, b and users (or None), replicated y (S, L)."""
    y = np.asarray(dt.observed_data["y"].values, dtype=float)
    c = dt.constant_data
    user = np.asarray(c["user"].values) if "user" in c else None
    rep = dt.posterior_predictive["y"].values
    return y, np.asarray(c["a"].values), np.asarray(c["b"].values), user, rep.reshape(-1, rep.shape[-1])


def _ppp(stat_obs, stat_rep):
    """Posterior predictive p-values P(T_rep > T_obs) + ½ P(T_rep = T_obs), per column."""
    return (stat_rep > stat_obs).mean(0) + 0.5 * (stat_rep == stat_obs).mean(0)


def ppc_win_rates(dt) -> list[Check]:
    """Each item's win rate (the share of its comparisons it wins) and each user's rate of
    choosing the first-listed item, observed against the posterior predictive distribution of the
    same statistic over replicated label sets; a p-value in the outer 2 × 2.5 % is "extreme"."""
    y, a, b, user, rep = _labels(dt)
    items, ia = np.unique(np.concatenate([a, b]), return_inverse=True)
    L = y.size
    rows = np.arange(L)
    A = sp.csr_matrix((np.ones(L), (rows, ia[:L])), shape=(L, items.size))
    B = sp.csr_matrix((np.ones(L), (rows, ia[L:])), shape=(L, items.size))
    n = np.asarray((A + B).sum(0)).ravel()
    win_obs = (A.T @ y + B.T @ (1 - y)) / n
    win_rep = (np.asarray((A.T @ rep.T).T) + np.asarray((B.T @ (1 - rep).T).T)) / n
    out = [_ppc_check("PPC: item win rates", "items", items, win_obs, win_rep)]
    if user is not None:
        out.append(_ppc_first_item(y, a, b, user, rep))
    return out


def ppc_tie_rates(dt) -> list[Check]:
    """Labels with ties as a third outcome (y = ½): each item's tie rate (the share of its comparisons
    that are ties), observed against the posterior predictive distribution of the same statistic, as
    :func:`ppc_win_rates` does for wins; nothing for labels without ties."""
    y, a, b, _, rep = _labels(dt)
    if not np.any(y == 0.5):
        return []
    items, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    L = y.size
    M = sp.csr_matrix((np.ones(2 * L), (np.tile(np.arange(L), 2), inv)), shape=(L, items.size))
    n = np.asarray(M.sum(0)).ravel()
    tie_obs = (M.T @ (y == 0.5)) / n
    tie_rep = np.asarray((M.T @ (rep == 0.5).T).T) / n
    return [_ppc_check("PPC: item tie rates", "items", items, tie_obs, tie_rep)]


def ppc_link_rates(dt) -> list[Check]:
    """Links (SCDC): each item's must-link rate (the share of its annotations that say "same
    cluster") and each worker's, observed against the posterior predictive distribution of the same
    statistic, as :func:`ppc_win_rates` does for preferences."""
    c = dt.constant_data
    y = np.asarray(dt.observed_data["y"].values, dtype=float)
    rep = dt.posterior_predictive["y"].values
    rep = rep.reshape(-1, rep.shape[-1])
    i, j, w = (np.asarray(c[k].values) for k in ("i", "j", "worker"))
    L = y.size
    out = []
    for name, what, keys in (("PPC: item must-link rates", "items", np.concatenate([i, j])),
                             ("PPC: worker must-link rates", "workers", w)):
        ids, inv = np.unique(keys, return_inverse=True)
        M = sp.csr_matrix((np.ones(inv.size), (np.arange(inv.size) % L, inv)), shape=(L, ids.size))
        n = np.asarray(M.sum(0)).ravel()
        out.append(_ppc_check(name, what, ids, (M.T @ y) / n, np.asarray((M.T @ rep.T).T) / n))
    return out


FIRST_ITEM = "PPC: user first-item rates"


def _ppc_first_item(y, a, b, user, rep) -> Check:
    """Each user's rate of choosing the first-listed item: a check of position bias, which means
    something only when pairs are written in the order they were shown. Labels all of one y (a
    winner-first layout) say nothing about position: skipped. A label that has a mirror (same user,
    items swapped, same y; a tie written as a ≻ b and b ≻ a) says nothing about position either, and
    is left out with its mirror."""
    rule = f"p < {PPC_TAIL} or > {1 - PPC_TAIL} is extreme (over users, as for items)"
    if np.all(y == y[0]):
        return Check(FIRST_ITEM, "skip", "–", rule,
                     f"every label has y = {y[0]:g}: the pairs are written winner-first (or loser-first), so "
                     "the first-listed item is chosen by the outcome and its rate tells nothing about the "
                     "model; the check needs pairs in the order they were shown")
    keep = ~_mirrored(y, a, b, user)
    if not keep.any():
        return Check(FIRST_ITEM, "skip", "–", rule, "every label is one half of a tie (a ≻ b and b ≻ a)")
    y, user, rep = y[keep], user[keep], rep[:, keep]
    L = y.size
    users, iu = np.unique(user, return_inverse=True)
    U = sp.csr_matrix((np.ones(L), (np.arange(L), iu)), shape=(L, users.size))
    m = np.asarray(U.sum(0)).ravel()
    c = _ppc_check(FIRST_ITEM, "users", users, (U.T @ y) / m, np.asarray((U.T @ rep.T).T) / m)
    if not keep.all():
        c.detail = (c.detail + "; " if c.detail else "") + (
            f"{int((~keep).sum())} labels left out: mirrored pairs (a tie written both ways)")
    return c


def _mirrored(y, a, b, user) -> np.ndarray:
    """Labels matched one-to-one with a label of the same user and y on the swapped pair."""
    f = pd.DataFrame({"u": user, "a": a, "b": b, "y": y})
    keys = ["u", "a", "b", "y"]
    count = f.groupby(keys, sort=False).size()
    nth = f.groupby(keys, sort=False).cumcount().to_numpy()
    mirror = count.reindex(pd.MultiIndex.from_arrays([f["u"], f["b"], f["a"], f["y"]], names=keys))
    return nth < mirror.fillna(0).to_numpy()


def _ppc_check(name, what, ids, obs, rep):
    p = _ppp(obs, rep)
    extreme = (p < PPC_TAIL) | (p > 1 - PPC_TAIL)
    z = (obs - rep.mean(0)) / np.maximum(rep.std(0), 1e-12)  # ranks the extreme ones
    order = np.argsort(np.abs(z))[::-1][:3]
    worst = ", ".join(str(ids[i]) for i in order if extreme[i])
    k = int(extreme.sum())
    warn_at, fail_at = (int(binom.ppf(q, p.size, 2 * PPC_TAIL)) for q in (PPC_WARN_Q, PPC_FAIL_Q))
    verdict = "pass" if k <= warn_at else "warn" if k <= fail_at else "fail"
    return Check(name, verdict, f"{k} of {p.size} {what} extreme",
                 f"p < {PPC_TAIL} or > {1 - PPC_TAIL} is extreme; up to {warn_at} extreme {what} pass, "
                 f"up to {fail_at} warn, else fail (95 % / 99.9 % quantiles of Binomial({p.size}, "
                 f"{2 * PPC_TAIL}), the count for a correct model)",
                 f"most extreme: {worst}" if worst else "",
                 {"ids": ids, "observed": obs, "lo": np.quantile(rep, 0.05, 0),
                  "hi": np.quantile(rep, 0.95, 0), "p": p})


def predicted_from_loglik(dt) -> tuple[np.ndarray, np.ndarray]:
    """In-sample P(y = 1) per label, the posterior mean of the likelihood, and the labels y."""
    y = np.asarray(dt.observed_data["y"].values, dtype=float)
    ll = dt.log_likelihood["y"].values
    p_obs = np.exp(ll.reshape(-1, ll.shape[-1])).mean(0)
    return np.where(y > 0.5, p_obs, 1 - p_obs), y


def _ece(p, y, n_bins):
    """Expected calibration error of each row of y (…, n) against p (n,), and the bin tables."""
    b = np.minimum((p * n_bins).astype(int), n_bins - 1)
    n = np.bincount(b, minlength=n_bins)
    conf = np.bincount(b, p, n_bins) / np.maximum(n, 1)
    onehot = np.eye(n_bins)[b]  # (n, bins)
    freq = (y @ onehot) / np.maximum(n, 1)
    return (n * np.abs(freq - conf)).sum(-1) / n.sum(), n, conf, freq


def calibration(p: np.ndarray, y: np.ndarray, where: str = "training labels", n_bins: int = 10,
                n_null: int = 400, seed: int = 0) -> Check:
    """Reliability of P(y = 1): labels binned by predicted probability into ``n_bins`` equal
    bins; ECE = Σ_b (n_b / n) |mean y_b − mean p_b|. With few labels per bin ECE is noisy even for
    perfect probabilities, so the verdict compares it with its distribution under perfect
    calibration (``n_null`` label sets drawn as y* ~ Bernoulli(p)): beyond the 95 % quantile warns,
    beyond the 99.9 % quantile fails.

    Each label counts both ways, as (p, y) and (1 − p, 1 − y) — the pair (a, b, y) and its mirror
    (b, a, 1 − y) — so that the verdict does not depend on which item of a pair was written first
    (in a winner-first layout every y = 1, and unsymmetrised bins compare mean p with 1). The
    labels are first put in one orientation (p ≥ ½) and the simulated label sets drawn there, so
    that ECE, its null distribution and the verdict are the same for any orientation."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    flip = p < 0.5
    p, y = np.where(flip, 1 - p, p), np.where(flip, 1 - y, y)
    both = np.concatenate([p, 1 - p])
    ece, n, conf, freq = _ece(both, np.concatenate([y, 1 - y]), n_bins)
    n_null = int(min(n_null, max(50, 10_000_000 // p.size)))  # bounded memory on big data
    rng = np.random.default_rng(seed)
    draws = (rng.random((n_null, p.size)) < p).astype(float)
    null = _ece(both, np.concatenate([draws, 1 - draws], axis=1), n_bins)[0]
    q95, q999 = np.quantile(null, [0.95, 0.999])
    verdict = "pass" if ece <= q95 else "warn" if ece <= q999 else "fail"
    in_sample = where.startswith("training labels")
    if in_sample and verdict == "fail":
        # the null draws y* ~ Bernoulli(p) independently of p, which holds for labels the fit has not
        # seen; on its own training labels even EP (within 0.001 of NUTS) exceeds the 99.9 % quantile
        # (tests/core/test_new_user_models.py), so a training-label check can only warn
        verdict = "warn"
    return Check(f"calibration ({where})", verdict, f"ECE {ece:.3f} (perfect: ≤ {q95:.3f} in 95 %)",
                 f"ECE within the 95 % quantile of ECE under perfect calibration pass, 99.9 % warn, "
                 f"else fail ({n_bins} bins, {n_null} simulated label sets; each label counted both ways, "
                 f"as (a, b, y) and (b, a, 1 − y))"
                 + ("; on training labels at most warn (its null holds for unseen labels)" * in_sample),
                 f"{p.size} labels" + ("; in-sample, so optimistic" if in_sample else ""),
                 {"n": n, "confidence": conf, "frequency": freq, "ece": float(ece)})


def three_way_calibrations(probs: np.ndarray, y: np.ndarray, where: str) -> list[tuple]:
    """The calibrations of three predicted outcomes (n, 3) = (p_a, p_tie, p_b) against labels
    y ∈ {0, ½, 1}: P(a ≻ b | not a tie) on the decided labels, and P(tie) against whether each label
    is a tie; (p, y, where) for :func:`calibration`."""
    probs, y = np.asarray(probs, dtype=float), np.asarray(y, dtype=float)
    decided = y != 0.5
    p_dec = probs[decided, 0] / np.maximum(probs[decided, 0] + probs[decided, 2], 1e-300)
    return [(p_dec, y[decided], f"{where}, decided: P(a ≻ b) given no tie"),
            (probs[:, 1], (y == 0.5).astype(float), f"{where}: P(tie)")]


def choice_calibration(p: np.ndarray, mask: np.ndarray, best: np.ndarray, where: str = "training choices",
                       n_bins: int = 10, n_null: int = 400, seed: int = 0) -> Check:
    """Reliability of predicted choice probabilities ``p`` (R, k_max) of sets ``mask`` (R, k_max)
    whose chosen slots are ``best`` (R,): every member of every set is one (predicted probability,
    chosen or not) pair, binned by the prediction into ``n_bins`` equal bins; ECE = Σ_b (n_b / n)
    |observed share chosen_b − mean predicted_b|. As for pairs (:func:`calibration`), the verdict
    compares ECE with its distribution under perfect calibration, ``n_null`` sets of choices drawn one
    per row from the rows' own probabilities: beyond the 95 % quantile warns, beyond the 99.9 %
    quantile fails (at most warns on the training choices). No orientation to choose: each member is
    counted once. The detail holds the calibration table (predicted against observed by bin) and the
    confidence gap (mean largest probability of a row less the share of rows whose most probable
    member was chosen: > 0 over-confident)."""
    p, mask, best = np.asarray(p, dtype=float), np.asarray(mask, dtype=bool), np.asarray(best)
    R = p.shape[0]
    rows = np.arange(R)
    hit = np.zeros(p.shape)
    hit[rows, best] = 1.0
    q = p[mask]
    ece, n, conf, freq = _ece(q, hit[mask], n_bins)
    n_null = int(min(n_null, max(50, 4_000_000 // q.size)))  # bounded memory on big data
    rng = np.random.default_rng(seed)
    cum = np.cumsum(np.where(mask, p, 0.0), 1)
    u = rng.random((n_null, R, 1)) * cum[:, -1:]
    drawn = np.minimum((cum[None] < u).sum(-1), mask.sum(1) - 1)  # (n_null, R): a slot per row
    sim = np.zeros((n_null,) + p.shape)
    sim[np.arange(n_null)[:, None], rows[None, :], drawn] = 1.0
    null = _ece(q, sim[:, mask], n_bins)[0]
    q95, q999 = np.quantile(null, [0.95, 0.999])
    verdict = "pass" if ece <= q95 else "warn" if ece <= q999 else "fail"
    in_sample = where.startswith("training")
    if in_sample and verdict == "fail":  # as for pairs: the null holds for choices the fit has not seen
        verdict = "warn"
    gap = float(p.max(1).mean() - (p.argmax(1) == best).mean())
    table = "; ".join(f"{b / n_bins:.1f}–{(b + 1) / n_bins:.1f}: {conf[b]:.3f} → {freq[b]:.3f} (n {n[b]})"
                      for b in range(n_bins) if n[b])
    return Check(f"calibration ({where})", verdict, f"ECE {ece:.3f} (perfect: ≤ {q95:.3f} in 95 %)",
                 "ECE within the 95 % quantile of ECE under perfect calibration pass, 99.9 % warn, else "
                 f"fail ({n_bins} bins of every set member's P(chosen), {n_null} simulated sets of choices)"
                 + ("; on training choices at most warn (its null holds for unseen choices)" * in_sample),
                 f"{R} choices, {q.size} members{'; in-sample, so optimistic' if in_sample else ''}; "
                 f"confidence gap {gap:+.3f}; predicted → observed share chosen by bin: {table}",
                 {"n": n, "confidence": conf, "frequency": freq, "ece": float(ece), "gap": gap})


def is_choices(dt) -> bool:
    """Whether the tree holds choices among k items (its observed data the best's slot of each row)."""
    return "observed_data" in dt.children and "best" in dt.observed_data and "y" not in dt.observed_data


def ppc_choice_rates(dt) -> list[Check]:
    """Choices among k items: each item's choice rate (the share of the sets offering it in which it was
    chosen as best) and, for best–worst data, its worst rate (the share of the sets with a worst that
    offer it in which it was rejected as worst), observed against the posterior predictive
    distribution of the same statistic over replicated choices, as :func:`ppc_win_rates` does for
    pairs. Reads the items of each set from the constant data ``set_item`` (positions, −1 padding)."""
    if "set_item" not in dt.constant_data:
        return [Check("PPC: item choice rates", "skip", "–", "needs the items of each set",
                      "the tree has no constant data 'set_item' (the items of each set)")]
    sets = np.asarray(dt.constant_data["set_item"].values)
    R = sets.shape[0]
    mask = sets >= 0
    N = int(sets.max()) + 1
    coord = dt.posterior.coords.get("item") if "item" in dt.posterior.coords else None
    ids = np.asarray(coord.values) if coord is not None and coord.size >= N else np.arange(N)
    out = []
    for var, name in (("best", "PPC: item choice rates"), ("worst", "PPC: item worst rates")):
        if var not in dt.observed_data:
            continue
        obs = np.asarray(dt.observed_data[var].values)
        rep = np.asarray(dt.posterior_predictive[var].values).reshape(-1, R)
        rows = np.flatnonzero(obs >= 0)  # a best-only row of best–worst data has no worst (−1)
        n = np.bincount(sets[rows][mask[rows]], minlength=N)
        seen = np.bincount(sets[rows, obs[rows]], minlength=N)
        drawn = sets[rows[None, :], rep[:, rows]]  # (S, rows): the replicated choices' items
        S = drawn.shape[0]
        rep_n = np.bincount((drawn + N * np.arange(S)[:, None]).ravel(), minlength=S * N).reshape(S, N)
        keep = n > 0
        out.append(_ppc_check(name, "items", ids[:N][keep], seen[keep] / n[keep], rep_n[:, keep] / n[keep]))
    return out


def k_threshold(n_draws: int) -> float:
    """Pareto k̂ above which a label's PSIS estimate is unreliable with S draws:
    min(1 − 1/log10 S, 0.7) (Vehtari et al. 2024, "Pareto smoothed importance sampling", §3)."""
    return min(1.0 - 1.0 / np.log10(max(n_draws, 11)), K_GOOD)


def _keep_labels(dt, ll, keep):
    return dt if keep.all() else dt.isel({ll.dims[-1]: np.flatnonzero(keep)}, missing_dims="ignore")


def loo(dt) -> Check:
    """PSIS-LOO over the labels (arviz-stats ``loo``): elpd_loo ± se and the Pareto k̂.

    A label counts as unreliable when k̂ passes :func:`k_threshold` *and* its log-likelihood spans at
    least ``LOO_SPAN`` nats over the draws: a self-normalised importance-sampling estimate of its
    elpd term lies between the smallest and largest of those values whatever the weights, so for a
    narrower span a heavy-tailed k̂ cannot move it by more than the span. (Confident labels of a
    probit model, log Φ(z) ≈ 0 in every draw, give such k̂ > 1 with spans of 10⁻⁶ nats.)"""
    import arviz_stats as azs

    ll = dt.log_likelihood["y" if "y" in dt.log_likelihood else "choice"]  # a label's, or a choice row's
    flat = np.asarray(ll.values).reshape(-1, ll.shape[-1])
    span = np.ptp(flat, 0)
    # labels whose log-likelihood hardly varies have elpd_i = that value and k̂ = 0; PSIS's Pareto
    # fit divides by their spread, so they are left out of it
    # … and so are labels whose largest importance ratios 1/p(y|θ) are one repeated value (log Φ(z)
    # rounds to the same float in most draws): PSIS's Pareto fit of that tail is undefined
    # (arviz-stats raises), and the importance weights of such a label are flat over its tail
    S = flat.shape[0]
    n_tail = max(2, int(min(0.2 * S, 3 * np.sqrt(S))))
    flat_tail = np.ptp(np.sort(-flat, 0)[-n_tail:], 0) == 0
    const = (span < 1e-8) | flat_tail
    # labels whose log-likelihood takes a few values only (a discrete latent under point-estimated
    # parameters, e.g. SCDC's clusters): bounded importance ratios, so plain importance sampling
    # gives their elpd term (−log mean 1/p(y|θ)) with no Pareto tail to fit (k̂ = 0)
    n_values = (np.diff(np.sort(flat, 0), axis=0) != 0).sum(0) + 1
    discrete = (n_values <= DISCRETE_VALUES) & ~const
    if const.all():  # a point estimate (MAP) or draws that agree on every label
        return Check("PSIS-LOO", "skip", "no label's log-likelihood varies over the draws",
                     "needs draws of a posterior",
                     "a point estimate (e.g. a MAP route) has no spread to reweight: PSIS-LOO does not apply")
    smooth = ~const & ~discrete
    k = np.zeros(const.size)
    elpd_i = flat.mean(0)
    elpd_i[discrete] = -(np.logaddexp.reduce(-flat[:, discrete], axis=0) - np.log(S))
    res = None
    if smooth.any():
        try:
            with warnings.catch_warnings():  # high k̂ is this check's verdict, not a warning of its own
                warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto")
                res = azs.loo(_keep_labels(dt, ll, smooth))
        except ValueError as err:  # e.g. too few draws for the Pareto fit of the tail
            return Check("PSIS-LOO", "skip", "not computed", "needs enough posterior draws",
                         f"arviz-stats could not run PSIS-LOO on {S} draws "
                         f"({str(err).splitlines()[0][:120]}); draw more (more samples or sweeps) to get it")
        k[smooth] = np.ravel(res.pareto_k.values)
    elpd = (0.0 if res is None else float(res.elpd)) + float(elpd_i[~smooth].sum())
    if not np.isfinite(elpd):
        why = ("the log-likelihood has infinite or NaN draws" if not np.isfinite(flat).all() else
               f"PSIS overflowed: the log-likelihood spans up to {np.nanmax(span):.3g} nats over the draws "
               f"(lowest {np.nanmin(flat):.3g}); draws this far apart are not a usable LOO proposal")
        return Check("PSIS-LOO", "fail", "elpd_loo not finite", "a finite elpd_loo", why, {"pareto_k": k})
    se = float(res.se) if res is not None else float(np.sqrt(elpd_i.size * elpd_i.var()))
    p_loo = float(res.p) if res is not None else 0.0
    lppd = np.logaddexp.reduce(flat[:, discrete], axis=0) - np.log(S)  # p_loo_i = lppd_i − elpd_loo_i
    p_loo += float((lppd - elpd_i[discrete]).sum())
    k_max = k_threshold(flat.shape[0])
    high = ~(k <= k_max)  # a NaN k̂ (a failed Pareto fit) counts as high
    bad = high & (span >= LOO_SPAN)
    share = float(bad.mean())
    verdict = "pass" if share == 0 else "warn" if share <= K_SHARE_WARN else "fail"
    note = ""
    if not is_mcmc(dt):  # a high k̂ may be the approximation's distance from the posterior, not the model's
        verdict = "warn" if verdict == "fail" else verdict
        note = ("draws of an approximation: k̂ also measures how far it is from the posterior, so a high "
                "share warns at most (compare with NUTS, reference=, to tell the two apart); ")
    if discrete.any():
        note += (f"{int(discrete.sum())} labels with at most {DISCRETE_VALUES} log-likelihood values by "
                 "plain importance sampling; ")
    return Check("PSIS-LOO", verdict, f"elpd_loo {elpd:.1f} ± {se:.1f}, p_loo {p_loo:.1f}",
                 f"no label with k̂ > {k_max:.2f} (for {flat.shape[0]} draws) and a log-likelihood "
                 f"spanning ≥ {LOO_SPAN} nats pass, ≤ {K_SHARE_WARN:.0%} of labels warn, else fail (warn "
                 "for draws of an approximation)",
                 note + f"{int(bad.sum())} of {k.size} labels unreliable; {int((high & ~bad).sum())} more "
                 f"with k̂ > {k_max:.2f} whose log-likelihood spans < {LOO_SPAN} nats",
                 {"pareto_k": k, "span": span})


def agreement_of(xs: np.ndarray, rs: np.ndarray) -> dict:
    """One quantity group of an approximation (draws ``xs``, (S, n)) against NUTS (draws ``rs``, (R, n)),
    element by element (:func:`crowdzoo.diagnostics.compare.compare_draws`): |E_approx − E_NUTS| /
    sd_NUTS (``diff``), sd_approx / sd_NUTS (``ratio``), the shares of NUTS draws inside the
    approximation's central 50 % and 90 % intervals (``cover50``, ``cover90``), the Wasserstein
    distances in NUTS sds (``w1``, ``w2``) and the moment-matched Gaussian KL (``kl``); elements NUTS
    holds fixed are left out."""
    return compare_draws(xs, rs)


def _ratio_grade(r: float) -> str:
    return ("pass" if SD_RATIO_PASS[0] <= r <= SD_RATIO_PASS[1]
            else "warn" if SD_RATIO_WARN[0] <= r <= SD_RATIO_WARN[1] else "fail")


def agreement(dt, ref) -> list[Check]:
    """An approximate posterior ``dt`` against a NUTS reference ``ref`` on the same data, group by
    group (:func:`crowdzoo.diagnostics.compare.compare_posteriors`: the per-label log-likelihood and
    each identified variable): |E_approx − E_NUTS| / sd_NUTS, sd_approx / sd_NUTS and the share of
    NUTS draws inside the approximation's 90 % interval. Each check's verdict is its worst group's, so
    that many well-matched log-likelihood terms cannot hide an over-confident latent variable. A
    reference fitted to other data (by the checksums of the data) is refused with a DataError."""
    same_data(dt, ref)
    known = set(identified_vars(dt))
    per = {k: g for k, g in per_element(dt, ref).items() if k.startswith(LOGLIK) or k in known}
    md = {k: float(g["diff"].mean()) for k, g in per.items()}
    mr = {k: float(np.median(g["ratio"])) for k, g in per.items()}
    cv = {k: float(g["cover90"].mean()) for k, g in per.items()}
    worst_d = max(md, key=md.get)
    worst_r = max(mr, key=lambda k: abs(np.log(mr[k])))
    worst_c = min(cv, key=cv.get)

    def each(vals, fmt):
        return "; ".join(f"{k} {fmt.format(v)}" for k, v in vals.items())

    return [Check("agreement with NUTS: means", _grade(md[worst_d], AGREE_PASS, AGREE_WARN),
                  f"{md[worst_d]:.2f} NUTS sd ({worst_d})",
                  f"per group, mean |Δ mean| / sd_NUTS < {AGREE_PASS} pass, < {AGREE_WARN} warn, else "
                  "fail; the worst group decides", each(md, "{:.2f}"),
                  {k: g["diff"] for k, g in per.items()}),
            Check("agreement with NUTS: sds", _ratio_grade(mr[worst_r]),
                  f"median ratio {mr[worst_r]:.2f} ({worst_r})",
                  f"per group, median sd / sd_NUTS in [{SD_RATIO_PASS[0]}, {SD_RATIO_PASS[1]}] pass, "
                  f"[{SD_RATIO_WARN[0]:.2f}, {SD_RATIO_WARN[1]}] warn, else fail; the worst group decides",
                  "below 1: the approximation is over-confident; " + each(mr, "{:.2f}"),
                  {k: g["ratio"] for k, g in per.items()}),
            Check("agreement with NUTS: 90 % intervals", _grade(-cv[worst_c], -COVER_PASS, -COVER_WARN),
                  f"{cv[worst_c]:.2f} of NUTS draws inside ({worst_c})",
                  "per group, the share of NUTS draws inside the central 90 % interval of the "
                  f"approximation ≥ {COVER_PASS} pass, ≥ {COVER_WARN} warn, else fail; the worst group "
                  "decides",
                  "0.90 when the two agree; " + each(cv, "{:.2f}"),
                  {k: g["cover90"] for k, g in per.items()})]


def run_all(dt, held_out=None, reference=None, outcomes=None, choices=None) -> list[Check]:
    """Every check that applies; ``held_out`` = (p, y) of held-out labels for calibration,
    ``reference`` a NUTS ``DataTree`` on the same data. ``outcomes``: for a fit with ties as a third
    outcome, a list of (p, y, where) calibrations to run instead of the one read from the
    log-likelihood, which knows only the probability of each label's own outcome
    (:func:`three_way_calibrations`). ``choices``: for a fit of choices among k items, a list of
    (p, mask, best, where) for :func:`choice_calibration` (the predicted probability of every set
    member, which the log-likelihood of the chosen one does not give)."""
    out = convergence(dt) + optimisation(dt) + sampler(dt)
    missing = [g for g in ("constant_data", "posterior_predictive") if g not in dt.children]
    choice = is_choices(dt)
    if missing:  # a tree made elsewhere without the labels' items or replicated labels
        out.append(Check("PPC", "skip", "–", "needs the constant_data and posterior_predictive groups",
                         f"the tree has no {' or '.join(missing)} group"))
    elif "worker" in dt.constant_data:
        out += ppc_link_rates(dt)
    elif choice:
        out += ppc_choice_rates(dt)
    else:
        out += ppc_win_rates(dt) + ppc_tie_rates(dt)
    if choice:
        out += [choice_calibration(p, mask, best, where=where) for p, mask, best, where in choices or []]
        if not choices:
            out.append(Check("calibration (training choices)", "skip", "–", "needs each member's predicted "
                             "P(chosen)", "a tree alone holds the chosen member's likelihood only; pass the "
                             "posterior"))
    elif outcomes is None:
        out.append(calibration(*predicted_from_loglik(dt)))
    else:
        out += [calibration(p, y, where=where) for p, y, where in outcomes]
    if held_out is not None:
        out.append(calibration(*held_out, where="held-out labels"))
    out.append(loo(dt))
    if reference is not None:
        out += agreement(dt, reference)
    return out
