"""A large crowd as a user holds it, through the command line: what a fit and its outputs cost.

The crowd (``crowdzoo.data.simulate_panel``, seed 0): 3,000 items with 16 numeric features of which
half matter, 20,000 users with low-rank tastes, about 62 winner-first labels each — 991,668 training
labels. For each model, in a fresh process: ``crowdzoo fit MODEL`` on the CSV files with the
model's defaults and ``--max-iter`` (the fit is not the point here: every output is), then the
wall time and the process's peak resident memory (``ru_maxrss`` of the child), and the fit's own
seconds from metrics.json. Scoring the training labels, the utilities and posterior.pt are all in
the command's peak. Each model runs twice: with every output, and with ``--outputs utilities`` (the
fit, the utilities and posterior.pt: close to the fit's own peak), so that the ratio of the two peaks
says what the outputs add.

``python benchmarks/bench_scale.py --out docs/benchmarks.md`` (``make bench``); ``--max-iter`` and
``--models`` to change what runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- bench_scale.py: this section is rewritten by it -->"


def make_crowd(folder: Path) -> dict:
    from crowdzoo.data.simulate_panel import Panel, simulate_panel

    panel = Panel(n_items=3000, n_users=20000, labels_per_user=62, features="irrelevant", n_features=16,
                  taste="low-rank", rank=3, personal=0.7, residual=1.0)
    train, test, items, _, truth = simulate_panel(panel, seed=0)
    train.drop(columns="p_winner").to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    items.to_csv(folder / "items.csv")
    return {"n_train": len(train), "n_test": len(test), "oracle": truth["oracle"]}


def held_out(folder: Path, model: str | None) -> dict:
    """Held-out accuracy and log loss of a run's ``crowdzoo predict`` on the decided test pairs (each
    row winner first, so the label is 1); ``model`` None: the per-item win rate of the training labels
    (P(a ≻ b) = w_a / (w_a + w_b), add-one smoothed), the baseline a GP model should beat."""
    import numpy as np
    import pandas as pd

    test = pd.read_csv(folder / "test.csv")
    test = test[test["tie"].astype(str).str.lower().isin(["no", "false", "0"])]
    if model is None:
        train = pd.read_csv(folder / "train.csv")
        train = train[train["tie"].astype(str).str.lower().isin(["no", "false", "0"])]
        wins = train["winner"].value_counts()
        games = wins.add(train["loser"].value_counts(), fill_value=0)
        rate = ((wins.reindex(games.index, fill_value=0) + 1) / (games + 2))
        ra, rb = (rate.reindex(test[c]).fillna(0.5).to_numpy() for c in ("winner", "loser"))
        p = ra / (ra + rb)
    else:
        exe = Path(sys.executable).with_name("crowdzoo")
        test.drop(columns="p_winner").to_csv(folder / "decided.csv", index=False)
        out = folder / f"pred-{model}.csv"
        subprocess.run([str(exe), "predict", str(folder / f"run-{model}"), "--pairs",
                        str(folder / "decided.csv"), "-o", str(out), "--overwrite"], check=True,
                       capture_output=True)
        p = pd.read_csv(out)["p"].to_numpy()
    p = np.clip(p, 1e-12, 1 - 1e-12)
    oracle = np.clip(test["p_winner"].to_numpy(), 1e-12, 1 - 1e-12)
    return {"acc": float((p > 0.5).mean()), "log_loss": float(-np.log(p).mean()),
            "oracle_acc": float((oracle > 0.5).mean()), "oracle_log_loss": float(-np.log(oracle).mean()),
            "_loss": -np.log(p), "_hit": (p > 0.5).astype(float)}


def paired(rows: list, base: str = "bradley-terry") -> None:
    """Each scored row's held-out log loss and accuracy minus ``base``'s, paired over the held-out pairs
    (mean and its standard error), where ``base`` was scored."""
    import numpy as np

    ref = next((r for r in rows if r["model"] == base and "_loss" in r), None)
    if ref is None:
        return
    for r in rows:
        if "_loss" in r and r is not ref:
            for key, name in (("_loss", "d_log_loss"), ("_hit", "d_acc")):
                d = r[key] - ref[key]
                r[name] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)))


def public(row: dict) -> dict:
    """The row without its per-pair arrays (what is printed as JSON)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


#: models that pool every user's labels (no --user-col): the baselines a crowd model is held against
POOLED = ("gppl", "bradley-terry")


def run_cli(model: str, folder: Path, max_iter: int, outputs: str | None = None, extra=()) -> dict:
    exe = Path(sys.executable).with_name("crowdzoo")
    out = folder / f"run-{model}"
    cmd = [str(exe), "fit", model, "--pairs", str(folder / "train.csv"), "--a-col", "winner",
           "--b-col", "loser", "--winner-first", "--items", str(folder / "items.csv"), "--id-col", "id",
           "--out", str(out), "--overwrite", "--no-progress"]
    if max_iter:  # 0: the model's own stop rule and limits
        cmd += ["--max-iter", str(max_iter)]
    if outputs:
        cmd += ["--outputs", outputs]
    if model not in POOLED:
        cmd += ["--user-col", "taster"]
    cmd += list(extra)
    # a fresh parent per command, so that its RUSAGE_CHILDREN peak is this command's alone
    wrap = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", wrap, *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak = int(res.stderr.strip().splitlines()[-1])
    row = {"model": model, "max_iter": max_iter, "outputs": outputs or "all", "wall_s": wall,
           "rc": res.returncode, "peak_mib": peak / 1024}
    if res.returncode == 0:
        metrics = json.loads((out / "metrics.json").read_text())
        row.update(fit_s=metrics["seconds"], train_cee=metrics.get("train_cee"),
                   converged=metrics.get("converged"), iterations=metrics.get("iterations"),
                   files=sorted(p.name for p in out.iterdir()))
    else:
        row["error"] = res.stderr.strip().splitlines()[-2:-1]
    return row


