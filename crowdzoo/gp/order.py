"""The order effect: a learned advantage δ of the item a label lists first (column ``a``: the home side
of a match, the item shown first in a survey), the same for every label:

    δ     ~ N(μ_δ, σ_δ²)                  ``order_prior``, default N(0, 1) on the link's scale  (site "order")
    z_p   = f(a_p) − f(b_p) + δ           the latent difference of label p, whose a_p is listed first

(the within-pair order effect of Davidson & Beaver 1977, there for Bradley–Terry). δ = 0 is a neutral
venue; ``predict_proba(..., order=False)`` predicts
there. δ is identified by labels that name the order independently of the outcome: a winner-first
file (every label a ≻ b, ``from_frame(..., y=None)``) makes the order the outcome, and ``ties="half"``
writes the second half of each tie in the other order, so both are refused (:func:`check_data`).

Natural-gradient SVI keeps q(δ) = N(m, S), a one-dimensional :class:`~crowdzoo.gp.natural.Gaussian`
block beside the utilities' (mean field). Its row in z is 1 for every label, so its step is that of any
factor of the natural-gradient routes (Eq. 17–18 of Simpson & Gurevych 2020; Eq. 32–37 for
crowdGPPL's) with the prior precision 1/σ_δ² and the prior's natural mean μ_δ/σ_δ²:

    Λ ← (1 − ρ) Λ + ρ (1/σ_δ² + π Σ_p λ_p),      η ← (1 − ρ) η + ρ (μ_δ/σ_δ² + π Σ_p ν_p)

with each label's weights from the likelihood (times its weight w_p): ``"exact"`` λ = −2 g_v,
ν = g_μ − 2 g_v m (g_μ, g_v the derivatives of its expected log-likelihood in the mean and variance of
z_p) and ``"linearised"`` (Eq. 9–11) λ = G²/Q, ν = G/Q (y − Φ(ẑ) + G m). KL(q(δ) ‖ p(δ)) enters the
bound (Eq. 30–31), and q(δ)'s mean and variance add to every label's marginal of z_p.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..errors import DataError, _show
from . import natural
from .linalg import DTYPE
from .natural import Gaussian

#: what a refused ``order_prior`` should be
EXAMPLE = "pyro.distributions.Normal(0.0, 1.0)"


def default_prior():
    """N(0, 1): a first item's advantage of up to about ±2 on the probit (or logit) scale a priori,
    weakly informative beside home advantages of 0.1–0.5 and position effects of similar size."""
    import pyro.distributions as dist

    return dist.Normal(torch.zeros((), dtype=DTYPE), torch.ones((), dtype=DTYPE))


def check_settings(order_effect, prior, field: str = "order_prior") -> None:
    """Refuse an ``order_effect`` that is not True or False, and an ``order_prior`` that is not a Normal
    over one number with a positive finite scale, or one given without the order effect (it would be
    ignored)."""
    if not isinstance(order_effect, bool):
        raise DataError(f"order_effect: expected True or False, got {_show(order_effect)}",
                        arg="order_effect")
    if prior is None:
        return
    from torch.distributions import Normal

    if not isinstance(prior, Normal):
        raise DataError(f"{field}: the order effect δ is a real number with a Normal prior; expected e.g. "
                        f"{EXAMPLE}, got {type(prior).__name__}", arg=field)
    loc, scale = torch.as_tensor(prior.loc), torch.as_tensor(prior.scale)
    if loc.numel() != 1 or scale.numel() != 1:
        raise DataError(f"{field}: δ is one number; expected a Normal over one value (e.g. {EXAMPLE}), got "
                        f"batch shape {tuple(prior.batch_shape)}", arg=field)
    if not (math.isfinite(float(loc)) and float(scale) > 0 and math.isfinite(float(scale))):
        raise DataError(f"{field}: expected a finite mean and a positive finite sd, got "
                        f"Normal({float(loc):g}, {float(scale):g})", arg=field)
    if not order_effect:
        raise DataError(f"{field}: the prior of the order effect, which the model has only with "
                        "order_effect=True; pass order_effect=True or drop order_prior", arg=field)


def prior_of(model):
    """The prior of δ (a Normal over one value, float64) of a model with ``order_effect=True``, else None."""
    if not getattr(model, "order_effect", False):
        return None
    import pyro.distributions as dist

    prior = getattr(model, "order_prior", None) or default_prior()
    return dist.Normal(torch.as_tensor(prior.loc, dtype=DTYPE).reshape(()),
                       torch.as_tensor(prior.scale, dtype=DTYPE).reshape(()))


def check_data(data) -> None:
    """Refuse data in which the order of a pair says nothing apart from its outcome (module docstring):
    choices among k items (no item is listed first), labels whose decided outcomes are all a ≻ b (or
    all b ≻ a), as a winner-first layout writes them, and ties written as two halves in opposite
    orders (``ties="half"``)."""
    if hasattr(data, "sets"):
        raise DataError("order_effect: choices among k items list no item first; fit pairs (PairwiseData) "
                        "with the order they were shown in, or drop order_effect", arg="order_effect")
    y = np.asarray(data.y)
    if getattr(data, "tie_halves", None) is not None:
        r = int(np.flatnonzero(data.tie_halves)[0])
        raise DataError(f"order_effect: row {r}: half of a tie (ties='half'), whose other half is written in "
                        "the other order, so that an order effect would read each tie as a win of the first "
                        "item; build the data with ties='model' (a third outcome) or ties='drop'",
                        arg="order_effect", row=r, problem="a tie written as two halves in opposite orders")
    decided = y[y != 0.5]
    held = getattr(data, "label_range", None)
    if decided.size and held is None and (np.all(decided == 1.0) or np.all(decided == 0.0)):
        side = "a ≻ b (y = 1)" if decided[0] == 1.0 else "b ≻ a (y = 0)"
        raise DataError(f"order_effect: every decided label is {side}, as a winner-first layout writes "
                        "them (from_frame(..., y=None), --winner-first): the order of each pair is then its "
                        "outcome and a first item's advantage is not identified; give each pair in the order "
                        "it was played or shown (home and away, shown first and second) with its label y, or "
                        "drop order_effect", arg="order_effect",
                        problem="the order of every pair is its outcome")


def sample(prior):
    """δ (site "order") under ``prior``, or None for a model without the order effect."""
    if prior is None:
        return None
    import pyro

    return pyro.sample("order", prior)


def moments_of(prior) -> tuple[float, float]:
    """(μ_δ, σ_δ²) of the prior."""
    return float(prior.loc), float(prior.scale) ** 2


class Order(NamedTuple):
    """q(δ) = N(m, S) as a one-dimensional diagonal Gaussian block (shapes (1,))."""

    q: Gaussian

    @property
    def m(self) -> torch.Tensor:
        return self.q.m[0]

    @property
    def S(self) -> torch.Tensor:
        return self.q.S[0]


def init(prior: tuple[float, float]) -> Order:
    """q(δ) at its prior (μ_δ, σ_δ²)."""
    mu0, var0 = prior
    Lam = torch.full((1,), 1.0 / var0, dtype=DTYPE)
    return Order(natural.gaussian(Lam, Lam * mu0))


def moments(o: Order | None):
    """Mean and variance of δ under q (zeros without an order effect)."""
    if o is None:
        return 0.0, 0.0
    return o.m, o.S


def exact_weights(g_mu, g_v, o: Order):
    """(λ, ν) of each label for δ from the exact likelihood's derivatives g_μ, g_v in the mean and
    variance of z_p (already times the labels' weights)."""
    h = -2.0 * g_v
    return h, g_mu + h * o.m


def linearised_weights(mu, Q, y, o: Order):
    """(λ, ν) of each label for δ from the likelihood linearised about ẑ = ``mu`` (Eq. 9–11), G = φ(ẑ),
    noise Q (already divided by the labels' weights)."""
    G = torch.exp(-0.5 * mu * mu) / math.sqrt(2 * math.pi)
    return G * G / Q, G / Q * (y - torch.special.ndtr(mu) + G * o.m)


def step(o: Order, lam_sum, nu_sum, rho: float, pi: float, prior: tuple[float, float]) -> Order:
    """The natural-gradient step of size ρ of q(δ) from the labels' sums Σ λ_p and Σ ν_p (scaled by π),
    towards the prior's precision and natural mean plus the likelihood's (module docstring)."""
    mu0, var0 = prior
    prec = torch.full((1,), 1.0 / var0, dtype=DTYPE)
    lam = (pi * torch.as_tensor(lam_sum, dtype=DTYPE)).reshape(1)
    nu = (pi * torch.as_tensor(nu_sum, dtype=DTYPE)).reshape(1) + mu0 / var0
    return Order(natural.step(o.q, prec, lam, nu, float(rho)))


def kl(o: Order | None, prior: tuple[float, float] | None):
    """KL(N(m, S) ‖ N(μ_δ, σ_δ²)): q(δ)'s term of the bound (0 without an order effect)."""
    if o is None:
        return 0.0
    mu0, var0 = prior
    return 0.5 * ((o.S + (o.m - mu0) ** 2) / var0 - 1.0 - torch.log(o.S / var0))


def predictive(mu, var, means, variances, order: bool = True):
    """(mean, variance) (G, P) of z per posterior component with δ added: its means (G,) and variances
    (G,; None for draws) where the posterior has an order effect and ``order`` is True (the pair as
    given, a first); unchanged otherwise (a neutral venue)."""
    if means is None or not order:
        return mu, var
    mu = mu + means[:, None]
    return mu, var if variances is None else var + variances[:, None]


def summary(weights, means, variances) -> dict:
    """δ's posterior mean, sd and P(δ > 0), mixed over the components (weights (G,), means (G,),
    variances (G,) or None for draws)."""
    w = torch.as_tensor(weights, dtype=DTYPE)
    m = torch.as_tensor(means, dtype=DTYPE).reshape(-1)
    v = torch.zeros_like(m) if variances is None else torch.as_tensor(variances, dtype=DTYPE).reshape(-1)
    mean = (w * m).sum()
    var = (w * (v + m * m)).sum() - mean * mean
    sd = v.sqrt()
    above = torch.where(sd > 0, torch.special.ndtr(m / sd.clamp_min(1e-300)), (m > 0).to(DTYPE))
    return {"mean": float(mean), "sd": float(var.clamp_min(0.0).sqrt()),
            "p_positive": float((w * above).sum())}
