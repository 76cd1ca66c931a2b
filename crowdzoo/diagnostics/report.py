"""The posterior diagnostic report: one self-contained HTML file (or Markdown with its images).

    crowdzoo.report(posterior, "report.html", test=held_out_data, reference=nuts_posterior)
    crowdzoo report RUN_DIR -o report.html          # a run written by `crowdzoo fit` / `demo`

The report holds the run's settings, a verdict per check of :mod:`crowdzoo.diagnostics.checks`
with the rule that gave it, a summary table of the identified posterior variables, and the plots of
:mod:`crowdzoo.diagnostics.plots`. Images are embedded as base64 PNG, so the HTML needs no network
and no other file; the Markdown variant writes its images into ``<name>_files/`` beside it.
"""
from __future__ import annotations

import base64
import dataclasses
import html
import importlib.metadata as md
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..errors import DataError
from . import checks as ck
from . import plots
from .compare import compare_posteriors, same_data

COMPARISON_TITLE = ("Against the reference, by variable group (mean error and Wasserstein distances in "
                    "reference sds; coverage 0.5 / 0.9 when the two agree)")
COLOURS = {"pass": "#1a7f37", "warn": "#b35900", "fail": "#c62828", "skip": "#6e7781"}


@dataclasses.dataclass
class Report:
    """What :func:`report` wrote: the checks, the figures (caption → PNG bytes), the settings, the
    summary table and, with a reference, :func:`~crowdzoo.diagnostics.compare.compare_posteriors`'s
    table (``comparison``); ``verdict`` is the worst verdict of the checks that ran."""

    path: Path
    checks: list
    figures: dict
    settings: dict
    summary: pd.DataFrame
    comparison: pd.DataFrame | None = None

    @property
    def verdict(self) -> str:
        ran = [c.verdict for c in self.checks if c.verdict != "skip"]
        return max(ran, key=ck.VERDICTS.index) if ran else "skip"


def _outcomes(post, data, where: str):
    """The three-way calibrations (:func:`~crowdzoo.diagnostics.checks.three_way_calibrations`) of a fit
    with ties on ``data``'s labels, or None for a fit without."""
    if getattr(post, "tau", None) is None or data is None:
        return None
    frame = data.to_frame()
    kw = {"users": frame["user"].to_numpy()} if "user" in frame and data.users is not None else {}
    probs = post.predict_outcomes(frame["a"].to_numpy(), frame["b"].to_numpy(), **kw).to_numpy()
    return ck.three_way_calibrations(probs, frame["y"].to_numpy(dtype=float), where)


def _choices(post, data, where: str):
    """The choice calibrations (:func:`~crowdzoo.diagnostics.checks.choice_calibration`) of a fit of
    choices among k items on ``data``'s choices (a :class:`~crowdzoo.ChoiceData`): each set member's
    predicted probability of being chosen, by the posterior's predictive mixture; None for other data."""
    if data is None or not hasattr(data, "sets"):
        return None
    ids = np.asarray(data.item_ids)
    sets = [ids[row[row >= 0]] for row in data.sets]
    kw = {"users": np.asarray(data.user_ids)[data.users]} if data.users is not None else {}
    p = post.predict_choice(sets, **kw)
    return [(p, data.mask, data.best, where)]


def _held_out(post, test):
    """(p, y) of the held-out labels, a label of whole weight w (a count) written w times, so that the
    calibration check counts it as the w labels it stands for (fractional weights: each label once)."""
    if test is None or getattr(post, "tau", None) is not None or hasattr(test, "sets"):
        return None  # ties: three ways, in _outcomes; choices: over every set member, in _choices
    frame = test.to_frame()
    kw = {"users": frame["user"].to_numpy()} if "user" in frame and test.users is not None else {}
    p = np.asarray(post.predict_proba(frame["a"].to_numpy(), frame["b"].to_numpy(), **kw), dtype=float)
    y = frame["y"].to_numpy(dtype=float)
    w = test.weights
    if w is not None and np.all(w == np.round(w)):
        p, y = np.repeat(p, w.astype(np.int64)), np.repeat(y, w.astype(np.int64))
    return p, y


