"""SCDC's route: stochastic variational inference on the amortised ELBO of
:mod:`crowdzoo.models.scdc.model`, networks and point-estimated globals trained together by Adam.

Each step takes a uniform mini-batch of ``batch_size`` items and, independently, ``annotation_batch``
annotations drawn uniformly with replacement (default: the annotations spread evenly over an epoch,
as the paper's code does: 57,330 // 468 = 122 per step on MNIST), appends the annotations'
endpoints to the item rows (they feed only the relational term) and ascends the ELBO estimate,
divided by N. By default the sum over each item's cluster is exact (:func:`~.model.elbo`); with
``guide=`` a Pyro guide function ``guide(batch, nets, g)`` of the sites ``z`` and ``x`` replaces the
amortised guide, and the loss is Pyro's ``Trace_ELBO`` on :func:`~.model.scdc_model` (score-function
gradients for z, so noisier).
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pyro
import torch
from pyro.infer import Trace_ELBO

from ...core.seeds import isolated
from ...errors import ConvergenceWarning, DataError, NumericalError
from ...inference.common import check_finite, progress, summary
from .model import DTYPE, Batch, Globals, elbo, init_globals, scdc_model
from .posterior import SCDCPosterior, encode_items

ADVICE = "a smaller lr (e.g. 3e-4), a larger batch_size, or likelihood='gaussian' for unscaled data"


class LinkTensors(NamedTuple):
    """A LinkData's arrays as tensors: observations (float32) and the annotations."""

    O: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    w: torch.Tensor
    L: torch.Tensor


def link_tensors(data) -> LinkTensors:
    long = torch.long
    return LinkTensors(torch.as_tensor(data.O, dtype=DTYPE), torch.as_tensor(data.i, dtype=long),
                       torch.as_tensor(data.j, dtype=long), torch.as_tensor(data.worker, dtype=long),
                       torch.as_tensor(data.same, dtype=DTYPE))


def batches(t: LinkTensors, batch_size, annotation_batch, generator, device):
    """One epoch of :class:`~.model.Batch` es (a generator): a permutation of the items in chunks of
    ``batch_size``, each with ``annotation_batch`` annotations drawn with replacement."""
    N, A = t.O.shape[0], t.i.shape[0]
    perm = torch.randperm(N, generator=generator)
    for lo in range(0, N, batch_size):
        items = perm[lo:lo + batch_size]
        ann = (torch.randint(A, (annotation_batch,), generator=generator) if A and annotation_batch
               else torch.zeros(0, dtype=torch.long))
        rows = torch.cat([items, t.i[ann], t.j[ann]])
        n, b = items.shape[0], ann.shape[0]
        yield Batch(t.O[rows].to(device), n, torch.arange(n, n + b, device=device),
                    torch.arange(n + b, n + 2 * b, device=device), t.w[ann].to(device),
                    t.L[ann].to(device), N / n, A / b if b else 0.0)


