"""crowdBT–GP: crowdBT consensus scores regressed on item features by a sparse GP — the baseline
of Simpson & Gurevych (2020), Table 3 (after Chen et al. 2013 and Simpson & Gurevych 2018).

Stage 1, crowdBT (Chen et al. 2013): item scores s_i and worker reliabilities η_k,

    s_i ~ N(0, σ_s²),   η_k ~ Beta(α_η, β_η),
    P(worker k says a ≻ b) = η_k σ(s_a − s_b) + (1 − η_k) σ(s_b − s_a)        (σ logistic)

Stage 2: the scores ŝ of the training items are treated as noisy observations of a GP over item
features, ŝ = g(x) + ε, g ~ GP(0, k), ε ~ N(0, σ_n²), sparse with M inducing items (DTC); the
consensus P(a ≻ b) for any items uses the GP's predictive g_a − g_b inside the logistic link.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CrowdBTGP:
    """Parameters: ``score_sd`` σ_s of the score prior; ``reliability_prior`` (α_η, β_η) of the
    Beta prior on each worker's reliability (default (4, 1): most workers mostly right);
    ``n_inducing`` M of the GP; ``kernel``, ``lengthscale``, ``scaled_lengthscale`` as for
    :class:`~crowdzoo.models.GPPL` (median heuristic of Eq. 26 by default)."""

    score_sd: float = 2.0
    reliability_prior: tuple[float, float] = (4.0, 1.0)
    n_inducing: int | None = 200
    kernel: str = "matern32"
    lengthscale: float | None = None
    scaled_lengthscale: bool = False
    name = "crowdbt-gp"


def crowdbt_label_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y) -> torch.Tensor:
    """log P(y_p | s, η) of each label (the last dimension; s may carry leading draw dimensions);
    η_k = σ(logit_eta_k), the mixture computed by logsumexp so that it stays finite as η → 0 or 1."""
    d = (s[..., a] - s[..., b]) * (2.0 * y - 1.0)  # the said winner's score minus the loser's
    ls = torch.nn.functional.logsigmoid
    right = ls(logit_eta[k]) + ls(d)
    wrong = ls(-logit_eta[k]) + ls(-d)
    return torch.logaddexp(right, wrong)


def crowdbt_log_lik(s: torch.Tensor, logit_eta: torch.Tensor, a, b, k, y) -> torch.Tensor:
    """Σ_p log P(y_p | s, η) of the crowdBT likelihood, vectorised over labels."""
    return crowdbt_label_log_lik(s, logit_eta, a, b, k, y).sum(-1)


def crowdbt_log_prior(s, logit_eta, model: CrowdBTGP) -> torch.Tensor:
    """log N(s; 0, σ_s²) + log Beta(η; α_η, β_η) + log |dη/dlogit| (the density of logit η)."""
    a, b = model.reliability_prior
    ls = torch.nn.functional.logsigmoid
    return (-0.5 * (s / model.score_sd) ** 2).sum() + (a * ls(logit_eta) + b * ls(-logit_eta)).sum()


__all__ = ["CrowdBTGP", "crowdbt_label_log_lik", "crowdbt_log_lik", "crowdbt_log_prior"]