def _settings(post, dt, extra):
    if post is None:  # a tree made elsewhere: what its attributes say
        return _tree_settings(dt, extra)
    model = post.model
    out = {"model": post.name, "route": post.method,
           "draws": f"{dt.posterior.sizes['chain']} chain(s) × {dt.posterior.sizes['draw']}"
           + ("" if ck.is_mcmc(dt) else " (independent draws of the approximate posterior)")}
    d = post.data
    if hasattr(d, "n_pairs"):
        out["data"] = (f"{d.n_pairs} labels, {d.n_items} items"
                       + (f", {d.n_users} users" if d.users is not None else ""))
    elif hasattr(d, "sets"):  # choices among k items
        k = d.set_sizes
        sizes = f"{int(k.min())}" + (f"–{int(k.max())}" if k.max() > k.min() else "")
        out["data"] = (f"{d.n_rows} choices of {sizes}"
                       + f" items{' (best and worst)' if d.worst is not None else ''}, {d.n_items} items"
                       + (f", {d.n_users} users" if d.users is not None else ""))
    else:  # links
        out["data"] = f"{d.n_annotations} annotations, {d.n_items} items, {d.n_workers} workers"
    if dataclasses.is_dataclass(model):
        for f in dataclasses.fields(model):
            value = getattr(model, f.name)
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                # the settings of a part the model composes (the DPM's item_gp), each by its own name
                for g in dataclasses.fields(value):
                    out[f"model.{f.name}.{g.name}"] = getattr(value, g.name)
            else:
                out[f"model.{f.name}"] = _used(f.name, value, d)
    if getattr(post, "order_means", None) is not None:  # the first item's advantage δ
        oe = post.order_effect()
        out["order effect δ (first item's advantage)"] = (
            f"{oe['mean']:.3f} ± {oe['sd']:.3f} (posterior mean ± sd), P(δ > 0) = {oe['p_positive']:.3f}")
    for k, v in (post.settings or {}).items():
        out[f"fit.{k}"] = v
    out.update(extra or {})
    small = {k: v.tolist() for k, v in out.items() if isinstance(v, torch.Tensor) and v.numel() <= 50}
    return {k: small.get(k, v) for k, v in out.items() if k in small or not isinstance(v, torch.Tensor)}


def _tree_settings(dt, extra):
    out = {"model": str(dt.attrs.get("model", "(an ArviZ DataTree)")),
           "route": str(dt.attrs.get("inference", "nuts" if ck.is_mcmc(dt) else "unknown")),
           "draws": f"{dt.posterior.sizes['chain']} chain(s) × {dt.posterior.sizes['draw']}"
           + ("" if ck.is_mcmc(dt) else " (draws of an approximate posterior)"),
           "data": f"{dt.observed_data['y'].size} labels"}
    out.update({f"tree.{k}": v for k, v in dt.attrs.items() if k not in ("model", "inference")
                and not k.startswith("checksum_") and not k.startswith("creat")})
    out.update(extra or {})
    return out


def _used(name: str, value, data):
    """A model's ``item_features``/``user_features`` switch as the fit used it: on only where the
    data has such features (a crowd fitted without a users table has none to use)."""
    if name in ("item_features", "user_features") and value is True:
        X = getattr(data, name, None)
        if X is None or X.shape[1] == 0:
            return f"False (the data has no {name.replace('_', ' ')})"
    return value


def _summary(dt) -> pd.DataFrame:
    import arviz_stats as azs

    # the smallest variables first (s before f over items): a long table is cut to its first rows
    names = sorted(ck.identified_vars(dt), key=lambda v: dt.posterior[v].isel(chain=0, draw=0).size)
    kind = "all" if ck.is_mcmc(dt) else "stats"
    # no identified variable (collabGP: W, H up to rotation): the labels' log-likelihood, whose
    # dimension is renamed where it would clash with the summary's own "label" column
    ds = dt.log_likelihood.to_dataset()
    ds = ds.rename({d: f"{d}_" for d in ds.dims if d == "label"})
    with np.errstate(divide="ignore", invalid="ignore"):  # r̂ of a quantity constant within chains: NaN
        return (azs.summary(dt, var_names=names, kind=kind, round_to="none") if names
                else azs.summary(ds, kind=kind, round_to="none"))


