"""BayesSCDC's clusters from the end-of-fit Gibbs sampler against the variational fixed point's, from the
same fits.

Each job fits ``cz.BayesSCDC`` once with its defaults and one initialisation (``n_init=1``, as the
comparison tables do). The posterior's ``cluster_probs`` are the sampler's shares of kept sweeps
(``clusters="gibbs"``) and its ``vi_cluster_probs`` the variational q*(z_n) (Eq. 14) of the same fit,
so one fit gives both accuracies (Hungarian, against the simulated groups or the digits' classes). Also
reported per fit:

* "new": the accuracy of ``predict(O)`` on the training items' features without their links (the
  mixture refit to the chain's clusters), and "same labels": the share of items whose ``predict(O)``
  equals their own cluster label, beside the best that a relabelling of the clusters reaches — equal
  when the posterior's mixture and its training labels share the labels (no permutation);
* "from": "gibbs", or "vi" where the chain emptied a cluster that the fixed point holds and the fit
  kept the fixed point's clusters (:func:`crowdzoo.models.scdc.natgrad.finish_workers`);
* "unsure": the share of items whose most visited cluster holds under half the kept sweeps (the chain
  switching labels within a run would raise it towards 1).

Sets: ``scdc-crowd``'s link sets (:func:`crowdzoo.comparisons.scdc_crowd.link_set`) and scikit-learn's
digits with every image annotated (``cz.digits_links(annotated="all")``, the ``scdc-digits``
comparison's architecture, epochs and pretraining: :func:`crowdzoo.comparisons.scdc._settings`).

    .venv/bin/python benchmarks/scdc_gibbs_clusters.py --sets overlapping --seeds 0 1 2 3 4 5
    .venv/bin/python benchmarks/scdc_gibbs_clusters.py --sets "overlapping, 5,000 links" elongated \\
        --seeds 0 1 2
    .venv/bin/python benchmarks/scdc_gibbs_clusters.py --sets digits --seeds 0 1 2 --jobs 3

``--jobs`` fits in parallel processes (one thread each).
"""
from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np


def _match(a, b, K: int) -> float:
    """The largest share of items on which ``a`` and ``b`` agree under a relabelling of ``b``."""
    from scipy.optimize import linear_sum_assignment

    C = np.zeros((K, K), dtype=np.int64)
    np.add.at(C, (a, b), 1)
    r, c = linear_sum_assignment(-C)
    return C[r, c].sum() / a.size


def one(job) -> dict:
    """Fit set ``job[0]`` with seed ``job[1]``; the row of the module docstring's numbers."""
    name, seed = job
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    import crowdzoo as cz
    from crowdzoo.cluster_metrics import hungarian_accuracy

    if name.startswith("digits"):
        from crowdzoo.comparisons.scdc import DIGITS_ALPHA, _settings

        s = _settings("digits", False)
        epochs, pretrain = s.pop("n_epochs"), s.pop("pretrain")
        annotated = 100 if name == "digits, 100 annotated" else "all"
        data, truth = cz.digits_links(annotated=annotated, alpha=DIGITS_ALPHA, seed=seed)
        labels, model, kw = truth["labels"], cz.BayesSCDC(**s), dict(n_epochs=epochs, pretrain=pretrain)
    else:
        from crowdzoo.comparisons.scdc_crowd import link_set

        data, K, _, _ = link_set(name, seed)
        labels, model, kw = data.labels, cz.BayesSCDC(n_clusters=K), {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = cz.fit(model, data, seed=seed, n_init=1, progress_bar=False, **kw)
    secs = time.perf_counter() - t0
    gibbs = post.cluster_probs.argmax(1).numpy()
    vi = post.vi_cluster_probs.argmax(1).numpy()
    new = post.predict(data.O).to_numpy()
    K = post.cluster_probs.shape[1]
    return {"set": name, "seed": seed, "seconds": secs,
            "gibbs": hungarian_accuracy(labels, gibbs), "vi": hungarian_accuracy(labels, vi),
            "new": hungarian_accuracy(labels, new), "same labels": float((new == gibbs).mean()),
            "best relabelling": _match(gibbs, new, K), "gibbs = vi": float((gibbs == vi).mean()),
            "unsure": float((post.cluster_probs.max(1).values < 0.5).double().mean()),
            "from": post.settings["clusters_from"]}


def table(rows: list[dict]) -> str:
    lines = ["| set | seeds | VI clusters | Gibbs clusters | predict(O) | same labels (best relabelling) "
             "| most visited < ½ | s a fit |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in dict.fromkeys(r["set"] for r in rows):
        rs = [r for r in rows if r["set"] == name]

        def cell(k, rs=rs):
            v = np.array([r[k] for r in rs])
            return f"{v.mean():.3f} ({v.min():.3f}–{v.max():.3f})"

        lines.append(f"| {name} | {', '.join(str(r['seed']) for r in rs)} | {cell('vi')} | {cell('gibbs')} | "
                     f"{cell('new')} | {np.mean([r['same labels'] for r in rs]):.3f} "
                     f"({np.mean([r['best relabelling'] for r in rs]):.3f}) | "
                     f"{np.mean([r['unsure'] for r in rs]):.3f} | "
                     f"{np.mean([r['seconds'] for r in rs]):.0f} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", default=["overlapping"],
                   help="scdc-crowd link sets (crowdzoo.comparisons.scdc_crowd.SETS), 'digits' (every "
                   "image annotated) or 'digits, 100 annotated'")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4, 5])
    p.add_argument("--jobs", type=int, default=1, help="fits in parallel (processes, one thread each)")
    p.add_argument("--out", help="also write the rows as JSON here")
    a = p.parse_args(argv)
    jobs = [(name, seed) for name in a.sets for seed in a.seeds]
    if a.jobs > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(a.jobs) as pool:
            rows = []
            for r in pool.imap(one, jobs):
                rows.append(r)
                print(json.dumps(r), flush=True)
    else:
        rows = []
        for job in jobs:
            rows.append(one(job))
            print(json.dumps(rows[-1]), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))


if __name__ == "__main__":
    main()
