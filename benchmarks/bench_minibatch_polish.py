"""Pooled GPPL on mini-batches at hundreds of labels per item: the last mini-batch iterate, the same fit
ended by full-batch steps (``polish``) or by sweeps of the item residual alone (``residual_sweeps``, the
default) and full-batch steps after them, and per-item Bradley–Terry (logit and probit links) and win
rates beside them.

A smaller analogue of ``bench_scale.py``'s crowd (3,000 items, 20,000 users, ~660 labels per item, 16
features of which half matter, low-rank tastes, item effects; M = 500 inducing items): 300 items, 2,000
users, the same ~660 labels per item and crowd, M = 50 inducing items (the same M/N), and mini-batches
of P/200 labels, the default batch rule's size at 10⁶ labels — so each item is in about 3 labels of a
batch, as there. The item residual is on (the GP is sparse); the kernel is the median heuristic (on
mini-batches the default learns no length-scales), as at 10⁶ labels.

    python benchmarks/bench_minibatch_polish.py --seeds 0 1 2 --polish 0 3 --swept 0 3 \
        --out docs/benchmarks.md

``--polish K ...``: fits ended by K full-batch steps without the residual sweeps; ``--swept K ...``: fits
ended by the residual sweeps and K full-batch steps, each followed by the sweeps again (K = 0: natgrad's
default with the item residual).

``--average K ...`` adds, for the fit without full-batch steps, the average of its last K iterates in
natural parameters (Polyak–Ruppert) of q(f_m), q(r), q(s) and q(s_r); ``--full`` the full-batch fit
(every label each step, ρ ≥ ½, 300 steps: minutes a seed).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- bench_minibatch_polish.py: this section is rewritten by it -->"
N_INDUCING = 50


def crowd(seed: int):
    from crowdzoo.data.simulate_panel import Panel, simulate_panel

    panel = Panel(n_items=300, n_users=2000, labels_per_user=62, features="irrelevant", n_features=16,
                  taste="low-rank", rank=3, personal=0.7, residual=1.0)
    return simulate_panel(panel, seed=seed)


def averaged(post, states: list, k: int):
    """The posterior whose q(f_m), q(r), q(s), q(s_r) average the last ``k`` iterates' natural
    parameters (and the Gammas' shape and rate)."""
    import dataclasses

    import torch

    from crowdzoo.gp import natural

    last = states[-k:]

    def mean(get):
        return sum(get(s) for s in last) / len(last)

    q = natural.gaussian(mean(lambda s: s.q.Lam), mean(lambda s: s.q.eta))
    r_lam, r_eta = mean(lambda s: s.r.q.Lam), mean(lambda s: s.r.q.eta)
    s = mean(lambda s: s.shape) / mean(lambda s: s.rate)
    s_r = mean(lambda s: s.r.shape) / mean(lambda s: s.r.rate)
    return dataclasses.replace(post, means=q.m[None], covs=q.S[None], r_means=(r_eta / r_lam)[None],
                               r_vars=(1.0 / r_lam)[None], s=torch.as_tensor(s).reshape(1),
                               s_r=torch.as_tensor(s_r).reshape(1))


def run(seed: int, polish: list[int], full: bool, average: list[int] = (),
        swept: list[int] = ()) -> list[dict]:
    import torch

    import crowdzoo as cz
    from crowdzoo.comparisons.calibration import _as_data, _scores, win_rates
    from crowdzoo.models.bradley_terry.model import BradleyTerry

    torch.set_num_threads(1)
    train, test, items, users, truth = crowd(seed)
    decided = test[test["tie"] == "no"]
    data = _as_data(train, items, users, False)
    P = data.n_pairs
    a, b = decided["winner"].to_numpy(), decided["loser"].to_numpy()
    base = dict(seed=seed, labels=P, per_item=2 * P / data.n_items, oracle=truth["oracle"])
    bt = cz.fit(BradleyTerry(), data, seed=seed)
    probit = cz.fit(BradleyTerry(link="probit"), data, seed=seed)
    rows = [dict(base, fit="bradley-terry", **_scores(bt.predict_proba(a, b))),
            dict(base, fit="bradley-terry, probit", **_scores(probit.predict_proba(a, b))),
            dict(base, fit="win rate", **_scores(win_rates(train, decided)))]
    batch = math.ceil(P / 200)
    fits = {f"gppl, polish {k}": dict(batch_size=batch, polish=k, residual_sweeps=0) for k in polish}
    fits.update({"gppl, residual sweeps" + (f" + polish {k}" if k else " (default)"):
                 dict(batch_size=batch, polish=k) for k in swept})
    if full:
        fits["gppl, full batch"] = dict(batch_size=P, rho_min=0.5, tol=1e-7, max_iter=300, eval_size=P)
    for name, kw in fits.items():
        states = []
        if average and kw.get("polish") == 0 and kw.get("residual_sweeps") == 0:
            kw = dict(kw, callback=lambda i, state, kept=states: kept.append(state))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(cz.GPPL(n_inducing=N_INDUCING), data, method="natgrad", seed=seed,
                          progress_bar=False, **kw)
        rows.append(dict(base, fit=name, seconds=time.perf_counter() - t0,
                         iterations=post.settings["iterations"], sweeps=post.settings["residual_sweeps"],
                         **_scores(post.predict_proba(a, b))))
        print(rows[-1], flush=True)
        for k in average if states else ():
            rows.append(dict(base, fit=f"gppl, polish 0, average of the last {k} iterates",
                             **_scores(averaged(post, states, k).predict_proba(a, b))))
    return rows


def render(df: pd.DataFrame, argv: str) -> str:
    ll = df.pivot(index="seed", columns="fit", values="log loss")
    base = ("bradley-terry", "bradley-terry, probit", "win rate")
    order = [c for c in df["fit"].drop_duplicates() if c not in base]
    acc = df.pivot(index="seed", columns="fit", values="accuracy")
    lines = [HEAD, "", "## GPPL on mini-batches at hundreds of labels per item", "",
             f"Machine: {machine()}. `python benchmarks/bench_minibatch_polish.py {argv}` "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             f"The analogue of the 10⁶-label crowd in the script's docstring: {int(df['labels'].iloc[0]):,} "
             f"training labels at seed 0, {df['per_item'].mean():.0f} per item; mini-batches of P/200 "
             "labels. "
             "*polish k*: the fit ended by k full-batch steps (GPPL's natgrad ``polish``) without the "
             "residual sweeps; *residual sweeps*: ended by sweeps of the item residual alone with q(f_m) "
             "held (``residual_sweeps``, natgrad's default with the residual), *+ polish k* then k "
             "full-batch steps each followed by the sweeps; *average of the last k iterates*: the fit "
             "without either, its q the average of its last k iterates in natural parameters. Held-out "
             "log loss and accuracy, mean over seeds; the differences from Bradley–Terry (logit link) are "
             "paired by seed (± standard error); *sweeps*: the residual sweeps taken in all (mean).", "",
             "| fit | log loss | − BT | accuracy | − BT | seconds | iterations | sweeps |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def paired(table, fit):
        d = table[fit] - table["bradley-terry"]
        return f"{d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(len(d)):.4f}"

    for fit in [*order, *base]:
        g = df[df["fit"] == fit]
        secs = f"{g['seconds'].mean():.1f}" if "seconds" in g and g["seconds"].notna().all() else "–"
        its = f"{g['iterations'].mean():.0f}" if "iterations" in g and g["iterations"].notna().all() else "–"
        swept = f"{g['sweeps'].mean():.0f}" if "sweeps" in g and g["sweeps"].notna().all() else "–"
        dll, dacc = ("–", "–") if fit == "bradley-terry" else (paired(ll, fit), paired(acc, fit))
        lines.append(f"| {fit} | {ll[fit].mean():.4f} | {dll} | {acc[fit].mean():.4f} | {dacc} | {secs} "
                     f"| {its} | {swept} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--polish", nargs="*", type=int, default=[0, 3])
    ap.add_argument("--swept", nargs="*", type=int, default=[0, 3])
    ap.add_argument("--average", nargs="*", type=int, default=[])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    df = pd.DataFrame([r for s in args.seeds
                       for r in run(s, args.polish, args.full, args.average, args.swept)])
    said = " ".join(sys.argv[1:] if argv is None else argv)
    text = render(df, said)
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
