"""The ``peers`` benchmark's section on ties: evalica (Bradley–Terry, Elo with draws, and Newman's
Bradley–Terry with Davidson's ties) beside crowdzoo's tie model on labels with ties.

``make bench-peers`` runs it after run_peers.py (evalica lives in ``.venv-peers``, never a dependency
of crowdzoo); alone: ``.venv/bin/python benchmarks/peers/run_ties.py --out docs/benchmarks.md``. Each
problem (problems.py ``ties_problem``: a taste panel from GPPL's ordered probit at two tie thresholds)
is written to an .npz file and every method runs on it in its own process with the harness of
run_peers.py (the same thread count, time limit and memory cap, *fit s*, *total s* and *peak MiB*):
evalica's by ``.venv-peers/bin/python peer_evalica.py``, crowdzoo's by its own interpreter
(crowdzoo_fit.py).

Scored on the held-out labels, ties included: the **three-way log loss** (mean −log P(the observed
outcome) of a ≻ b, tie, b ≻ a; probabilities clipped to [10⁻⁹, 1]); the **decided log loss** (the
decided held-out labels against P(a ≻ b | decided)); the **mean P(tie)** beside the held-out share of
ties; Kendall **τ** of the item scores against the true utility. A method without a tie probability of
its own (evalica's Bradley–Terry and Elo, crowdzoo with ties as two half labels) is scored with the
training share t of ties as its tie rate, ((1 − t) p, t, (1 − t)(1 − p)); the row *no model* is
((1 − t)/2, t, (1 − t)/2) for every label.

The markdown goes into ``--out`` between its two ``<!-- bench_peers_ties`` markers (appended with the
markers when they are absent; the rest of the file is left as it is); the raw results go to
``--work``/results.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from harness import cpu_name  # noqa: E402
from problems import save, ties_problem  # noqa: E402
from run_peers import _versions, child_options, run_child, write_section  # noqa: E402

START = "<!-- bench_peers_ties: run_ties.py rewrites this section -->"
END = "<!-- bench_peers_ties:end -->"
TAUS = (0.3, 0.8)

#: evalica's methods: (label, method of peer_evalica.py, config); they run in .venv-peers
PEERS = [
    ("evalica newman (Bradley–Terry with Davidson's ties)", "newman", {}),
    ("evalica bradley_terry (a tie is half a win each way)", "bradley_terry", {}),
    ("evalica elo (defaults: k = 4; a draw is half a point)", "elo", {}),
    ("evalica elo (k = 32)", "elo", {"k": 32.0}),
]

#: crowdzoo's: (label, config of crowdzoo_fit.py)
OURS = [
    ("crowdzoo Bradley–Terry (probit, map), ties modelled",
     {"model": "BradleyTerry", "model_kwargs": {"link": "probit"}, "fit_kwargs": {"method": "map"},
      "ties": "model"}),
    ("crowdzoo Bradley–Terry (probit, map), ties as two halves",
     {"model": "BradleyTerry", "model_kwargs": {"link": "probit"}, "fit_kwargs": {"method": "map"},
      "ties": "half"}),
    ("crowdzoo GPPL (natgrad), ties modelled",
     {"model": "GPPL", "model_kwargs": {}, "fit_kwargs": {"method": "natgrad"}, "ties": "model"}),
    ("crowdzoo GPPL (natgrad), ties as two halves",
     {"model": "GPPL", "model_kwargs": {}, "fit_kwargs": {"method": "natgrad"}, "ties": "half"}),
]

NO_MODEL = "no model: ((1 − t)/2, t, (1 − t)/2)"


def outcome(y) -> np.ndarray:
    """The column of each label's outcome among (a ≻ b, tie, b ≻ a): y = 1, ½, 0 → 0, 1, 2."""
    return np.rint(2.0 * (1.0 - np.asarray(y, dtype=float))).astype(np.int64)


def score(probs, scores, prob) -> dict:
    """Held-out three-way and decided log loss, mean P(tie) and Kendall τ (module docstring)."""
    from scipy.stats import kendalltau

    probs, yt = np.asarray(probs, dtype=float), prob["yt"]
    rows = np.arange(len(yt))
    three = float(-np.mean(np.log(np.clip(probs[rows, outcome(yt)], 1e-9, 1.0))))
    dec = yt != 0.5
    p = np.clip(probs[dec, 0] / (probs[dec, 0] + probs[dec, 2]), 1e-9, 1 - 1e-9)
    decided = float(-np.mean(yt[dec] * np.log(p) + (1 - yt[dec]) * np.log1p(-p)))
    tau = float(kendalltau(scores, prob["f"]).statistic) if scores is not None else None
    return {"cee3": three, "cee_decided": decided, "p_tie": float(probs[:, 1].mean()), "tau": tau,
            "nan_p": int(np.isnan(probs).any(1).sum())}


