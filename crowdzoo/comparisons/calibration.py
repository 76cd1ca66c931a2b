"""The calibration battery: every pairwise model's default route on crowds no one tuned it to.

Thirteen crowds made by :func:`crowdzoo.data.simulate_panel.simulate_panel` span 10–300 items,
1–2000 users and 3–60 labels per user; features none, one-hot, in raw units (metres, euros, grams)
or partly irrelevant; noise from near-coin to none (labels taken from each user's full ranking, as
Sushi's are); tastes shared, low-rank or in communities, with or without user features; ties. One
crowd (``coffee-cli``) is read the way a user reads one: written to ``;``-separated CSVs (string
ids, winner first, a yes/no tie column, categorical columns) and fitted with ``crowdzoo fit`` and
``crowdzoo predict``. Each crowd's held-out labels (a fifth of each user's) have an oracle log loss
under the truth.

Every model of the zoo that takes pairs (read from :data:`crowdzoo.zoo.ZOO`, so a new model joins
the battery) is fitted with its defaults — ``Model()`` and its default route — and scored on the
held-out decided labels: log loss, symmetrised expected calibration error (each label counted both
ways, 10 bins), accuracy, seconds, and whether it warned. Beside them: the oracle, a coin (log 2),
per-item win rates, and crowdGPPL by NUTS where that runs in about two minutes (small crowds).

``crowdzoo compare calibration --repeats 3 --jobs 2 --out docs/calibration.md``; ``--quick`` runs
the seven smallest crowds. :func:`score_models` scores models of one's own (other priors, kernels or
routes) on the same crowds.
"""
from __future__ import annotations

import dataclasses
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.simulate_panel import Panel, simulate_panel
from ..errors import DataError

#: name → (how the crowd is made, how it is read: "api" or "cli")
CROWDS = {
    "one-rater": (Panel(n_items=30, n_users=1, labels_per_user=60, features="raw", taste="shared"), "api"),
    "coffee-cli": (Panel(n_items=40, n_users=24, labels_per_user=30, features="one-hot", tie_rate=0.05,
                         taste="communities"), "cli"),
    "sushi-like": (Panel(n_items=10, n_users=100, labels_per_user=10, features="one-hot", taste="low-rank"),
                   "api"),
    "no-features": (Panel(n_items=50, n_users=30, labels_per_user=20, features="none"), "api"),
    "noisy": (Panel(n_items=40, n_users=50, labels_per_user=20, scale=0.6, taste="shared"), "api"),
    "decided": (Panel(n_items=25, n_users=20, labels_per_user=40, scale=3.0), "api"),
    "dense-panel": (Panel(n_items=20, n_users=10, labels_per_user=60, taste="low-rank", personal=1.0,
                          user_features=True), "api"),
    "ties": (Panel(n_items=30, n_users=40, labels_per_user=20, tie_rate=0.15, taste="shared"), "api"),
    "rankings": (Panel(n_items=10, n_users=100, labels_per_user=20, features="one-hot", taste="low-rank",
                       personal=1.5, rankings=True), "api"),
    "irrelevant": (Panel(n_items=80, n_users=40, labels_per_user=15, features="irrelevant", n_features=4,
                         taste="low-rank"), "api"),
    "user-features": (Panel(n_items=60, n_users=200, labels_per_user=8, user_features=True), "api"),
    "many-per-item": (Panel(n_items=150, n_users=300, labels_per_user=20, residual=1.0, personal=0.5), "api"),
    "sparse-big": (Panel(n_items=300, n_users=2000, labels_per_user=4, features="irrelevant", n_features=6,
                         taste="low-rank", personal=0.4), "api"),
    # survey panels: every respondent answers every pair, categorical covariates shared by many
    "survey-weak": (Panel(n_items=6, n_users=200, all_pairs=True, features="none", taste="low-rank",
                          personal=1.0, covariates=5, covariate_taste=0.3, scale=0.5, tie_rate=0.16), "api"),
    "survey-individual": (Panel(n_items=8, n_users=250, all_pairs=True, features="none", taste="low-rank",
                                personal=1.5, covariates=6, covariate_taste=0.3, scale=1.5), "api"),
    "survey-covariates": (Panel(n_items=6, n_users=300, all_pairs=True, features="none", taste="communities",
                                personal=0.5, covariates=5, covariate_taste=1.0, scale=4.0, tie_rate=0.16),
                          "api"),
}
QUICK = ("one-rater", "coffee-cli", "sushi-like", "noisy", "decided", "dense-panel", "ties")
#: crowdGPPL (C = 20) by NUTS beside the defaults on crowds this small: about two minutes on one core
NUTS_LABELS = 120
NUTS = {"method": "nuts", "num_samples": 300, "warmup_steps": 300, "num_chains": 2}
#: defaults that do not scale to the largest crowd: model → (most users it is run on, what was measured)
TOO_SLOW = {"collabgp": (1000, "its EP took ~25 min on one core at 2000 users"),
            "dpm": (1000, "its Gibbs sampler ran 5–8 sweeps a minute at 2000 users: 600 sweeps, 1–2 h")}


