"""BayesSCDC's route (Luo et al. 2018, Algorithm 1): per mini-batch, the recognition potentials (Eq. 9),
local message passing (Eq. 12 and 14, with the annotations' messages), a natural-gradient step on the
conjugate globals (Eq. 17) and an Adam step on the networks along the reparameterised gradient of J
(Eq. 16), whose local part is differentiated through the message passing.

By default (``mixture_step="graph"``) each epoch starts with every item's local optimum on the whole
annotation graph under the current networks and globals, q̄(z) (the fit's final encoding,
:func:`encode_all`), and holds it fixed for the epoch (:func:`epoch_graph`, as SCDC's route does with
its q(z), :func:`~.svi.whole_graph`): a step takes a uniform mini-batch of ``batch_size`` items, whose
local optima take the messages Σ_{a ∋ n} E[w_a] q̄(z_{n'}) of *all* their annotations (Eq. 14 with the
neighbours' q(z) given); the mixture's statistics (Eq. 17) come from those rows (× N / batch), the
workers' from every annotation at P(same) = q̄_i · q̄_j, and J's annotation term is linearised about q̄
(:class:`EpochGraph`). The cost is one pass of the recognition network over the items and one over the
annotations per epoch. The paper's stochastic approximation, ``mixture_step="links"`` (Algorithm 1:
"sample annotated data pairs uniformly ... form a subsample of the relational model, and do local
message passing"), takes ``annotation_batch`` annotations per step, drawn uniformly with replacement,
whose endpoints, each once, form the subgraph on which messages pass; the mixture's statistics come from
the annotated items' local optima on that subgraph (with the messages) and from the uniform rows'
unannotated items, each weighted by one over its chance of entering the step (:func:`mixture_weights`);
the workers' from the sampled annotations (× A / annotations). There an item sees, in a step, only the
annotations drawn in it. ``mixture_step="uniform"`` takes the mixture's statistics from the uniform rows
alone (× N / batch), encoded without messages. The networks' objective J keeps its item terms on the
uniform rows (× N / batch) under all three: with the endpoints' weighted rows in J as well, a scratch
run on the pinwheel left a cluster that no item takes holding 6.7 items' mass, and the digits were no
better (docs/scdc.md). After training every item's q*(z) is the local optimum on the whole annotation
graph.

With ``pretrain=`` epochs, the networks are first pretrained as a VAE and the mixture starts from a
Gaussian mixture on their latent points (VaDE's recipe, Jiang et al. 2017; :func:`pretrain_natgrad`),
refined by default by rounds of EM with the annotations' messages (:func:`hmrf_em`).

The steps run on the natural-gradient loop every natgrad route shares (:mod:`crowdzoo.inference.natgrad`:
progress bar, stop rule, checkpoints, resume), BlackJAX style: on the :class:`Fixed` problem,
:func:`init` makes a :class:`State` (a NamedTuple of the globals, the networks' weights, Adam's state,
the generator's state and the epoch's order of the items), :func:`step` takes one step of Algorithm 1
(a :class:`State` and an :class:`Info`) and :func:`bound` reads the bound averaged over the epoch just
ended. An iteration of the loop is one step; ``n_epochs`` is
``n_epochs`` × ⌈N / ``batch_size``⌉ of them.

Data-parallel (``distributed=True`` inside a ``torchrun`` launch, :mod:`crowdzoo.inference.distributed`):
each rank holds a contiguous shard of the annotations (:meth:`~crowdzoo.LinkData.read_shard` reads only
its rows of a file; given the whole data, a rank keeps its share, :meth:`~crowdzoo.LinkData.shard`)
and every item's observations O, and draws the same mini-batches from the same seeded generator: the
same uniform rows and the same annotation positions. The step's annotation records are completed by one
all-reduce of an ``annotation_batch`` × 4 table that each rank fills where it holds the row
(:func:`records`: O(batch) numbers, whatever the number of annotations), and every item's number of
annotations, which the statistics' weights read, is summed over the ranks once, at the start
(:func:`annotation_degree`). What is then split is the
step's compute: the uniform rows go to the ranks in R contiguous parts, the sampled annotations by
connected component of the step's annotation graph (:func:`component_ranks`), so that each rank's
message passing (Eq. 12, 14) is the single process's restricted to its components — exactly, since
messages never cross a component. Every term of the networks' objective J (Eq. 16, the globals' KL
aside, which does not depend on the networks) and every statistic of Eq. 17 is a sum over rows or
annotations, so one all-reduce per step of [the networks' gradients, J, the Eq. 17 statistics] gives
every rank the single process's step: the same Adam step and the same natural-gradient step on the
globals. The final pass over the whole graph (:func:`encode_all`) sums each sweep's messages into the
items over the ranks, and the workers' Gibbs sampler (:func:`finish_workers`) its counts and each
colour's messages: every rank draws the same numbers and so runs the same chain.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ...core.seeds import isolated
from ...errors import DataError, NumericalError
from ...inference import natgrad as loop
from ...inference.common import check_finite
from ...inference.distributed import bounds, check_tiling, replicated
from .bayes import (
    F64,
    Conjugate,
    Stats,
    conjugate_update,
    expected,
    item_stats,
    kl_globals,
    local_step,
    local_terms,
    messages,
    missing_information,
    moments,
    natgrad_step,
    pair_same,
    relational_weights,
    sample_x,
    widen_workers,
    worker_stats,
)
from .defaults import resolve
from .gibbs import gibbs_workers, mixture_unaries
from .model import DTYPE, Batch
from .posterior import SCDCPosterior
from .starts import best_of, check_collapse, check_n_init, init_seeds, init_settings, occupancy
from .svi import _warn_unconverged, link_tensors

ADVICE = ("a smaller {lr} (e.g. {lr=3e-4}), a larger {step_delay} (slower early natural-gradient steps), "
          "or likelihood='gaussian' for unscaled data")
ADVICE_SETTINGS = ("lr", "step_delay")
_CHUNK = 4096
FINISH_ROUNDS = 3  # alternations of the workers' exact update and the whole graph's messages
GIBBS_SWEEPS, GIBBS_BURN = 500, 100  # the workers' Gibbs sampler: sweeps, of which the first are dropped
START_ROUNDS = 10  # rounds of the links-aware start's EM after pretraining (:func:`hmrf_em`)


class Part(NamedTuple):
    """This rank's share of one step: its rows and annotations as a :class:`~.model.Batch` (scales of
    the whole step), the number of rows of the whole step (ε is drawn for all of them on every rank, so
    that the generator stays in step everywhere), which of the step's uniform rows are this rank's, and
    each row's weight in the mixture's statistics (:func:`mixture_weights`; None: the uniform rows ×
    N / n, the others not at all)."""

    batch: Batch
    n_rows: int
    uniform: slice
    weight: torch.Tensor | None = None
    fixed: torch.Tensor | None = None  # the uniform rows' whole-graph messages (mixture_step="graph")


class Records(NamedTuple):
    """A step's sampled annotations: their items i, j, workers w and labels L (one row each)."""

    i: torch.Tensor
    j: torch.Tensor
    w: torch.Tensor
    L: torch.Tensor


def records(t, ann, lo: int = 0, sh=None) -> Records:
    """The annotations at global positions ``ann``. This process's ``t`` holds annotations ``lo``.. of
    the whole data (a distributed fit's shard): each rank fills the rows it holds and one all-reduce of
    the ``ann``-sized table completes them — a sum, since exactly one rank holds each annotation, so
    the ranks never hold more than their shard and a step moves O(annotation_batch) numbers."""
    if sh is None or sh.world == 1:
        return Records(t.i[ann], t.j[ann], t.w[ann], t.L[ann])
    pos = ann - lo
    mine = (pos >= 0) & (pos < t.i.shape[0])
    p = pos[mine]
    table = torch.zeros(ann.shape[0], 4, dtype=F64)
    table[mine] = torch.stack([t.i[p].to(F64), t.j[p].to(F64), t.w[p].to(F64), t.L[p].to(F64)], -1)
    table = sh.sum(table)
    ijw = table[:, :3].round().long()
    return Records(ijw[:, 0], ijw[:, 1], ijw[:, 2], table[:, 3].to(t.L.dtype))


