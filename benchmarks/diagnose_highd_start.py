"""Where GPPL's learned length-scales start on high-dimensional features, and whether they can move.

On UKPConvArg (``crowdzoo.comparisons.ukpconvarg``: 1,052 arguments, 64-D TF-IDF + SVD features, the
crowd labels of every fold but the held-out one) pooled GPPL with its defaults is fitted by natgrad
with the length-scales held at ``c`` · ℓ_MH (the per-dimension median heuristic, Eq. 26) for several
global factors ``c``: ``learn_kernel=True`` with ``kernel_lr=0``, so that the route computes the
length-scales' gradient at every step (the bound's expected log-likelihood with q held, as its Adam
step would) without taking it. For each ``c`` the script prints the median distance between two items
under those length-scales (r = ‖(x − x')/ℓ‖), the Matérn 3/2 kernel there, the norm of the last
step's gradient in log ℓ (q converged), and the held-out log loss and accuracy of the personal labels
(a coin scores .693). ``c`` = 1 is where learning starts with the median heuristic; ``median-r`` is
the factor that puts the median distance at 1.

    python benchmarks/diagnose_highd_start.py --seed 1
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch


def folds_data(seed: int):
    """(training PairwiseData, test frame of the personal held-out labels) of fold ``seed``."""
    from crowdzoo.comparisons import ukpconvarg as uk

    u, F = uk._load(str(uk.DATA_DIR), 64)
    fold = u.folds[seed % len(u.folds)]
    train = u.crowd[u.crowd.fold != fold]
    test = u.crowd[(u.crowd.fold == fold) & u.crowd.worker.isin(set(train.worker))]
    return uk.training_data(u, F, fold), test


def pair_distances(X: np.ndarray, ell: np.ndarray, n: int = 20000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, X.shape[0], n), rng.integers(0, X.shape[0], n)
    keep = i != j
    return np.sqrt((((X[i[keep]] - X[j[keep]]) / ell) ** 2).sum(-1))


def matern32(r):
    return (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--factors", type=float, nargs="*", default=[1, 2, 4, 8, 16, 32])
    args = ap.parse_args()

    import crowdzoo as cz
    from crowdzoo import metrics
    from crowdzoo.gp.kernels import median_heuristic
    from crowdzoo.models.gppl import natgrad as ng

    torch.set_num_threads(1)
    data, test = folds_data(args.seed)
    X = np.asarray(data.item_features)
    ell_mh = median_heuristic(X).numpy()
    r_mh = pair_distances(X, ell_mh)
    c_med = float(np.median(r_mh))
    print(f"UKPConvArg fold seed {args.seed}: N = {X.shape[0]}, D = {X.shape[1]}, {len(data.y)} labels; "
          f"median ℓ_MH = {np.median(ell_mh):.3g}; √D = {math.sqrt(X.shape[1]):.2f}; "
          f"median-r factor = {c_med:.2f}")
    grads = []
    real_ascend = ng.ascend

    def recording(state, objective, lr, reduce=None):
        theta = state.theta.detach().requires_grad_()
        (g,) = torch.autograd.grad(objective(theta), theta)
        grads.append(float(g.norm()))
        return real_ascend(state, objective, lr, reduce)

    ng.ascend = recording
    print("\n| factor c | median r | k(median r) | ‖∂/∂log ℓ‖ first step | ‖∂/∂log ℓ‖ last step | "
          "held-out log loss | acc | s |")
    print("|---|---|---|---|---|---|---|---|")
    for c in sorted(set(args.factors) | {round(c_med, 2)}):
        grads.clear()
        t0 = time.perf_counter()
        post = cz.fit(cz.GPPL(lengthscale=torch.as_tensor(c * ell_mh)), data, method="natgrad",
                      seed=args.seed, learn_kernel=True, kernel_lr=0.0, progress_bar=False)
        p = post.predict_proba(test.a.to_numpy(), test.b.to_numpy())
        y = test.y.to_numpy()
        r = float(np.median(r_mh / c))
        print(f"| {c:g} | {r:.2f} | {matern32(r):.2g} | {grads[0]:.3g} | {grads[-1]:.3g} | "
              f"{metrics.cross_entropy(y, p):.3f} | {metrics.accuracy(y, p):.3f} | "
              f"{float(post.s.mean()):.3g} |  ({time.perf_counter() - t0:.0f} s, {len(grads)} steps)",
              flush=True)
    ng.ascend = real_ascend


if __name__ == "__main__":
    main()
