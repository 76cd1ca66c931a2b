"""evalica as a peer on labels with ties (run by .venv-peers/bin/python; see run_ties.py). No item
features: each method sees the training labels only, as (x, y, winner) with winner X, Y or Draw.

Held-out probabilities of the three outcomes (x ≻ y, tie, y ≻ x), row by row:

* ``newman`` — Newman's (2023) algorithm for the Bradley–Terry model with ties of Davidson (1970):
  P(x ≻ y) = π_x / D, P(tie) = 2v √(π_x π_y) / D, P(y ≻ x) = π_y / D with D = π_x + π_y + 2v √(π_x π_y);
  evalica estimates the scores π and the tie parameter v (its ``NewmanResult.v``) together
  (:func:`davidson`; the factor 2 is the one evalica's update of v solves for, which
  tests/benchmarks/test_peers_evalica.py checks at its estimate).
* ``bradley_terry`` — Bradley–Terry by evalica's MM iterations, a tie counted as half a win each way
  (``tie_weight`` 0.5, its default), P(x ≻ y | decided) = π_x / (π_x + π_y);
* ``elo`` — Elo ratings with draws as half a point (``tie_weight`` 0.5), P(x ≻ y | decided) = the
  expected score 1 / (1 + base^((R_y − R_x) / scale)).

Bradley–Terry and Elo have no tie probability of their own; they are scored with the training share t
of ties as their tie rate, ((1 − t) p, t, (1 − t)(1 − p)) (:func:`with_tie_rate`), as
crowdzoo's "half" fits are in docs/ties.md. Item scores (for Kendall τ): log π, log π, R.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: evalica's outcome codes (``evalica.Winner``): Draw = 0, X = 1, Y = 2; a label y ∈ {1, ½, 0}
#: (1: x preferred) is X, Draw, Y
WINNER_OF_Y = {1.0: 1, 0.5: 0, 0.0: 2}


def davidson(pi_x, pi_y, v) -> np.ndarray:
    """(n, 3): P(x ≻ y), P(tie), P(y ≻ x) under Davidson's model with scores π and tie parameter v
    (module docstring)."""
    pi_x, pi_y = np.asarray(pi_x, dtype=float), np.asarray(pi_y, dtype=float)
    tie = 2.0 * v * np.sqrt(pi_x * pi_y)
    d = pi_x + pi_y + tie
    return np.column_stack([pi_x / d, tie / d, pi_y / d])


def with_tie_rate(p, t: float) -> np.ndarray:
    """(n, 3): a two-outcome P(x ≻ y | decided) ``p`` with the constant tie rate ``t``."""
    p = np.asarray(p, dtype=float)
    return np.column_stack([(1.0 - t) * p, np.full_like(p, t), (1.0 - t) * (1.0 - p)])


def bradley_terry_p(pi_x, pi_y) -> np.ndarray:
    pi_x, pi_y = np.asarray(pi_x, dtype=float), np.asarray(pi_y, dtype=float)
    return pi_x / (pi_x + pi_y)


def elo_p(r_x, r_y, base: float = 10.0, scale: float = 400.0) -> np.ndarray:
    """Elo's expected score of x against y."""
    return 1.0 / (1.0 + base ** ((np.asarray(r_y, dtype=float) - np.asarray(r_x, dtype=float)) / scale))


def winners(y):
    """evalica's ``Winner`` of each label y ∈ {1, ½, 0}."""
    import evalica

    return [evalica.Winner(WINNER_OF_Y[float(v)]) for v in y]


def _tie_share(prob) -> float:
    return float(np.mean(prob["y"] == 0.5))


def newman(prob, config):
    import evalica

    n = prob["X"].shape[0]
    xs, ys, w = list(prob["a"]), list(prob["b"]), winners(prob["y"])

    def fit():
        res = evalica.newman(xs, ys, w, index=pd.Index(range(n)), **config)
        pi = res.scores.reindex(range(n)).to_numpy(dtype=float)  # evalica's scores come sorted by value
        probs = davidson(pi[prob["at"]], pi[prob["bt"]], res.v)
        notes = {"v": float(res.v), "iterations": int(res.iterations), "limit": int(res.limit)}
        return lambda: (probs, np.log(pi), notes)

    return fit


def bradley_terry(prob, config):
    import evalica

    n, t = prob["X"].shape[0], _tie_share(prob)
    xs, ys, w = list(prob["a"]), list(prob["b"]), winners(prob["y"])

    def fit():
        res = evalica.bradley_terry(xs, ys, w, index=pd.Index(range(n)), **config)
        pi = res.scores.reindex(range(n)).to_numpy(dtype=float)
        probs = with_tie_rate(bradley_terry_p(pi[prob["at"]], pi[prob["bt"]]), t)
        notes = {"iterations": int(res.iterations), "limit": int(res.limit), "tie rate": t}
        return lambda: (probs, np.log(pi), notes)

    return fit


def elo(prob, config):
    import evalica

    n, t = prob["X"].shape[0], _tie_share(prob)
    xs, ys, w = list(prob["a"]), list(prob["b"]), winners(prob["y"])

    def fit():
        res = evalica.elo(xs, ys, w, index=pd.Index(range(n)), **config)
        r = res.scores.reindex(range(n)).to_numpy(dtype=float)
        probs = with_tie_rate(elo_p(r[prob["at"]], r[prob["bt"]], res.base, res.scale), t)
        return lambda: (probs, r, {"k": float(res.k), "tie rate": t})

    return fit


if __name__ == "__main__":
    from child import main

    main({"newman": newman, "bradley_terry": bradley_terry, "elo": elo})