def render(info: dict, rows: list) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [HEAD, "", "## A large crowd through the command line", "",
             f"Machine: {machine()}. `python benchmarks/bench_scale.py` ({when}).", "",
             f"{info['n_train']:,} training labels (3,000 items, 16 features, 20,000 users; the script's "
             "docstring). Each row: `crowdzoo fit MODEL` with the model's defaults and `--max-iter`, in its "
             "own process; "
             "*command s* and *peak MiB* cover reading the CSV, the fit, and the outputs asked for "
             "(*all*: scoring every training label into predictions.csv, the utilities, posterior.pt; "
             "*utilities*: `--outputs utilities`, the fit with its utilities and posterior.pt). *× fit "
             "alone*: the peak over the same model's `--outputs utilities` peak.", "",
             "| model | --max-iter | outputs | fit s | command s | peak MiB | × fit alone | converged "
             "| files |",
             "|---|---:|---|---:|---:|---:|---:|---|---|"]
    alone = {r["model"]: r.get("peak_mib") for r in rows if r["outputs"] == "utilities"}
    for r in rows:
        fit = f"{r['fit_s']:.0f}" if "fit_s" in r else "—"
        peak = f"{r['peak_mib']:.0f}" if r.get("peak_mib") else "—"
        ratio = (f"{r['peak_mib'] / alone[r['model']]:.2f}" if r.get("peak_mib") and alone.get(r["model"])
                 else "—")
        files = ", ".join(r.get("files", [])) or f"failed: {r.get('error')}"
        lines.append(f"| {r['model']} | {r['max_iter']} | {r['outputs']} | {fit} | {r['wall_s']:.0f} | "
                     f"{peak} | {ratio} | {r.get('converged', '—')} | {files} |")
    return "\n".join(lines) + "\n"


HEAD_HELD_OUT = "<!-- bench_scale.py --held-out: this section is rewritten by it -->"


def render_held_out(info: dict, rows: list, max_iter: int, models: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    limit = "each model's own stop rule" if not max_iter else f"`--max-iter {max_iter}`"
    lines = [HEAD_HELD_OUT, "", "## A large crowd through the command line: fitted, and scored", "",
             f"Machine: {machine()}. `python benchmarks/bench_scale.py --held-out --max-iter {max_iter} "
             f"--models {models}` "
             f"({when}).", "",
             "The crowd of \"A large crowd through the command line\" "
             f"({info['n_train']:,} training labels), {limit}: `crowdzoo fit MODEL` with the "
             "model's defaults and every output, then `crowdzoo predict` on the held-out decided pairs. "
             f"The oracle (the simulation's own probabilities) scores accuracy "
             f"{rows[0].get('oracle_acc', float('nan')):.3f} and log loss "
             f"{rows[0].get('oracle_log_loss', float('nan')):.3f}.", "",
             "*− BT*: the difference from per-item Bradley–Terry's, paired over the held-out pairs "
             "(mean ± standard error).", "",
             "| model | command s | fit s | iterations | converged | peak MiB | held-out accuracy | "
             "− BT | held-out log loss | − BT |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    def f(r, k, fmt):
        return format(r[k], fmt) if r.get(k) is not None else "—"

    def d(r, k):
        return f"{r[k][0]:+.4f} ± {r[k][1]:.4f}" if k in r else "—"

    for r in rows:
        lines.append(f"| {r['model']} | {f(r, 'wall_s', '.0f')} | {f(r, 'fit_s', '.0f')} | "
                     f"{r.get('iterations', '—')} | {r.get('converged', '—')} | {f(r, 'peak_mib', '.0f')} | "
                     f"{f(r, 'acc', '.4f')} | {d(r, 'd_acc')} | {f(r, 'log_loss', '.4f')} | "
                     f"{d(r, 'd_log_loss')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="markdown file whose section to rewrite")
    ap.add_argument("--models", default="gppl,crowdgppl")
    ap.add_argument("--max-iter", type=int, default=20, help="0: each model's own stop rule")
    ap.add_argument("--extra", default="", help="more `crowdzoo fit` flags for every model, e.g. "
                                                 "\"--likelihood linearised\" (the rows say so)")
    ap.add_argument("--held-out", action="store_true",
                    help="one fit per model with every output, scored on the held-out labels beside "
                         "the per-item win rate (a section of its own)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        info = make_crowd(folder)
        rows = []
        for model in args.models.split(","):
            for outputs in ((None,) if args.held_out else (None, "utilities")):
                rows.append(run_cli(model, folder, args.max_iter, outputs, args.extra.split()))
                if args.extra:
                    rows[-1]["model"] = f"{model} {args.extra}"
                if args.held_out and rows[-1]["rc"] == 0:
                    rows[-1].update(held_out(folder, model))
                print(json.dumps(public(rows[-1])), flush=True)
        if args.held_out:
            rows.append({"model": "per-item win rate", **held_out(folder, None)})
            print(json.dumps(public(rows[-1])), flush=True)
    if args.held_out:
        paired(rows)
        text = render_held_out(info, rows, args.max_iter, args.models)
        print(text)
        if args.out:
            replace_section(args.out, HEAD_HELD_OUT, text)
        return
    text = render(info, rows)
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