def pairwise_models() -> list:
    """The zoo's entries that take pairwise labels (everything but the clustering models)."""
    from .. import zoo

    return [e for e in zoo.ZOO if e.data != "links"]


def crowd_data(name: str, seed: int):
    """(train frame, test frame, items, users, truth, read) of battery crowd ``name``."""
    panel, read = CROWDS[name]
    return (*simulate_panel(panel, seed=seed), read)


def _as_data(train, items, users, crowd: bool):
    """PairwiseData from the frames, as a Python user writes it (categorical columns one-hot)."""
    from ..data import PairwiseData

    feats = pd.get_dummies(items, dtype=float) if items.shape[1] else items
    covariates = users.drop(columns="barista")
    numeric = pd.get_dummies(covariates, dtype=float) if covariates.shape[1] else covariates
    kw = dict(user="taster", users=numeric if numeric.shape[1] else None) if crowd else {}
    return PairwiseData.from_frame(train, feats, a="winner", b="loser", y=None, tie="tie", ties="half", **kw)


def _fit_api(entry, model, train, items, users, seed, method=None, **settings):
    import crowdzoo as cz

    data = _as_data(train, items, users, _takes_users(entry))
    if "progress_bar" in _signature(entry, method or entry.default):
        settings.setdefault("progress_bar", False)
    return cz.fit(model, data, method=method, seed=seed, **settings)


def _signature(entry, method):
    from ..cli.flags import route_signature_static

    return route_signature_static(entry, method)


def _takes_users(entry) -> bool:
    from .. import zoo

    return zoo.takes_users(entry)


def _predict(post, entry, test):
    users = {"users": test["taster"].to_numpy()} if _takes_users(entry) else {}
    return np.asarray(post.predict_proba(test["winner"].to_numpy(), test["loser"].to_numpy(), **users))


def _cli_fit(entry, train, test, items, users, seed):
    """The README's commands on CSV files: ``crowdzoo fit`` then ``crowdzoo predict``; P(winner wins)."""
    from .. import cli

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train.drop(columns="p_winner").to_csv(tmp / "train.csv", sep=";", index=False)
        test.drop(columns="p_winner").to_csv(tmp / "test.csv", sep=";", index=False)
        items.to_csv(tmp / "items.csv", sep=";")
        cats = [c for c in items.columns if not pd.api.types.is_numeric_dtype(items[c])]
        argv = ["fit", entry.name, "--pairs", tmp / "train.csv", "--sep", ";", "--a-col", "winner", "--b-col",
                "loser", "--winner-first", "--items", tmp / "items.csv", "--id-col", "id", "--tie-col", "tie",
                "--ties", "half", "--out", tmp / "run", "--seed", str(seed), "--no-progress"]
        if cats:
            argv += ["--one-hot", ",".join(cats)]
        if _takes_users(entry):
            argv += ["--user-col", "taster"]
        for args in (argv, ["predict", tmp / "run", "--pairs", tmp / "test.csv", "-o", tmp / "p.csv"]):
            import contextlib
            import io

            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                code = cli.main(args)
            if code != 0:
                raise RuntimeError(f"crowdzoo {args[0]} exited {code}: {err.getvalue().strip()[-300:]}")
        return pd.read_csv(tmp / "p.csv", sep=";")["p"].to_numpy()


def ece(p) -> float:
    """Symmetrised expected calibration error of P(winner wins) ``p`` (every label y = 1): each label
    counted both ways, as (p, 1) and (1 − p, 0), in 10 equal bins."""
    from ..diagnostics.checks import _ece

    p = np.asarray(p, dtype=float)
    both = np.concatenate([p, 1 - p])
    y = np.concatenate([np.ones_like(p), np.zeros_like(p)])
    return float(_ece(both, y, 10)[0])


