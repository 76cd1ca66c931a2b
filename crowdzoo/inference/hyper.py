"""Gradient steps on hyper-parameters between natural-gradient steps on q (Hensman, Fusi & Lawrence
2013; Salimbeni, Eleftheriadis & Hensman 2018): the hybrid every natgrad route uses to learn them.

The natural-gradient loop moves the variational parameters; after each of its steps, the
hyper-parameters θ (log length-scales, optionally inducing inputs) take one Adam step along the
gradient of the same mini-batch bound (Eq. 30 of Simpson & Gurevych 2020) with q held fixed. The
Adam state lives in the loop's state as a NamedTuple, so checkpoints keep it and a resumed fit ends
where an uninterrupted one does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ..errors import DataError


class Adam(NamedTuple):
    """θ and Adam's moments (Kingma & Ba 2015, Alg. 1) after ``t`` steps, and ``gain`` = Σ gradᵀΔθ over
    the steps: what they added to the objective, to first order."""

    theta: torch.Tensor
    m: torch.Tensor
    v: torch.Tensor
    t: int
    gain: float = 0.0


def adam_init(theta: torch.Tensor) -> Adam:
    theta = theta.detach().clone()
    return Adam(theta, torch.zeros_like(theta), torch.zeros_like(theta), 0)


def adam_ascent(state: Adam, grad: torch.Tensor, lr: float, betas=(0.9, 0.99), eps: float = 1e-8) -> Adam:
    """One Adam step *up* ``grad`` (the bound is maximised)."""
    b1, b2 = betas
    t = state.t + 1
    m = b1 * state.m + (1 - b1) * grad
    v = b2 * state.v + (1 - b2) * grad * grad
    step = lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
    return Adam(state.theta + step, m, v, t, state.gain + float(grad @ step))


def ascend(state: Adam, objective: Callable[[torch.Tensor], torch.Tensor], lr: float,
           reduce: Callable | None = None) -> Adam:
    """One Adam step up ``objective(θ)`` (a scalar tensor, differentiable in θ). ``reduce`` sums the
    gradient over the ranks of a distributed fit, whose objective is a sum over labels that each rank
    holds a share of (:mod:`crowdzoo.inference.distributed`); every rank then takes the same step."""
    theta = state.theta.detach().requires_grad_()
    (grad,) = torch.autograd.grad(objective(theta), theta, allow_unused=True)
    grad = torch.zeros_like(theta) if grad is None else grad.detach()
    if reduce is not None:
        grad = reduce(grad)
    if not torch.isfinite(grad).all():
        return state  # a non-finite gradient (e.g. a kernel at a degenerate length-scale): skip the step
    return adam_ascent(state, grad, lr)


def gain(before: Adam | None, after: Adam | None) -> float:
    """What θ's steps between two states added to the objective, to first order."""
    return 0.0 if before is None or after is None else after.gain - before.gain


def state_gain(learning: bool):
    """The natgrad loop's ``gain`` for states that carry θ's optimiser as ``hyper``: None when no
    hyper-parameter learns (the stop rule then keeps no earlier state alive)."""
    return (lambda s0, s1: gain(s0.hyper, s1.hyper)) if learning else None


LEARN_FULL_BATCH = 50_000
#: the most mini-batch steps of the default batch size in one pass over the labels
PASS_STEPS = 200


def default_batch_size(batch_size: int | None, learning: bool, P: int) -> int:
    """P_i unless given: the paper's 1000 labels, or P / :data:`PASS_STEPS` where that is more (above
    2·10⁵ labels), since the natgrad loop stops no earlier than one full pass and a step's cost at
    scale is mostly its O(M³) per component, not its labels; while hyper-parameters learn, every label up to
    :data:`LEARN_FULL_BATCH` (then 1000 again). On mini-batches the length-scales' Adam steps follow a
    noisy gradient while q lags them (ρ ≥ 0.1), and the pair settles short of the bound's optimum: on
    GPPL's N = 1000, 2·10⁴-pair problem of docs/benchmarks.md ("Peers") 1000-label batches stopped
    unconverged with relevant length-scales of 1.3–1.5 / 1.1 / 1.8 and τ .951–.961 over kernel_lr, batch
    sizes up to 5000 and max_iter, where the full batch converged in 145 iterations at 1.9 / 1.3 / 3.6
    (BoTorch's: 1.8 / 1.3 / 3.3) and τ .970."""
    if batch_size is not None:
        if int(batch_size) != batch_size or batch_size < 1:
            raise DataError(f"batch_size: expected a positive integer (labels per iteration), got "
                            f"{batch_size!r}", arg="batch_size")
        return int(batch_size)
    return P if learning and P <= LEARN_FULL_BATCH else max(1000, -(-P // PASS_STEPS))


def rho_floor(rho_min: float | None, learning: bool, full_batch: bool, full: float = 0.5) -> float:
    """The floor under the natural-gradient step size ρ_i: ``rho_min`` if given; else ``full`` on the
    full batch and 0.1 on mini-batches while hyper-parameters learn (their gradient with q held fixed
    is the bound's only when q keeps up with them), 0 otherwise (the paper's ρ_i)."""
    if rho_min is not None:
        if not 0.0 <= rho_min <= 1.0:
            raise DataError(f"rho_min: expected a value in [0, 1], got {rho_min!r}", arg="rho_min")
        return float(rho_min)
    return 0.0 if not learning else (full if full_batch else 0.1)