def _figures(post, dt, checks) -> dict:
    figs = {}
    if ck.is_mcmc(dt) and dt.posterior.sizes["chain"] > 1:
        try:
            figs["Rank plots of the labels' log-likelihood with the largest r̂ (uniform ranks in "
                 "every chain: the chains agree)"] = plots.rank(dt)
        except Exception as err:  # a plot must not sink the report
            figs[f"(rank plot unavailable: {err})"] = None
    opt = plots.optimisation(dt)
    if opt is not None:
        figs["Optimisation trace of the route"] = opt
    for c in checks:
        if c.name.startswith("PPC") and "observed" in c.extra:  # a skipped PPC has nothing to plot
            figs[f"{c.name}: observed (dots) against the replicated 90 % intervals (bars)"] = plots.ppc(c)
    cal = [c for c in checks if c.name.startswith("calibration")]
    if cal:
        figs["Reliability diagram (perfect calibration on the dashed diagonal)"] = plots.reliability(cal)
    for var in ck.identified_vars(dt):
        if dt.posterior[var].dims[2:] == ("item",):  # one utility per item (not per user and item)
            figs[f"Posterior utilities {var} with 95 % intervals"] = plots.utilities(dt, var)
    comp = plots.component_scales(dt)
    if comp is not None:
        figs["Latent component scales (crowdGPPL, Fig. 3 of Simpson & Gurevych 2020)"] = comp
    co = _coclustering(post)
    if co is not None:
        figs[co[0]] = co[1]
    if hasattr(post, "workers") and hasattr(post, "x_mean"):  # clustering from links (SCDC)
        try:
            figs["Clusters: the latent points by cluster, the clusters in use, the workers' "
                 "reliabilities"] = plots.clusters(post.x_mean.numpy(), post.predict().to_numpy(),
                                                   post.workers())
        except Exception as err:  # a plot must not sink the report
            figs[f"(cluster plot unavailable: {err})"] = None
    return {k: v for k, v in figs.items() if v is not None}


def _coclustering(post):
    """(caption, PNG) of the co-clustering heat map when the posterior is over communities of users
    (duck-typed: it has ``coclustering()``; ``memberships()``, when it has one, gives the point
    partition that orders the users), else None."""
    if not hasattr(post, "coclustering"):
        return None
    try:
        partition = None
        if hasattr(post, "memberships"):
            P, part = post.memberships()
            partition = np.asarray(part)
        else:
            P = post.coclustering()
        P = P.to_numpy() if hasattr(P, "to_numpy") else np.asarray(P)
        ids = getattr(post.data, "user_ids", None)
        png = plots.coclustering(P, partition, user_ids=ids)
    except Exception as err:  # a plot must not sink the report
        return f"(co-clustering plot unavailable: {err})", None
    how = "ordered by the point partition (outlined)" if partition is not None else "ordered greedily"
    return (f"Co-clustering: the posterior probability that two users share a community, users {how}",
            png)


#: the groups the report reads from an ArviZ DataTree, and what each is for
NEEDED_GROUPS = {"posterior": "the draws (r̂, ESS, the summary table)",
                 "log_likelihood": "each label's log-likelihood (calibration, PSIS-LOO, r̂)",
                 "observed_data": "the labels y"}


def check_tree(dt):
    """Refuse a DataTree that lacks a group the report needs, naming it (:data:`NEEDED_GROUPS`)."""
    for group, what in NEEDED_GROUPS.items():
        if group not in dt.children:
            raise DataError(f"posterior: the ArviZ DataTree has no {group!r} group, which the report needs "
                            f"for {what}; it has {sorted(dt.children)}", arg="posterior",
                            problem=f"no {group!r} group")
    for group in ("log_likelihood", "observed_data"):
        if "y" not in dt[group].data_vars:
            raise DataError(f"posterior: the DataTree's {group!r} group has no variable 'y' (the labels)",
                            arg="posterior")
    return dt