def _scores(p) -> dict:
    p = np.clip(np.asarray(p, dtype=float), 1e-12, 1 - 1e-12)
    return {"log loss": float(-np.log(p).mean()), "ECE": ece(p),
            "accuracy": float(np.mean(np.where(p == 0.5, 0.5, p > 0.5)))}


def win_rates(train, test) -> np.ndarray:
    """P(winner wins) from per-item win rates (one win and one loss added to each item; a tie counts
    half each way): the log-odds of the two rates, differenced."""
    ids = pd.Index(pd.unique(pd.concat([train["winner"], train["loser"], test["winner"], test["loser"]])))
    w = np.where(train["tie"].to_numpy() == "yes", 0.5, 1.0)
    wins = np.bincount(ids.get_indexer(train["winner"]), w, len(ids)) + np.bincount(
        ids.get_indexer(train["loser"]), 1 - w, len(ids))
    games = np.bincount(ids.get_indexer(train["winner"]), None, len(ids)) + np.bincount(
        ids.get_indexer(train["loser"]), None, len(ids))
    r = (wins + 1) / (games + 2)
    logit = np.log(r) - np.log1p(-r)
    z = logit[ids.get_indexer(test["winner"])] - logit[ids.get_indexer(test["loser"])]
    return 1 / (1 + np.exp(-z))


def score_models(models: dict, crowds=None, seed: int = 0) -> pd.DataFrame:
    """Score ``models`` ({row name: (zoo name, model object, {route settings})}) on battery ``crowds``
    (names; default all) at ``seed``: one row per crowd and model with log loss, ECE, accuracy, seconds,
    warnings (the count of warnings the fit raised) and an ``error`` column where a fit failed. A
    model's default (``model`` None) is not run where :data:`TOO_SLOW` says it does not scale (a
    ``skipped`` column says why)."""
    from .. import zoo

    rows = []
    for crowd in crowds or list(CROWDS):
        train, test, items, users, truth, read = crowd_data(crowd, seed)
        decided = test[test["tie"] == "no"]
        base = {"seed": seed, "crowd": crowd, "labels": len(train), "oracle": truth["oracle"]}
        for name, (zname, model, settings) in models.items():
            e = zoo.entry(zname)
            row = dict(base, model=name)
            limit, why = TOO_SLOW.get(zname, (None, ""))
            if model is None and limit is not None and CROWDS[crowd][0].n_users > limit:
                rows.append(dict(row, skipped=f"not run above {limit} users: {why}"))
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                try:
                    if read == "cli" and model is None:
                        p = _cli_fit(e, train, decided, items, users, seed)
                    else:
                        post = _fit_api(e, model if model is not None else e.model_class()(), train, items,
                                        users, seed, **settings)
                        p = _predict(post, e, decided)
                    row.update(_scores(p))
                except Exception as err:  # a failed fit is a result of the battery, not its end
                    row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
                row["seconds"] = time.perf_counter() - t0
            row["warnings"] = sum(1 for w in caught if not issubclass(w.category, DeprecationWarning))
            rows.append(row)
    return pd.DataFrame(rows)


def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    """Every pairwise model's default route (the CLI's for ``coffee-cli``) on the battery's crowds,
    with the oracle, a coin, win rates and crowdGPPL by NUTS beside them."""
    crowds = list(QUICK if quick else CROWDS)
    defaults = {e.name: (e.name, None, {}) for e in pairwise_models()}
    frames = [score_models(defaults, crowds, seed), references(crowds, seed)]
    small = [c for c in crowds if len(crowd_data(c, seed)[0]) <= NUTS_LABELS]
    if small:
        from ..models import CrowdGPPL

        frames.append(score_models({"crowdgppl (nuts)": ("crowdgppl", CrowdGPPL(), NUTS)}, small, seed))
    return pd.concat(frames, ignore_index=True)


