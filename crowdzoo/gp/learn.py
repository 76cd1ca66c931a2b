"""The kernel's learnable hyper-parameters as one flat vector θ, for routes that learn the kernel.

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
from .linalg import DTYPE, solve_lower
from .priors import check_positive_prior


def check_learnable(model, features, what: str = "learn_kernel") -> None:
    """Refuse to learn the kernel of a model whose length-scales it does not own."""
    from .kernels import Kernel

    kern = model.kernel
    named = isinstance(kern, str) or (isinstance(kern, Kernel) and kern.lengthscale is None)
    if not named or np.asarray(features).shape[1] == 0:
        raise DataError(f"{what}: needs a named kernel ('se', 'matern32') whose length-scales the model "
                        "sets, on items with features; pass {kernel='se'} or {kernel='matern32'}, or "
                        f"{{{what}=False}}", arg=what, settings=("kernel", what))


def _heuristic_kernel(kern) -> bool:
    """Whether ``kern`` is a named ARD kernel ("se", "matern32", or a Kernel of that name without
    length-scales of its own) whose length-scales the median heuristic would set."""
    from .kernels import Kernel

    if isinstance(kern, Kernel) and kern.lengthscale is None:
        kern = kern.name
    return isinstance(kern, str) and kern in ("se", "matern32")


def learns_by_default(model, features) -> bool:
    """What a route's ``learn_kernel`` left unset (None) means: learn the length-scales where the model
    leaves them to the median heuristic — ``"se"`` or ``"matern32"`` without length-scales of its own,
    ``lengthscale=None`` — on items with features, and wherever the model has a ``lengthscale_prior``
    (whose MAP the route then finds; :func:`check_learnable` refuses a kernel it cannot learn). A
    length-scale the user set, a kernel object with its own length-scales, a callable kernel, and items
    without features keep their kernel fixed."""
    if getattr(model, "lengthscale_prior", None) is not None:
        return True
    features = np.asarray(features)
    return (_heuristic_kernel(model.kernel) and getattr(model, "lengthscale", None) is None
            and features.ndim == 2 and features.shape[1] > 0)


def starts_from_heuristic(model, features, lengthscale: str = "lengthscale") -> bool:
    """Whether ``model``'s ``lengthscale`` field leaves ARD length-scales to the median heuristic: a
    named kernel ("se", "matern32") without length-scales of its own, the field None, not the
    high-dimensional variant (``scaled_lengthscale``), on items with two or more features."""
    kern = model.kernel if lengthscale == "lengthscale" else model.user_gp().kernel
    features = np.asarray(features) if features is not None else np.zeros((0, 0))
    return (_heuristic_kernel(kern) and getattr(model, lengthscale, None) is None
            and not (lengthscale == "lengthscale" and getattr(model, "scaled_lengthscale", False))
            and features.ndim == 2 and features.shape[1] > 1 and features.shape[0] > 1)


def at_learning_start(model, features, user_features=None):
    """``model`` with the length-scales it leaves to the median heuristic set where a route that learns
    them starts (:func:`~crowdzoo.gp.kernels.learning_start`: the heuristic rescaled so the median pair
    of items is at distance 1); the model itself where it sets them (or the paper's
    ``scaled_lengthscale``). ``user_features``: the same for a two-sided model's ``user_lengthscale``."""
    from .kernels import learning_start

    changes = {}
    if starts_from_heuristic(model, features):
        changes["lengthscale"] = learning_start(features)
    if user_features is not None and hasattr(model, "user_lengthscale") \
            and starts_from_heuristic(model, user_features, "user_lengthscale"):
        changes["user_lengthscale"] = learning_start(user_features)
    return dataclasses.replace(model, **changes) if changes else model


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
            raise DataError("learn_inducing: the model is exact (every item is inducing, {n_inducing=None}); "
                            "set {n_inducing=M} to learn M inducing inputs, or {learn_inducing=False}",
                            arg="learn_inducing", settings=("n_inducing", "learn_inducing"))
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