def split_step(O, items, rec: Records, n_annotations: int, rank: int, world: int, device,
               degree=None, msg=None) -> Part:
    """Rank ``rank``'s share of the step with uniform rows ``items`` (of the observations ``O``) and
    annotations ``rec``: a contiguous 1/``world`` of ``items``, and the annotations (with their
    endpoints' rows) of the components that :func:`component_ranks` gives it. The scales stay the whole
    step's: N / n and A / b (A = ``n_annotations``). ``degree`` (N,), every item's number of
    annotations: the rows' weights in the mixture's statistics (:func:`mixture_weights`); None, the
    uniform rows' N / n alone. ``msg`` (N, K): every item's messages from the whole annotation graph
    (:func:`epoch_graph`), of which the uniform rows' are taken."""
    N, A = O.shape[0], n_annotations
    n, b = items.shape[0], rec.i.shape[0]
    ends, inv = torch.unique(torch.cat([rec.i, rec.j]), return_inverse=True)
    n_rows = n + ends.shape[0]
    li, lj = inv[:b], inv[b:]
    w, L = rec.w, rec.L
    lo, hi = bounds(n, rank, world)
    if world > 1:
        keep = component_ranks(li, lj, ends.shape[0], world) == rank
        mine = keep[li]
        pos = torch.cumsum(keep, 0) - 1  # an endpoint's row among this rank's endpoints
        ends, w, L, li, lj = ends[keep], w[mine], L[mine], pos[li[mine]], pos[lj[mine]]
    m = hi - lo
    rows = torch.cat([items[lo:hi], ends])
    batch = Batch(O[rows].to(device), m, (m + li).to(device), (m + lj).to(device), w.to(device),
                  L.to(device, F64), N / n, A / b if b else 0.0)
    weight = None if degree is None else mixture_weights(degree, items[lo:hi], ends, n, A, b).to(device)
    fixed = None if msg is None else msg[items[lo:hi].to(msg.device)].to(device)
    return Part(batch, n_rows, slice(lo, hi), weight, fixed)


def mixture_weights(degree, uniform, ends, n: int, A: int, b: int) -> torch.Tensor:
    """Each row's weight in a step's mixture statistics (Eq. 17): the rows are the step's ``uniform``
    items (a share of its ``n`` uniform rows) and then the endpoints ``ends`` of its ``b`` annotations,
    drawn uniformly with replacement from all ``A`` (``degree`` (N,): each item's number of annotations
    d_n, :func:`annotation_degree`).

    Algorithm 1 takes the global step from the annotated subsample's local optima, found with the
    annotations' messages (Eq. 14), and from mini-batches of the unannotated items. So an item enters
    the statistics by one route only, with the weight that makes each step's statistics unbiased for
    the whole data's, Σ_n t_n (Horvitz–Thompson: one over its chance of entering the step):

    - an unannotated item (d_n = 0) through the uniform rows, which hold it with probability n / N:
      weight N / n, the former scale;
    - an annotated item as an endpoint, which it is when one of the b draws is one of its d_n
      annotations, with probability p_n = 1 − (1 − d_n / A)^b: weight 1 / p_n; its uniform row, if the
      step has one, weighs 0.

    Hence E[Σ_rows weight_r t_r] = Σ_n t_n: every item counts once, in expectation, in each step's
    statistics (which, as Eq. 17 asks, are scaled to the whole data), and S times over an epoch's S
    steps, as under the uniform rows' N / n. The t_n of an endpoint is its local optimum on the step's
    subgraph (the messages of its sampled annotations), the paper's subsample approximation of the
    whole graph's."""
    N = degree.shape[0]
    d = degree.to(F64)
    u = torch.where(d[uniform] > 0, 0.0, N / n).to(F64)
    p = -torch.expm1(b * torch.log1p(-d[ends] / A)) if A else torch.ones(0, dtype=F64)
    return torch.cat([u, 1 / p])


def annotation_degree(t, N: int, sh=None) -> torch.Tensor:
    """Every item's number of annotations d_n (an item is an endpoint of each; a pair annotated twice
    counts twice), summed over the ranks' shards of a distributed fit."""
    d = (torch.bincount(t.i, minlength=N) + torch.bincount(t.j, minlength=N)).to(F64)
    return d if sh is None or sh.world == 1 else sh.sum(d)


def mixture_stats(loc, part: Part):
    """(n_k, Σ φ x, Σ φ E[xxᵀ]) of Eq. 17 over this rank's rows of a step, scaled to the whole data: the
    uniform rows × N / n, or each row by its weight in ``part`` (:func:`mixture_weights`)."""
    B = part.batch
    if part.weight is None:
        return item_stats(loc, slice(0, B.n_uniform), B.item_scale)
    return moments(loc.phi * part.weight[:, None], loc.x, torch.cholesky_inverse(loc.P_chol))


def component_ranks(li, lj, n_nodes: int, world: int) -> torch.Tensor:
    """The rank (0 … ``world`` − 1) of each of ``n_nodes`` nodes: each connected component of the graph
    with edges ``li``–``lj`` (a step's annotations between its endpoints) lies whole on one rank, so that
    the local message passing (Eq. 12, 14) splits exactly. Components, in scipy's order, are cut into
    ``world`` contiguous runs holding about equal numbers of annotations: a component goes to the rank
    whose 1/``world`` of the annotations holds its middle annotation (deterministic; a rank's excess is
    at most half the largest component's annotations)."""
    if world == 1 or n_nodes == 0:
        return torch.zeros(n_nodes, dtype=torch.long)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    a, c = li.cpu().numpy(), lj.cpu().numpy()
    graph = coo_matrix((np.ones(a.shape[0]), (a, c)), shape=(n_nodes, n_nodes))
    n_comp, label = connected_components(graph, directed=False)
    count = np.bincount(label[a], minlength=n_comp)
    middle = np.cumsum(count) - count / 2
    rank = np.minimum((middle * world / max(count.sum(), 1)).astype(np.int64), world - 1)
    return torch.as_tensor(rank[label])


def init_conjugate(model, n_workers: int, generator, device) -> Conjugate:
    """The authors' starting q: Dirichlet a_k = 1 + U(0, 1), NIW κ = 1, ν = d + 1, S = (d + 1) I,
    m_k ~ N(0, 9 I), and Beta(10, 1) for every α_m, β_m (reliable workers)."""
    K, d = model.n_clusters, model.latent_dim
    kw = dict(dtype=F64)
    q = Conjugate(1 + torch.rand(K, generator=generator, **kw), torch.ones(K, **kw),
                  3 * torch.randn(K, d, generator=generator, **kw),
                  (d + 1.0) * torch.eye(d, **kw).repeat(K, 1, 1),
                  torch.full((K,), d + 1.0, **kw), torch.tensor([10.0, 1.0], **kw).repeat(n_workers, 1),
                  torch.tensor([10.0, 1.0], **kw).repeat(n_workers, 1))
    return Conjugate(*(x.to(device) for x in q))


def kmeans_globals(model, nets, t, prior: Conjugate, q: Conjugate, seed: int, device) -> Conjugate:
    """The mixture restarted from the data: k-means (K clusters) on the recognition network's latent
    points h_n / λ_n, and the conjugate posterior of that hard assignment (the workers' q kept)."""
    from sklearn.cluster import KMeans

    with torch.no_grad():
        h, lam = potentials(nets, t.O.to(device))
    x = (h / lam).cpu()
    K = min(model.n_clusters, x.shape[0])
    z = KMeans(K, n_init=3, random_state=seed).fit(x.numpy()).labels_
    phi = torch.nn.functional.one_hot(torch.as_tensor(z).long(), model.n_clusters).to(F64)
    return mixture_globals(phi, x, lam, prior, q, device)


