"""crowd-kit's pairwise aggregators as peers, and the check of their two defects (run by
.venv-peers/bin/python; see run_peers.py). No item features. The labels go in as crowd-kit wants
them: a DataFrame with columns worker, left (= a), right (= b), label (the winner); worker is the
label's user in the crowd problem and one worker otherwise.

* ``bradley_terry`` — ``BradleyTerry(n_iter=100)``: Hunter's MM for P(a ≻ b) = p_a / (p_a + p_b);
  ``scores_`` are the p (summing to 1), so the held-out probability is p_a / (p_a + p_b) =
  σ(ln p_a − ln p_b) (½ where both are 0); item scores ln p.
* ``noisy_bradley_terry`` — ``NoisyBradleyTerry()`` (its defaults: L-BFGS-B, 100 iterations, tol
  10⁻⁵): per worker a skill γ and a bias q, P(left wins) = σ(γ) σ(s_l − s_r) + (1 − σ(γ)) σ(q);
  ``scores_`` are σ(s), so the consensus probability scored is σ(s_a − s_b) with s = logit(score).
* ``check_defects`` — evidence for the two defects of crowd-kit 1.4.2 (no fit is scored):
  (a) ``BradleyTerry`` stops after two MM steps whatever ``n_iter`` is: its convergence test
  compares ``p_new`` with ``p_old``, which is the same array (``p_old = p_new``, then
  ``p_new[:] = w`` in place), so the second step's change is 0. Shown by the source lines, the
  number of times the loop body runs (a line tracer) for several ``n_iter``, and the training
  log-likelihood against the same MM loop with ``p_old = p_new.copy()``.
  (b) ``NoisyBradleyTerry._compute_gradient`` disagrees with central finite differences of its own
  ``_compute_log_likelihood``; shown per parameter block, with what L-BFGS-B reports when ``fit``
  runs it (captured by wrapping the ``minimize`` its module calls) and the loss the same
  L-BFGS-B reaches with a finite-difference gradient instead.
"""
from __future__ import annotations

import inspect
import os
import sys

import numpy as np
import pandas as pd
from child import main
from scipy.special import expit, logit


def frame(prob):
    a, b, y = prob["a"], prob["b"], prob["y"]
    worker = prob["users"] if "users" in prob else np.zeros_like(a)
    return pd.DataFrame({"worker": worker, "left": a, "right": b, "label": np.where(y == 1, a, b)})


def _scores(series, n, fill):
    s = series.reindex(range(n))
    return s.fillna(fill).to_numpy(dtype=float), int(s.isna().sum())


def bradley_terry(prob, config):
    from crowdkit.aggregation import BradleyTerry

    df = frame(prob)

    def fit():
        model = BradleyTerry(n_iter=config.get("n_iter", 100)).fit(df)
        return lambda: predict(model)

    def predict(model):
        p, unseen = _scores(model.scores_, prob["X"].shape[0], 0.0)
        pa, pb = p[prob["at"]], p[prob["bt"]]
        tot = pa + pb
        q = np.divide(pa, tot, out=np.full_like(tot, 0.5), where=tot > 0)
        with np.errstate(divide="ignore"):
            s = np.log(p)
        return q, s, {"items without a score": unseen, "items with p = 0": int((p == 0).sum())}

    return fit


def noisy_bradley_terry(prob, config):
    from crowdkit.aggregation import NoisyBradleyTerry

    df = frame(prob)

    def fit():
        model = NoisyBradleyTerry(**config).fit(df)
        return lambda: predict(model)

    def predict(model):
        s, unseen = _scores(pd.Series(logit(model.scores_.to_numpy()), index=model.scores_.index),
                            prob["X"].shape[0], 0.0)
        return expit(s[prob["at"]] - s[prob["bt"]]), s, {"items without a score": unseen}

    return fit


def _where(obj, needle):
    """(file relative to site-packages, line number, the line) of the first line of obj containing needle."""
    lines, start = inspect.getsourcelines(obj)
    path = inspect.getsourcefile(obj)
    rel = path[path.index("crowdkit"):] if "crowdkit" in path else os.path.basename(path)
    for i, line in enumerate(lines):
        if needle in line:
            return rel, start + i, line.strip()
    return rel, None, None


def _bt_loglik(M, p):
    """Σ w_ij ln(p_i / (p_i + p_j)) over the win matrix M (−inf where an item with wins has p = 0)."""
    i, j = np.nonzero(M)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sum(M[i, j] * (np.log(p[i]) - np.log(p[i] + p[j]))))


def _mm_fixed(M, n_iter, tol):
    """crowd-kit's MM loop with one change: p_old is a copy, so the test sees the change."""
    T = M.T + M
    active = T > 0
    w = M.sum(axis=1)
    Z = np.zeros_like(M, dtype=float)
    p = np.ones(M.shape[0])
    p_new = p.copy() / p.sum()
    p_old = None
    for it in range(1, n_iter + 1):
        P = np.broadcast_to(p, M.shape)
        Z[active] = T[active] / (P[active] + P.T[active])
        p_new[:] = w
        p_new /= Z.sum(axis=0)
        p_new /= p_new.sum()
        p[:] = p_new
        if p_old is not None and np.abs(p_new - p_old).sum() < tol:
            return p_new, it
        p_old = p_new.copy()
    return p_new, n_iter


