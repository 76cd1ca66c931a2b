"""The posterior of a Bradley–Terry model: draws (or the MAP point) of the utilities f (and of the order
effect δ, the first item's advantage, with ``order_effect=True``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...core.ids import distinct_pairs, positions
from ...core.posterior import Posterior, uniform_weights
from ...errors import DataError
from ...gp import order as order_effect
from .model import logits


@dataclass(kw_only=True)
class BradleyTerryPosterior(Posterior):
    """``f`` (G, N): one utility vector per component (a draw, or the MAP point); ``tau`` (G,): the
    tie threshold of each component, for a fit to data with ties (else None); ``order_means`` (G,): the
    order effect δ of each component, with ``order_effect=True`` (else None)."""

    f: torch.Tensor
    tau: torch.Tensor | None = None
    order_means: torch.Tensor | None = None

    @classmethod
    def from_draws(cls, model, setup, data, sites, method, **kw):
        f = sites["f"].to(torch.float64)
        tau = sites["tau"].to(torch.float64).reshape(-1) if "tau" in sites else None
        if "order" in sites:
            kw["order_means"] = sites["order"].to(torch.float64).reshape(-1)
        return cls(model=model, setup=setup, data=data, method=method, weights=uniform_weights(f.shape[0]),
                   f=f, tau=tau, **kw)

    @property
    def tie_link(self) -> str:
        return self.setup.link

    @property
    def choice_link(self) -> str:
        return self.setup.link

    def set_moments(self, items, users=None):
        """Each component's utilities of the set members (G, R, k_max), and variance 0."""
        if users is not None:
            raise DataError("users: this model has one utility per item (no personal utilities)", arg="users")
        f = self.f[:, items]
        return f, torch.zeros_like(f)

    def pair_moments(self, a, b, order: bool = True):
        """Each component's f_a − f_b (G, P) for item ids a, b (+ δ with the order effect, unless
        ``order=False``), and its variance 0 (a point per draw)."""
        ia = positions("a", a, self.data.item_ids, hint=False)
        ib = positions("b", b, self.data.item_ids, hint=False)
        distinct_pairs(ia, ib, a)
        z = self.f[:, ia] - self.f[:, ib]
        return order_effect.predictive(z, torch.zeros_like(z), self.order_means, None, order)

    def predict_proba(self, a, b, order: bool = True) -> np.ndarray:
        """P(a ≻ b) per pair (item ids), averaged over the components; for a fit with ties,
        P(a ≻ b | not a tie) (:meth:`~crowdzoo.core.posterior.Posterior.decided_proba`). ``order``: with
        the order effect, a listed first (g(f_a − f_b + δ)); False: a neutral venue, without δ."""
        if self.tau is not None:
            return self.decided_proba(a, b, order=order)
        z, _ = self.pair_moments(a, b, order)
        p = torch.sigmoid(logits(self.setup, z))
        return (self.weights[:, None] * p).sum(0).numpy()

    def label_link(self, users=None):
        """P(a ≻ b | z) = σ(logit(z)) of the model's link, for active learning."""
        return lambda z, rows: torch.sigmoid(logits(self.setup, z))

    def utilities(self):
        """Posterior mean and variance of each item's utility (Series by item id)."""
        w = self.weights[:, None]
        mean = (w * self.f).sum(0)
        var = (w * (self.f - mean) ** 2).sum(0)
        index = pd.Index(self.data.item_ids, name="item")
        return (pd.Series(mean.numpy(), index=index, name="mean"),
                pd.Series(var.numpy(), index=index, name="variance"))

    def sample(self, n: int = 500, seed: int = 0) -> dict:
        """{"f": (n, N)} (and "tau" (n,) for a fit with ties, "order" (n,) with the order effect): the draws
        themselves when n is their number, else components by weight."""
        G = self.weights.shape[0]
        g = torch.Generator().manual_seed(seed)
        comp = (torch.arange(n) if G == n
                else torch.multinomial(self.weights, n, replacement=True, generator=g))
        out = {"f": self.f[comp]}
        if self.tau is not None:
            out["tau"] = self.tau[comp]
        if self.order_means is not None:
            out["order"] = self.order_means[comp]
        return out

    def utility_draws(self, n: int = 2000, seed: int = 0, user=None) -> torch.Tensor:
        """(n, N) draws of the items' utilities f (one user: ``user`` must be None)."""
        if user is not None:
            raise DataError("user: this model has one utility per item (no personal utilities)")
        return self.sample(n, seed=seed)["f"]

    def to_arviz(self, n_draws: int = 500, seed: int = 0):
        from .arviz import to_arviz

        return to_arviz(self, n_draws=n_draws, seed=seed)