def no_model(prob) -> dict:
    t = float(np.mean(prob["y"] == 0.5))
    n = len(prob["yt"])
    probs = np.column_stack([np.full(n, (1 - t) / 2), np.full(n, t), np.full(n, (1 - t) / 2)])
    return {"label": NO_MODEL, "status": "ok", **score(probs, None, prob), "notes": {"tie rate": t}}


def methods():
    """(label, python, script, method, config) of every method."""
    peers_py = os.path.join(ROOT, ".venv-peers", "bin", "python")
    rows = [(label, peers_py, "peer_evalica.py", method, cfg) for label, method, cfg in PEERS]
    return rows + [(label, sys.executable, "crowdzoo_fit.py", "fit", cfg) for label, cfg in OURS]


def run_all(args, argv):
    taus = [float(t) for t in args.taus.split(",") if t.strip()]
    os.makedirs(args.work, exist_ok=True)
    shown = [a for a in argv if a not in ("--note", args.note)]
    raw = {"machine": machine(args.threads), "command": ["python", "benchmarks/peers/run_ties.py", *shown],
           "note": args.note, "timeout": args.timeout, "mem_gib": args.mem_gib, "problems": {}}
    out_json = os.path.join(args.work, "results.json")
    for tau in taus:
        prob = ties_problem(tau, seed=args.seed)
        path = os.path.join(args.work, f"ties-{tau:g}.npz")
        save(path, prob)
        rows, t0 = [no_model(prob)], time.perf_counter()
        raw["problems"][prob["name"]] = {"description": prob["description"], "rows": rows,
                                         "held_out_ties": float(np.mean(prob["yt"] == 0.5))}
        for label, python, script, method, cfg in methods():
            print(f"[{prob['name']}] {label} ...", end=" ", flush=True)
            res = run_child(python, script, method, path, cfg, os.path.join(args.work, "result.json"),
                            args.threads, args.timeout, args.mem_gib)
            if res["status"] == "ok":
                res.update(score(res["p"], res["scores"], prob))
            res.update(label=label, config=cfg)
            print(res["status"], {k: round(res[k], 3) for k in ("cee3", "cee_decided", "tau") if res.get(k)},
                  res.get("error", ""), flush=True)
            rows.append({k: v for k, v in res.items() if k not in ("p", "scores")})
            raw["problems"][prob["name"]]["wall_s"] = time.perf_counter() - t0
            with open(out_json, "w") as fh:
                json.dump(raw, fh, indent=1, ensure_ascii=False)
    return raw


def machine(threads):
    peers_py = os.path.join(ROOT, ".venv-peers", "bin", "python")
    peers = _versions(peers_py, ["evalica", "numpy", "scipy", "pandas"])
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
            "load": os.getloadavg()[0],
            "crowdzoo_venv": _versions(sys.executable, ["torch", "pyro-ppl", "numpy"]), "peers_venv": peers,
            "threads": threads, "commit": _commit(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def _commit():
    import subprocess

    try:
        run = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT)  # noqa: E731
        commit = run("rev-parse", "--short", "HEAD").stdout.strip()
        if run("status", "--porcelain", "--", "crowdzoo").stdout.strip():
            commit += " with uncommitted changes in crowdzoo/"
        return commit
    except OSError:
        return ""


def _fmt(v, spec):
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, spec)


def _notes(r):
    out = []
    if r["status"] != "ok":
        out.append(f"**{r['status']}**: {r.get('error', '')[:200]}".replace("|", "/").replace("\n", " "))
    n = r.get("notes") or {}
    for key, text in (("v", "v = {:.3g}"), ("tau", "τ̂ = {:.3g}"), ("tie rate", "tie rate t = {:.3f}"),
                      ("iterations", "{} iterations")):
        if key in n:
            out.append(text.format(n[key]))
    if "limit" in n and n.get("iterations", 0) >= n["limit"]:
        out[-1] += " (its limit: stopped before its tolerance)"
    if r.get("nan_p"):
        out.append(f"{r['nan_p']} rows with NaN probabilities")
    warns = sorted({w.split(":")[0] for w in r.get("warnings", [])
                    if not w.startswith("DeprecationWarning")})
    if warns:
        out.append("warned: " + ", ".join(warns))
    return "; ".join(out)


