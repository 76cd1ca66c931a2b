"""crowdGPPL's item length-scales on a large crowd: the median heuristic, learned in the fit, and
learned before it from pooled labels (the default above 2·10⁵ labels), beside pooled GPPL.

The crowd is ``bench_scale.py``'s (``crowdzoo.data.simulate_panel``, seed 0): 3,000 items with 16
numeric features of which half matter, 20,000 users with low-rank tastes over the same features,
about 62 labels each (991,668 training labels). Each configuration runs in its own process through
the Python API and is scored on the held-out decided pairs, personally (each label's own user) and by
the consensus:

* ``median``: ``learn_kernel=False``, the median heuristic (the paper's kernel);
* ``in-fit``: ``learn_kernel=True``, an Adam step on the ARD length-scales after each sweep;
* ``default``: ``learn_kernel`` unset, which here is ``"pooled"`` (GPPL's type-II ML on 10⁴ of the
  labels pooled over users, then fixed; ``crowdzoo.models.crowdgppl.natgrad.pooled``);
* ``gppl``: pooled GPPL with its defaults; ``gppl-learned``: with ``learn_kernel=True`` (mini-batches).

``--jobs`` runs that many at once, each pinned to its own ``--cores`` cores (``taskset``) with as many
torch threads, so that several two-core fits share a larger machine without sharing cores.

    python benchmarks/bench_pooled_lengthscales.py --jobs 4 --out docs/benchmarks.md

``--items`` / ``--users`` shrink the crowd (``--users 4000``: 197,944 labels).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- bench_pooled_lengthscales.py: this section is rewritten by it -->"
CONFIGS = {"median": dict(learn_kernel=False), "in-fit": dict(learn_kernel=True), "default": {},
           "gppl": None, "gppl-learned": dict(learn_kernel=True)}


def one(name: str, n_items: int, n_users: int) -> dict:
    """Fit configuration ``name`` on the crowd and score it (in this process)."""
    import warnings

    import numpy as np
    import torch

    import crowdzoo as cz
    from crowdzoo.data.simulate_panel import Panel, simulate_panel

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    panel = Panel(n_items=n_items, n_users=n_users, labels_per_user=62, features="irrelevant",
                  n_features=16, taste="low-rank", rank=3, personal=0.7, residual=1.0)
    train, test, items, _, truth = simulate_panel(panel, seed=0)
    test = test[test["tie"].astype(str).str.lower().isin(["no", "false", "0"])]
    data = cz.PairwiseData.from_frame(train.drop(columns=["p_winner", "tie"]).assign(y=1), items,
                                      a="winner", b="loser", y="y", user="taster")
    a, b, users = (test[c].to_numpy() for c in ("winner", "loser", "taster"))
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    gppl = name.startswith("gppl")
    kw = CONFIGS[name] or {}
    post = cz.fit(cz.GPPL() if gppl else cz.CrowdGPPL(), data, progress_bar=False, **kw)
    secs = time.perf_counter() - t0

    def score(p):
        return float(-np.log(np.clip(p, 1e-12, 1)).mean()), float((p > 0.5).mean())

    row = dict(config=name, labels=len(train), oracle=truth["oracle"], fit_s=secs,
               iterations=post.settings.get("iterations"), converged=post.settings.get("converged"),
               learn_kernel=str(post.settings.get("learn_kernel")))
    row["consensus"], row["consensus_acc"] = score(post.predict_proba(a, b))
    if not gppl:
        row["personal"], row["personal_acc"] = score(post.predict_proba(a, b, users=users))
    return row


def render(rows: list[dict], args) -> str:
    first = rows[0]
    resized = (args.items, args.users) != (3000, 20000)
    lines = [HEAD, "", "## crowdGPPL's length-scales on a large crowd", "",
             f"Machine: {machine()}; each configuration in its own process on {args.cores} core(s)"
             + (f", {args.jobs} at once on separate cores" if args.jobs > 1 else "") + ". "
             f"`python benchmarks/bench_pooled_lengthscales.py --jobs {args.jobs} --cores {args.cores}"
             + (f" --items {args.items} --users {args.users}" if resized else "")
             + f" --out docs/benchmarks.md` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             f"The crowd of `bench_scale.py` ({first['labels']:,} training labels, {args.items:,} items "
             f"with 16 features of which 8 matter, {args.users:,} users with low-rank tastes); held-out "
             f"decided pairs scored for each label's own user (*personal*) and by the consensus. The "
             f"oracle scores {first['oracle']:.3f}.", "",
             "| configuration | learn_kernel | fit s | iterations | converged | personal log loss (acc) "
             "| consensus log loss (acc) |",
             "|---|---|---:|---:|---|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['config']} | – | – | – | – | {r['error']} | |")
            continue
        personal = (f"{r['personal']:.3f} ({r['personal_acc']:.3f})" if "personal" in r else "–")
        lines.append(f"| {r['config']} | {r['learn_kernel']} | {r['fit_s']:.0f} | {r['iterations']} | "
                     f"{r['converged']} | {personal} | {r['consensus']:.3f} ({r['consensus_acc']:.3f}) |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--users", type=int, default=20000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.items, args.users)))
        return
    names = args.configs.split(",")
    pending, running, rows = list(enumerate(names)), [], {}
    free = [list(range(k * args.cores, (k + 1) * args.cores)) for k in range(args.jobs)]
    while pending or running:
        while pending and free:
            k, name = pending.pop(0)
            cores = free.pop(0)
            cmd = [sys.executable, __file__, "--one", name, "--items", str(args.items),
                   "--users", str(args.users)]
            if args.jobs > 1 and shutil.which("taskset"):
                cmd = ["taskset", "-c", ",".join(map(str, cores))] + cmd
            env = dict(os.environ, OMP_NUM_THREADS=str(args.cores))
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
            running.append((k, name, cores, proc))
        time.sleep(1)
        for job in list(running):
            k, name, cores, proc = job
            if proc.poll() is None:
                continue
            out = proc.stdout.read().strip().splitlines()
            ok = proc.returncode == 0 and out
            rows[k] = json.loads(out[-1]) if ok else dict(config=name, error="failed")
            print(json.dumps(rows[k]), flush=True)
            running.remove(job)
            free.append(cores)
    text = render([rows[k] for k in sorted(rows)], args)
    print(text)
    if args.out:
        replace_section(args.out, HEAD, text)


if __name__ == "__main__":
    main()
