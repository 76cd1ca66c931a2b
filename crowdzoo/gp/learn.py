"""The kernel's learnable hyper-parameters as one flat vector θ (issue 18).

θ = (log ℓ_1 … log ℓ_D) for ARD length-scales, followed by the inducing inputs Z (M × D, row by row)
when those are learned. :class:`KernelSpace` maps θ to a model's setup — the sparse-GP algebra of
:class:`~crowdzoo.gp.conditional.SparseGP` — differentiably, so that any route can take gradients of
its objective in θ. The median heuristic (Eq. 26 of Simpson & Gurevych 2020) is the starting point.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import DataError
from .linalg import DTYPE


def check_learnable(model, features, what: str = "learn_kernel") -> None:
    """Refuse to learn the kernel of a model whose length-scales it does not own."""
    from .kernels import Kernel

    kern = model.kernel
    named = isinstance(kern, str) or (isinstance(kern, Kernel) and kern.lengthscale is None)
    if not named or np.asarray(features).shape[1] == 0:
        raise DataError(f"{what}: needs a named kernel ('se', 'matern32') whose length-scales the model "
                        f"sets, on items with features; pass kernel='se' or kernel='matern32', or "
                        f"{what}=False")


@dataclass
class KernelSpace:
    """θ ↦ setup for ``model`` (a dataclass with ``lengthscale`` and ``setup_features``) on ``X``."""

    model: object
    X: torch.Tensor
    Z: torch.Tensor | None  # fixed inducing inputs (None: exact, Z = X)
    seed: int
    learn_inducing: bool
    theta0: torch.Tensor

    @classmethod
    def of(cls, model, features, setup, seed: int, learn_kernel: bool, learn_inducing: bool):
        """The space of ``model``'s kernel started at ``setup`` (None when nothing is learned)."""
        if not (learn_kernel or learn_inducing):
            return None
        what = "learn_kernel" if learn_kernel else "learn_inducing"
        check_learnable(model, features, what)
        if learn_inducing and setup.exact:
            raise DataError("learn_inducing: the model is exact (every item is inducing, n_inducing=None); "
                            "set n_inducing=M to learn M inducing inputs, or learn_inducing=False")
        X = torch.as_tensor(np.asarray(features), dtype=DTYPE)
        parts = [torch.log(setup.kernel.lengthscale).reshape(-1)]
        if learn_inducing:
            parts.append(setup.Z.reshape(-1))
        Z = None if setup.exact else setup.Z
        return cls(model, X, Z, seed, learn_inducing, torch.cat(parts).detach())

    def split(self, theta):
        """(ℓ, Z) of θ."""
        D = self.X.shape[1]
        ell = theta[:D].exp()
        Z = theta[D:].reshape(-1, D) if self.learn_inducing else self.Z
        return ell, Z

    def build(self, theta):
        """The model's setup at θ (differentiable in θ)."""
        ell, Z = self.split(theta)
        model = dataclasses.replace(self.model, lengthscale=ell)
        return model.setup_features(self.X, seed=self.seed, inducing=Z)

    def learned(self, theta, setup):
        """(the model with the learned length-scales, what to put in the posterior's settings)."""
        ell, _ = self.split(theta.detach())
        out = {"learned_lengthscale": ell.tolist(), "start_lengthscale": self.split(self.theta0)[0].tolist()}
        if self.learn_inducing:
            out["learned_inducing_moved"] = float((setup.Z - self.split(self.theta0)[1]).norm(dim=-1).mean())
        return dataclasses.replace(self.model, lengthscale=ell), out
