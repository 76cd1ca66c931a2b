"""DPM communities: users fall into an unbounded number of communities, each with its own GP utility
over item features (Abbasnejad, Sanner, Bonilla & Poupart, IJCAI 2013; the supplement's symbols in
brackets).

Generative story:

    λ            ~ Gamma(a_λ, b_λ)             optional (``concentration_prior``); else λ = ``concentration``
    π            ~ GEM(λ)                      stick-breaking weights of the communities        [π, λ]
    c_u | π      ~ Cat(π)                      community of user u                               [c_u]
    f^c          ~ GP(0, K_x / s)              one utility function per community                [f^c, K_x]
    y_p | u      ~ Bernoulli(Φ((f^{c_u}_a − f^{c_u}_b) / α))   each label p = (a, b) of user u   [α]

Integrating π out gives the Chinese restaurant process used by the sampler: user u joins an
existing community c with probability n_{−u,c} / (U − 1 + λ) and a new one with λ / (U − 1 + λ)
(supplement Eq. 20–21, with the count N read as the number of users U, not of communities).

Convention beside GPPL's: GPPL writes P(a ≻ b) = Φ(f_a − f_b) (Simpson & Gurevych's Eq. 2 with
σ² = ½) and carries the function scale in s; here P(a ≻ b | u) = Φ((f_a − f_b) / α) with the
supplement's α (``probit_scale``, 1 by default, so that α = 1 is GPPL's link exactly).

The item GP is GPPL's (``GPPL(...).setup_features(item_features)``: kernel objects, the median
heuristic, optional inducing items with the sparse conditional of Eq. 19). The Gibbs + EP route
fixes the inverse scale s at its prior mean (the paper conditions on the kernel hyper-parameters).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyro.distributions as dist
import torch

from ...errors import DataError
from ..gppl.model import GPPL, GPPLSetup


@dataclass
class DPMCommunities:
    """Dirichlet-process mixture of GP preference models (module docstring).

    Parameters
    ----------
    concentration : λ > 0 of the Dirichlet process (larger: more communities).
    concentration_prior : None (λ fixed) or a Pyro ``Gamma`` prior on λ, resampled by Escobar & West
        (1995) in the Gibbs route.
    n_inducing, kernel, lengthscale, scaled_lengthscale, shape_s0, rate_s0, s_prior, jitter : the
        item GP, as in :class:`~crowdzoo.models.gppl.model.GPPL`; s is fixed at the prior mean.
    probit_scale : α > 0 of P(a ≻ b | u) = Φ((f_a − f_b) / α).
    """

    concentration: float = 1.0
    concentration_prior: object = None
    n_inducing: int | None = None
    kernel: object = "matern32"
    lengthscale: object = None
    scaled_lengthscale: bool = False
    shape_s0: float = 2.0
    rate_s0: float = 2.0
    s_prior: object = None
    probit_scale: float = 1.0
    jitter: float = 1e-6

    def __post_init__(self):
        lam = float(self.concentration)
        if not lam > 0 or lam == float("inf"):
            raise DataError(f"concentration: the DP concentration λ must be a positive finite number, got "
                            f"{self.concentration!r}")
        if self.concentration_prior is not None and not isinstance(self.concentration_prior, dist.Gamma):
            raise DataError("concentration_prior: Escobar–West resampling of λ needs a Gamma prior "
                            f"(pyro.distributions.Gamma), got {type(self.concentration_prior).__name__}")
        if not float(self.probit_scale) > 0:
            raise DataError(f"probit_scale: α must be positive, got {self.probit_scale!r}")

    def gppl(self) -> GPPL:
        """The GPPL whose item GP each community uses."""
        return GPPL(n_inducing=self.n_inducing, kernel=self.kernel, lengthscale=self.lengthscale,
                    scaled_lengthscale=self.scaled_lengthscale, shape_s0=self.shape_s0,
                    rate_s0=self.rate_s0, s_prior=self.s_prior, jitter=self.jitter)

    def setup(self, data, seed: int = 0) -> DPMSetup:
        """The item GP (GPPL's), s fixed at its prior mean, α, and the EP direction of every label."""
        gp = self.gppl().setup_features(data.item_features, seed=seed)
        s = float(gp.s_prior.mean)
        if not s > 0 or s == float("inf"):
            raise DataError(f"s_prior: the Gibbs route fixes s at the prior mean, which is {s}")
        a = torch.as_tensor(data.a, dtype=torch.long)
        b = torch.as_tensor(data.b, dtype=torch.long)
        alpha = float(self.probit_scale)
        return DPMSetup(gp=gp, s=s, alpha=alpha, H=directions(gp, s, alpha, a, b))


def directions(gp: GPPLSetup, s: float, alpha: float, a, b, X=None) -> torch.Tensor:
    """Rows h_p (P, M) with P(y_p = 1 | f_m) = Φ(h_pᵀ f_m): (A_a − A_b) / √(α² + c_p / s)."""
    rows, c = gp.pair_rows(a, b, X)
    return rows / torch.sqrt(alpha ** 2 + c / s)[:, None]


@dataclass
class DPMSetup:
    """What is fixed before inference: the item GP (GPPL's setup), s, α, and H (P, M): each training
    label's direction in the inducing utilities (see :func:`directions`)."""

    gp: GPPLSetup
    s: float
    alpha: float
    H: torch.Tensor

    @property
    def M(self) -> int:
        return self.gp.M

    @property
    def K(self) -> torch.Tensor:
        """Prior covariance K_mm / s of a community's inducing utilities."""
        return self.gp.K_mm / self.s


__all__ = ["DPMCommunities", "DPMSetup", "directions"]
