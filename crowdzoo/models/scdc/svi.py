"""SCDC's route: stochastic variational inference on the amortised ELBO of
:mod:`crowdzoo.models.scdc.model`, networks and point-estimated globals trained together by Adam.

Each step takes a uniform mini-batch of ``batch_size`` items and, independently, ``annotation_batch``
annotations drawn uniformly with replacement (default: the annotations spread evenly over an epoch,
as the paper's code does: 57,330 // 468 = 122 per step on MNIST), appends the annotations'
endpoints to the item rows (they feed only the relational term) and ascends the ELBO estimate,
divided by N. By default the sum over each item's cluster is exact (:func:`~.model.elbo`); with
``guide=`` a Pyro guide function ``guide(batch, nets, g)`` of the sites ``z`` and ``x`` replaces the
amortised guide, and the loss is Pyro's ``Trace_ELBO`` on :func:`~.model.scdc_model` (score-function
gradients for z, so noisier). With ``pretrain=`` epochs, the networks are first pretrained and the
mixture and the classifier start from a Gaussian mixture on the codes (VaDE's recipe, Jiang et al.
2017; :func:`pretrain_svi`).

With the exact sum (no ``guide=``) and annotations, each item's q(z) takes the messages of all its
annotations (:mod:`~.model`'s docstring): at the start of every epoch :func:`whole_graph` runs
``sweeps`` mean-field sweeps on the whole annotation graph from the encoder's q(z | o) under the
current networks and workers (one encoder pass over the items and ``sweeps`` passes over the
annotations), and the epoch's steps read their rows' messages from it. After training the same sweeps
give the posterior's cluster probabilities.
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
from ...inference.svi import guide_name
from .defaults import resolve
from .model import (
    DTYPE,
    Batch,
    Globals,
    Graph,
    elbo,
    graph_q,
    init_globals,
    link_messages,
    link_weight,
    scdc_model,
)
from .posterior import SCDCPosterior, encode_items
from .starts import best_of, check_collapse, check_n_init, init_seeds, init_settings

ADVICE = "a smaller {lr} (e.g. {lr=3e-4}), a larger {batch_size}, or likelihood='gaussian' for unscaled data"
ADVICE_SETTINGS = ("lr", "batch_size")


class LinkTensors(NamedTuple):
    """A LinkData's arrays as tensors: observations (float32) and the annotations."""

    O: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    w: torch.Tensor
    L: torch.Tensor


def link_tensors(data, shard_ok: bool = False) -> LinkTensors:
    """The data as tensors. A shard of the annotations (:meth:`~crowdzoo.LinkData.shard`) only where
    ``shard_ok`` (a distributed natgrad fit): any other fit would take it for the whole data."""
    if data.is_shard and not shard_ok:
        lo, hi, A = data.annotation_range
        raise DataError(f"data: holds annotations {lo}..{hi - 1} of {A} (one rank's shard); fit it with "
                        "{method='natgrad'}, {distributed=True} inside the torchrun launch, or give the "
                        "whole data", arg="data", settings=("method", "distributed"))
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
                    t.L[ann].to(device), N / n, A / b if b else 0.0, rows.to(device))