def mixture_globals(phi, x, lam, prior: Conjugate, q: Conjugate, device) -> Conjugate:
    """The conjugate posterior of the mixture given responsibilities ``phi`` (N, K) of the latent
    points ``x`` = h / λ with variances 1 / ``lam`` (the workers' q kept): a start for the globals."""
    V = torch.diag_embed(1 / lam.cpu())
    stats = Stats(*moments(phi, x, V), torch.zeros_like(q.alpha.cpu()), torch.zeros_like(q.beta.cpu()))
    new = conjugate_update(Conjugate(*(v.cpu() for v in prior)), stats)
    return Conjugate(*(v.to(device) for v in new))._replace(alpha=q.alpha, beta=q.beta)


def hmrf_em(x, log_w, mu, cov, phi, li, lj, weight, rounds: int, sweeps: int, reg_covar: float,
            reduce=None):
    """``rounds`` of mean-field EM of a Gaussian mixture on the points ``x`` (N, d) coupled by the
    annotations ``li``–``lj`` (a hidden Markov random field over the items' clusters, as in HMRF-KMeans,
    Basu, Bilenko & Mooney 2004): from the mixture (log weights ``log_w``, means ``mu``, covariances
    ``cov``) and responsibilities ``phi``, each E-step gives every item

        φ_nk ∝ π_k N(x_n; μ_k, Σ_k) exp(Σ_{a ∋ n} w_a φ_{n'k})

    (``sweeps`` mean-field sweeps; ``weight`` w_a is the annotation's two-coin log-likelihood ratio of
    same against different cluster, Eq. 14's message weight), and each M-step the weighted maximum
    likelihood mixture, ``reg_covar`` added to the covariances' diagonal (scikit-learn's). Without
    annotations these are the mixture's own EM rounds, continuing a fit that scikit-learn stopped at its
    tolerance; what the links add is the messages. ``reduce`` sums each sweep's messages over the ranks
    of a distributed fit. Returns φ (N, K)."""
    d = x.shape[1]
    eye = reg_covar * torch.eye(d, dtype=x.dtype, device=x.device)
    for _ in range(rounds):
        chol = torch.linalg.cholesky(cov)
        r = torch.linalg.solve_triangular(chol, (x[:, None, :] - mu)[..., None], upper=False)[..., 0]
        log_n = -0.5 * (r * r).sum(-1) - torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        unary = log_w + log_n - 0.5 * d * math.log(2 * math.pi)
        for _ in range(sweeps):
            msg = messages(phi, li, lj, weight)
            phi = torch.softmax(unary + (msg if reduce is None else reduce(msg)), -1)
        n = phi.sum(0) + 10 * torch.finfo(x.dtype).eps
        log_w, mu = torch.log(n / n.sum()), (phi.T @ x) / n[:, None]
        c = x[:, None, :] - mu
        cov = torch.einsum("nk,nka,nkb->kab", phi, c, c) / n[:, None, None] + eye
    return phi


class EpochGraph(NamedTuple):
    """The whole annotation graph as an epoch's steps read it under ``mixture_step="graph"``
    (:func:`epoch_graph`): every item's q̄(z) on the whole graph at the epoch's start, held fixed, gives

    * ``msg`` (N, K): the messages Σ_{a ∋ n} E[w_a] q̄(z_{n'}) into every item (Eq. 14's relational term);
    * ``alpha``, ``beta`` (W, 2): the workers' Beta counts of every annotation (Eq. 17), at P(same)
      s_a = Σ_k q̄_ik q̄_jk;
    * ``const``: Σ_a (E[log p(L_a | different)] − E[w_a] s_a), so that J's annotation term
      Σ_a E[log p(L_a | z_i, z_j)] = Σ_a (E[log p(L_a | different)] + E[w_a] s_a) is, to first order in
      the rows' q(z) about q̄, ``const`` + Σ_n q(z_n) · msg_n (each annotation's s_a linear in both
      endpoints' q(z); exact at q = q̄)."""

    msg: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    const: float


def epoch_graph(nets, q: Conjugate, t, sweeps: int, n_workers: int, device, sh=None,
                chunk: int = 65536) -> EpochGraph:
    """:class:`EpochGraph` under the networks ``nets`` and globals ``q``: every item's local optimum on
    the whole annotation graph (:func:`encode_all`), then, in chunks of ``chunk`` annotations (so that
    the temporaries stay O(chunk · K) whatever the number of annotations), its messages, the workers'
    counts and the constant; each summed over the ranks of a distributed fit, whose shards of the
    annotations they are."""
    with torch.no_grad():
        phi = encode_all(nets, q, t, sweeps, device, sh).phi
        E = expected(q)
        msg = torch.zeros_like(phi)
        a = torch.zeros(n_workers, 2, dtype=F64, device=device)
        b, const = torch.zeros_like(a), torch.zeros((), dtype=F64, device=device)
        for lo in range(0, t.i.shape[0], chunk):
            i, j, w = (x[lo:lo + chunk].to(device) for x in (t.i, t.j, t.w))
            L = t.L[lo:lo + chunk].to(device, F64)
            weight, _, diff = relational_weights(E, w, L)
            msg = msg + messages(phi, i, j, weight)
            s = (phi[i] * phi[j]).sum(-1)
            da, db = worker_stats(s, w, L, n_workers, 1.0)
            a, b, const = a + da, b + db, const + (diff - weight * s).sum()
        if sh is not None and sh.world > 1:
            msg, a, b, const = sh.sum(msg, a, b, const)
    return EpochGraph(msg, a, b, float(const))


def decoder_terms(nets, loc, O, eps):
    """J's reconstruction term per row (Eq. 16), log p(o_n | x̂_n) at one reparameterised draw
    x̂_n ~ q*(x_n) (Algorithm 1) from the standard normal ``eps``, for the rows of ``loc`` and ``O``."""
    return nets.obs_dist(sample_x(loc, eps=eps).to(DTYPE)).log_prob(O).to(F64)


def step_objective(batch: Batch, nets, E, sweeps: int, eps, fixed=None):
    """J of one mini-batch (Eq. 16, without the globals' KL) and what the global step needs: the local
    optimum and each sampled annotation's P(same) (the mean-field Σ_k φ_ik φ_jk, as in J's annotation
    term). The loop's workers' statistics keep it: counted from the pair beliefs (:func:`~.bayes.pair_same`)
    instead, the pinwheel test's fit (K = 15, seeds 0 and 1) fell from 0.910 and 0.964 to 0.842 and 0.846
    accuracy, so only the fit's last step (:func:`finish_workers`) uses them. ``eps``: the standard
    normal draws of x̂ for the uniform rows (Algorithm 1's reparameterised x̂_n ~ q*(x_n)). ``fixed``
    (``mixture_step="graph"``; the step then holds uniform rows alone): the rows' messages from the whole
    graph (:class:`EpochGraph`), in the local optimum and, as Σ_n q(z_n) · msg_n, in the rows' terms of J
    (whose annotation term's constant the caller adds)."""
    h, lam = nets.potentials(batch.O)
    w, same, diff = relational_weights(E, batch.w, batch.L)
    loc = local_step(E, h, lam, batch.li, batch.lj, w, sweeps, fixed=fixed)
    n = batch.n_uniform
    terms = local_terms(E, loc)[:n]
    if fixed is not None:
        terms = terms + (loc.phi[:n] * fixed[:n]).sum(-1)
    if n:  # a rank of a distributed fit may hold none of a step's uniform rows
        rows = loc._replace(x=loc.x[:n], P_chol=loc.P_chol[:n])
        terms = decoder_terms(nets, rows, batch.O[:n], eps) + terms
    J = batch.item_scale * terms.sum()
    s = (loc.phi[batch.li] * loc.phi[batch.lj]).sum(-1)
    if batch.L.shape[0]:
        J = J + batch.ann_scale * (s * same + (1 - s) * diff).sum()
    return J, loc, s