# ---------------------------------------------------------------------- length-scales as random variables
def lengthscale_prior_of(prior, D: int, what: str = "lengthscale_prior"):
    """``prior`` (a positive distribution over one length-scale, iid over the D dimensions, or with
    batch or event shape (D,)) as a distribution with event shape (D,): the prior of ℓ in the Pyro
    model of the svi/nuts routes. A prior without positive support, or of another shape, is refused."""
    import pyro.distributions as dist

    check_positive_prior(prior, what)
    prior = _float64(prior)
    shape = tuple(prior.batch_shape) + tuple(prior.event_shape)
    if tuple(prior.event_shape) == (D,) and tuple(prior.batch_shape) == ():
        return prior
    if tuple(prior.event_shape) != () or shape not in ((), (1,), (D,)):
        raise DataError(f"{what}: expected a distribution over one length-scale (shared by the {D} "
                        f"feature dimensions) or with batch shape ({D},), got batch shape "
                        f"{tuple(prior.batch_shape)} and event shape {tuple(prior.event_shape)}")
    return dist.Independent(prior.expand((D,)), 1)


def _float64(prior):
    """``prior`` with float64 parameters where it is defined by them (the GP algebra is float64), else
    ``prior`` itself."""
    for keys in (list(prior.arg_constraints), [k for k in prior.arg_constraints if k in prior.__dict__]):
        try:
            params = {k: getattr(prior, k) for k in keys}
            if params and all(torch.is_tensor(v) or isinstance(v, (int, float)) for v in params.values()):
                return type(prior)(**{k: torch.as_tensor(v, dtype=DTYPE) for k, v in params.items()})
        except (TypeError, ValueError, AttributeError, NotImplementedError):
            continue
    return prior


def ard_k(name: str, variance: float, x1, x2, ell):
    """The named kernel k(x1, x2) at every ARD ℓ: x1 (n, D), x2 (m, D), ℓ (..., D) → (..., n, m)."""
    from .kernels import KERNELS

    return variance * KERNELS[name][0](x1, x2, ell[..., None, :])


def ard_k_pairs(name: str, variance: float, xa, xb, ell):
    """k(x_a, x_b) row by row at every ℓ: (P, D), (P, D), (..., D) → (..., P)."""
    from .kernels import KERNELS

    return variance * KERNELS[name][1]((((xa - xb) / ell[..., None, :]) ** 2).sum(-1))


def fixed_jitter_chol(K: torch.Tensor, jitter: float) -> torch.Tensor:
    """L (..., M, M) with L Lᵀ = K + jitter·I: a fixed jitter, not the escalating one of
    :func:`~crowdzoo.gp.linalg.cholesky`, so the factor is smooth in the kernel's parameters and has no
    Python branch on tensor values (NUTS traces it); a failure is a NaN potential, a divergence."""
    return torch.linalg.cholesky(K + jitter * torch.eye(K.shape[-1], dtype=K.dtype))