def fit_svi(model, data, seed: int = 0, n_epochs: int = 200, batch_size: int = 128,
            annotation_batch: int | None = None, lr: float = 1e-3, lr_globals: float = 1e-2, guide=None,
            num_particles: int = 1, device: str = "cpu", progress_bar: bool | None = None,
            setup=None) -> SCDCPosterior:
    """Fit SCDC by SVI (module docstring) for ``n_epochs`` passes over the items.

    ``batch_size`` items per step; ``annotation_batch`` annotations per step (default
    ceil(A / steps per epoch)); Adam with learning rate ``lr`` for the networks (the paper's 1e-3) and
    ``lr_globals`` for π, μ, σ, α, β (which the paper's 93,600 MNIST steps move at 1e-3, but a small
    data set's few hundred steps would not); ``guide`` a Pyro guide function
    replacing the amortised one (``num_particles`` samples per step); ``device`` "cpu" or "cuda".
    Warns (ConvergenceWarning) when the last tenth of the epochs still improved the ELBO by more than
    1 %."""
    for name, v in (("n_epochs", n_epochs), ("batch_size", batch_size)):
        if int(v) != v or v < 1:
            raise DataError(f"{name}: expected an integer ≥ 1, got {v!r}")
    if device != "cpu" and not torch.cuda.is_available():
        raise DataError(f"device: {device!r} requested but torch sees no GPU; use device='cpu'")
    N, A, W = data.n_items, data.n_annotations, max(data.n_workers, 1)
    steps = math.ceil(N / batch_size)
    annotation_batch = annotation_batch if annotation_batch is not None else math.ceil(A / steps)
    with isolated(seed):
        pyro.clear_param_store()
        setup = setup or model.setup(data, seed=seed)
        nets = model.networks(setup, seed=seed).to(device)
        gen = torch.Generator().manual_seed(int(seed))
        g0 = init_globals(model.n_clusters, model.latent_dim, W, model.worker_init, gen)
        g = Globals(*(t.to(device).requires_grad_() for t in g0))
        t = link_tensors(data)
        params = list(nets.parameters())
        loss_fn = _exact_loss if guide is None else _trace_loss(guide, num_particles)
        if guide is not None:  # a user guide's params appear in Pyro's store on its first call
            first = next(batches(t, batch_size, annotation_batch, torch.Generator().manual_seed(0), device))
            loss_fn(first, nets, g, gen)
            ours = {id(p) for p in params}
            params += [p for _, p in pyro.get_param_store().named_parameters() if id(p) not in ours]
        opt = torch.optim.Adam([{"params": params, "lr": lr}, {"params": list(g), "lr": lr_globals}])
        trace = np.empty(n_epochs)
        with progress(n_epochs, "scdc svi", progress_bar) as bar:
            for epoch in range(n_epochs):
                total = 0.0
                for batch in batches(t, batch_size, annotation_batch, gen, device):
                    opt.zero_grad()
                    loss = loss_fn(batch, nets, g, gen) / N
                    check_finite(float(loss.detach()), "the ELBO", epoch, ADVICE)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * batch.n_uniform
                trace[epoch] = -total / N  # the ELBO / N, averaged over the epoch's steps
                bar.set_postfix(elbo=f"{trace[epoch]:.4g}")
                bar.update()
        summary(bar, f"scdc svi: {n_epochs} epochs, final ELBO {trace[-1]:.6g}")
        _warn_unconverged(trace)
        with torch.no_grad():
            probs, x_mean = encode_items(nets, t.O.to(device))
    nets = nets.cpu()
    return SCDCPosterior(
        model=model, setup=setup, data=data, method="svi", trace={"elbo": trace},
        settings=dict(seed=seed, n_epochs=n_epochs, batch_size=batch_size, annotation_batch=annotation_batch,
                      lr=lr, lr_globals=lr_globals, device=device,
                      guide="amortised" if guide is None else getattr(guide, "__name__", "custom")),
        cluster_probs=probs.cpu().double(), x_mean=x_mean.cpu().double(),
        pi=torch.softmax(g.pi_logits.detach().cpu(), -1).double(), mu=g.mu.detach().cpu().double(),
        cov=torch.diag_embed(torch.exp(2 * g.log_sigma.detach().cpu())).double(),
        alpha=torch.sigmoid(g.alpha_logit.detach().cpu()).double(),
        beta=torch.sigmoid(g.beta_logit.detach().cpu()).double(),
        net_state={k: v.detach().cpu().clone() for k, v in nets.state_dict().items()})


def _exact_loss(batch, nets, g, gen):
    return -elbo(batch, nets, g, generator=gen)[0]


def _trace_loss(guide, num_particles):
    trace_elbo = Trace_ELBO(num_particles=num_particles)

    def loss(batch, nets, g, gen):
        try:
            return trace_elbo.differentiable_loss(scdc_model, guide, batch, nets, g)
        except ValueError as err:
            raise NumericalError(f"SVI with the given guide failed: {str(err).splitlines()[0][:200]}. "
                                 f"Try: {ADVICE}") from None
    return loss


def _warn_unconverged(trace, what="scdc svi", bound="ELBO"):
    n = len(trace)
    k = max(n // 10, 1)
    if n < 2 * k:
        return
    before, last = trace[-2 * k:-k].mean(), trace[-k:].mean()
    if last - before > 0.01 * abs(before):
        rise = 100 * (last - before) / abs(before)
        warnings.warn(f"{what}: the {bound} still rose by {rise:.1f} % over the last tenth of "
                      "the epochs; raise n_epochs", ConvergenceWarning, stacklevel=3)
