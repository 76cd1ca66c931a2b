"""crowdGPPL on sparse personal data: the synthetic Sushi-A crowd beside the authors' code.

``synthetic-sushi`` fits, for each seed (``--repeats 3`` gives seeds 0–2) and both protocols
(5 training pairs per user, Sushi-A-small's; 20, Sushi-A's), the authors' configuration of
crowdGPPL\\u — C = 20, M = 25 (all 10 items), Gamma(1, 100) on the consensus scale, Gamma(1, 10)
on the component scales, no user features (:meth:`~crowdzoo.CrowdGPPL.paper`) — by the paper's
natgrad route (linearised likelihood), by natgrad with the exact likelihood, and GPPL pooled over
users (Gamma(1, 100)); and crowdGPPL\\u with the zoo's defaults (priors, every item inducing, default
route) beside them. Each row beside the numbers the authors' implementation reaches on the same
files (``shared/data/synthetic-sushi/README.md`` of the project; the files are
:func:`crowdzoo.data.synthetic_sushi.synthetic_sushi`), and whether ours are at least as good: acc
≥ theirs − 0.01 and CEE ≤ theirs + 0.02. Times are wall-clock seconds of the fit alone, on whatever
machine runs the command (the authors': 2.4 s and 6.8 s on the real Sushi-A-small and Sushi-A
splits, on an idle 2-core machine).

``synthetic-sushi-nuts`` asks whether the over-confidence of a long-run natgrad fit on 5 pairs per
user is the mean-field optimum itself: a shrunken crowd (40 users, 5 + 25 pairs each, C = 5) fitted
by NUTS (the reference), natgrad (default; and run on to its optimum, tol = 0, 300 iterations,
both likelihoods) and Pyro SVI (the mean-field guide of Eq. 20).
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

# the authors' crowdGPPL\u on the files of seeds 0–2 (acc, CEE, τ, iterations), and their GPPL
AUTHORS = {
    (0, 5): (.705, .565, .475, 41), (1, 5): (.716, .544, .495, 41), (2, 5): (.698, .575, .455, 39),
    (0, 20): (.852, .314, .833, 87), (1, 20): (.838, .328, .819, 105), (2, 20): (.834, .345, .814, 83),
}
AUTHORS_GPPL = {(0, 5): (.631, .635), (1, 5): (.662, .617), (2, 5): (.639, .622)}


def crowd_model(n_components: int = 20):
    import crowdzoo as cz

    return cz.CrowdGPPL.paper(n_components=n_components).variant("\\u")


def _evaluate(post, sushi, users: bool = True) -> dict:
    from .. import metrics
    from .sushi import personal_tau

    te = sushi.test
    p = post.predict_proba(te.a, te.b, users=te.users) if users else post.predict_proba(te.a, te.b)
    out = {"acc": metrics.accuracy(te.y, p), "CEE": metrics.cross_entropy(te.y, p)}
    if users:
        F = post.utilities(users=np.arange(sushi.utilities.shape[0]))[0].to_numpy()
        out["tau"] = personal_tau(F, te.item_ids, sushi.gold_order)
    return out


def _fit(model, data, **kw):
    import crowdzoo as cz

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the table reports convergence itself
        post = cz.fit(model, data, seed=0, progress_bar=False, **kw)
    return post, time.perf_counter() - t0


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz
    from crowdzoo.data.synthetic_sushi import synthetic_sushi

    rows = []
    for n_train in (5, 20):
        sushi = synthetic_sushi(seed, n_train)
        paper = {"likelihood": "linearised"}
        fits = {"crowdGPPL\\u natgrad (the paper's: linearised)": (crowd_model(), paper),
                "crowdGPPL\\u natgrad, exact likelihood": (crowd_model(), {"likelihood": "exact"}),
                "crowdGPPL\\u with the zoo's defaults": (cz.CrowdGPPL().variant("\\u"), {})}
        for name, (model, kw) in fits.items():
            post, sec = _fit(model, sushi.train, method="natgrad", **kw)
            vals = {**_evaluate(post, sushi), "seconds": sec, "iterations": post.settings["iterations"],
                    "converged": float(post.settings["converged"])}
            rows += [{"seed": seed, "pairs": n_train, "method": name, "metric": k, "value": float(v)}
                     for k, v in vals.items()]
        tr = sushi.train
        pooled = cz.PairwiseData.from_arrays(tr.a, tr.b, tr.y, tr.item_features)
        post, sec = _fit(cz.GPPL(n_inducing=25, shape_s0=1.0, rate_s0=100.0), pooled, method="natgrad",
                         learn_kernel=False)  # the paper's GPPL: the median heuristic
        vals = {**_evaluate(post, sushi, users=False), "seconds": sec,
                "iterations": post.settings["iterations"], "converged": float(post.settings["converged"])}
        rows += [{"seed": seed, "pairs": n_train, "method": "GPPL (pooled) natgrad (median heuristic)",
                  "metric": k, "value": float(v)} for k, v in vals.items()]
    return pd.DataFrame(rows)


def _cell(v, fmt=".3f"):
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)


def summarise(df: pd.DataFrame) -> str:
    """One row per (pairs, seed, method): ours beside the authors', and the verdict."""
    wide = df.pivot_table(index=["pairs", "seed", "method"], columns="metric", values="value", sort=False)
    head = ("| pairs / user | seed | method | acc ours | acc authors | CEE ours | CEE authors | τ ours | "
            "τ authors | iterations ours / authors | fit s | as good as the authors? |")
    lines = [head, "|---:|---:|---|" + "---:|" * 8 + "---|"]
    for (pairs, seed, method), r in wide.iterrows():
        ref = AUTHORS.get((seed, pairs)) if method.startswith("crowd") else None
        if method.startswith("GPPL"):
            g = AUTHORS_GPPL.get((seed, pairs))
            ref = None if g is None else (*g, None, None)
        verdict = "–"
        if ref is not None:
            ok = r["acc"] >= ref[0] - 0.01 and r["CEE"] <= ref[1] + 0.02
            verdict = "yes" if ok else "**no**"
        conv = "" if r["converged"] else " (unconverged)"
        lines.append(
            f"| {pairs} | {seed} | {method} | {r['acc']:.3f} | {_cell(ref and ref[0])} | {r['CEE']:.3f} | "
            f"{_cell(ref and ref[1])} | {_cell(r.get('tau'))} | {_cell(ref and ref[2])} | "
            f"{int(r['iterations'])}{conv} / {_cell(ref and ref[3], 'd')} | {r['seconds']:.2f} | {verdict} |")
    return "\n".join(lines + ["", "As good as the authors: acc ≥ theirs − 0.01 and CEE ≤ theirs + 0.02. "
                              "Authors' numbers: their crowdGPPL\\u (and GPPL) on the same files."])