def fit_svi(model, data, seed: int = 0, n_epochs: int | None = None, batch_size: int = 128,
            annotation_batch: int | None = None, lr: float = 1e-3, lr_globals: float = 1e-2, guide=None,
            num_particles: int = 1, pretrain: int | None = None, n_init: int = 3, device: str = "cpu",
            progress_bar: bool | None = None, setup=None, sweeps: int = 10) -> SCDCPosterior:
    """Fit SCDC by SVI (module docstring) for ``n_epochs`` passes over the items.

    ``n_epochs``, ``pretrain`` and the model's ``latent_dim`` and ``hidden`` left at None are set from
    the data by :func:`~.defaults.default_sizes` (the posterior's ``model`` holds the sizes used).

    ``batch_size`` items per step; ``annotation_batch`` annotations per step (default
    ceil(A / steps per epoch)); Adam with learning rate ``lr`` for the networks (the paper's 1e-3) and
    ``lr_globals`` for π, μ, σ, α, β (which the paper's 93,600 MNIST steps move at 1e-3, but a small
    data set's few hundred steps would not); ``guide`` a Pyro guide function
    replacing the amortised one (``num_particles`` samples per step); ``pretrain`` epochs of VaDE-style
    pretraining before the ``n_epochs`` (:func:`pretrain_svi`: an autoencoder, a Gaussian mixture on
    its codes for π, μ, σ, and the classifier q(z | o) fitted to the mixture's responsibilities; 0, the
    paper's setting, starts from random networks and globals; on scikit-learn's digits with K = 10 it
    is what keeps SCDC from collapsing to a few clusters, docs/scdc.md; where K exceeds the clusters
    in the data, as on the pinwheel at K = 15, the mixture's spare components split clusters and
    pretraining does worse); ``device`` "cpu" or "cuda"; ``sweeps`` mean-field sweeps of the
    annotations' messages on the whole graph (module docstring; 0: the encoder's q(z | o) alone, the
    paper's; ignored with ``guide=``, whose q(z) is the guide's, and without annotations).
    ``n_init`` initialisations (seeds :func:`~.starts.init_seeds`; each a whole fit, so the fit takes
    ``n_init`` times as long; the paper's runs take the best of 10) and the one with the best final
    ELBO (averaged over its last epoch) is kept; ``settings`` records every initialisation's ELBO
    (with ``guide=``, Pyro's parameter store is left holding the kept initialisation's parameters).
    Warns (ConvergenceWarning) when the last tenth of the epochs still improved the ELBO by more than
    1 %, and (CollapseWarning) when fewer than K clusters hold 1 % of the items or the ELBO fell from
    its best (:func:`~.starts.check_collapse`)."""
    if int(batch_size) != batch_size or batch_size < 1:
        raise DataError(f"batch_size: expected an integer ≥ 1, got {batch_size!r}", arg="batch_size")
    model, sizes = resolve(model, data, batch_size)
    n_epochs = sizes.n_epochs if n_epochs is None else n_epochs
    pretrain = sizes.pretrain if pretrain is None else pretrain
    for name, v in (("n_epochs", n_epochs), ("batch_size", batch_size)):
        if int(v) != v or v < 1:
            raise DataError(f"{name}: expected an integer ≥ 1, got {v!r}", arg=name)
    if int(pretrain) != pretrain or pretrain < 0:
        raise DataError(f"pretrain: expected an integer ≥ 0, got {pretrain!r}", arg="pretrain")
    if device != "cpu" and not torch.cuda.is_available():
        raise DataError(f"device: {device!r} requested but torch sees no GPU; use {{device='cpu'}}",
                        arg="device", settings=("device",))
    n_init = check_n_init(n_init)
    A, steps = data.n_annotations, math.ceil(data.n_items / batch_size)
    annotation_batch = annotation_batch if annotation_batch is not None else math.ceil(A / steps)
    setup = setup or model.setup(data, seed=seed)
    seeds = init_seeds(seed, n_init)
    if int(sweeps) != sweeps or sweeps < 0:
        raise DataError(f"sweeps: expected an integer ≥ 0, got {sweeps!r}", arg="sweeps")
    settings = dict(n_epochs=n_epochs, batch_size=batch_size, annotation_batch=annotation_batch, lr=lr,
                    lr_globals=lr_globals, guide=guide, num_particles=num_particles, pretrain=pretrain,
                    device=device, progress_bar=progress_bar, setup=setup, sweeps=int(sweeps))
    name = "scdc svi"

    stores = {}  # a guide's parameters in Pyro's store, by initialisation

    def fit_one(r, bounds, best):
        what = name if n_init == 1 else f"{name} (initialisation {r + 1} of {n_init})"
        post = _fit_once(model, data, seeds[r], what=what, **settings)
        if guide is not None:
            stores[r] = pyro.get_param_store().get_state()
        return post

    kept = best_of(fit_one, n_init, lambda post: post.trace["elbo"][-1])
    if guide is not None:  # the store holds the kept initialisation's guide, not the last one's
        pyro.get_param_store().set_state(stores[kept.index])
    post = kept.fit
    post.settings.update(seed=seed, **init_settings(n_init, kept, seeds))
    retry = "pretraining ({pretrain=N}, N of 50–200 epochs), another seed, or a larger {n_init}"
    post.settings.update(check_collapse(post.cluster_probs, post.trace["elbo"], name, retry,
                                        ("pretrain", "n_init")))
    return post