def report(posterior, path, test=None, held_out=None, reference=None, settings: dict | None = None,
           title: str | None = None, n_draws: int = 500, seed: int = 0) -> Report:
    """Write the diagnostic report of a fitted ``posterior`` to ``path`` (``.html`` or ``.md``).

    ``posterior``: a crowdzoo posterior, or an ArviZ DataTree (``to_arviz()``, read back with
    ``xarray.open_datatree``, or made elsewhere) with at least the groups of :data:`NEEDED_GROUPS`;
    checks whose groups it lacks (the PPC without ``posterior_predictive`` and ``constant_data``)
    are skipped.
    A fit with ties as a third outcome is calibrated three ways (P(a ≻ b | not a tie) on the decided
    labels, P(tie) on all), on the training labels and on ``test``'s, and its posterior predictive
    checks add each item's tie rate. A fit of choices among k items is calibrated over every member of
    every set (its predicted P(chosen) against whether it was chosen), on the training choices and on
    ``test``'s (a :class:`~crowdzoo.ChoiceData`), and its posterior predictive checks compare each
    item's choice rate (and worst rate) with replicated choices.
    ``test``: held-out :class:`~crowdzoo.PairwiseData` for the held-out calibration check (or
    ``held_out=(p, y)``, predicted P(y = 1) and labels, when the predictions exist already);
    ``reference``: a NUTS posterior (or its ``to_arviz()`` tree) on the same data, for the agreement
    check; ``settings``: extra key → value rows for the settings table. Returns a :class:`Report`.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm", ".md"):
        raise DataError(f"path: the report is written as .html or .md, got {path.name!r}")
    if hasattr(posterior, "to_arviz"):
        dt = posterior.to_arviz(n_draws=n_draws, seed=seed)
    elif hasattr(posterior, "children") and hasattr(posterior, "attrs"):  # a DataTree made elsewhere
        dt, posterior = check_tree(posterior), None
        if test is not None:
            raise DataError("test: a DataTree cannot predict held-out labels; pass held_out=(p, y), the "
                            "predicted P(y = 1) and the labels", arg="test")
    else:
        raise DataError(f"posterior: {type(posterior).__name__} has no to_arviz() and is no ArviZ DataTree; "
                        "the report needs one of them", arg="posterior")
    ref = None
    if reference is not None:
        ref = reference.to_arviz(n_draws=n_draws, seed=seed) if hasattr(reference, "to_arviz") else reference
        if ref.attrs.get("inference", "nuts" if ck.is_mcmc(ref) else None) != "nuts":
            raise DataError("reference: the agreement check compares with NUTS; got a "
                            f"{ref.attrs.get('inference')!r} posterior")
        same_data(dt, ref)
    held_out = held_out if held_out is not None else _held_out(posterior, test)
    outcomes = None if posterior is None else _outcomes(posterior, posterior.data, "training labels")
    if outcomes is not None and test is not None:
        outcomes += _outcomes(posterior, test, "held-out labels")
    choices = None if posterior is None else _choices(posterior, posterior.data, "training choices")
    if choices is not None and test is not None:
        choices += _choices(posterior, test, "held-out choices") or []
    checks = ck.run_all(dt, held_out=held_out, reference=ref, outcomes=outcomes, choices=choices)
    from .confidence import as_check

    # what crowdzoo.fit measured (a tree made elsewhere has no fit settings)
    at_fit = None if posterior is None else as_check((posterior.settings or {}).get("confidence"))
    if at_fit is not None:
        checks.append(at_fit)
    rep = Report(path, checks, _figures(posterior, dt, checks), _settings(posterior, dt, settings),
                 _summary(dt), None if ref is None else compare_posteriors(dt, ref))
    title = title or f"crowdzoo diagnostic report: {rep.settings['model']} by {rep.settings['route']}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".md":
        path.write_text(_markdown(rep, title))
    else:
        path.write_text(_html(rep, title))
    return rep


def _versions() -> str:
    out = []
    for pkg in ("crowdzoo", "pyro-ppl", "torch", "arviz-base", "arviz-stats", "arviz-plots"):
        try:
            out.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(out)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, np.ndarray):
        return np.array2string(v, precision=3, threshold=8)
    return str(v)


def _summary_rows(df: pd.DataFrame, max_rows: int = 30) -> pd.DataFrame:
    if len(df) <= max_rows:
        return df
    if "r_hat" in df:  # the worst-mixing first
        return df.sort_values("r_hat", ascending=False).head(max_rows)
    return df.head(max_rows)


def _html(rep: Report, title: str) -> str:
    e = html.escape
    counts = {v: sum(c.verdict == v for c in rep.checks) for v in ck.VERDICTS}
    badge = lambda v: f'<span class="b" style="background:{COLOURS[v]}">{v}</span>'  # noqa: E731
    rows = "".join(f"<tr><td>{e(c.name)}</td><td>{badge(c.verdict)}</td><td>{e(c.value)}</td>"
                   f"<td>{e(c.rule)}</td><td>{e(c.detail)}</td></tr>" for c in rep.checks)
    sett = "".join(f"<tr><th>{e(k)}</th><td>{e(_fmt(v))}</td></tr>" for k, v in rep.settings.items())
    figs = "".join(f'<figure><img alt="{e(cap)}" src="data:image/png;base64,'
                   f'{base64.b64encode(png).decode()}"><figcaption>{e(cap)}</figcaption></figure>'
                   for cap, png in rep.figures.items())
    summ = _summary_rows(rep.summary).to_html(float_format=lambda x: f"{x:.3g}", border=0)
    comp = "" if rep.comparison is None else (
        f"<h2>{e(COMPARISON_TITLE)}</h2>\n"
        + rep.comparison.to_html(float_format=lambda x: f"{x:.3f}", border=0) + "\n")
    overall = rep.verdict
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #1f2328; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
td, th {{ border-bottom: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }}
.b {{ color: white; border-radius: 4px; padding: 1px 7px; font-weight: 600; font-size: 0.85em; }}
figure {{ margin: 1em 0 2em; }} figure img {{ max-width: 100%; }}
figcaption {{ color: #57606a; font-size: 0.9em; }}
</style></head><body>
<h1>{e(title)}</h1>
<p>Overall: {badge(overall)} — {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail,
{counts['skip']} skipped. Each verdict comes from the rule beside it.</p>
<h2>Checks</h2>
<table id="checks"><tr><th>check</th><th>verdict</th><th>value</th><th>rule</th><th>detail</th></tr>
{rows}</table>
{comp}<h2>Settings</h2>
<table id="settings">{sett}</table>
<h2>Plots</h2>
{figs}
<h2>Summary of the identified posterior variables</h2>
{summ}
<p style="color:#57606a;font-size:0.8em">{e(_versions())}</p>
</body></html>
"""


