"""The ``peers`` benchmark: crowdzoo beside BoTorch, choix and crowd-kit on the same data.

Run with ``make bench-peers``: it builds ``.venv-peers`` (torch CPU, botorch, choix, crowd-kit; never
dependencies of crowdzoo) and runs this driver in crowdzoo's ``.venv``, which writes the problems
(problems.py) to .npz files and runs every method on each problem in its own process, one after
another: the peers by ``.venv-peers/bin/python`` (peer_botorch.py, peer_choix.py, peer_crowdkit.py),
crowdzoo by its own interpreter (crowdzoo_fit.py). Every child runs with the same thread count
(``--threads``, default 2, for torch and every BLAS / OpenMP pool), a time limit (``--timeout``)
and a cap on its data segment (``--mem-gib``, RLIMIT_DATA); a method that runs past either, or
fails, is reported as such, not dropped.

Measured per method: *fit s* (only the fit, timed inside the child, after imports and data
preparation), *total s* (the child's wall time from start to exit, seen by this driver), *peak MiB*
(the child's own resident peak, imports included: its VmHWM, polled by this driver and read by the
child itself; not ru_maxrss, which also counts the driver's pages that fork copied before exec),
*fit peak MiB* (the resident peak during the fit above the resident memory before it), and, on the
held-out pairs, accuracy (P > ½ against the label), CEE (mean cross-entropy, natural log,
probabilities clipped to [10⁻⁹, 1 − 10⁻⁹]) and Kendall τ of the item scores against the true
utility. Also the evidence for crowd-kit 1.4.2's two
defects (peer_crowdkit.py ``check_defects``, on the crowd problem).

The markdown goes into ``--out`` between its two ``<!-- bench_peers`` markers
(appended with the markers when they are absent; the rest of the file is left as it is); the raw
results go to ``--work``/results.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from child import threads_env  # noqa: E402
from harness import cpu_name  # noqa: E402
from problems import crowd_problem, gppl_problem, save  # noqa: E402

START, END = "<!-- bench_peers: run_peers.py rewrites this section -->", "<!-- bench_peers:end -->"
BOTORCH = "BoTorch PairwiseGP"

#: the peers: (label, script, method, config); they run in .venv-peers
PEERS = [
    (BOTORCH, "peer_botorch.py", "pairwise_gp", {}),
    ("choix ep_pairwise (probit, α = 1)", "peer_choix.py", "ep_pairwise", {"alpha": 1.0}),
    ("choix opt_pairwise (BT ML, defaults)", "peer_choix.py", "opt_pairwise", {}),
    ("choix opt_pairwise (BT MAP, α = 1)", "peer_choix.py", "opt_pairwise", {"alpha": 1.0}),
    ("choix ilsr_pairwise (BT ML, defaults)", "peer_choix.py", "ilsr_pairwise", {}),
    ("crowd-kit BradleyTerry (n_iter = 100)", "peer_crowdkit.py", "bradley_terry", {"n_iter": 100}),
    ("crowd-kit NoisyBradleyTerry (defaults)", "peer_crowdkit.py", "noisy_bradley_terry", {}),
]

#: crowdzoo's GPPL configurations: (label, GPPL kwargs, cz.fit kwargs). n_inducing, when not given,
#: is every item up to N = 200 and 200 inducing items beyond (see gppl_kwargs)
GPPL_CONFIGS = [
    ("crowdzoo natgrad (zoo defaults: Matérn-3/2, learned ℓ on full batches)", {}, {"method": "natgrad"}),
    ("crowdzoo natgrad, median heuristic (Matérn-3/2, linearised)", {},
     {"method": "natgrad", "learn_kernel": False}),
    ("crowdzoo natgrad, SE", {"kernel": "se"}, {"method": "natgrad", "learn_kernel": False}),
    ("crowdzoo natgrad, SE, exact likelihood", {"kernel": "se"},
     {"method": "natgrad", "likelihood": "exact", "learn_kernel": False}),
    ("crowdzoo natgrad, SE, exact, learn_kernel", {"kernel": "se"},
     {"method": "natgrad", "likelihood": "exact", "learn_kernel": True}),
    ("crowdzoo ep, SE", {"kernel": "se"}, {"method": "ep"}),
    ("crowdzoo ep, SE, learn_kernel", {"kernel": "se"}, {"method": "ep", "learn_kernel": True}),
]

#: crowdzoo's crowd models on the crowd problem: (label, CrowdGPPL kwargs, cz.fit kwargs)
CROWD_CONFIGS = [
    ("crowdzoo crowdGPPL natgrad, linearised (paper)", {"n_components": 20, "n_inducing": 25},
     {"likelihood": "linearised"}),
    ("crowdzoo crowdGPPL natgrad, exact likelihood (default here)", {"n_components": 20, "n_inducing": 25},
     {"likelihood": "exact"}),
    ("crowdzoo crowdGPPL natgrad, learn_kernel", {"n_components": 20, "n_inducing": 25},
     {"learn_kernel": True}),
]

#: --quick: the N = 100 problem, these methods
QUICK = {BOTORCH, "choix ep_pairwise (probit, α = 1)", "choix opt_pairwise (BT ML, defaults)",
         "crowd-kit BradleyTerry (n_iter = 100)", "crowd-kit NoisyBradleyTerry (defaults)",
         "crowdzoo natgrad (zoo defaults: Matérn-3/2, learned ℓ on full batches)",
         "crowdzoo natgrad, SE, exact likelihood", "crowdzoo ep, SE", "crowdzoo ep, SE, learn_kernel"}

INDUCING_FROM = 200


def gppl_kwargs(kwargs, n_items):
    out = dict(kwargs)
    out.setdefault("n_inducing", None if n_items <= INDUCING_FROM else INDUCING_FROM)
    return out


def methods_for(prob, quick=False):
    """(label, python, script, method, config) for every method run on ``prob``."""
    peers_py = os.path.join(ROOT, ".venv-peers", "bin", "python")
    n = prob["X"].shape[0]
    rows = [(label, peers_py, script, method, cfg) for label, script, method, cfg in PEERS]

    def ours(label, model, mk, fk):
        return label, sys.executable, "crowdzoo_fit.py", "fit", {"model": model, "model_kwargs": mk,
                                                                 "fit_kwargs": fk}

    if prob["name"] == "crowd":
        rows += [ours(label, "CrowdGPPL", mk, fk) for label, mk, fk in CROWD_CONFIGS]
        pooled = [(f"{label} (pooled)", mk, fk) for label, mk, fk in GPPL_CONFIGS]
    else:
        pooled = GPPL_CONFIGS
    rows += [ours(label, "GPPL", gppl_kwargs(mk, n), fk) for label, mk, fk in pooled]
    return [r for r in rows if r[0] in QUICK] if quick else rows


def _hwm_mib(pid):
    """Resident peak (VmHWM) of a running process, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run_child(python, script, method, problem_path, config, result_path, threads, timeout, mem_gib):
    """Run one method in its own process; returns the child's result dict with total_s, peak_mib,
    and status ok / timeout / oom / unavailable / error."""
    if os.path.exists(result_path):
        os.remove(result_path)
    if not os.path.exists(python):  # the peers' venv not built (make bench-peers builds it)
        return {"status": "unavailable", "error": f"no interpreter {os.path.relpath(python, ROOT)} (make "
                "bench-peers builds .venv-peers)", "total_s": 0.0, "peak_mib": 0.0}
    cmd = [python, os.path.join(HERE, script), method, problem_path, result_path, "--threads", str(threads),
           "--config", json.dumps(config)]
    lim = int(mem_gib * 2**30)

    def limits():
        resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))

    err_path = result_path + ".stderr"
    t0 = time.perf_counter()
    polled = 0.0
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=threads_env(threads),
                                cwd=ROOT, preexec_fn=limits)
        timed_out = False
        while True:
            polled = max(polled, _hwm_mib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                os.kill(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
    total = time.perf_counter() - t0
    res = {}
    if os.path.exists(result_path):
        with open(result_path) as fh:
            res = json.load(fh)
    # the child's own peak: ru_maxrss would also count the driver's pages that fork copied before exec
    res.update(total_s=total, peak_mib=max(polled, res.get("peak_self_mib", 0.0)),
               ru_maxrss_mib=usage.ru_maxrss / 1024.0)
    if timed_out:
        res.update(status="timeout", error=f"timed out after {timeout:.0f} s (killed)")
    elif "status" in res:
        pass
    elif "fit_s" in res:
        res["status"] = "ok"
    elif proc.returncode == -signal.SIGKILL:
        res.update(status="oom", error="killed by SIGKILL (out of memory?)")
    else:
        with open(err_path) as fh:
            tail = [line for line in fh.read().strip().splitlines() if line.strip()]
        res.update(status="error", error=f"exit {proc.returncode}: {tail[-1] if tail else ''}")
    return res


def score(res, prob):
    """Held-out accuracy, CEE and Kendall τ (against the true utility) of a child's result."""
    from scipy.stats import kendalltau

    p, yt = np.asarray(res["p"], dtype=float), prob["yt"]
    pc = np.clip(p, 1e-9, 1 - 1e-9)
    s = np.asarray(res["scores"], dtype=float)
    finite = np.isfinite(s)
    if not finite.all() and finite.any():  # ln 0 = −inf (crowd-kit BT's p = 0): ranks kept, below the rest
        s = np.where(finite, s, np.where(s > 0, s[finite].max() + 1, s[finite].min() - 1))
    return {"acc": float(np.mean((p > 0.5) == (yt == 1))),
            "cee": float(-np.mean(yt * np.log(pc) + (1 - yt) * np.log1p(-pc))),
            "tau": float(kendalltau(s, prob["f"]).statistic), "clipped": int(np.sum(pc != p)),
            "nan_p": int(np.isnan(p).sum())}


def _versions(python, modules):
    code = ("import importlib.metadata as m, json, sys; out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except Exception: out[n] = None\n"
            "print(json.dumps(out))")
    try:
        out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def machine(threads):
    cpu = cpu_name()
    ours = _versions(sys.executable, ["torch", "pyro-ppl", "numpy"])
    peers = _versions(os.path.join(ROOT, ".venv-peers", "bin", "python"),
                      ["torch", "botorch", "gpytorch", "choix", "crowd-kit", "numpy", "scipy", "pandas"])
    try:
        git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT)  # noqa: E731
        commit = git("rev-parse", "--short", "HEAD").stdout.strip()
        if git("status", "--porcelain", "--", "crowdzoo").stdout.strip():
            commit += " with uncommitted changes in crowdzoo/"
    except OSError:
        commit = ""
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "crowdzoo_venv": ours,
            "peers_venv": peers, "threads": threads, "commit": commit,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def _fmt(v, spec):
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, spec)


