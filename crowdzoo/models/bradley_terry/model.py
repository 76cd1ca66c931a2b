"""Bradley–Terry (logit link; Bradley & Terry 1952) or Thurstone case V (probit link; Thurstone 1927).

Generative story, for N items and P labelled pairs:

    f_i ~ N(0, σ²)                         i = 1..N, independent utilities (no features)
    y_p ~ Bernoulli(g(f_a − f_b))          g = logistic σ (Bradley–Terry) or Φ (Thurstone)

Ties (labels y = ½ of ``PairwiseData.from_frame(..., ties="model")``) are a third outcome with a
threshold τ on the link's scale (:mod:`crowdzoo.gp.ordinal`; Glenn & David 1960 for the probit, Rao &
Kupper 1967 for the logit):

    τ   ~ tie_prior                         default LogNormal(log ½, 1)
    y_p ∈ {b ≻ a, tie, a ≻ b} with P = (g(−Δ − τ), g(τ − Δ) − g(−τ − Δ), g(Δ − τ)),  Δ = f_a − f_b

An order effect (``order_effect=True``; :mod:`crowdzoo.gp.order`): the item a label lists first (column
``a``: the home side, the item shown first) gains an advantage δ on the link's scale, shared by every label
(Davidson & Beaver 1977):

    δ   ~ order_prior                       default N(0, 1)   (site "order")
    y_p ~ Bernoulli(g(f_a − f_b + δ))        (with ties, Δ = f_a − f_b + δ above)

Choices (a :class:`~crowdzoo.data.ChoiceData`: a set of k items per row, the best and optionally the
worst) take the same utilities through the first stage of Plackett–Luce (:mod:`crowdzoo.gp.choice`):

    best_r ~ Categorical(exp(f_i) / Σ_{j ∈ set_r} exp(f_j))            logit: the multinomial logit
    worst_r | best_r ~ Categorical(exp(−f_i) / Σ_{j ∈ set_r − best_r} exp(−f_j))   (MaxDiff)

and, with the probit link, Thurstone's multinomial probit (one-dimensional quadrature); a set of two
items is the pairwise model exactly.

Weighted labels (``PairwiseData.weights``: counts per pair, ``ties="half"``'s halves): a label of weight
w_p enters as w_p copies of it, its log-likelihood times w_p (``poutine.scale`` on the observed site
inside the pairs plate, so within a mini-batch too: :func:`~crowdzoo.data.tensors.label_scale`).

With the probit link this is GPPL with the identity kernel and a fixed scale s = 1/σ². It is the
zoo's worked example of adding a model (docs/guides/add-a-model.md): this file, a posterior, an
ArviZ converter, a tiny example and one entry in ``crowdzoo/zoo.py``; its routes (map, svi, nuts)
are the generic engines.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch

from ...data.tensors import choice_tensors, label_scale, label_tensors, weight_tensor, weighted
from ...errors import DataError
from ...gp import order
from ...gp.choice import observe_choices
from ...gp.ordinal import default_tie_prior, outcome_codes, outcome_distribution
from ...gp.priors import check_priors
from ...gp.probit import probit_logits

LINKS = ("logit", "probit")


@dataclass
class BradleyTerry:
    """``link``: "logit" (Bradley–Terry) or "probit" (Thurstone); ``prior_sd``: σ of each utility;
    ``tie_prior``: the prior of the tie threshold τ > 0 on the link's scale, used when the data have
    ties (None: :func:`~crowdzoo.gp.ordinal.default_tie_prior`, LogNormal(log ½, 1)); ``order_effect``:
    a learned advantage δ of the item each label lists first (the home side, the item shown first; module
    docstring), reported by ``posterior.order_effect()``; ``order_prior``: δ's Normal prior on the link's
    scale (None: N(0, 1))."""

    link: str = "logit"
    prior_sd: float = 2.0
    tie_prior: object = None
    order_effect: bool = False
    order_prior: object = None

    def __post_init__(self):
        if self.link not in LINKS:
            raise DataError(f"link: expected one of {list(LINKS)}, got {self.link!r}")
        check_priors(self, {"prior_sd": "a positive number (the prior sd σ of each utility)"},
                     positive_priors={"tie_prior": "tie thresholds"})
        order.check_settings(self.order_effect, self.order_prior)

    def setup(self, data, seed: int = 0) -> BTSetup:
        """Nothing to precompute but the number of items and the link (and τ's prior, for data with ties;
        δ's, with the order effect)."""
        if self.order_effect:
            order.check_data(data)
        tie_prior = (self.tie_prior or default_tie_prior()) if data.has_ties else None
        return BTSetup(n_items=data.n_items, link=self.link, prior_sd=float(self.prior_sd),
                       tie_prior=tie_prior, order_prior=order.prior_of(self))

    def program(self, setup: BTSetup, data, subsample_size=None):
        """The Pyro model and its arguments (what the generic map, svi and nuts engines run)."""
        if hasattr(data, "sets"):  # a ChoiceData
            return bradley_terry_choice_model, (setup, *choice_tensors(data), subsample_size)
        a, b, y = label_tensors(data)
        return weighted(bradley_terry_model, weight_tensor(data)), (setup, a, b, y, subsample_size)


@dataclass
class BTSetup:
    n_items: int
    link: str
    prior_sd: float
    tie_prior: object = None  # τ's prior when the labels have ties (a third outcome), else None
    order_prior: object = None  # δ's prior with the order effect, else None


def logits(setup: BTSetup, z: torch.Tensor) -> torch.Tensor:
    """Logits of P(a ≻ b) for utility differences z."""
    return z if setup.link == "logit" else probit_logits(z)


def bradley_terry_model(setup: BTSetup, a, b, y, subsample_size=None, weights=None):
    """The Pyro model (module docstring). ``a``, ``b``, ``y``: (P,) tensors; ``weights`` (P,) (None:
    every label 1): each label's log-likelihood times its weight, as that many copies of it."""
    loc = torch.zeros(setup.n_items, dtype=torch.float64)
    f = pyro.sample("f", dist.Normal(loc, setup.prior_sd).to_event(1))
    tau = None if setup.tie_prior is None else pyro.sample("tau", setup.tie_prior)
    delta = order.sample(setup.order_prior)
    with pyro.plate("pairs", a.shape[0], subsample_size=subsample_size) as idx:
        z = f[a[idx]] - f[b[idx]]
        if delta is not None:  # the first item's advantage
            z = z + delta
        with label_scale(weights, idx):
            if tau is None:
                pyro.sample("y", dist.Bernoulli(logits=logits(setup, z)), obs=None if y is None else y[idx])
            else:  # three outcomes, k = 2y
                pyro.sample("y", outcome_distribution(z, tau, setup.link),
                            obs=None if y is None else outcome_codes(y[idx]))


def bradley_terry_choice_model(setup: BTSetup, items, mask, best, worst, subsample_size=None):
    """The Pyro model of choices (module docstring). ``items`` (R, k_max) item positions, ``mask`` the
    slots that hold one, ``best`` (R,) and ``worst`` (R,; −1 none) slots, or None."""
    loc = torch.zeros(setup.n_items, dtype=torch.float64)
    f = pyro.sample("f", dist.Normal(loc, setup.prior_sd).to_event(1))
    with pyro.plate("choices", items.shape[0], subsample_size=subsample_size) as idx:
        observe_choices(f[items[idx]], mask[idx], None if best is None else best[idx],
                        None if worst is None else worst[idx], setup.link)
