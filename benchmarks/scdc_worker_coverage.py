"""BayesSCDC's worker intervals against the simulated truth, fit by fit, on ``scdc-crowd``'s link sets.

Each seed fits ``cz.BayesSCDC(n_clusters=K)`` with its defaults and one initialisation (as
``crowdzoo compare scdc-crowd`` does; ``--n-init 3`` for the default fit's best of three) to
:func:`crowdzoo.comparisons.scdc_crowd.link_set` and reports the Hungarian accuracy, the share of the
workers' true α_m, β_m inside their 90 % intervals and the mean error of E[α_m], E[β_m]. Beside the
fit's own intervals (the Gibbs sampler of :mod:`crowdzoo.models.scdc.gibbs`), other workers' updates
are applied to the same fitted networks and mixture (three alternations with the whole graph's message
passing, as the fit's last step):

* "pair beliefs, widened": ``finish_workers(..., workers="louis")``, the pair beliefs' counts widened
  by Louis's missing information;
* "mean-field counts": the Beta counts weighted by the mean-field Σ_k φ_ik φ_jk, not widened;
* "true groups": the Beta posteriors that the simulated groups give (prior + the closed-form counts),
  the reference that no clustering can beat.

    .venv/bin/python benchmarks/scdc_worker_coverage.py --set overlapping --seeds 0 1 2 3 4 5
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch


def _inside(alpha, beta, a, b):
    from scipy.stats import beta as beta_dist

    out = []
    for P, truth in ((alpha, a), (beta, b)):
        P = np.asarray(P)
        lo, hi = beta_dist.ppf(0.05, P[:, 0], P[:, 1]), beta_dist.ppf(0.95, P[:, 0], P[:, 1])
        out.append((lo <= truth) & (truth <= hi))
    return np.concatenate(out)


def _mean_field_workers(post):
    """The workers' Beta posteriors from the mean-field counts on the fit's networks and mixture."""
    from crowdzoo.models.scdc.bayes import F64, Conjugate, worker_stats
    from crowdzoo.models.scdc.natgrad import FINISH_ROUNDS, encode_all
    from crowdzoo.models.scdc.svi import link_tensors

    model, W = post.model, post.data.n_workers
    nets = model.networks(post.setup, state=post.net_state)
    t = link_tensors(post.data)
    prior, q = model.prior(W), Conjugate(**post.conjugate)
    with torch.no_grad():
        for _ in range(FINISH_ROUNDS):
            loc = encode_all(nets, q, t, model.sweeps, "cpu")
            s = (loc.phi[t.i] * loc.phi[t.j]).sum(-1)
            a, b = worker_stats(s, t.w, t.L.to(F64), W, 1.0)
            q = q._replace(alpha=prior.alpha + a, beta=prior.beta + b)
    return q.alpha.numpy(), q.beta.numpy()


def _louis_workers(post):
    """The pair beliefs' counts widened by Louis's missing information, on the fit's networks and mixture."""
    from crowdzoo.models.scdc.bayes import Conjugate
    from crowdzoo.models.scdc.natgrad import finish_workers
    from crowdzoo.models.scdc.svi import link_tensors

    model, W = post.model, post.data.n_workers
    nets = model.networks(post.setup, state=post.net_state)
    with torch.no_grad():
        q, *_ = finish_workers(Conjugate(**post.conjugate), model.prior(W), nets, link_tensors(post.data),
                              model.sweeps, W, "cpu", workers="louis")
    return q.alpha.numpy(), q.beta.numpy()


def _chain_accuracy(post, seed: int) -> float:
    """The Hungarian accuracy of each item's most visited cluster in a run of the workers' Gibbs sampler
    (a chain of its own, as long as the fit's) on the fit's networks and mixture."""
    from crowdzoo.cluster_metrics import hungarian_accuracy
    from crowdzoo.models.scdc.bayes import F64, Conjugate
    from crowdzoo.models.scdc.gibbs import gibbs_workers, mixture_unaries
    from crowdzoo.models.scdc.natgrad import GIBBS_BURN, GIBBS_SWEEPS, potentials
    from crowdzoo.models.scdc.svi import link_tensors

    model, W, t = post.model, post.data.n_workers, link_tensors(post.data)
    nets = model.networks(post.setup, state=post.net_state)
    prior = model.prior(W)
    torch.manual_seed(seed)
    with torch.no_grad():
        h, lam = potentials(nets, t.O)
        z0 = post.cluster_probs.argmax(-1)
        draw = mixture_unaries(h, lam, prior, Conjugate(**post.conjugate))
        _, _, visits = gibbs_workers(draw, t.i, t.j, t.w, t.L.to(F64), prior.alpha, prior.beta, z0,
                                     post.cluster_probs.shape[1], GIBBS_SWEEPS, GIBBS_BURN)
    return hungarian_accuracy(post.data.labels, visits.argmax(-1).numpy())