def _markdown(rep: Report, title: str) -> str:
    folder = rep.path.with_name(rep.path.stem + "_files")
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", "", f"Overall: **{rep.verdict}**", "", "## Checks", "",
             "| check | verdict | value | rule | detail |", "|---|---|---|---|---|"]
    lines += [f"| {c.name} | **{c.verdict}** | {c.value} | {c.rule} | {c.detail} |" for c in rep.checks]
    if rep.comparison is not None:
        t = rep.comparison
        lines += ["", f"## {COMPARISON_TITLE}", "", "| group | " + " | ".join(t.columns) + " |",
                  "|---" * (len(t.columns) + 1) + "|"]
        lines += [f"| {i} | " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
                  for i, row in zip(t.index, t.itertuples(index=False))]
    lines += ["", "## Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in rep.settings.items()]
    lines += ["", "## Plots", ""]
    for i, (cap, png) in enumerate(rep.figures.items()):
        name = f"figure{i + 1}.png"
        (folder / name).write_bytes(png)
        lines += [f"![{cap}]({folder.name}/{name})", "", f"*{cap}*", ""]
    df = _summary_rows(rep.summary)
    lines += ["## Summary of the identified posterior variables", "",
              "| | " + " | ".join(df.columns) + " |", "|---" * (len(df.columns) + 1) + "|"]
    lines += [f"| {i} | " + " | ".join(f"{v:.3g}" for v in row) + " |" for i, row in zip(df.index, df.values)]
    lines += ["", _versions(), ""]
    return "\n".join(lines)