def references(crowds, seed: int) -> pd.DataFrame:
    """The oracle's, a coin's and the items' win rates' rows of ``crowds`` at ``seed``."""
    rows = []
    for crowd in crowds:
        train, test, items, users, truth, read = crowd_data(crowd, seed)
        decided = test[test["tie"] == "no"]
        base = {"seed": seed, "crowd": crowd, "labels": len(train), "oracle": truth["oracle"]}
        rows.append(dict(base, model="oracle", **{"log loss": truth["oracle"]}))
        rows.append(dict(base, model="coin", **_scores(np.full(len(decided), 0.5))))
        rows.append(dict(base, model="win rate", **_scores(win_rates(train, decided))))
    return pd.DataFrame(rows)


def _crowd_line(crowd: str, labels: int) -> str:
    panel, read = CROWDS[crowd]
    how = ("read by `crowdzoo fit` / `crowdzoo predict` from CSV" if read == "cli"
           else "PairwiseData.from_frame")
    extras = [f"ties {panel.tie_rate:.0%}"] * bool(panel.tie_rate) + ["user features"] * panel.user_features
    extras += ["labels from full rankings"] * panel.rankings
    extras += ["every pair asked of every user"] * panel.all_pairs
    if panel.covariates:
        extras.append(f"{panel.covariates} categorical user covariates, one-hot (taste share "
                      f"{panel.covariate_taste})")
    per_user = panel.n_items * (panel.n_items - 1) // 2 if panel.all_pairs else panel.labels_per_user
    return (f"{panel.n_items} items, {panel.n_users} users, about {per_user} labels each "
            f"({labels} training labels at seed 0); features {panel.features}, tastes {panel.taste}, "
            f"scale {panel.scale}" + "".join(f", {x}" for x in extras) + f"; {how}.")


def _cell(v: pd.Series, several: bool) -> str:
    v = v.dropna()
    if v.empty:
        return ""
    return f"{v.mean():.3f}" + (f" ± {v.std():.3f}" if several and len(v) > 1 else "")


def summarise(df: pd.DataFrame) -> str:
    """One table per crowd (means over seeds, ± sd with several), then the targets: each crowd model's
    log loss against pooled GPPL's + 0.01 and a coin's."""
    from .. import zoo

    several = df["seed"].nunique() > 1
    metrics = ["log loss", "ECE", "accuracy", "seconds"]
    out = [f"Every pairwise model of the zoo with its defaults (`Model()`, its default route) on crowds "
           f"simulated the way users hold data (`crowdzoo.data.simulate_panel`), scored on each user's "
           f"held-out fifth of the labels, ties left out: log loss (nats; a coin scores {math.log(2):.3f}), "
           "ECE (symmetrised: each label counted both ways, 10 bins), accuracy, and the seconds of the fit "
           "on one core. *oracle*: the truth's log loss on the same labels; *win rate*: per-item win "
           "rates; *crowdgppl (nuts)*: crowdGPPL's posterior by NUTS, where it runs in minutes. "
           f"Means over {df['seed'].nunique()} seed(s)" + (", ± sd" if several else "") + ".", ""]
    for crowd, g in df.groupby("crowd", sort=False):
        out += [f"### {crowd}", "", _crowd_line(crowd, int(g["labels"].iloc[0])), "",
                "| model | " + " | ".join(metrics) + " | fits that warned | failed |",
                "|---|" + "---:|" * (len(metrics) + 2)]
        for model, h in g.groupby("model", sort=False):
            cells = [_cell(h[m], several) if m in h else "" for m in metrics]
            warned = int((h["warnings"].fillna(0) > 0).sum()) if "warnings" in h else 0
            failed = int(h["error"].notna().sum()) if "error" in h else 0
            if "skipped" in h and h["skipped"].notna().all():
                cells = [h["skipped"].iloc[0]] + [""] * (len(metrics) - 1)
            out.append(f"| {model} | " + " | ".join(cells) + f" | {warned or ''} | {failed or ''} |")
        out.append("")
    out += ["### Targets", "", "Each crowd model's default against pooled GPPL's log loss + 0.01 and a "
            "coin's (means over seeds).", "",
            "| crowd | model | log loss | GPPL + 0.01 | within |", "|---|---|---:|---:|---|"]
    crowd_models = [e.name for e in pairwise_models() if zoo.takes_users(e)]
    tally = {}
    for crowd, g in df.groupby("crowd", sort=False):
        mean = g.groupby("model")["log loss"].mean()
        if "gppl" not in mean:
            continue
        for m in (m for m in crowd_models if m in mean and np.isfinite(mean[m])):
            bound = mean["gppl"] + 0.01
            verdict = ("yes" if mean[m] <= bound else "**no**" if mean[m] < math.log(2)
                       else "**no, above a coin**")
            out.append(f"| {crowd} | {m} | {mean[m]:.3f} | {bound:.3f} | {verdict} |")
            tally.setdefault(m, []).append((mean[m] <= bound, mean[m] < math.log(2)))
    out += ["", "Per model: " + "; ".join(
        f"{m} within on {sum(w for w, _ in t)} of {len(t)} crowds, above a coin on {sum(not c for _, c in t)}"
        for m, t in tally.items()) + ".", "", INDEPENDENT]
    return "\n".join(out)