def _true_groups_workers(post):
    from crowdzoo.models.scdc.bayes import F64, worker_stats

    d = post.data
    same = torch.as_tensor((d.labels[d.i] == d.labels[d.j]).astype(float))
    a, b = worker_stats(same, torch.as_tensor(d.worker), torch.as_tensor(d.same).to(F64), d.n_workers, 1.0)
    prior = post.model.prior(d.n_workers)
    return (prior.alpha + a).numpy(), (prior.beta + b).numpy()


def run(name: str, seeds, n_init: int = 1) -> list[dict]:
    import crowdzoo as cz
    from crowdzoo.cluster_metrics import hungarian_accuracy
    from crowdzoo.comparisons.scdc_crowd import link_set

    rows = []
    for seed in seeds:
        data, K, a, b = link_set(name, seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = cz.fit(cz.BayesSCDC(n_clusters=K), data, seed=seed, n_init=n_init,
                          progress_bar=False)
        secs = time.perf_counter() - t0
        row = {"seed": seed, "accuracy": hungarian_accuracy(data.labels, post.predict().to_numpy()),
               "seconds": secs, "chain accuracy": _chain_accuracy(post, seed)}
        for what, (A, B) in (("fit", (post.alpha_post.numpy(), post.beta_post.numpy())),
                             ("pair beliefs, widened", _louis_workers(post)),
                             ("mean-field counts", _mean_field_workers(post)),
                             ("true groups", _true_groups_workers(post))):
            row[what] = _inside(A, B, a, b)
            row[what + " dA"] = float(np.mean(A[:, 0] / A.sum(1) - a))
            row[what + " dB"] = float(np.mean(B[:, 0] / B.sum(1) - b))
        rows.append(row)
        print(f"seed {seed}: accuracy {row['accuracy']:.3f} (the sampler's {row['chain accuracy']:.3f}), "
              f"coverage {row['fit'].mean():.2f} "
              f"(pair beliefs, widened {row['pair beliefs, widened'].mean():.2f}, mean-field counts "
              f"{row['mean-field counts'].mean():.2f}, true groups "
              f"{row['true groups'].mean():.2f}), {secs:.0f} s", flush=True)
    return rows


def table(name: str, rows: list[dict], n_init: int = 1) -> str:
    head = ("| workers' update | truth in 90 % intervals | E[α] − α | E[β] − β |\n"
            "|---|---:|---:|---:|")
    lines = [head]
    for what in ("fit", "pair beliefs, widened", "mean-field counts", "true groups"):
        inside = np.concatenate([r[what] for r in rows])
        label = {"fit": "the fit's (Gibbs sampler)"}.get(what, what)
        lines.append(f"| {label} | {inside.mean():.3f} of {inside.size} | "
                     f"{np.mean([r[what + ' dA'] for r in rows]):+.3f} | "
                     f"{np.mean([r[what + ' dB'] for r in rows]):+.3f} |")
    acc = [r["accuracy"] for r in rows]
    secs = np.mean([r["seconds"] for r in rows])
    return (f"Set {name!r}, seeds {[r['seed'] for r in rows]}, n_init {n_init}, {secs:.0f} s a fit; "
            f"accuracy {np.mean(acc):.3f} ({min(acc):.3f}–{max(acc):.3f}); the sampler's most visited "
            f"clusters {np.mean([r['chain accuracy'] for r in rows]):.3f}\n\n" + "\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="overlapping")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-init", type=int, default=1, help="initialisations per fit (the comparison's 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(table(args.set, run(args.set, args.seeds, args.n_init), args.n_init))


if __name__ == "__main__":
    main()