# ---------------------------------------------------------------- the mean-field question
NUTS_ROUTES = {
    "NUTS (reference)": {"method": "nuts", "num_samples": 300, "warmup_steps": 300, "num_chains": 1},
    "natgrad (default: linearised, tol 1e-3)": {"method": "natgrad", "likelihood": "linearised"},
    "natgrad linearised, to its optimum (ρ = 1, 300 it.)": {"method": "natgrad", "forgetting_rate": 0.0,
                                                            "max_iter": 300, "tol": 0.0},
    "natgrad exact, default stop": {"method": "natgrad", "likelihood": "exact"},
    "natgrad exact, to its optimum (300 it.)": {"method": "natgrad", "likelihood": "exact", "max_iter": 300,
                                                "tol": 0.0},
    "Pyro SVI, mean-field guide (Eq. 20)": {"method": "svi"},
}


def run_one_nuts(seed: int, quick: bool = False) -> pd.DataFrame:
    from crowdzoo.data.synthetic_sushi import synthetic_sushi

    from .. import metrics

    sushi = synthetic_sushi(seed, 5, n_users=40)
    model = crowd_model(n_components=5)
    rows = []
    for name, kw in NUTS_ROUTES.items():
        kw = dict(kw)
        if quick and kw["method"] == "nuts":
            kw.update(num_samples=100, warmup_steps=100)
        post, sec = _fit(model, sushi.train, **kw)
        te, tr = sushi.test, sushi.train
        p = post.predict_proba(te.a, te.b, users=te.users)
        ev = _evaluate(post, sushi)
        p_train = post.predict_proba(tr.a, tr.b, users=tr.users)
        rows.append({"seed": seed, "route": name, "test acc": ev["acc"], "test CEE": ev["CEE"],
                     "train CEE": metrics.cross_entropy(tr.y, p_train),
                     "share of test P outside [.01, .99]": float(np.mean((p < 0.01) | (p > 0.99))),
                     "seconds": sec})
    return pd.DataFrame(rows)


class _Nuts:
    __name__ = "synthetic-sushi-nuts"
    run_one = staticmethod(run_one_nuts)

    @staticmethod
    def summarise(df):
        from .gppl_routes import summarise as by_route

        return by_route(df)


nuts = _Nuts()
