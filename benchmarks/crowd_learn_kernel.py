"""When does learning crowdGPPL's kernel help? (docs/crowdgppl.md, "Learning the kernel")

crowdGPPL shares one item kernel between the consensus t and all C components v_c. On the speed
target's simulated crowd (50 items, 20 users with 2-D features, 3 true components, 1000 training and
250 held-out labels, seed 0) this fits the exact-likelihood natgrad route with the length-scales fixed
at the median heuristic, learned, and learned under a LogNormal prior centred on the median heuristic,
with C = 3 (the truth's) and C = 20 (the default), exact (every item inducing) and M = 25, and prints
a markdown table: iterations, final bound, held-out accuracy and CEE, the learned item and user
length-scales.

Run: ``.venv/bin/python benchmarks/crowd_learn_kernel.py`` (about 2 minutes on one thread).
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pyro.distributions as dist
import torch

import crowdzoo as cz
from crowdzoo.metrics import cross_entropy


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    data, _ = cz.simulate_crowd(n_items=50, n_users=20, n_pairs=1250, n_components=3, seed=0)
    train, test = cz.split_pairs(data, 0.2, seed=0)
    ids, users = test.item_ids, test.user_ids[test.users]
    ell_mh = cz.CrowdGPPL().setup(train).items.kernel.lengthscale
    prior = dist.LogNormal(math.log(float(ell_mh.mean())), 0.5)
    print(f"median heuristic: items {np.round(ell_mh.tolist(), 2)}; prior LogNormal(log "
          f"{float(ell_mh.mean()):.2f}, 0.5) on items and users\n")
    print("| C | M | length-scales | seconds | iterations | bound | held-out acc | held-out CEE | item ℓ "
          "| user ℓ |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---|---|")
    for C in (3, 20):
        for M in (None, 25):
            for label, learn, pr in (("median heuristic", False, None), ("learned", True, None),
                                     ("learned, prior", True, prior)):
                model = cz.CrowdGPPL(n_components=C, n_inducing=M, lengthscale_prior=pr,
                                     user_lengthscale_prior=pr)
                t0 = time.perf_counter()
                post = cz.fit(model, train, method="natgrad", likelihood="exact", learn_kernel=learn,
                              progress_bar=False)
                sec = time.perf_counter() - t0
                p = post.predict_proba(ids[test.a], ids[test.b], users=users)
                acc = float(((p > 0.5) == (test.y == 1)).mean())
                ell = np.round(post.settings.get("learned_lengthscale", ell_mh.tolist()), 1).tolist()
                ell_u = np.round(post.settings.get("learned_user_lengthscale", []), 1).tolist() or "—"
                print(f"| {C} | {M or 'all'} | {label} | {sec:.1f} | {post.settings['iterations']} | "
                      f"{post.trace['bound'][-1]:.0f} | {acc:.3f} | {cross_entropy(test.y, p):.3f} | {ell} | "
                      f"{ell_u} |", flush=True)


if __name__ == "__main__":
    main()
