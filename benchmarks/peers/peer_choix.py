"""choix as a peer (run by .venv-peers/bin/python; see run_peers.py). No item features: each method
sees the training pairs only, as (winner, loser) tuples over items 0..N−1.

* ``ep_pairwise`` — EP on Thurstone's model, P(a ≻ b) = Φ(s_a − s_b) (choix's probit sites use
  z = m / √(1 + v), the same scale as crowdzoo's GPPL), isotropic prior N(0, I / α) with α = 1
  (choix has no default; crowdzoo's prior mean of s is 1 too). Held-out probability under the
  posterior N(μ, Σ): Φ((μ_a − μ_b) / √(1 + Σ_aa + Σ_bb − 2 Σ_ab)); scores μ.
* ``opt_pairwise`` — Bradley–Terry (logistic) maximum likelihood by scipy (choix's defaults:
  Newton-CG, α = 10⁻⁶, or ``alpha`` from the config: MAP under N(0, I / α)); P(a ≻ b) =
  σ(s_a − s_b). The converged Bradley–Terry beside crowd-kit's.
* ``ilsr_pairwise`` — the same maximum-likelihood Bradley–Terry by iterative Luce spectral ranking
  (choix's defaults); P(a ≻ b) = σ(s_a − s_b).
"""
from __future__ import annotations

import numpy as np
from child import main
from scipy.special import expit, ndtr


def _pairs(prob):
    a, b, y = prob["a"], prob["b"], prob["y"]
    win = y == 1
    return [(int(w), int(v)) for w, v in zip(np.where(win, a, b), np.where(win, b, a))]


def ep_pairwise(prob, config):
    import choix

    n, pairs, alpha = prob["X"].shape[0], _pairs(prob), config.get("alpha", 1.0)

    def fit():
        mean, cov = choix.ep_pairwise(n, pairs, alpha, model="probit")
        at, bt = prob["at"], prob["bt"]
        var = cov[at, at] + cov[bt, bt] - 2 * cov[at, bt]
        return lambda: (ndtr((mean[at] - mean[bt]) / np.sqrt(1 + var)), mean, {"alpha": alpha})

    return fit


def bradley_terry(name):
    """choix's ``name`` (opt_pairwise or ilsr_pairwise) with its defaults, or ``alpha`` from config."""

    def method(prob, config):
        import choix

        n, pairs = prob["X"].shape[0], _pairs(prob)

        def fit():
            s = getattr(choix, name)(n, pairs, **config)
            return lambda: (expit(s[prob["at"]] - s[prob["bt"]]), s, dict(config))

        return fit

    return method


if __name__ == "__main__":
    main({"ep_pairwise": ep_pairwise, "opt_pairwise": bradley_terry("opt_pairwise"),
          "ilsr_pairwise": bradley_terry("ilsr_pairwise")})