@dataclass
class ARDGP:
    """The sparse-GP algebra of a named ARD kernel as a function of its length-scales ℓ (..., D),
    batched over ℓ's leading dimensions: what the svi/nuts routes need when ℓ is a random variable
    (one ℓ per posterior draw).

    K_mm is factorised with a fixed jitter (``jitter`` × the kernel's variance on the diagonal), not
    the escalating jitter of :func:`~crowdzoo.gp.linalg.cholesky`: the result is smooth in ℓ and has no
    Python branch on tensor values, so NUTS can trace it with TorchScript, and the posterior's
    algebra for a draw is the model's for that draw, to round-off. ``X`` (N, D) the items, ``Z``
    (M, D) the inducing inputs (fixed: those of the median-heuristic setup), ``exact`` when Z = X.
    """

    name: str
    variance: float
    X: torch.Tensor
    Z: torch.Tensor
    exact: bool
    jitter: float
    white: float = 0.0  # each inducing input's independent part (Kernel's ``white``)

    @classmethod
    def of(cls, model, setup, what: str = "lengthscale_prior"):
        """The ARD space of ``model``'s kernel on ``setup``'s items and inducing inputs."""
        from .kernels import Kernel

        check_learnable(model, setup.X, what)
        kern = model.kernel
        name, variance = (kern, 1.0) if isinstance(kern, str) else (kern.name, float(kern.variance))
        Kernel(name)  # the kernel's name is checked here
        return cls(name, variance, setup.X, setup.Z, bool(setup.exact), float(model.jitter),
                   float(getattr(kern, "white", 0.0)))

    @property
    def D(self) -> int:
        return self.X.shape[1]

    def kernel(self, ell):
        """The kernel object at one ℓ (D,)."""
        from .kernels import Kernel

        return Kernel(self.name, ell, self.variance, self.white)

    def k(self, x1, x2, ell):
        """k(x1, x2) at every ℓ: x1 (n, D), x2 (m, D), ℓ (..., D) → (..., n, m)."""
        return ard_k(self.name, self.variance, x1, x2, ell)

    def k_pairs(self, xa, xb, ell):
        """k(x_a, x_b) row by row at every ℓ: (P, D), (P, D), (..., D) → (..., P)."""
        return ard_k_pairs(self.name, self.variance, xa, xb, ell)

    def chol(self, ell):
        """(K_mm, L_mm) at every ℓ: (..., M, M) each; L_mm L_mmᵀ = K_mm + jitter·variance·I."""
        K = self.k(self.Z, self.Z, ell)
        if self.white:
            K = K + self.white * torch.eye(K.shape[-1], dtype=K.dtype)
        return K, fixed_jitter_chol(K, self.jitter * self.variance)

    def sparse_gp(self, ell, cls=None, **extra):
        """The :class:`~crowdzoo.gp.conditional.SparseGP` (or ``cls``, a subclass, with ``extra``
        fields) at one ℓ (D,), differentiable in ℓ."""
        from .conditional import SparseGP
        from .linalg import solve_lower

        K_mm, L_mm = self.chol(ell)
        kern = self.kernel(ell)
        B = solve_lower(L_mm, K_mm if self.exact else self.k(self.Z, self.X, ell))
        return (cls or SparseGP)(kernel=kern, X=self.X, Z=self.Z, K_mm=K_mm, L_mm=L_mm, B=B,
                                 exact=self.exact, jitter=self.jitter, **extra)

    def whitened(self, L, x, ell):
        """B = L_mm⁻¹ K_mx (..., M, n) at every ℓ, for inputs x (n, D) and factors L (..., M, M)."""
        from .linalg import solve_lower

        return solve_lower(L, self.k(self.Z, x, ell))

    # The sparse conditional of Eq. 19 at every ℓ: SparseGP.item_terms / pair_terms / pair_rows batched
    # over ℓ's leading dimensions (each posterior draw its own K_mm), for x = None the items X (where c = 0
    # when exact) or new inputs x (n, D).
    def item_rows(self, ell, x=None, L=None, idx=None):
        """A = K_xm K_mm⁻¹ (..., n, M) and c = k(x, x) − ‖L_mm⁻¹ k_m(x)‖² (..., n) at every ℓ (..., D);
        ``idx``: only those rows of the items (x None); ``L``: :meth:`chol`'s factors at ℓ when at hand."""
        L = self.chol(ell)[1] if L is None else L
        xs = self.X if x is None else x
        K_zx = self.k(self.Z, xs if idx is None else xs[idx], ell)
        if x is None and self.exact and self.white:  # the training inputs' own independent parts
            eye = torch.eye(self.Z.shape[0], dtype=K_zx.dtype)
            K_zx = K_zx + self.white * (eye if idx is None else eye[:, idx])
        B = solve_lower(L, K_zx)  # (..., M, n)
        A = torch.linalg.solve_triangular(L.mT, B, upper=True).mT
        if x is None and self.exact:
            return A, torch.zeros(B.shape[:-2] + B.shape[-1:], dtype=B.dtype)
        return A, (self.variance + self.white - (B * B).sum(-2)).clamp_min(0.0)

    def pair_terms(self, ell, a, b, x=None, L=None):
        """Whitened rows d = L_mm⁻¹ (k_m(x_a) − k_m(x_b)) (..., P, M) and the conditional variance of
        f_a − f_b, c = k(a, a) + k(b, b) − 2 k(a, b) − ‖d‖² (..., P), at every ℓ (..., D)."""
        L = self.chol(ell)[1] if L is None else L
        xs = self.X if x is None else x
        xa, xb = xs[a], xs[b]
        d = (self.whitened(L, xa, ell) - self.whitened(L, xb, ell)).mT
        if x is None and self.exact:
            return d, torch.zeros(d.shape[:-1], dtype=d.dtype)
        k_d = 2.0 * (self.variance + self.white) - 2.0 * self.k_pairs(xa, xb, ell)
        return d, (k_d - (d * d).sum(-1)).clamp_min(0.0)

    def pair_rows(self, ell, a, b, x=None, L=None):
        """Rows A_a − A_b = d L_mm⁻¹ (..., P, M) (f_a − f_b = (A_a − A_b) f_m + noise) and c (..., P) as
        in :meth:`pair_terms`."""
        L = self.chol(ell)[1] if L is None else L
        d, c = self.pair_terms(ell, a, b, x, L)
        return torch.linalg.solve_triangular(L.mT, d.mT, upper=True).mT, c