def train_step(part: Part, nets, opt, q: Conjugate, shape: tuple, sweeps: int, gen, sh, epoch: int,
               graph: EpochGraph | None = None):
    """One step of Algorithm 1 on this rank's share ``part``: the local optimum and J (Eq. 16), the
    networks' gradient of J and the statistics of Eq. 17 (n_k, Σ φx, Σ φ E[xxᵀ] over the rows, weighted
    by :func:`mixture_stats`; the workers' Beta counts over the annotations × A / b), summed over the
    ranks of ``sh`` in one all-reduce, then the Adam step (``shape``: the data's N items and W
    workers). With ``graph`` (``mixture_step="graph"``) the workers' counts and J's annotation constant
    are the whole graph's (:class:`EpochGraph`), added once after the sum. Returns the whole step's J
    and statistics."""
    batch, (N, n_workers) = part.batch, shape
    eps = torch.randn((part.n_rows, q.m.shape[-1]), generator=gen, dtype=F64)[part.uniform]
    try:
        J, loc, s = step_objective(batch, nets, expected(q), sweeps, eps, part.fixed)
    except torch.linalg.LinAlgError as err:
        raise NumericalError(f"bayesscdc natgrad, epoch {epoch}: a local precision matrix is not positive "
                             f"definite ({err}). Try: {ADVICE}") from None
    opt.zero_grad()
    if J.requires_grad:  # not on a rank that holds none of the step's rows
        (-J / N).to(DTYPE).backward()
    with torch.no_grad():
        loc = loc._replace(**{k: v.detach() for k, v in loc._asdict().items()})
        n_k, sx, sxx = mixture_stats(loc, part)
        a_st, b_st = worker_stats(s.detach(), batch.w, batch.L, n_workers, batch.ann_scale)
        J, *stats = sh.sum_grads(nets.parameters(), J.detach(), n_k, sx, sxx, a_st, b_st)
        if graph is not None:
            J, stats[3], stats[4] = J + graph.const, stats[3] + graph.alpha, stats[4] + graph.beta
    check_finite(float(J), "the bound J", epoch, ADVICE, ADVICE_SETTINGS)
    opt.step()
    return float(J), Stats(*stats)


class State(NamedTuple):
    """BayesSCDC's state between two steps of Algorithm 1: all that the next step reads, so that a
    checkpoint of it continues the fit bit for bit."""

    q: Conjugate  # q(π) q(μ, Σ) q(α) q(β)
    nets: dict  # the networks' weights (recognition network and decoder, a state_dict)
    adam: dict  # the networks' Adam state (its state_dict: moments and step counts)
    rng: torch.Tensor  # the generator's state: epochs' orders, annotations, the noise of x̂
    perm: torch.Tensor  # this epoch's order of the items
    t: int  # steps taken
    total: float  # Σ J over this epoch's steps so far
    seed: int  # the initialisation's seed (the k-means restart's)
    graph: EpochGraph | None = None  # the epoch's whole-graph messages (mixture_step="graph")


@dataclasses.dataclass
class Work:
    """The working networks and their optimiser, and the :class:`State` they hold: a cache, so that
    consecutive steps update them in place; a step given another state (a resumed fit's) loads it."""

    nets: torch.nn.Module
    opt: torch.optim.Optimizer
    state: State | None = None


class Fixed(NamedTuple):
    """What stays fixed during a fit: the model, data, priors, sizes and settings."""

    model: object
    setup: object
    t: object  # this rank's LinkTensors
    prior: Conjugate
    n_workers: int
    n_annotations: int
    lo: int  # the position of this rank's first annotation among all
    sh: object  # the distributed Shard (or the one process)
    device: str
    steps: int  # steps per epoch, ⌈N / batch_size⌉
    batch_size: int
    annotation_batch: int
    warmup: int  # epochs
    restart: bool  # the k-means restart after the warm-up
    pretrain: int
    lr: float
    work: Work
    seed: int = 0  # the initialisation's seed (the networks' and the k-means restart's)
    degree: torch.Tensor | None = None  # every item's number of annotations (None: mixture_step="uniform")
    start_rounds: int = 0  # rounds of EM with the links after pretraining's mixture (start="links")
    graph: bool = False  # each epoch's steps read the whole graph's messages (mixture_step="graph")


class Info(NamedTuple):
    """What a step did: its step size ρ_t on the globals (Eq. 17) and its mini-batch's J (Eq. 16)."""

    rho: float
    J: float


def _weights(nets) -> dict:
    return {k: v.detach().clone() for k, v in nets.state_dict().items()}


