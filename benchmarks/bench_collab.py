"""collabGP EP + VB benchmarks: time and memory against the number of users and labels.

Synthetic collabGP data (supplement a §6 generator) with D = 20 latent functions and FITC with
P₀ = U₀ = 25 pseudo pairs and users, as the paper runs it; a sweep over users at 10 items and 30
labels per user (the first row is Table 1's Synthetic setting), and 100 items with 10 labels per
user (Sushi-B's shape, at 1000 of its 5000 users). Each size runs in a
fresh subprocess so that its peak memory is its own. Run with ``make bench``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, proc_mib, replace_section  # noqa: E402

HEAD = "<!-- bench_collab.py: this section is rewritten by it -->"


def one_size(n_items, n_users, n_train, n_test=5, D=20, pseudo_pairs=25, seed=0):
    import torch

    import crowdzoo as cz

    torch.set_num_threads(2)
    data, _ = cz.simulate_collab(n_items=n_items, n_users=n_users, seed=seed)
    tr, te = cz.split_each_user(data, (n_train, n_test), seed=seed)
    train, test = data.subset(tr), data.subset(te)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    rss0 = proc_mib("VmRSS")
    t0 = time.perf_counter()
    model = cz.CollabGP(n_latent=D, n_pseudo_pairs=pseudo_pairs, n_pseudo_users=25, learn_scale=False,
                        lengthscale="median distance", user_lengthscale="median distance")  # the paper's
    post = cz.fit(model, train, method="ep", seed=seed, progress_bar=False)
    sec = time.perf_counter() - t0
    p = post.predict_proba(test.a, test.b, users=test.users)
    return {"N": n_items, "U": n_users, "L": train.n_pairs, "P": post.setup.P, "D": D,
            "P0": "all items" if pseudo_pairs is None else pseudo_pairs, "seconds": sec,
            "converged": post.trace["converged"], "log_evidence": post.log_evidence,
            "sweeps": post.trace["n_iter"], "ms_per_sweep": 1000 * sec / post.trace["n_iter"],
            "peak_mib": proc_mib("VmHWM") - rss0, "error": float(((p > 0.5) != (test.y > 0.5)).mean())}


def _sub(fn, **kw):
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import bench_collab as b; print(json.dumps(b.{fn}(**{kw!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = ap.parse_args(argv)
    users = [100, 300] if args.quick else [100, 1000]
    rows = [_sub("one_size", n_items=10, n_users=u, n_train=30) for u in users]  # Table 1's protocol
    rows.append(_sub("one_size", n_items=100 if not args.quick else 30, n_users=users[-1], n_train=10))
    # many items, few labels per user, fewer users: D = 5 and 20, FITC and exact items (docs/collabgp.md)
    rows += [_sub("one_size", n_items=100, n_users=100, n_train=10, D=D, pseudo_pairs=p0)
             for D in (5, 20) for p0 in (25, None)]
    L = [HEAD, "", "## collabGP EP + VB: users and labels", "",
         f"Machine: {machine()}. Reproduce with `python benchmarks/bench_collab.py --out docs/benchmarks.md` "
         "(part of `make bench`; replaces this section).", "",
         "Synthetic collabGP data (supplement a §6), D = 20, FITC with 25 pseudo pairs and 25 pseudo users, "
         "unless the row says otherwise; default EP settings (damping × 0.95 per sweep, tol 10⁻³, at most "
         "200 sweeps); 5 held-out pairs per user. *Peak* is "
         "the resident memory the fit adds on top of the data (VmHWM after clear_refs).", "",
         "| items | users | labels L | distinct pairs P | D | pseudo pairs | seconds | sweeps | converged | "
         "ms / sweep | peak (MiB) | log evidence | held-out error |",
         "|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        L.append(f"| {r['N']} | {r['U']:,} | {r['L']:,} | {r['P']:,} | {r['D']} | {r['P0']} | "
                 f"{r['seconds']:.1f} | {r['sweeps']} | {r['converged']} | {r['ms_per_sweep']:.0f} | "
                 f"{r['peak_mib']:.0f} | "
                 f"{r['log_evidence']:.0f} | {r['error']:.3f} |")
    text = "\n".join(L) + "\n"
    replace_section(args.out, HEAD, text)
    print(text)


if __name__ == "__main__":
    main()