def _check_bt(df):
    from crowdkit.aggregation import BradleyTerry

    file, body_line, body = _where(BradleyTerry.fit, "np.broadcast_to(p")
    ev = {"source": [_where(BradleyTerry.fit, "p_new[:] = w"), _where(BradleyTerry.fit, "p_old = p_new"),
                     _where(BradleyTerry.fit, "loss = np.abs(p_new - p_old)")]}
    code = BradleyTerry.fit.__code__
    runs, scores = {}, {}
    for n_iter in (1, 2, 3, 100, 10_000):
        hits = [0]

        def tracer(frame, event, arg, hits=hits):
            if frame.f_code is not code:
                return None
            if event == "line" and frame.f_lineno == body_line:
                hits[0] += 1
            return tracer

        sys.settrace(tracer)
        try:
            m = BradleyTerry(n_iter=n_iter, tol=1e-5).fit(df)
        finally:
            sys.settrace(None)
        runs[n_iter] = hits[0]
        scores[n_iter] = m.scores_.to_numpy()
    ev["loop body runs by n_iter"] = runs
    ev["max |score(n_iter) − score(2)|"] = {k: float(np.abs(v - scores[2]).max()) for k, v in scores.items()}
    ev["loss_history_ after fit"] = list(m.loss_history_)
    M, _ = BradleyTerry._build_win_matrix(df)
    fixed, iters = _mm_fixed(M, 100_000, 1e-5)
    ev["training log-likelihood"] = {"as shipped (n_iter = 10000)": _bt_loglik(M, scores[10_000]),
                                     "MM with p_old = p_new.copy(), tol 1e-5": _bt_loglik(M, fixed)}
    ev["MM iterations with the copy"] = iters
    return ev


def _check_nbt(df):
    from crowdkit.aggregation import NoisyBradleyTerry
    from crowdkit.aggregation.pairwise import noisy_bt
    from crowdkit.aggregation.utils import factorize
    from scipy.optimize import minimize

    labels, np_data = factorize(df[["left", "right", "label"]].values)
    workers, np_workers = factorize(df.worker.values)
    np_data = np_data + 1
    L, W = labels.size, workers.size
    args = (np_data, np_workers, L, W, 1e-5)
    f, g = NoisyBradleyTerry._compute_log_likelihood, NoisyBradleyTerry._compute_gradient
    blocks = {"x[0] (anchor)": slice(0, 1), "scores s": slice(1, 1 + L), "biases q": slice(1 + L, 1 + L + W),
              "skills γ": slice(1 + L + W, 1 + L + 2 * W)}
    np.random.seed(0)
    x0 = np.random.rand(1 + L + 2 * W)  # fit's own starting point (random_state = 0)
    h = 1e-6
    fd = np.array([(f(x0 + h * e, *args) - f(x0 - h * e, *args)) / (2 * h) for e in np.eye(x0.size)])
    an = g(x0, *args)
    grad = NoisyBradleyTerry._compute_gradient
    ev = {"parameters": {"items": L, "workers": W, "labels": len(df)},
          "at fit's starting point, per block": {
              k: {"max |analytic|": float(np.abs(an[s]).max()),
                  "max |finite diff.|": float(np.abs(fd[s]).max()),
                  "max |analytic − finite diff.|": float(np.abs(an[s] - fd[s]).max()),
                  "‖analytic − fd‖ / ‖fd‖": float(np.linalg.norm(an[s] - fd[s]) / np.linalg.norm(fd[s]))}
              for k, s in blocks.items()},
          "source": [_where(grad, "q = x[1 + labels + worker_idx]"),
                     _where(grad, "gamma = x[1 + labels + workers + worker_idx]"),
                     _where(grad, "gradient[labels + worker_idx] ="),
                     _where(grad, "gradient[labels + workers + worker_idx] =")]}
    captured = []
    real = noisy_bt.minimize

    def recording(*a, **k):
        captured.append(real(*a, **k))
        return captured[-1]

    noisy_bt.minimize = recording
    try:
        NoisyBradleyTerry().fit(df)
    finally:
        noisy_bt.minimize = real
    r = captured[0]
    fdr = minimize(f, x0, args=args, method="L-BFGS-B", options={"maxiter": 100, "ftol": np.float32(1e-5)})
    ev["fit as shipped (L-BFGS-B, its gradient, maxiter 100)"] = {
        "loss": float(r.fun), "iterations": int(r.nit), "message": str(r.message)}
    ev["same call, finite-difference gradient (maxiter 100)"] = {
        "loss": float(fdr.fun), "iterations": int(fdr.nit), "message": str(fdr.message)}
    ev["loss at the starting point"] = float(f(x0, *args))
    return ev


def check_defects(prob, config):
    import crowdkit

    df = frame(prob)
    ev = {"crowd-kit": getattr(crowdkit, "__version__", "?"), "problem": prob["name"],
          "BradleyTerry": _check_bt(df), "NoisyBradleyTerry": _check_nbt(df)}
    return lambda: lambda: (np.zeros(0), np.zeros(0), ev)


if __name__ == "__main__":
    main({"bradley_terry": bradley_terry, "noisy_bradley_terry": noisy_bradley_terry,
          "check_defects": check_defects})