def _fit_once(model, data, seed: int, n_epochs: int, batch_size: int, annotation_batch: int, lr: float,
              lr_globals: float, guide, num_particles: int, pretrain: int, device: str, progress_bar,
              setup, sweeps: int, what: str = "scdc svi") -> SCDCPosterior:
    """One initialisation of :func:`fit_svi`, from ``seed``."""
    N, W = data.n_items, max(data.n_workers, 1)
    with isolated(seed):
        pyro.clear_param_store()
        nets = model.networks(setup, seed=seed).to(device)
        gen = torch.Generator().manual_seed(int(seed))
        g0 = init_globals(model.n_clusters, model.latent_dim, W, model.worker_init, gen)
        t = link_tensors(data)
        if pretrain:
            g0 = pretrain_svi(nets, t, g0, pretrain, batch_size, lr, gen, device, seed)
        g = Globals(*(t.to(device).requires_grad_() for t in g0))
        params = list(nets.parameters())
        loss_fn = _exact_loss if guide is None else _trace_loss(guide, num_particles)
        if guide is not None:  # a user guide's params appear in Pyro's store on its first call
            first = next(batches(t, batch_size, annotation_batch, torch.Generator().manual_seed(0), device))
            loss_fn(first, nets, g, gen)
            ours = {id(p) for p in params}
            params += [p for _, p in pyro.get_param_store().named_parameters() if id(p) not in ours]
        opt = torch.optim.Adam([{"params": params, "lr": lr}, {"params": list(g), "lr": lr_globals}])
        linked = guide is None and sweeps > 0 and data.n_annotations > 0
        trace = np.empty(n_epochs)
        with progress(n_epochs, what, progress_bar) as bar:
            for epoch in range(n_epochs):
                total = 0.0
                graph = whole_graph(nets, g, t, sweeps, device) if linked else None
                for batch in batches(t, batch_size, annotation_batch, gen, device):
                    opt.zero_grad()
                    loss = loss_fn(batch, nets, g, gen, graph) / N
                    check_finite(float(loss.detach()), "the ELBO", epoch, ADVICE, ADVICE_SETTINGS)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * batch.n_uniform
                trace[epoch] = -total / N  # the ELBO / N, averaged over the epoch's steps
                bar.set_postfix(elbo=f"{trace[epoch]:.4g}")
                bar.update()
        summary(bar, f"{what}: {n_epochs} epochs, final ELBO {trace[-1]:.6g}")
        _warn_unconverged(trace, what)
        with torch.no_grad():
            probs = whole_graph(nets, g, t, sweeps, device).q_bar if linked else None
            probs, x_mean = encode_items(nets, t.O.to(device), probs)
    nets = nets.cpu()
    return SCDCPosterior(
        model=model, setup=setup, data=data, method="svi", trace={"elbo": trace},
        settings=dict(seed=seed, n_epochs=n_epochs, batch_size=batch_size, annotation_batch=annotation_batch,
                      lr=lr, lr_globals=lr_globals, pretrain=pretrain, device=device,
                      guide="amortised" if guide is None else guide_name(guide), num_particles=num_particles,
                      sweeps=sweeps if linked else 0),
        cluster_probs=probs.cpu().double(), x_mean=x_mean.cpu().double(),
        pi=torch.softmax(g.pi_logits.detach().cpu(), -1).double(), mu=g.mu.detach().cpu().double(),
        cov=torch.diag_embed(torch.exp(2 * g.log_sigma.detach().cpu())).double(),
        alpha=torch.sigmoid(g.alpha_logit.detach().cpu()).double(),
        beta=torch.sigmoid(g.beta_logit.detach().cpu()).double(),
        net_state={k: v.detach().cpu().clone() for k, v in nets.state_dict().items()})


def _exact_loss(batch, nets, g, gen, graph=None):
    return -elbo(batch, nets, g, generator=gen, graph=graph)[0]


def whole_graph(nets, g: Globals, t: LinkTensors, sweeps: int, device) -> Graph:
    """The whole annotation graph with every item's q(z) after ``sweeps`` mean-field sweeps from the
    encoder's q(z | o) under the current networks and workers (:func:`~.model.graph_q`) and the messages
    into every item from it, held fixed (no gradient) for the steps that read them."""
    with torch.no_grad():
        O = t.O.to(device)
        log_q = torch.cat([torch.log_softmax(nets.z_logits(O[lo:lo + 4096]), -1)
                           for lo in range(0, O.shape[0], 4096)])
        i, j, w, L = (x.to(device) for x in (t.i, t.j, t.w, t.L))
        graph = Graph(i, j, w, L, log_q)
        q_bar = graph_q(log_q, graph, g, sweeps)
        msg = link_messages(q_bar, i, j, link_weight(L, g.alpha_logit[w], g.beta_logit[w]))
    return graph._replace(q_bar=q_bar, msg=msg)