def _copy_adam(adam: dict) -> dict:
    """A copy of an Adam state_dict, its tensors cloned: the optimiser updates its own in place."""
    return {"state": {i: {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
                      for i, s in adam["state"].items()},
            "param_groups": [dict(g) for g in adam["param_groups"]]}


def working(fx: Fixed, state: State):
    """The networks and optimiser holding ``state`` (loaded unless they hold it already)."""
    w = fx.work
    if w.state is not state:
        w.nets.load_state_dict(state.nets)
        w.opt = torch.optim.Adam(w.nets.parameters(), lr=fx.lr)
        w.opt.load_state_dict(_copy_adam(state.adam))
        w.state = state
    return w.nets, w.opt


def init(fx: Fixed, gen) -> State:
    """The start from ``gen`` (the loop's generator, seeded with ``fx.seed``): the networks from that
    seed, the authors' random q (:func:`init_conjugate`) or, with ``pretrain``, VaDE-style
    pretraining's (:func:`pretrain_natgrad`), and a fresh Adam."""
    seed = fx.seed
    nets = fx.model.networks(fx.setup, seed=seed).to(fx.device)
    q = init_conjugate(fx.model, fx.n_workers, gen, fx.device)
    if fx.pretrain:
        q = pretrain_natgrad(fx.model, nets, fx.t, fx.prior, q, fx.pretrain, fx.batch_size, fx.lr, gen,
                             fx.device, seed, fx.sh, fx.start_rounds if fx.n_annotations else 0)
    opt = torch.optim.Adam(nets.parameters(), lr=fx.lr)
    state = State(q, _weights(nets), _copy_adam(opt.state_dict()), gen.get_state(),
                  torch.zeros(0, dtype=torch.long), 0, 0.0, int(seed))
    fx.work.nets, fx.work.opt, fx.work.state = nets, opt, state
    return state


def step(state: State, batch: loop.Batch, fx: Fixed) -> tuple[State, Info]:
    """One step of Algorithm 1 (:func:`train_step`): the networks' Adam step on J (Eq. 16) and, after
    the warm-up, the globals' natural-gradient step of size ρ_t = ``batch.rho`` (Eq. 17). An epoch's
    first step draws its order of the items (and, at the end of the warm-up, restarts the mixture from
    k-means: :func:`kmeans_globals`). The batch's ``idx`` (every item) and ``pi`` (1) are not used: an
    epoch is a permutation of the items, as in the paper's code, drawn from the generator the state
    carries."""
    t, sh, rho_t = fx.t, fx.sh, batch.rho
    N = t.O.shape[0]
    epoch, k = divmod(state.t, fx.steps)
    nets, opt = working(fx, state)
    gen = torch.Generator()
    gen.set_state(state.rng)
    q, perm, total, graph = state.q, state.perm, state.total, state.graph
    if k == 0:
        if epoch == fx.warmup and fx.restart:
            q = kmeans_globals(fx.model, nets, t, fx.prior, q, state.seed, fx.device)
            q = Conjugate(*sh.broadcast(*q))
        perm, total = torch.randperm(N, generator=gen), 0.0
        if fx.graph:
            graph = epoch_graph(nets, q, t, fx.model.sweeps, fx.n_workers, fx.device, sh)
    A, b = fx.n_annotations, 0 if fx.graph else fx.annotation_batch
    ann = torch.randint(A, (b,), generator=gen) if A and b else torch.zeros(0, dtype=torch.long)
    items = perm[k * fx.batch_size:(k + 1) * fx.batch_size]
    part = split_step(t.O, items, records(t, ann, fx.lo, sh), A, sh.rank, sh.world, fx.device, fx.degree,
                      None if graph is None else graph.msg)
    J, stats = train_step(part, nets, opt, q, (N, fx.n_workers), fx.model.sweeps, gen, sh, epoch, graph)
    if epoch >= fx.warmup:
        q = natgrad_step(q, conjugate_update(fx.prior, stats), rho_t)
    new = State(q, _weights(nets), _copy_adam(opt.state_dict()), gen.get_state(), perm, state.t + 1,
                total + J, state.seed, graph)
    fx.work.state = new
    return new, Info(rho_t, J)


def bound(state: State, idx, scale: float, fx: Fixed) -> float:
    """The bound per item averaged over the epoch just ended: (mean of the steps' J (Eq. 16) − KL of
    the globals from their prior) / N. The loop evaluates it at the end of each epoch."""
    return (state.total / fx.steps - float(kl_globals(state.q, fx.prior))) / fx.t.O.shape[0]


#: the algorithm (:func:`init`, :func:`step`, :func:`bound`) the loop runs; ``fit_natgrad``'s own
#: ``init`` setting (the k-means or random start) shadows the function's name there
ALGORITHM = (init, step, bound)


def fit_natgrad(model, data, seed: int = 0, n_epochs: int | None = None, batch_size: int = 128,
                annotation_batch: int | None = None, lr: float = 1e-3, step_delay: float | None = None,
                forgetting_rate: float | None = None, warmup: int | None = None, init: str = "kmeans",
                pretrain: int | None = None, start: str = "links", n_init: int = 3, tol: float = 0.0,
                patience: int = 10, mixture_step: str = "graph", clusters: str = "vi", device: str = "cpu",
                distributed: bool = False, progress_bar: bool | None = None, setup=None,
                resume=None, checkpoint=None, checkpoint_every: int = 0, callback=None) -> SCDCPosterior:
    """Fit BayesSCDC by natural-gradient SVI (module docstring) for ``n_epochs`` passes over the items,
    on the shared natural-gradient loop (:mod:`crowdzoo.inference.natgrad`), whose iteration is one
    step (one mini-batch): ``n_epochs`` × ⌈N / ``batch_size``⌉ steps. ``n_epochs``, ``pretrain`` and the
    model's ``latent_dim`` and ``hidden`` left at None are set from the data by
    :func:`~.defaults.default_sizes` (the posterior's ``model`` holds the sizes used).

    ``batch_size`` items and ``annotation_batch`` annotations per step (default: the annotations
    spread evenly over an epoch); Adam with ``lr`` for the networks; the globals' step size
    ρ_t = (t + ``step_delay``)^(−``forgetting_rate``) (the Robbins–Monro schedule of crowdGPPL's
    natgrad, Eq. 18 there; default 10 and 0.6, or 100 and 1 after pretraining, where the mixture
    starts from a fit that the larger early steps would undo: docs/scdc-digits-diagnosis.md, part 6);
    ``pretrain`` epochs of VaDE-style pretraining before the ``n_epochs`` (:func:`pretrain_natgrad`;
    the mixture then starts from a Gaussian mixture on the pretrained latent points, in place of the
    warm-up and the k-means restart; 0 is the paper's random start; None, the default, the rule of
    :mod:`~.defaults`); ``start`` "links" (the default: that Gaussian mixture refined by
    ``START_ROUNDS`` rounds of EM whose responsibilities include the annotations' messages,
    :func:`hmrf_em`, so that the links too place the start; on scdc-crowd's overlapping set, one
    initialisation, seeds 0–5, 0.807 against 0.777, higher on every seed; on the digits within a point,
    docs/scdc.md) or "features" (pretraining's Gaussian mixture as it is, the features alone);
    without pretraining ``start`` does nothing; ``warmup`` epochs (default a quarter of
    ``n_epochs``, 0 after pretraining) in which only the networks learn, against the initial mixture,
    before the globals move — without it the mixture collapses onto the untrained recognition network's
    output (on the pinwheel: 2 clusters in use, accuracy 0.38; the paper's "bad initialisation"); t
    counts the steps after the warm-up;
    ``init`` "kmeans" (after the warm-up the
    mixture restarts from k-means on the latent points, :func:`kmeans_globals`) or "random" (the
    authors' random q throughout); ``mixture_step`` "graph" (the default: each epoch's steps read
    every item's messages from the whole annotation graph at the epoch's start, :func:`epoch_graph`;
    ``annotation_batch`` is then unused), "links" (Algorithm 1: each step samples ``annotation_batch``
    annotations, and the mixture's statistics come from their endpoints' local optima with the
    messages of that subgraph and the unannotated items of the uniform rows, :func:`mixture_weights`)
    or "uniform" (from the uniform rows alone, encoded without messages); measured in docs/scdc.md
    ("Whole-graph messages"); ``device`` "cpu" or "cuda".

    ``clusters``: the items' cluster probabilities, "vi" (the default) the variational fixed point
    q*(z_n) (Eq. 14) with the fitted mixture (:func:`finish_workers`), or "gibbs" each item's share of
    the workers' Gibbs sampler's kept sweeps in each cluster, the mixture refit to the chain's clusters
    (so that ``predict`` of new items uses the same labels; the fixed point's are kept where the chain
    emptied a cluster that the fixed point holds); the posterior's ``vi_cluster_probs`` holds the fixed
    point's either way. "gibbs" is not the default: it lost up to 1.8 points on single digits fits,
    and the chain visits the spare clusters that the fixed point switches off. Where the features are
    ambiguous the links move the sampler's mixture off a fit that cuts across the groups: on
    scdc-crowd's overlapping set (six fits, one initialisation each, the former mixture step) the
    chain's clusters scored 0.826 against the fixed point's 0.774 (0.816 against 0.562 on the seed
    that cut across the groups); on scikit-learn's digits, all annotated, 0.788 against 0.782 (five
    fits; docs/scdc.md, ``benchmarks/scdc_gibbs_clusters.py``).

    ``n_init`` initialisations (seeds :func:`~.starts.init_seeds`; each a whole fit, so the fit takes
    ``n_init`` times as long; the paper's runs take the best of 10) and the one with the best final
    bound is kept; ``settings`` records every initialisation's bound. A fit whose clusters emptied or
    merged below K, or whose bound fell from its best, warns (:func:`~.starts.check_collapse`).

    The stop rule (:class:`~crowdzoo.inference.natgrad.StopRule`) reads the bound per item averaged
    over each epoch's steps (:func:`bound`, one value per epoch in ``trace["elbo"]``). ``tol`` 0 (the
    default) runs all ``n_epochs``, as the paper does, and warns (ConvergenceWarning) when the last
    tenth of the epochs still raised the bound by more than 1 %; ``tol`` > 0 stops once the epoch's
    bound changes by less than ``tol`` (relative) from the previous epoch's, after the warm-up and
    two epochs more — the epoch's bound is a noisy estimate, so a small ``tol`` may stop early by
    chance. A bound that falls at ``patience`` epochs in a row halves ρ_t for the rest of the fit.

    ``checkpoint``: a file the loop writes every ``checkpoint_every`` steps and on KeyboardInterrupt
    (the globals, the networks' weights and Adam state, the generator's state, this epoch's order of
    the items, and with ``n_init`` > 1 the finished initialisations' bounds and the best of them);
    ``resume``: such a file, or a natgrad posterior, to continue from: the same posterior, bit for
    bit, as an uninterrupted fit with the same seed and settings (``n_epochs`` counts the whole fit;
    a posterior continues its kept initialisation alone). Pretraining is part of the start and is not
    checkpointed. ``callback(i, state)`` is called after each step.

    ``distributed``: data-parallel over the ranks of a ``torchrun`` launch (module docstring). Each rank
    is given either its shard of the annotations (:meth:`~crowdzoo.LinkData.read_shard`, or
    :meth:`~crowdzoo.LinkData.shard` of data it built; the ranks' shards must tile the annotations in
    rank order, which is checked) or the whole data, of which it keeps its contiguous share; every rank
    needs every item's observations O (checked to agree, with the settings and the numbers of
    annotations and workers). Each step's uniform rows and annotation components are split across the
    ranks, and one all-reduce per step sums the networks' gradients, J and the statistics of Eq. 17. The
    mixture's starts (k-means, pretraining's Gaussian mixture) are computed on every rank and rank 0's
    is broadcast; the final encoding of every item (:func:`encode_all`) runs on every rank with the
    messages summed over the ranks, so that each returns the whole posterior (its ``workers()`` counts
    every rank's annotations). Only rank 0 shows progress, warns and writes checkpoints."""
    if int(batch_size) != batch_size or batch_size < 1:
        raise DataError(f"batch_size: expected an integer ≥ 1, got {batch_size!r}", arg="batch_size")
    model, sizes = resolve(model, data, batch_size)
    n_epochs = sizes.n_epochs if n_epochs is None else n_epochs
    pretrain = sizes.pretrain if pretrain is None else pretrain
    for name, v in (("n_epochs", n_epochs), ("batch_size", batch_size), ("patience", patience)):
        if int(v) != v or v < 1:
            raise DataError(f"{name}: expected an integer ≥ 1, got {v!r}", arg=name)
    for name, v in (("pretrain", pretrain), ("checkpoint_every", checkpoint_every)):
        if int(v) != v or v < 0:
            raise DataError(f"{name}: expected an integer ≥ 0, got {v!r}", arg=name)
    n_init = check_n_init(n_init)
    if not tol >= 0:
        raise DataError(f"tol: expected a number ≥ 0, got {tol!r}", arg="tol")
    step_delay = (100.0 if pretrain else 10.0) if step_delay is None else step_delay
    forgetting_rate = (1.0 if pretrain else 0.6) if forgetting_rate is None else forgetting_rate
    if not 0.5 < forgetting_rate <= 1.0:
        raise DataError(f"forgetting_rate: expected a value in (0.5, 1], got {forgetting_rate!r}",
                        arg="forgetting_rate")
    if not step_delay >= 1.0:
        raise DataError(f"step_delay: expected a value ≥ 1, got {step_delay!r}", arg="step_delay")
    if device != "cpu" and not torch.cuda.is_available():
        raise DataError(f"device: {device!r} requested but torch sees no GPU; use {{device='cpu'}}",
                        arg="device", settings=("device",))
    warmup = (0 if pretrain else n_epochs // 4) if warmup is None else warmup
    if clusters not in ("gibbs", "vi"):
        raise DataError(f"clusters: expected 'gibbs' or 'vi', got {clusters!r}", arg="clusters")
    if init not in ("kmeans", "random"):
        raise DataError(f"init: expected 'kmeans' or 'random', got {init!r}", arg="init")
    if start not in ("links", "features"):
        raise DataError(f"start: expected 'links' or 'features', got {start!r}", arg="start")
    if mixture_step not in ("links", "uniform", "graph"):
        raise DataError(f"mixture_step: expected 'links', 'uniform' or 'graph', got {mixture_step!r}",
                        arg="mixture_step")
    if int(warmup) != warmup or not 0 <= warmup < n_epochs:
        raise DataError(f"warmup: expected an integer in [0, {{n_epochs}} = {n_epochs}), got {warmup!r}",
                        arg="warmup", settings=("n_epochs",))
    sh = replicated(data.n_items, distributed)
    held, lo, A = _annotations(data, sh)
    N, W = data.n_items, max(data.n_workers, 1)
    steps = math.ceil(N / batch_size)
    annotation_batch = annotation_batch if annotation_batch is not None else math.ceil(A / steps)
    ckpt, restarts = loop.read_checkpoint(resume), _restarts(resume)
    setup = ckpt["setup"] if setup is None and ckpt is not None else setup or model.setup(data, seed=seed)
    seeds = init_seeds(seed, n_init)
    if ckpt is not None and restarts is None:  # a posterior: its kept initialisation, continued
        n_init, seeds, restarts = 1, [int(ckpt["state"].seed)], {"index": 0, "bounds": [], "best": None}
    t = link_tensors(held, shard_ok=True)
    degree = annotation_degree(t, N, sh) if mixture_step == "links" and A else None
    with isolated(seed):
        fx = Fixed(model, setup, t, model.prior(W, device), W, A, lo, sh, device, steps, batch_size,
                   annotation_batch, warmup, init == "kmeans" and not pretrain, pretrain, lr,
                   Work(model.networks(setup, seed=seed).to(device), None), degree=degree,
                   start_rounds=START_ROUNDS if start == "links" else 0,
                   graph=mixture_step == "graph" and A > 0)
    settings = loop.Settings(batch_size=N, delay=step_delay, forgetting_rate=forgetting_rate,
                             max_iter=n_epochs * steps, min_iter=(warmup + 2) * steps, tol=tol,
                             eval_every=steps, eval_size=N, patience=patience, warmup=warmup * steps)
    what = "bayesscdc natgrad"

    def fit_one(r, bounds, best):
        s = seeds[r]
        again = ckpt if restarts and r == restarts["index"] else None
        name = what if n_init == 1 else f"{what} (initialisation {r + 1} of {n_init})"
        with isolated(s), sh.quiet():
            _check_replicated(sh, t, (A, W, s, n_init, n_epochs, batch_size, annotation_batch, lr, pretrain,
                                      warmup, step_delay, forgetting_rate, init == "kmeans", tol, patience,
                                      model.n_clusters, model.latent_dim, model.sweeps,
                                      ("uniform", "links", "graph").index(mixture_step), start == "links"))
            problem = loop.algorithm(*ALGORITHM, fx._replace(seed=s), N)
            res = loop.run(problem, settings, shard=sh, seed=s, what=name, advice=ADVICE,
                           advice_settings=ADVICE_SETTINGS, progress_bar=progress_bar, resume=again,
                           checkpoint=checkpoint, checkpoint_every=checkpoint_every, callback=callback,
                           meta=dict(model=model, method="natgrad",
                                     restarts=dict(index=r, bounds=bounds, best=best)), setup=setup)
            if res.stop.reason == "max_iter" and tol == 0:
                _warn_unconverged(np.asarray(res.stop.bounds), name, "bound")
        return res

    done = dict(bounds=restarts["bounds"], best=restarts["best"]) if restarts else {}
    kept = best_of(fit_one, n_init, lambda res: res.stop.bounds[-1], **done)
    res = kept.fit
    with isolated(seeds[kept.index]), sh.quiet():
        nets, _ = working(fx, res.state)
        q = res.state.q
        with torch.no_grad():
            q, loc, phi_vi = finish_workers(q, fx.prior, nets, t, model.sweeps, W, device, sh,
                                            clusters=clusters)
        counts = {"clusters_from": "vi" if loc.phi is phi_vi else "gibbs"}
        if sh.world > 1:  # every worker's annotations, over the ranks' shards (the posterior's table)
            n = torch.bincount(t.w, minlength=W).to(F64)
            counts["worker_annotations"] = sh.sum(n).round().long().tolist()
        trace = np.asarray(res.stop.bounds)
        collapse = check_collapse(loc.phi, trace, what, "longer pretraining ({pretrain=N}, N of 100–200 "
                                  "epochs), another seed, or a larger {n_init}", ("pretrain", "n_init"))
    q = Conjugate(*(x.cpu() for x in q))
    nets = nets.cpu()
    d = model.latent_dim
    looped = {k: res.settings[k] for k in ("iterations", "converged", "stop_reason", "step_scale")}
    return SCDCPosterior(
        model=model, setup=setup, data=data, method="natgrad", trace={"elbo": trace},
        settings=dict(seed=seed, n_epochs=n_epochs, batch_size=batch_size, annotation_batch=annotation_batch,
                      lr=lr, step_delay=step_delay, forgetting_rate=forgetting_rate, warmup=warmup,
                      init=init, pretrain=pretrain, start=start, tol=tol, patience=patience,
                      mixture_step=mixture_step, clusters=clusters, device=device,
                      distributed=distributed, ranks=sh.world, annotations=A, **looped,
                      **init_settings(n_init, kept, seeds), **collapse, **counts),
        cluster_probs=loc.phi.cpu(), vi_cluster_probs=phi_vi.cpu(), x_mean=loc.x.cpu(), pi=q.a / q.a.sum(),
        mu=q.m,
        cov=q.S / (q.nu + d + 1)[:, None, None],
        alpha=q.alpha[:, 0] / q.alpha.sum(-1), beta=q.beta[:, 0] / q.beta.sum(-1),
        alpha_post=q.alpha, beta_post=q.beta, conjugate=q._asdict(),
        net_state={k: v.detach().cpu().clone() for k, v in nets.state_dict().items()},
        checkpoint=res.checkpoint)


def _restarts(resume) -> dict | None:
    """The finished initialisations a checkpoint file records (their bounds and the best of them, the
    index of the one in progress); None for a posterior or no resume."""
    if not isinstance(resume, (str, Path)):
        return None
    from ...core.io import decode, read

    stored = read(resume, loop.CHECKPOINT, "resume").get("restarts")
    return None if stored is None else decode(stored)


def pretrain_natgrad(model, nets, t, prior: Conjugate, q: Conjugate, n_epochs: int, batch_size: int,
                     lr: float, gen, device, seed: int, sh=None, link_rounds: int = 0) -> Conjugate:
    """VaDE-style pretraining (Jiang et al. 2017, §3.3) of BayesSCDC's networks (in place) and a start
    for its mixture: ``n_epochs`` of the recognition network and the decoder as a VAE with a N(0, I)
    prior (x̂_n ~ N(h_n / λ_n, diag 1 / λ_n), reparameterised, so that λ learns a scale; a plain
    autoencoder on h_n / λ_n leaves λ untrained), then a full-covariance Gaussian mixture
    (scikit-learn, K components) on the latent points h_n / λ_n, whose responsibilities and the
    potentials' variances 1 / λ_n give the conjugate posterior (the workers' q kept). With
    ``link_rounds``, the mixture is first refined by that many rounds of EM whose responsibilities
    include the annotations' messages at ``q``'s workers (:func:`hmrf_em`): the Gaussian mixture
    ignores the links, and where the features blur the groups it can cut across them, a start that the
    slow natural-gradient steps after pretraining do not leave. ``sh`` (a distributed fit's
    :class:`~crowdzoo.inference.distributed.Shard`): each rank takes a contiguous part of every batch
    and the gradients are summed across ranks (the EM's messages too); the mixture is rank 0's."""
    from sklearn.mixture import GaussianMixture

    sh = sh or replicated(t.O.shape[0], False)
    N, d = t.O.shape[0], model.latent_dim
    opt = torch.optim.Adam(nets.parameters(), lr=lr)
    for _ in range(n_epochs):
        perm = torch.randperm(N, generator=gen)
        for lo in range(0, N, batch_size):
            idx = perm[lo:lo + batch_size]
            b = idx.shape[0]
            mine = slice(*bounds(b, sh.rank, sh.world))
            eps = torch.randn((b, d), generator=gen, dtype=F64)[mine].to(device)
            opt.zero_grad()
            if mine.stop > mine.start:  # a rank may hold none of a short last batch
                _vae_loss(nets, t.O[idx[mine]].to(device), eps, b).to(DTYPE).backward()
            sh.sum_grads(nets.parameters())
            opt.step()
    with torch.no_grad():
        h, lam = potentials(nets, t.O.to(device))
    x = (h / lam).cpu()
    K = min(model.n_clusters, x.shape[0])
    gmm = GaussianMixture(K, covariance_type="full", n_init=3, reg_covar=1e-4, random_state=seed)
    gmm.fit(x.numpy())
    phi = torch.zeros(x.shape[0], model.n_clusters, dtype=F64)
    phi[:, :K] = torch.as_tensor(gmm.predict_proba(x.numpy()), dtype=F64)
    if link_rounds:
        weight, _, _ = relational_weights(expected(q), t.w.to(device), t.L.to(device, F64))
        fitted = (torch.as_tensor(v, dtype=F64, device=device)
                  for v in (np.log(gmm.weights_), gmm.means_, gmm.covariances_))
        phi[:, :K] = hmrf_em(x.to(device), *fitted, phi[:, :K].to(device), t.i.to(device), t.j.to(device),
                             weight, link_rounds, model.sweeps, gmm.reg_covar,
                             None if sh.world == 1 else sh.sum).cpu()
    return Conjugate(*sh.broadcast(*mixture_globals(phi, x, lam, prior, q, device)))


def _vae_loss(nets, o, eps, b: int):
    """The negative VAE bound of observations ``o`` (a share of a batch of ``b``) over ``b``: KL of
    N(h / λ, diag 1 / λ) from N(0, I), minus log p(o | x̂) at x̂ = h / λ + ``eps`` / √λ."""
    h, lam = nets.potentials(o)
    x = h / lam
    kl = 0.5 * (1 / lam + x * x - 1 + torch.log(lam)).sum(-1).sum() / b
    x = x + eps / lam.sqrt()
    return kl - nets.obs_dist(x.to(DTYPE)).log_prob(o).to(F64).sum() / b


def _annotations(data, sh):
    """(this rank's annotations, the position of its first among all, A): a shard as given (the ranks'
    shards checked to tile the annotations, :meth:`~crowdzoo.LinkData.read_shard`), or the whole data's
    contiguous 1/R (:meth:`~crowdzoo.LinkData.shard`); one process: the whole data."""
    if data.is_shard:
        lo, hi, A = data.annotation_range
        if sh.world == 1:
            raise DataError(f"data: holds annotations {lo}..{hi - 1} of {A} (one rank's shard); fit it with "
                            "{distributed=True} inside the torchrun launch, or give the whole data",
                            arg="data", settings=("distributed",))
        check_tiling(lo, hi, A, sh.rank, sh.world, "annotations")
        return data, lo, A
    A = data.n_annotations
    data = dataclasses.replace(data, annotation_range=None)
    if sh.world == 1:
        return data, 0, A
    return data.shard(sh.rank, sh.world), A * sh.rank // sh.world, A


def _check_replicated(sh, t, settings) -> None:
    """A DataError on every rank of a distributed fit unless all hold the same observations (sizes and
    position-weighted sums of O) and ``settings`` (the number of annotations and workers among them)."""
    if sh.world == 1:
        return
    O = t.O.to(F64)
    sums = [O.sum(), (O * torch.arange(1, O.shape[0] + 1, dtype=F64)[:, None]).sum()]
    sh.agree([*t.O.shape, *(float(v) for v in sums), *(float(v) for v in settings)],
             "data (sizes and checksums of O, the numbers of annotations and workers) or settings")


def potentials(nets, O):
    """The recognition potentials (h, λ) of every row of ``O``, in chunks."""
    out = [nets.potentials(O[lo:lo + _CHUNK]) for lo in range(0, O.shape[0], _CHUNK)]
    return torch.cat([h for h, _ in out]), torch.cat([lam for _, lam in out])


def encode_all(nets, q: Conjugate, t, sweeps: int, device, sh=None):
    """Every item's local optimum on the whole annotation graph (Eq. 12 and 14). ``sh``: a distributed
    fit's :class:`~crowdzoo.inference.distributed.Shard`; each rank holds a shard of the annotations and
    every sweep's messages into the items (N × K) are summed over the ranks."""
    E = expected(q)
    h, lam = potentials(nets, t.O.to(device))
    w, _, _ = relational_weights(E, t.w.to(device), t.L.to(device, F64))
    reduce = None if sh is None or sh.world == 1 else sh.sum
    return local_step(E, h, lam, t.i.to(device), t.j.to(device), w, sweeps, reduce)


def finish_workers(q: Conjugate, prior: Conjugate, nets, t, sweeps: int, n_workers: int, device, sh=None,
                   rounds: int = FINISH_ROUNDS, workers: str = "gibbs", clusters: str = "vi"):
    """The workers' q(α_m), q(β_m) given the fitted networks and mixture, and every item's local optimum
    (:func:`encode_all`) under them. First ``rounds`` alternations of the message passing on the whole
    annotation graph and the workers' expected counts, whose messages read the updated workers: prior +
    Eq. 1's two coins weighted by each annotation's P(same) under its pair belief
    (:func:`~.bayes.pair_same`: the endpoints' q*(z) without the annotation's own message, times its
    likelihood; the mean-field Σ_k φ_ik φ_jk in its place counts a label on a pair the features leave
    ambiguous as the worker's error). The items' local optimum returned is the one under these counts,
    the variational fixed point. The workers' q(α_m), q(β_m) returned are then, by ``workers``:

    * "gibbs" (the default): the posterior of the surrogate model that the variational family
      approximates — mixture, latent points, clusters and workers, the recognition potentials standing
      in for the decoder — by the Gibbs sampler of :mod:`~.gibbs` (``GIBBS_SWEEPS`` sweeps from the
      fixed point's clusters and the fitted mixture, the first ``GIBBS_BURN`` dropped), each worker's
      Beta with the mean and variance of the chain's mixture of conditional Betas. On scdc-crowd's
      overlapping set (980 links, 20 workers; ten fits, docs/scdc.md) its 90 % intervals hold the true
      α_m, β_m 0.905 of the time (400 intervals), against 0.868 for "louis" on the same fits and 0.890
      given the true groups (fitted with the sampled subgraph, ``mixture_step="links"``: 0.897 against
      0.775): the chain carries the clustering's uncertainty jointly, and the links move the sampled
      mixture, so that where the fit cuts across the groups (seed 6: accuracy 0.66) the chain's
      clusters follow them (0.84) and the intervals cover 0.90 (0.80 under "louis"). About 1.3 s at 500
      items and 1,000 annotations.
    * "louis": the pair beliefs' Betas widened by the clusters' uncertainty (:func:`~.bayes.widen_workers`,
      Louis's missing information of the pairs' unknown agreement, taken independent across pairs).
    * "counts": the pair beliefs' Betas as they are, as narrow as a known clustering's.

    Why not the loop's own q(α), q(β): the loop moves them along the natural gradient with ρ_t =
    (t + step_delay)^(−forgetting_rate), the mixture's schedule, so they end as a weighted average of
    the start (the authors' Beta(10, 1): mean 0.91) and every step's noisy target, the start keeping a
    weight of step_delay / (t + step_delay) under the slow schedule that pretraining selects (100 / 280
    after 180 steps).

    The items' clusters returned are, by ``clusters``:

    * "vi": the variational fixed point's q*(z_n) (Eq. 14), with the fitted mixture;
    * "gibbs" (needs ``workers="gibbs"``; the same chain): each item's share of the chain's kept sweeps
      in each cluster, and the mixture's q(π) q(μ, Σ) refit to them (:func:`chain_mixture`), so that
      new items (:func:`encode_new`) take the same labels. The latent points stay the fixed point's.
      Unless the chain emptied a cluster that the fixed point holds (fewer clusters that are the most
      probable one of ≥ 1 % of the items, :func:`~.starts.occupancy`): then the fixed point's clusters
      and mixture, as for "vi". Where the links are few or none the chain can drift: without
      annotations, on three overlapping 4-D groups (``test_overlapping_low_dimensional_groups_keep_every_
      cluster``), every item's most visited cluster was one and the same, the recognition potentials too
      weak to hold the sampled mixture apart.

    Returns (q, the items' local optimum with those clusters, the fixed point's q*(z) (N, K))."""
    if workers not in ("gibbs", "louis", "counts"):
        raise DataError(f"workers: expected 'gibbs', 'louis' or 'counts', got {workers!r}", arg="workers")
    if clusters not in ("gibbs", "vi"):
        raise DataError(f"clusters: expected 'gibbs' or 'vi', got {clusters!r}", arg="clusters")
    if clusters == "gibbs" and workers != "gibbs":
        raise DataError(f"clusters: 'gibbs' reads the workers' Gibbs sampler, but workers is {workers!r}",
                        arg="clusters")
    i, j, w, L = (x.to(device) for x in (t.i, t.j, t.w, t.L.to(F64)))
    distributed = sh is not None and sh.world > 1

    def pair_counts(q):
        loc = encode_all(nets, q, t, sweeps, device, sh)
        weight, same, diff = relational_weights(expected(q), w, L)
        s = pair_same(loc, i, j, weight, same, diff)
        a, b = worker_stats(s, w, L, n_workers, 1.0)
        if distributed:
            a, b = sh.sum(a, b)
        return loc, s, prior.alpha + a, prior.beta + b

    for _ in range(rounds):
        _, _, alpha, beta = pair_counts(q)
        q = q._replace(alpha=alpha, beta=beta)
    loc, s, alpha, beta = pair_counts(q)
    phi_vi = loc.phi
    if workers == "louis":
        missing = missing_information(s, w, L, alpha[:, 0] / alpha.sum(-1), beta[:, 0] / beta.sum(-1),
                                      n_workers)
        if distributed:
            missing = sh.sum(missing)
        alpha, beta = widen_workers(alpha, beta, missing, prior.alpha, prior.beta)
    elif workers == "gibbs":
        h, lam = potentials(nets, t.O.to(device))
        alpha, beta, visits = gibbs_workers(mixture_unaries(h, lam, prior, q), i, j, w, L, prior.alpha,
                                            prior.beta, loc.phi.argmax(-1), loc.phi.shape[1], GIBBS_SWEEPS,
                                            GIBBS_BURN, reduce=sh.sum if distributed else None)
        hard = lambda p: occupancy(torch.nn.functional.one_hot(p.argmax(-1), p.shape[1]).to(F64))[0]  # noqa: E731
        if clusters == "gibbs" and hard(visits) >= hard(phi_vi):
            loc = loc._replace(phi=visits)
            return chain_mixture(loc, prior, q._replace(alpha=alpha, beta=beta)), loc, phi_vi
    return q._replace(alpha=alpha, beta=beta), loc, phi_vi


def chain_mixture(loc, prior: Conjugate, q: Conjugate) -> Conjugate:
    """The mixture's q(π) q(μ, Σ) given every item's cluster probabilities ``loc.phi`` (the Gibbs chain's
    shares of sweeps) and latent q*(x_n) = N(``loc.x``, P_n⁻¹) (the fixed point's): one full-batch
    conjugate update, Eq. 17 at step size 1, with n_k = Σ φ_nk, Σ φ_nk x_n, Σ φ_nk (P_n⁻¹ + x_n x_nᵀ)
    (:func:`~.bayes.item_stats`); ``q``'s workers kept. The kept sweeps' average statistics of the
    chain's own draws of x and z serve new items worse: on scikit-learn's digits (seed 3, a chain of
    its own) ``predict(O)`` of the training features under that mixture matched the classes on 0.49
    of the items, under this one 0.83 (the fit's own mixture: 0.81)."""
    zero = torch.zeros_like(q.alpha)
    new = conjugate_update(prior, Stats(*item_stats(loc, slice(None), 1.0), zero, zero))
    return new._replace(alpha=q.alpha, beta=q.beta)


def encode_new(model, post, O):
    """q*(z) and E[x] of new observations ``O`` (a float tensor), without annotations."""
    nets = model.networks(post.setup, state=post.net_state)
    q = Conjugate(**post.conjugate)
    h, lam = potentials(nets, O)
    loc = local_step(expected(q), h, lam, sweeps=model.sweeps)
    return loc.phi, loc.x