def log_prior_of_theta(prior, D: int, offset: int = 0, counted: bool = True):
    """θ ↦ log p(ℓ) for the D log length-scales θ[offset:offset + D] under ``prior`` (a positive
    distribution, as :func:`lengthscale_prior_of` takes it), the term that turns natgrad's and EP's
    learned length-scales into type-II MAP estimates; None without a prior. ``counted=False`` (the
    ranks of a distributed fit other than 0, whose gradients are summed) gives 0 with the same graph."""
    if prior is None:
        return None
    p = lengthscale_prior_of(prior, D)

    def log_prior(theta):
        lp = p.log_prob(theta[offset:offset + D].exp())
        return lp if counted else 0.0 * lp

    return log_prior


def varying_sides(space) -> list:
    """(site name, ARD algebra, prior, start ℓ) of each side of a two-sided length-scale space (crowdGPPL's
    and collabGP's: ``items`` / ``users`` algebras, None where that side's ℓ stays fixed, their
    ``prior`` / ``user_prior`` and the ``base`` setup whose kernels give the starts)."""
    out = []
    if space.items is not None:
        out.append(("lengthscale", space.items, space.prior, space.base.items.kernel.lengthscale))
    if space.users is not None:
        out.append(("user_lengthscale", space.users, space.user_prior, space.base.users.kernel.lengthscale))
    return out


def learned_sides(params: dict, setup):
    """svi's learned item and user length-scales (``params`` "lengthscale", "user_lengthscale"; None
    where absent) and the settings that report them beside their starts, the median heuristic or the
    model's (``setup.items`` / ``setup.users`` kernels)."""
    ell, ell_u = (None if params.get(k) is None else params[k].detach().to(DTYPE)
                  for k in ("lengthscale", "user_lengthscale"))
    learned = {}
    if ell is not None:
        learned.update(learned_lengthscale=ell.tolist(),
                       start_lengthscale=setup.items.kernel.lengthscale.tolist())
    if ell_u is not None:
        learned.update(learned_user_lengthscale=ell_u.tolist(),
                       start_user_lengthscale=setup.users.kernel.lengthscale.tolist())
    return ell, ell_u, learned


def varying_space(model, setup, learn_kernel: bool):
    """The length-scale space a two-sided model's svi/nuts program runs on (crowdGPPL, collabGP): its
    ``lengthscale_space(setup)`` (ℓ as ``pyro.param`` s) with ``learn_kernel``, its
    ``lengthscale_space(setup, prior=True)`` (ℓ sampled) with ``lengthscale_prior`` or
    ``user_lengthscale_prior``, None with neither (the kernels fixed)."""
    priors = model.lengthscale_prior is not None or model.user_lengthscale_prior is not None
    if learn_kernel and priors:
        raise DataError("learn_kernel: with lengthscale_prior (or user_lengthscale_prior) the "
                        "length-scales are already inferred (a posterior under the prior); pass one "
                        "of the two", arg="learn_kernel")
    if learn_kernel:
        return model.lengthscale_space(setup)
    return model.lengthscale_space(setup, prior=True) if priors else None