def _notes(r):
    out = []
    if r["status"] != "ok":
        label = {"timeout": "timed out", "oom": "out of memory", "unavailable": "not available",
                 "error": "error"}[r["status"]]
        msg = r.get("error", "").replace("|", "/").replace("\n", " ")
        out.append(f"**{label}**: {msg[:200]}")
    n = r.get("notes") or {}
    if "iterations" in n:
        out.append(f"{n['iterations']} iterations" + ("" if n.get("converged", True) else ", not converged"))
    for k in ("learned_lengthscale", "lengthscale"):
        if k in n:
            out.append(f"ℓ = {', '.join(f'{v:.2g}' for v in np.ravel(n[k]))}")
    if "outputscale" in n:
        out.append(f"outputscale {n['outputscale']:.3g}")
    if n.get("items with p = 0"):
        out.append(f"{n['items with p = 0']} items with p = 0")
    if r.get("clipped"):
        out.append(f"{r['clipped']} probabilities clipped")
    if r.get("nan_p"):
        out.append(f"{r['nan_p']} NaN probabilities")
    warns = [w.split(":")[0] for w in r.get("warnings", []) if not w.startswith("DeprecationWarning")]
    if warns:
        out.append("warned: " + ", ".join(sorted(set(warns))))
    return "; ".join(out)


