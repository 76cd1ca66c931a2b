"""SCDC: semi-crowdsourced clustering with a deep generative model (Luo, Tian, Shi, Zhu & Zhang,
NeurIPS 2018, §2; the paper's symbols in brackets).

Generative story, for N items with observations o_n and crowd annotations L on a few item pairs:

    z_n          ~ Cat(π)                                   cluster of item n               [z_n, π]
    x_n | z_n    ~ N(μ_{z_n}, diag σ²_{z_n})                latent point, dimension d       [x_n, μ_k, Σ_k]
    o_n | x_n    ~ decoder_γ(x_n)                           Bernoulli (o in [0, 1]) or Gaussian [γ]
    L_a | z      ~ Bern(α_m)       if z_i = z_j             annotation a = (i, j) by worker m:
                   Bern(1 − β_m)   otherwise                two-coin, Eq. 1 (product: Eq. 2) [α_m, β_m]

α_m is worker m's sensitivity P(must-link | same cluster), β_m its specificity P(cannot-link |
different clusters). In SCDC π, μ, σ, α, β and γ are point estimates.

Variational family (amortised, §2.3; the section is garbled in the paper's text, so this follows
the authors' code as read in ``shared/notes/dpm-scdc.md`` B2): q(z_n | o_n) = Cat(softmax g_φ(o_n))
and q(x_n | o_n, z_n) = N(m_φ(o_n, z_n), diag s²_φ(o_n, z_n)). The ELBO is a sum of item terms and
annotation terms,

    Σ_n Σ_k q(k | o_n) [log p(o_n | x_nk) + log N(x_nk; μ_k, σ_k²) + log π_k − log q(x_nk | o_n, k)
                        − log q(k | o_n)],                 x_nk ~ q(x | o_n, k) (one draw each)
  + Σ_a [s_a log p(L_a | same) + (1 − s_a) log p(L_a | different)],   s_a = Σ_k q(k | o_i) q(k | o_j),

with the sum over z exact (K decoder passes per item) and both sums estimated on independent
uniform mini-batches of items and of annotations, each scaled to its total (the paper's relational
term scaled by #annotations / N once the whole is divided by N). :func:`scdc_model` and
:func:`scdc_guide` are this model and guide as a Pyro program, with z sampled: ``Trace_ELBO`` on them
is an unbiased estimate of the same ELBO (tests/models/scdc/test_scdc.py checks the closed form against
it), and any other guide of z and x runs through them.

Where we depart from the paper: each item's q(z_n) takes its own annotations. The amortised
q(z_n | o_n) is a function of o_n alone, so two items with the same features get the same clusters
whatever their links say: the links can only move the encoder's boundary in feature space, and where
the groups overlap no such boundary beats the Bayes classifier of the features (measured in
docs/scdc-links-diagnosis.md). So, as BayesSCDC's q*(z) does (Eq. 14), q(z_n) multiplies the encoder's
q_φ(z_n | o_n) by the messages of the item's annotations:

    q(z_n = k) ∝ q_φ(k | o_n) exp(Σ_{a ∋ n} w_a q̄(z_{n'} = k)),
    w_a = log p(L_a | same) − log p(L_a | different)                    (Eq. 1)

with n' the annotation's other item and q̄ every item's q(z) after ``sweeps`` mean-field sweeps of this
update on the whole annotation graph (:func:`graph_q`), from q_φ. The annotations' term is linear in
q(z_n), so this is the ELBO's coordinate update in q(z_n) with the encoder's log q_φ standing in for
the item's own term c_nk = E_q(x | o, k)[log p(o_n | x) + log N(x; μ_k, σ_k²) − log q(x | o_n, k)] +
log π_k. For it to stand there, the encoder is fitted to the item's own term alone: its gradient is
that of the paper's item term with q_φ in place of q(z_n) and c_nk held fixed (its optimum: q_φ(k |
o_n) ∝ exp c_nk), not that of the ELBO through q(z_n) (q(z_n) reads q_φ held fixed), which vanishes
where an item's many links saturate q(z_n) and would leave q_φ, the clusters of a new item, untrained.
The route recomputes q̄ and the messages at the start of each epoch and holds them fixed over the
epoch's steps, so a step reads the messages of every annotation of its rows without encoding their
neighbours, in time and memory that do not grow with the annotations, and the workers' gradient is that
of the annotations' term at q(z) held fixed (the M-step of variational EM: at a coordinate optimum of
q(z), the path through q(z) adds nothing to the gradient); the ELBO above is
evaluated at this q(z) (:func:`elbo` with a :class:`Graph`), and the posterior's cluster probabilities
are q̄ after training. ``sweeps=0`` is the paper's q(z | o) alone; an item without annotations, or a
new one, gets q_φ(z | o).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from torch import nn

from ...errors import DataError

DTYPE = torch.float32  # networks train in float32 (the GP models' float64 is for their Cholesky algebra)


@dataclass
class SCDC:
    """Semi-crowdsourced clustering with a deep generative model (module docstring).

    Parameters
    ----------
    n_clusters : K, clusters in the mixture (the paper's experiments: 50).
    latent_dim : d, dimension of the latent points x_n; None (the default): set from the data by
        :func:`~.defaults.default_sizes` (min(D, 8); the paper: 8).
    hidden : hidden layer widths of every network (encoder and decoder); None: set from the data (two
        layers of 64–512 by D; the paper: two of 500).
    likelihood : "bernoulli" (observations in [0, 1], e.g. images), "gaussian", or "auto" (Bernoulli
        when every observation lies in [0, 1]).
    worker_init : starting α_m = β_m of every worker (a reliable-but-unsure 0.8).
    standardise : with a Gaussian likelihood, whether the networks read each feature centred and
        scaled by its mean and sd in the training data, the decoder's Gaussian mapped back to the
        data's units (:func:`observation_setup`): None (the default) where some feature is far from
        unit scale (:func:`far_from_unit_scale`: a mean beyond ±10 or an sd outside [0.1, 10]), so that
        features in raw units (a price in euros beside a length in metres) neither swamp the networks
        nor the others (unstandardised, both models put every item of such a set in one cluster);
        True always; False never.
    settings : "auto" (what is left unset here and in the route — ``latent_dim``, ``hidden``,
        ``pretrain``, ``n_epochs`` — follows the rule of :mod:`~.defaults`) or "paper" (the paper's MNIST
        settings: d = 8, two layers of 500, no pretraining, 200 epochs; :meth:`paper_mnist`).
    """

    n_clusters: int = 50
    latent_dim: int | None = None
    hidden: tuple | None = None
    likelihood: str = "auto"
    worker_init: float = 0.8
    standardise: bool | None = None
    settings: str = "auto"

    def __post_init__(self):
        check_architecture(self)
        if not 0.5 < float(self.worker_init) < 1.0:
            raise DataError(f"worker_init: expected a value in (0.5, 1), got {self.worker_init!r}")

    @classmethod
    def paper_mnist(cls, **kw):
        """The paper's MNIST settings (§5.3): K = 50, d = 8, two hidden layers of 500, and in the
        route no pretraining and 200 epochs (``settings="paper"``); ``kw`` overrides any field."""
        return paper_model(cls, kw)

    def setup(self, data, seed: int = 0) -> SCDCSetup:
        """The observation likelihood and dimension for ``data`` (a LinkData)."""
        return observation_setup(self.likelihood, data.O, standardise=self.standardise)

    def networks(self, setup: SCDCSetup, seed: int = 0, state: dict | None = None) -> Networks:
        """The encoder and decoder (:class:`Networks`), initialised from ``seed`` or loaded from
        ``state`` (a posterior's ``net_state``)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            nets = Networks(setup.n_features, self.n_clusters, self.latent_dim, self.hidden, setup.likelihood,
                            setup.loc, setup.scale)
        if state is not None:
            nets.load_state_dict(state)
        return nets


class Standardised(nn.Module):
    """A network whose inputs o are read as (o − loc) / scale per feature (buffers; none where ``loc``
    is None) and whose Gaussian decoder maps back, p(o | x) = N(loc + scale · mean, scale · sd)."""

    def _standardise(self, loc, scale):
        if loc is not None:
            self.register_buffer("obs_loc", torch.tensor(loc, dtype=DTYPE))
            self.register_buffer("obs_scale", torch.tensor(scale, dtype=DTYPE))

    def inputs(self, o):
        """The observations as the networks read them."""
        return (o - self.obs_loc) / self.obs_scale if hasattr(self, "obs_loc") else o

    def observations(self, out, log_scale):
        """p(o | x) from the decoder's output, in the data's units."""
        return observation_dist(out, log_scale, self.likelihood, getattr(self, "obs_loc", None),
                                getattr(self, "obs_scale", None))


class Networks(Standardised):
    """Encoder q(z | o) (D → hidden → K logits), q(x | o, z) ([o, one-hot z] → hidden → (m, log s))
    and decoder p(o | x) (d → hidden → D; Bernoulli logits, or Gaussian means with a learned
    log-scale per dimension); a Gaussian likelihood's features standardised by ``loc``, ``scale``
    (:class:`Standardised`)."""

    def __init__(self, D, K, d, hidden, likelihood, loc=None, scale=None):
        super().__init__()
        self.D, self.K, self.d, self.likelihood = D, K, d, likelihood
        self.q_z = mlp([D, *hidden, K])
        self.q_x = mlp([D + K, *hidden, 2 * d])
        self.decoder = mlp([d, *hidden, D])
        self.log_scale = nn.Parameter(torch.zeros(D))
        self._standardise(loc, scale)

    def z_logits(self, o):
        return self.q_z(self.inputs(o))

    def x_params(self, o, z_onehot):
        """(m, s) of q(x | o, z), broadcasting o (..., D) against z_onehot (..., K)."""
        batch = torch.broadcast_shapes(o.shape[:-1], z_onehot.shape[:-1])
        h = self.q_x(torch.cat([self.inputs(o).expand(*batch, self.D), z_onehot.expand(*batch, self.K)], -1))
        m, log_s = h.split(self.d, -1)
        return m, torch.nn.functional.softplus(log_s) + 1e-4

    def obs_dist(self, x):
        """p(o | x) as a distribution over the D observed values (event dim 1)."""
        return self.observations(self.decoder(x), self.log_scale)


def mlp(sizes):
    """Linear layers with ReLU between them (none after the last)."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def paper_model(cls, kw: dict):
    """``cls`` (SCDC or BayesSCDC) at the paper's MNIST settings, ``kw`` overriding any field."""
    from .defaults import PAPER_MNIST

    return cls(**{"n_clusters": 50, "latent_dim": PAPER_MNIST.latent_dim, "hidden": PAPER_MNIST.hidden,
                  "settings": "paper", **kw})


def check_architecture(model) -> None:
    """The checks SCDC and BayesSCDC share: K, d ≥ 1, layer widths ≥ 1 (d and the widths may be None:
    set from the data when fitted), a known likelihood and ``settings``."""
    from .defaults import SETTINGS

    for name in ("n_clusters", "latent_dim"):
        v = getattr(model, name)
        if v is None and name == "latent_dim":
            continue
        if int(v) != v or v < 1:
            raise DataError(f"{name}: expected an integer ≥ 1, got {v!r}", arg=name)
    if model.hidden is not None:
        model.hidden = tuple(int(h) for h in model.hidden)
        if any(h < 1 for h in model.hidden):
            raise DataError(f"hidden: layer widths must be ≥ 1, got {model.hidden}", arg="hidden")
    if model.settings not in SETTINGS:
        raise DataError(f"settings: expected one of {SETTINGS}, got {model.settings!r}")
    if model.likelihood not in ("auto", "bernoulli", "gaussian"):
        raise DataError("likelihood: expected 'auto', 'bernoulli' or 'gaussian', got "
                        f"{model.likelihood!r}")


#: the features' scale outside which ``standardise=None`` standardises them: some feature's mean
#: beyond ±``UNIT_SCALE[1]``, or its sd outside [``UNIT_SCALE[0]``, ``UNIT_SCALE[1]``]
UNIT_SCALE = (0.1, 10.0)


def far_from_unit_scale(O) -> bool:
    """Whether some feature of ``O`` (n, D) is far from unit scale (:data:`UNIT_SCALE`): a mean beyond
    ±10, or a non-zero sd outside [0.1, 10]. Networks that start near unit scale and move by steps of
    Adam's size cannot reach a feature's mean of thousands in the steps a fit has (features in raw
    units put every item in one cluster, docs/scdc.md), while rescaling data already near unit scale
    changed what the models learn (the pinwheel, sd 7: 0.945 raw against 0.851 standardised)."""
    O = np.asarray(O, dtype=np.float64)
    sd = O.std(0)
    lo, hi = UNIT_SCALE
    return bool((np.abs(O.mean(0)) > hi).any() or (sd > hi).any() or ((sd > 0) & (sd < lo)).any())


def observation_setup(likelihood: str, O, noise: float | None = None,
                      standardise: bool | None = None) -> SCDCSetup:
    """The observation likelihood ("auto": Bernoulli when every value of ``O`` lies in [0, 1]), the
    observations' dimension, for a Gaussian likelihood that ``standardise`` s (None: where the
    features are far from unit scale, :func:`far_from_unit_scale`) each feature's mean and sd in ``O``
    (1 for a constant feature), by which the networks standardise it, and, with ``noise``
    given, the cap on the decoder's log noise sd per feature: log(``noise`` × the feature's sd as the
    networks read it: 1 standardised; else its sd in ``O``, 1 for a constant feature)."""
    if likelihood == "auto":
        likelihood = "bernoulli" if (O.min() >= 0.0 and O.max() <= 1.0) else "gaussian"
    elif likelihood == "bernoulli" and (O.min() < 0.0 or O.max() > 1.0):
        raise DataError("likelihood: 'bernoulli' needs observations in [0, 1]; got values in "
                        f"[{O.min():g}, {O.max():g}] (rescale O, or use likelihood='gaussian')")
    log_noise = loc = scale = None
    if likelihood == "gaussian":
        O64 = np.asarray(O, dtype=np.float64)
        sd = O64.std(0)
        sd = np.where(sd > 0, sd, 1.0)
        standardise = far_from_unit_scale(O64) if standardise is None else bool(standardise)
        if standardise:
            loc, scale = tuple(float(v) for v in O64.mean(0)), tuple(float(v) for v in sd)
        if noise is not None:
            log_noise = tuple(float(v) for v in np.log(noise * (np.ones_like(sd) if standardise else sd)))
    return SCDCSetup(likelihood=likelihood, n_features=int(O.shape[1]), log_noise=log_noise, loc=loc,
                     scale=scale)


def observation_dist(out, log_scale, likelihood: str, loc=None, scale=None):
    """p(o | x) from the decoder's output ``out`` as a distribution over the D observed values (event
    dim 1): Bernoulli logits (grey levels in [0, 1] as Bernoulli "probabilities", i.e. −BCE), or
    Gaussian means with a learned log-scale per dimension, in standardised units mapped back to the
    data's by ``loc`` and ``scale`` where given: N(loc + scale · out, scale · exp(log_scale))."""
    if likelihood == "bernoulli":
        return dist.Bernoulli(logits=out, validate_args=False).to_event(1)
    if loc is None:
        return dist.Normal(out, log_scale.exp()).to_event(1)
    return dist.Normal(loc + scale * out, scale * log_scale.exp()).to_event(1)


class SCDCSetup(NamedTuple):
    """What is fixed before inference: the observation likelihood, the observations' dimension, the
    cap on the Gaussian decoder's log noise sd per feature (None: no cap, or a Bernoulli likelihood)
    and the features' means and sds by which the networks standardise them (None: read as given)."""

    likelihood: str
    n_features: int
    log_noise: tuple | None = None
    loc: tuple | None = None
    scale: tuple | None = None


class Globals(NamedTuple):
    """SCDC's point-estimated globals: π (as logits), μ_k, log σ_k, and α_m, β_m (as logits)."""

    pi_logits: torch.Tensor
    mu: torch.Tensor
    log_sigma: torch.Tensor
    alpha_logit: torch.Tensor
    beta_logit: torch.Tensor


def init_globals(K, d, W, worker_init, generator) -> Globals:
    """Starting values: π uniform, μ_k ~ N(0, I), σ_k = 1, α_m = β_m = ``worker_init``."""
    logit = float(np.log(worker_init / (1.0 - worker_init)))
    return Globals(torch.zeros(K), torch.randn(K, d, generator=generator), torch.zeros(K, d),
                   torch.full((W,), logit), torch.full((W,), logit))


class Batch(NamedTuple):
    """One mini-batch: item rows ``O`` (B, D) whose first ``n_uniform`` rows are a uniform sample of the
    N items (the rest: endpoints of the sampled annotations), and the sampled annotations as row
    positions ``li``, ``lj`` into ``O``, workers ``w`` and labels ``L``; ``item_scale`` = N / n_uniform,
    ``ann_scale`` = A / (sampled annotations); ``items`` (B,) the item of each row (None: not needed,
    the rows' q(z) being the encoder's alone)."""

    O: torch.Tensor
    n_uniform: int
    li: torch.Tensor
    lj: torch.Tensor
    w: torch.Tensor
    L: torch.Tensor
    item_scale: float
    ann_scale: float
    items: torch.Tensor | None = None


class Graph(NamedTuple):
    """The whole annotation graph — annotations a = (i_a, j_a) by workers ``w`` with labels ``L`` —,
    ``q_bar`` (N, K), every item's q(z) after the last mean-field sweeps on it, and ``msg`` (N, K), the
    messages Σ_{a ∋ n} w_a q_bar(z_{n'}) into every item under the workers of that time (both held fixed
    while the steps read them: :func:`link_q`)."""

    i: torch.Tensor
    j: torch.Tensor
    w: torch.Tensor
    L: torch.Tensor
    q_bar: torch.Tensor
    msg: torch.Tensor | None = None


def two_coin_loglik(L, alpha_logit, beta_logit):
    """(log p(L | same), log p(L | different)) of Eq. 1: Bern(L | α) and Bern(L | 1 − β)."""
    same = -torch.nn.functional.binary_cross_entropy_with_logits(alpha_logit, L, reduction="none")
    diff = -torch.nn.functional.binary_cross_entropy_with_logits(-beta_logit, L, reduction="none")
    return same, diff


def link_weight(L, alpha_logit, beta_logit):
    """w_a = log p(L_a | same) − log p(L_a | different) (Eq. 1): what annotation a by worker m adds to
    the log-odds that its two items share a cluster, log α_m − log(1 − β_m) for a must-link and
    log(1 − α_m) − log β_m for a cannot-link."""
    same, diff = two_coin_loglik(L, alpha_logit, beta_logit)
    return same - diff


def link_messages(q, i, j, w_a, chunk: int = 65536):
    """Σ_{a ∋ n} w_a q(z_{n'}) into each item n of ``q`` (N, K) from the annotations a = (i, j) with
    weights ``w_a``: the annotations' part of the coordinate update of q(z_n) (BayesSCDC's Eq. 14
    relational term with E[w_a]), in chunks of annotations so that the temporaries stay O(chunk · K)
    however many annotations there are."""
    msg = torch.zeros_like(q)
    for lo in range(0, i.shape[0], chunk):
        a, b, v = i[lo:lo + chunk], j[lo:lo + chunk], w_a[lo:lo + chunk, None]
        msg = msg.index_add(0, a, v * q[b]).index_add(0, b, v * q[a])
    return msg


def link_q(log_q_enc, msg):
    """q(z_n = k) ∝ q_φ(z_n = k | o_n) exp(msg_nk) and its log: the encoder's q(z | o) as the item's own
    potential, the messages of its annotations added in log space (module docstring)."""
    log_q = torch.log_softmax(log_q_enc + msg, -1)
    return log_q, log_q.exp()


def graph_q(log_q_enc, graph: Graph, g: Globals, sweeps: int):
    """Every item's q(z) (N, K) after ``sweeps`` mean-field sweeps on the whole annotation graph from
    the encoder's q(z | o) (``log_q_enc``, N × K), every item updated at once in each sweep
    (:func:`link_q` of :func:`link_messages` of the sweep before)."""
    w_a = link_weight(graph.L, g.alpha_logit[graph.w], g.beta_logit[graph.w])
    q = log_q_enc.exp()
    for _ in range(sweeps):
        _, q = link_q(log_q_enc, link_messages(q, graph.i, graph.j, w_a))
    return q


def scdc_model(batch: Batch, nets: Networks, g: Globals):
    """SCDC as a Pyro program on one mini-batch (module docstring), z sampled. Endpoint rows beyond
    the uniform sample are masked out of the item terms: their z only feed the annotations."""
    pyro.module("scdc", nets)
    B = batch.O.shape[0]
    uniform = torch.arange(B, device=batch.O.device) < batch.n_uniform
    with pyro.plate("items", B), poutine.scale(scale=batch.item_scale), poutine.mask(mask=uniform):
        z = pyro.sample("z", dist.Categorical(logits=g.pi_logits))
        x = pyro.sample("x", dist.Normal(g.mu[z], g.log_sigma[z].exp()).to_event(1))
        pyro.sample("o", nets.obs_dist(x), obs=batch.O)
    same_ll, diff_ll = two_coin_loglik(batch.L, g.alpha_logit[batch.w], g.beta_logit[batch.w])
    with pyro.plate("annotations", batch.L.shape[0]), poutine.scale(scale=batch.ann_scale):
        pyro.factor("L", torch.where(z[batch.li] == z[batch.lj], same_ll, diff_ll))


def scdc_guide(batch: Batch, nets: Networks, g: Globals):
    """The amortised guide q(z | o) q(x | o, z) (module docstring)."""
    pyro.module("scdc", nets)
    B = batch.O.shape[0]
    uniform = torch.arange(B, device=batch.O.device) < batch.n_uniform
    with pyro.plate("items", B), poutine.scale(scale=batch.item_scale), poutine.mask(mask=uniform):
        z = pyro.sample("z", dist.Categorical(logits=nets.z_logits(batch.O)))
        m, s = nets.x_params(batch.O, torch.nn.functional.one_hot(z, nets.K).to(batch.O.dtype))
        pyro.sample("x", dist.Normal(m, s).to_event(1))


def elbo(batch: Batch, nets: Networks, g: Globals, generator=None, graph: Graph | None = None):
    """The ELBO estimate of one mini-batch with the sum over z exact (module docstring): a scalar
    (to be maximised), and q(z) of the batch's rows (B, K). With ``graph``, each row's q(z) takes the
    messages of all its item's annotations, ``graph.msg`` (:func:`link_q`); without, it is the encoder's
    q(z | o) alone."""
    K = nets.K
    O = batch.O
    log_q_enc = torch.log_softmax(nets.z_logits(O), -1)  # (B, K)
    log_q = log_q_enc
    if graph is not None:
        log_q, _ = link_q(log_q_enc.detach(), graph.msg[batch.items])
    q = log_q.exp()
    n = batch.n_uniform
    eye = torch.eye(K, dtype=O.dtype, device=O.device)
    m, s = nets.x_params(O[:n, None, :], eye)  # (n, K, d)
    eps = torch.randn(m.shape, generator=generator, dtype=m.dtype).to(m.device)  # a CPU generator
    x = m + s * eps
    log_px = dist.Normal(g.mu, g.log_sigma.exp()).log_prob(x).sum(-1)  # (n, K)
    log_qx = dist.Normal(m, s).log_prob(x).sum(-1)
    log_po = nets.obs_dist(x).log_prob(O[:n, None, :])  # (n, K)
    log_pi = torch.log_softmax(g.pi_logits, -1)
    own = log_po + log_px + log_pi - log_qx  # (n, K): the item's own term, by cluster
    items = (q[:n] * (own - log_q[:n])).sum()
    total = batch.item_scale * items
    if graph is not None:  # the encoder's own objective: its gradient, not its value (module docstring)
        q_enc = log_q_enc[:n].exp()
        enc = (q_enc * (own.detach() - log_q_enc[:n])).sum()
        total = total + batch.item_scale * (enc - enc.detach())
    if batch.L.shape[0]:
        s_a = (q[batch.li] * q[batch.lj]).sum(-1)
        same_ll, diff_ll = two_coin_loglik(batch.L, g.alpha_logit[batch.w], g.beta_logit[batch.w])
        total = total + batch.ann_scale * (s_a * same_ll + (1.0 - s_a) * diff_ll).sum()
    return total, q


__all__ = ["SCDC", "SCDCSetup", "Networks", "check_architecture", "observation_setup", "observation_dist",
           "Globals", "Batch", "Graph", "scdc_model", "scdc_guide", "elbo", "two_coin_loglik", "init_globals",
           "link_weight", "link_messages", "link_q", "graph_q"]