INDEPENDENT = ("gppl-per-user fits every user alone — Simpson & Gurevych's (2020) baseline \"with no "
               "collaborative learning\", kept to show what pooling users buys — so with a few dozen labels "
               "per user it is not expected to reach a pooled model; the target binds the models that pool "
               "users.")


def describe() -> pd.DataFrame:
    """The battery's crowds as a table (their :class:`Panel` fields and how each is read)."""
    return pd.DataFrame([dict(crowd=k, read=r, **dataclasses.asdict(p)) for k, (p, r) in CROWDS.items()])


def update(models: list[str], md_path, repeats: int = 2, note: str = "", crowds=None) -> str:
    """Rerun the default rows of zoo ``models`` on ``crowds`` (names; default every crowd) at seeds
    0 … ``repeats`` − 1 and put them in place of those rows in the battery's CSV beside ``md_path``;
    rewrite the Markdown. For a change to some models or crowds, without refitting the others (whose
    rows stay as their last run). The page's first line keeps what made it and the earlier reruns of
    other rows, and says this one (with ``note``, e.g. the machine's load, after it)."""
    import re
    from pathlib import Path

    md_path = Path(md_path)
    csv = md_path.with_suffix(".csv")
    old = pd.read_csv(csv)
    unknown = [c for c in crowds or [] if c not in CROWDS]
    if unknown:
        raise DataError(f"crowds: {unknown} are not battery crowds (those are {list(CROWDS)})", arg="crowds")
    fresh = pd.concat([score_models({m: (m, None, {}) for m in models}, crowds, seed=s)
                       for s in range(repeats)], ignore_index=True)
    new = [c for c in crowds or list(CROWDS) if not ((old["crowd"] == c) & (old["model"] == "oracle")).any()]
    if new:  # a crowd new to the battery gets its reference rows
        fresh = pd.concat([fresh] + [references(new, s) for s in range(repeats)], ignore_index=True)
    replaced = old["model"].isin(models) & (old["crowd"].isin(crowds) if crowds else True)
    df = pd.concat([old[~replaced], fresh], ignore_index=True)
    order = {m: i for i, m in enumerate(old["model"].drop_duplicates())}
    df = df.sort_values(["seed", "model"], key=lambda c: c.map(order) if c.name == "model" else c,
                        kind="stable")
    place = {c: i for i, c in enumerate(CROWDS)}
    df = df.sort_values("crowd", key=lambda c: c.map(place), kind="stable").reset_index(drop=True)
    df.to_csv(csv, index=False)
    first = md_path.read_text().splitlines()[0]
    made = first if first.startswith("Made by") else "Made by `crowdzoo compare calibration`."
    rerun = f"Rows of {', '.join(models)}" + (f" on {', '.join(crowds)}" if crowds else "") + " rerun by "
    made = re.sub(r" ?" + re.escape(rerun) + r"`[^`]*`\.( [^`]*?(?= Rows of |$))?", "", made)  # the last one
    cmd = f"python -m crowdzoo.comparisons.calibration --update {md_path} --models {' '.join(models)}"
    cmd += f" --crowds {' '.join(crowds)}" if crowds else ""
    said = f"{rerun}`{cmd} --repeats {repeats}`." + (f" {note}" if note else "")
    text = f"{made} {said}\n\n{summarise(df)}\n"
    md_path.write_text(text)
    return text


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="rerun some models' rows of the calibration battery")
    ap.add_argument("--update", required=True, help="the battery's Markdown (its CSV lies beside it)")
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--crowds", nargs="+", default=None, help="only these crowds (default: every crowd)")
    ap.add_argument("--note", default="", help="a sentence said after the rerun's (e.g. the machine's load)")
    a = ap.parse_args()
    update(a.models, a.update, a.repeats, a.note, a.crowds)