def table(rows):
    base = next((r for r in rows if r["label"] == BOTORCH and r["status"] == "ok"), None)
    L = ["| method | fit s | total s | peak MiB | fit peak MiB | acc | CEE | τ | fit ÷ BoTorch "
         "| peak ÷ BoTorch | notes |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = r["status"] == "ok"
        ratio_t = ratio_m = "—"
        if ok and base is not None and r["label"].startswith("crowdzoo"):
            ratio_t = f"{r['fit_s'] / base['fit_s']:.3g}×"
            ratio_m = f"{r['peak_mib'] / base['peak_mib']:.2f}×"
        L.append(f"| {r['label']} | {_fmt(r.get('fit_s') if ok else None, '.2f')} | {r['total_s']:.1f} | "
                 f"{r['peak_mib']:.0f} | {_fmt(r.get('fit_peak_mib') if ok else None, '.0f')} | "
                 f"{_fmt(r.get('acc'), '.3f')} | {_fmt(r.get('cee'), '.3f')} | {_fmt(r.get('tau'), '.3f')} | "
                 f"{ratio_t} | {ratio_m} | {_notes(r)} |")
    return L


def crowdkit_section(ev):
    if not ev or ev.get("status") != "ok":
        return ["", "### crowd-kit's defects", "",
                f"The check did not run: {(ev or {}).get('error', 'no result')}"]
    n = ev["notes"]
    bt, nbt = n["BradleyTerry"], n["NoisyBradleyTerry"]
    src = lambda s: f"`{s[0]}:{s[1]}`: `{s[2]}`" if s[1] else f"`{s[0]}`: (line not found)"  # noqa: E731
    runs = ", ".join(f"n_iter = {k}: {v}" for k, v in bt["loop body runs by n_iter"].items())
    bt_stuck = max(bt["loop body runs by n_iter"].values()) <= 2
    errs = nbt["at fit's starting point, per block"]
    nbt_wrong = max(v["‖analytic − fd‖ / ‖fd‖"] for k, v in errs.items() if k != "x[0] (anchor)") > 1e-3
    diffs = ", ".join(f"{k}: {v:.3g}" for k, v in bt["max |score(n_iter) − score(2)|"].items())
    ll = bt["training log-likelihood"]
    L = ["", "### crowd-kit's defects", "",
         f"Checked on crowd-kit {n['crowd-kit']} as installed in `.venv-peers`, on the {n['problem']} "
         "problem's training labels, by `peer_crowdkit.py check_defects` (this run's output).", "",
         ("**(a) `BradleyTerry` stops after two MM steps whatever `n_iter` is.** Its loop updates `p_new` in "
          f"place ({src(bt['source'][0])}) and then keeps the same array as the previous iterate "
          f"({src(bt['source'][1])}), so the convergence test ({src(bt['source'][2])}) compares an array "
          "with itself: the change is 0 at the second step. " if bt_stuck else
          "**(a) `BradleyTerry`: the two-step stop reported for crowd-kit 1.4.2 is not seen with this "
          "version.** ") +
         f"Times the loop body ran (a line tracer): {runs}. "
         f"Largest change of the scores from n_iter = 2: {diffs}. `loss_history_` after a fit: "
         f"{bt['loss_history_ after fit']} (never filled). Training log-likelihood of the Bradley–Terry "
         f"model: {ll['as shipped (n_iter = 10000)']:.2f} as shipped (n_iter = 10⁴), "
         f"{ll['MM with p_old = p_new.copy(), tol 1e-5']:.2f} for the same MM loop with "
         "`p_old = p_new.copy()`, which stops at the 10⁻⁵ tolerance after "
         f"{bt['MM iterations with the copy']} steps. The tables report BradleyTerry as shipped and "
         "choix's converged Bradley–Terry (`opt_pairwise`) beside it.", "",
         ("**(b) `NoisyBradleyTerry`'s analytic gradient disagrees with finite differences of its own "
          "loss.** " if nbt_wrong else "**(b) `NoisyBradleyTerry`: its gradient agrees with finite "
          "differences in this version.** ") +
         f"`_compute_gradient` against central differences (h = 10⁻⁶) of `_compute_log_likelihood` at the "
         f"point `fit` starts from (random_state 0; {nbt['parameters']['items']} items, "
         f"{nbt['parameters']['workers']} workers, {nbt['parameters']['labels']} labels):", "",
         "| block | max abs analytic | max abs finite diff. | max abs difference | relative error (2-norm) |",
         "|---|---:|---:|---:|---:|"]
    for k, v in nbt["at fit's starting point, per block"].items():
        L.append(f"| {k} | {v['max |analytic|']:.3g} | {v['max |finite diff.|']:.3g} | "
                 f"{v['max |analytic − finite diff.|']:.3g} | {v['‖analytic − fd‖ / ‖fd‖']:.3g} |")
    s = nbt["source"]
    a, b = nbt["fit as shipped (L-BFGS-B, its gradient, maxiter 100)"], \
        nbt["same call, finite-difference gradient (maxiter 100)"]
    L += ["", ("Reading the source: a worker's bias and skill are read at one offset "
               f"({src(s[0])}; {src(s[1])}) and their gradients written one slot earlier "
               f"({src(s[2])}; {src(s[3])}): each worker's bias and skill gradients land on the previous "
               "worker's bias and skill, worker 0's on the last item's score and the last worker's bias; and "
               "they are assigned (`=`), not accumulated, so only each worker's last label counts. "
               if nbt_wrong else "") +
          "Effect on `fit` (L-BFGS-B, maxiter 100, captured by wrapping the `minimize` it calls): from "
          f"{nbt['loss at the starting point']:.2f} it stops after {a['iterations']} iterations at loss "
          f"{a['loss']:.2f} (\"{a['message'].strip()}\"); the same call with a finite-difference gradient "
          f"reaches {b['loss']:.2f} in {b['iterations']} iterations (\"{b['message'].strip()}\"). The tables "
          "report NoisyBradleyTerry as shipped."]
    return L


def _configs(raw):
    """What each crowdzoo row ran, read from the results (so a section re-rendered from an older
    results.json describes that run's configurations)."""
    seen = {}
    for e in raw["problems"].values():
        for r in e["rows"]:
            c = r.get("config", {})
            if "model" in c:
                mk = {k: v for k, v in c["model_kwargs"].items() if k != "n_inducing" or c["model"] != "GPPL"}
                seen.setdefault(r["label"].removesuffix(" (pooled)"),
                                f"{c['model']}, model {json.dumps(mk)}, fit {json.dumps(c['fit_kwargs'])}")
    return [f"*{label}*: {what}" for label, what in seen.items()]


def render(raw):
    """The markdown section from the raw results of :func:`run_all`."""
    m, cmd, note, check = raw["machine"], raw["command"], raw.get("note"), raw.get("crowdkit_check")
    timeout, mem_gib = raw["timeout"], raw["mem_gib"]
    pv = m["peers_venv"]
    L = [START, "", "## Peers: crowdzoo beside BoTorch, choix and crowd-kit", ""]
    if note:
        L += [f"**{note}**", ""]
    L += [f"Reproduce with `make bench-peers` (builds `.venv-peers`, then runs `.venv/bin/python "
          f"benchmarks/peers/run_peers.py --out docs/benchmarks.md`; this run: `{' '.join(cmd)}`).", "",
          f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; crowdzoo's venv: torch "
          f"{m['crowdzoo_venv'].get('torch')}, pyro-ppl {m['crowdzoo_venv'].get('pyro-ppl')}; peers' venv: "
          + (", ".join(f"{k} {v}" for k, v in pv.items()) or "not built") +
          f". {m['threads']} threads in every child (torch and the BLAS / OpenMP pools); crowdzoo at "
          f"{m['commit']}; {m['date']}.", "",
          "Every method runs on the same data in its own process, one after another. *fit s*: the fit only, "
          "timed inside the child after imports and data preparation (BoTorch: building PairwiseGP, whose "
          "first Laplace fit runs then, and `fit_gpytorch_mll`; crowdzoo: `cz.fit`); *total s*: the child's "
          "wall time, start to exit; *peak MiB*: the child's own resident peak (VmHWM, imports included: "
          "torch alone is some 200 MiB; not ru_maxrss, which would count the driver's pages that fork copied "
          "before exec); *fit peak MiB*: the resident peak during the fit above the resident memory "
          "before it. On the held-out pairs: *acc* (P > ½ against the label), *CEE* (mean cross-entropy, "
          "natural log, probabilities clipped to [10⁻⁹, 1 − 10⁻⁹]) and Kendall *τ* of the item scores "
          "against the true utility. *÷ BoTorch*: crowdzoo's fit time and peak memory over BoTorch's on the "
          "same problem. "
          f"Limits per child: {timeout:.0f} s and a {mem_gib:g} GiB data "
          "segment; a method past either is reported, not dropped.", "",
          "How each turns item scores into P(a ≻ b): BoTorch's likelihood is Φ((f_a − f_b)/√2), so "
          "Φ((μ_a − μ_b)/√(2 + Σ_aa + Σ_bb − 2Σ_ab)) under its Laplace posterior; choix EP (probit, "
          "Φ(s_a − s_b), prior N(0, I/α)): Φ((μ_a − μ_b)/√(1 + Σ_aa + Σ_bb − 2Σ_ab)); choix's "
          "Bradley–Terry and crowd-kit's: σ(s_a − s_b) (crowd-kit BradleyTerry's scores are p with "
          "P = p_a/(p_a + p_b), so s = ln p; NoisyBradleyTerry's are σ(s), so s = logit(score), and its "
          "per-worker skill and bias are left out: the consensus is scored); crowdzoo: `predict_proba`. "
          "choix and crowd-kit take no item features.", "",
          "crowdzoo's configurations, as `cz.fit(cz.<model>(**model), train, seed=0, **fit)` (GPPL's "
          f"`n_inducing`: every item up to N = {INDUCING_FROM}, then {INDUCING_FROM} inducing items by "
          "k-means++): " + "; ".join(_configs(raw)) + "."]
    for prob_name, e in raw["problems"].items():
        rows = e["rows"]
        L += ["", f"### {prob_name}", "", f"{e['description']}. All methods: {e.get('wall_s', 0):.0f} s.", ""]
        if prob_name == "crowd":
            L += ["The peers and pooled GPPL fit the pooled labels (crowd-kit's NoisyBradleyTerry gets each "
                  "label's user as its worker) and are scored with their consensus; crowdGPPL predicts each "
                  "held-out label for its user. Held-out labels are the users' own (drawn from their "
                  "personal utilities); τ is against the consensus t.", ""]
        L += table(rows)
    L += crowdkit_section(check)
    L += ["", END]
    return "\n".join(L) + "\n"


def write_section(path, text, start=START, end=END):
    """Replace the text between the markers ``start`` and ``end`` (the peers section's by default), or
    append it; nothing else in the file changes."""
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if start in old and end in old:
        before, rest = old.split(start, 1)
        after = rest.split(end, 1)[1]
        new = before + text.rstrip("\n") + after
        if not after.strip():
            new = before + text
    else:
        new = old.rstrip("\n") + "\n\n" + text
    with open(path, "w") as fh:
        fh.write(new)


def child_options(ap, work: str) -> None:
    """The options every peers script shares: the children's threads, time and memory limits, the work
    folder (default ``work``), a note under the heading, and rewriting from an earlier run's results."""
    ap.add_argument("--threads", type=int, default=2, help="threads in every child (default 2)")
    ap.add_argument("--timeout", type=float, default=400, help="seconds per child before it is killed")
    ap.add_argument("--mem-gib", type=float, default=12, help="data-segment cap per child (RLIMIT_DATA)")
    ap.add_argument("--work", default=work, help="problem and result files")
    ap.add_argument("--note", default="", help="a line printed in bold under the heading")
    ap.add_argument("--from-results", metavar="JSON",
                    help="run nothing: write the section again from an earlier run's results.json")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks.md", help="markdown file (its peers section)")
    ap.add_argument("--quick", action="store_true", help="the N = 100 problem, a few methods (a smoke run)")
    ap.add_argument("--sizes", default="100,150,crowd,1000,5000",
                    help="comma-separated problems, in order: numbers of items N for the sine problem's "
                    "generator, and 'crowd'")
    ap.add_argument("--only", default="", help="comma-separated substrings: only methods whose label has one")
    child_options(ap, os.path.join(ROOT, "runs", "peers"))
    args = ap.parse_args(argv)
    if args.from_results:
        with open(args.from_results) as fh:
            raw = json.load(fh)
        if args.note:
            raw["note"] = args.note
    else:
        raw = run_all(args, argv if argv is not None else sys.argv[1:])
    text = render(raw)
    write_section(args.out, text)
    print(text)


def run_all(args, argv):
    """Run every method on every problem; the raw results (also written to --work/results.json)."""
    sizes = ["100"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    only = [s for s in args.only.split(",") if s]
    os.makedirs(args.work, exist_ok=True)
    shown = [a for a in argv if a not in ("--note", args.note)]
    raw = {"machine": machine(args.threads), "command": ["python", "benchmarks/peers/run_peers.py", *shown],
           "note": args.note, "timeout": args.timeout, "mem_gib": args.mem_gib, "problems": {}}
    out_json = os.path.join(args.work, "results.json")

    def dump():
        with open(out_json, "w") as fh:
            json.dump(raw, fh, indent=1, ensure_ascii=False)

    for size in sizes:
        prob = crowd_problem() if size == "crowd" else gppl_problem(int(size))
        path = os.path.join(args.work, f"{'crowd' if size == 'crowd' else 'n' + size}.npz")
        save(path, prob)
        rows, t_all = [], time.perf_counter()
        entry = raw["problems"][prob["name"]] = {"description": prob["description"], "rows": rows}
        for label, python, script, method, cfg in methods_for(prob, args.quick):
            if only and not any(s in label for s in only):
                continue
            print(f"[{prob['name']}] {label} ...", end=" ", flush=True)
            res = run_child(python, script, method, path, cfg, os.path.join(args.work, "result.json"),
                            args.threads, args.timeout, args.mem_gib)
            if res["status"] == "ok":
                res.update(score(res, prob))
            res.update(label=label, config=cfg)
            got = {k: round(res[k], 3) for k in ("acc", "cee", "tau") if k in res}
            print(res["status"], f"fit {res.get('fit_s', float('nan')):.2f} s, total {res['total_s']:.1f} s, "
                  f"peak {res['peak_mib']:.0f} MiB", got, res.get("error", ""), flush=True)
            rows.append({k: v for k, v in res.items() if k not in ("p", "scores")})
            entry["wall_s"] = time.perf_counter() - t_all
            dump()
    crowd_path = os.path.join(args.work, "crowd.npz")
    if "crowd" not in sizes:
        save(crowd_path, crowd_problem())
    print("crowd-kit defects ...", flush=True)
    raw["crowdkit_check"] = run_child(os.path.join(ROOT, ".venv-peers", "bin", "python"), "peer_crowdkit.py",
                                      "check_defects", crowd_path, {}, os.path.join(args.work, "check.json"),
                                      args.threads, args.timeout, args.mem_gib)
    dump()
    return raw


if __name__ == "__main__":
    main()