def table(rows):
    L = ["| method | fit s | total s | peak MiB | 3-way log loss | decided log loss | mean P(tie) | τ "
         "| notes |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = r["status"] == "ok"
        child = "total_s" in r
        L.append(f"| {r['label']} | {_fmt(r.get('fit_s') if ok and child else None, '.2f')} | "
                 f"{_fmt(r.get('total_s'), '.1f')} | {_fmt(r.get('peak_mib'), '.0f')} | "
                 f"{_fmt(r.get('cee3'), '.3f')} | {_fmt(r.get('cee_decided'), '.3f')} | "
                 f"{_fmt(r.get('p_tie'), '.3f')} | {_fmt(r.get('tau'), '.3f')} | {_notes(r)} |")
    return L


def render(raw):
    m, pv = raw["machine"], raw["machine"]["peers_venv"]
    L = [START, "", "## Peers on ties: crowdzoo's tie model beside evalica", ""]
    if raw.get("note"):
        L += [f"**{raw['note']}**", ""]
    L += ["Reproduce with `make bench-peers` (after the section above it runs `.venv/bin/python "
          "benchmarks/peers/run_ties.py --out docs/benchmarks.md`; this run: "
          f"`{' '.join(raw['command'])}`).", "",
          f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; crowdzoo's venv: torch "
          f"{m['crowdzoo_venv'].get('torch')}, pyro-ppl {m['crowdzoo_venv'].get('pyro-ppl')}; peers' venv: "
          + ", ".join(f"{k} {v}" for k, v in pv.items()) +
          f". {m['threads']} threads in every child; crowdzoo at {m['commit']}; {m['date']}; load average "
          f"{m.get('load', float('nan')):.1f} when the run began (above the cores' count, other work shared "
          f"them and the times are longer than on an idle machine). Limits per child: {raw['timeout']:.0f} s "
          f"and a {raw['mem_gib']:g} GiB data segment.", "",
          "Each method runs on the same training labels in its own process (the harness of the section "
          "above: *fit s* is the fit alone, *total s* the process, *peak MiB* its resident peak). Scored on "
          "the held-out labels, ties included: the *3-way log loss*, mean −log P(observed outcome) over "
          "a ≻ b, tie and b ≻ a (probabilities clipped at 10⁻⁹); the *decided log loss* of the decided "
          "labels under P(a ≻ b | decided); the *mean P(tie)* beside the held-out share of ties; Kendall "
          "*τ* of the item scores against the true utility.", "",
          "How each gives three probabilities: evalica's `newman` fits Davidson's Bradley–Terry with ties, "
          "P(a ≻ b) = π_a / D, P(tie) = 2v√(π_a π_b) / D, D = π_a + π_b + 2v√(π_a π_b), with its tie "
          "parameter v; crowdzoo's tie model is the ordered probit of docs/ties.md, P(a ≻ b) = Φ(Δ − τ), "
          "P(b ≻ a) = Φ(−Δ − τ), with τ inferred (`predict_outcomes`). evalica's `bradley_terry` and `elo` "
          "count a tie as half a win and crowdzoo's \"ties as two halves\" fits as two half labels: they "
          "have no tie probability, and are given the training share t of ties as a constant tie rate, "
          "((1 − t) p, t, (1 − t)(1 − p)), with p = π_a / (π_a + π_b) (Bradley–Terry), Elo's expected score "
          "1 / (1 + 10^((R_b − R_a)/400)), or crowdzoo's `predict_proba`. *no model* is ((1 − t)/2, t, "
          "(1 − t)/2). evalica takes no item features; crowdzoo's GPPL uses the items' two features, its "
          "Bradley–Terry does not."]
    for name, e in raw["problems"].items():
        L += ["", f"### {name}", "", f"{e['description']}; held-out share of ties {e['held_out_ties']:.3f}. "
              f"All methods: {e.get('wall_s', 0):.0f} s.", ""]
        L += table(e["rows"])
    L += ["", END]
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks.md", help="markdown file (its section on ties)")
    ap.add_argument("--taus", default=",".join(map(str, TAUS)), help="tie thresholds of the problems")
    ap.add_argument("--seed", type=int, default=0, help="the problems' seed")
    child_options(ap, os.path.join(ROOT, "runs", "peers-ties"))
    args = ap.parse_args(argv)
    if args.from_results:
        with open(args.from_results) as fh:
            raw = json.load(fh)
    else:
        raw = run_all(args, argv if argv is not None else sys.argv[1:])
    text = render(raw)
    write_section(args.out, text, START, END)
    print(text)


if __name__ == "__main__":
    main()