def pretrain_svi(nets, t, g0: Globals, n_epochs: int, batch_size: int, lr: float, gen, device,
                 seed: int) -> Globals:
    """VaDE-style pretraining (Jiang et al. 2017, §3.3) of SCDC's networks, in place, and its globals.

    1. ``n_epochs`` of a plain autoencoder: q(x | o, z)'s mean m(o, z), fed a random one-hot z per item
       so that it learns to ignore z, decoded by the decoder (no KL);
    2. a diagonal Gaussian mixture (scikit-learn, K components) on the codes m(o, ·) averaged over
       the one-hots: π, μ_k, σ_k start from its weights, means and variances;
    3. ``n_epochs`` of the classifier q(z | o) fitted (cross-entropy) to the mixture's responsibilities.

    Returns the globals with π, μ, σ replaced (α, β as given)."""
    from sklearn.mixture import GaussianMixture

    K, N = nets.K, t.O.shape[0]
    ae = [*nets.q_x.parameters(), *nets.decoder.parameters(), nets.log_scale]
    opt = torch.optim.Adam(ae, lr=lr)
    for _ in range(n_epochs):
        perm = torch.randperm(N, generator=gen)
        for lo in range(0, N, batch_size):
            o = t.O[perm[lo:lo + batch_size]].to(device)
            z = torch.randint(K, (o.shape[0],), generator=gen).to(device)
            m, _ = nets.x_params(o, torch.nn.functional.one_hot(z, K).to(o.dtype))
            opt.zero_grad()
            (-nets.obs_dist(m).log_prob(o).mean()).backward()
            opt.step()
    with torch.no_grad():
        O = t.O.to(device)
        eye = torch.eye(K, dtype=O.dtype, device=device)
        code = torch.cat([nets.x_params(O[lo:lo + 4096, None, :], eye)[0].mean(1)
                          for lo in range(0, N, 4096)]).cpu().double().numpy()
    gmm = GaussianMixture(K, covariance_type="diag", n_init=3, random_state=seed).fit(code)
    resp = torch.as_tensor(gmm.predict_proba(code), dtype=t.O.dtype)
    opt = torch.optim.Adam(nets.q_z.parameters(), lr=lr)
    for _ in range(n_epochs):
        perm = torch.randperm(N, generator=gen)
        for lo in range(0, N, batch_size):
            rows = perm[lo:lo + batch_size]
            logits = nets.z_logits(t.O[rows].to(device))
            opt.zero_grad()
            (-(resp[rows].to(device) * torch.log_softmax(logits, -1)).sum(-1).mean()).backward()
            opt.step()
    f = dict(dtype=g0.mu.dtype)
    return g0._replace(pi_logits=torch.as_tensor(np.log(gmm.weights_), **f),
                       mu=torch.as_tensor(gmm.means_, **f),
                       log_sigma=torch.as_tensor(0.5 * np.log(gmm.covariances_), **f))


def _trace_loss(guide, num_particles):
    trace_elbo = Trace_ELBO(num_particles=num_particles)

    def loss(batch, nets, g, gen, graph=None):
        try:
            return trace_elbo.differentiable_loss(scdc_model, guide, batch, nets, g)
        except ValueError as err:
            raise NumericalError(f"SVI with the given guide failed: {str(err).splitlines()[0][:200]}. "
                                 f"Try: {ADVICE}", settings=ADVICE_SETTINGS) from None
    return loss


def epoch_rise(trace) -> float | None:
    """How much (%) the per-epoch bound ``trace`` rose over the last tenth of the epochs against the
    tenth before (None for a run too short to tell): above 1 %, the fit had not settled."""
    trace = np.asarray(trace, dtype=np.float64)
    n = len(trace)
    k = max(n // 10, 1)
    if n < 2 * k:
        return None
    before, last = trace[-2 * k:-k].mean(), trace[-k:].mean()
    return float(100 * (last - before) / abs(before))


def _warn_unconverged(trace, what="scdc svi", bound="ELBO"):
    rise = epoch_rise(trace)
    if rise is not None and rise > 1.0:
        warnings.warn(ConvergenceWarning(f"{what}: the {bound} still rose by {rise:.1f} % over the last "
                                         "tenth of the epochs; raise {n_epochs}", settings=("n_epochs",)),
                      stacklevel=3)
