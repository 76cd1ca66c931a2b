"""Simulation-based calibration (SBC) of a model's inference routes (Talts, Betancourt, Simpson,
Vehtari & Gelman 2018, "Validating Bayesian inference algorithms with simulation-based calibration",
arXiv:1804.06788).

If θ̃ ~ p(θ) and ỹ ~ p(y | θ̃) are drawn from the model's own generative program and θ_1..θ_L are
draws of the exact posterior p(θ | ỹ), then for any scalar summary h the rank

    r = #{l : h(θ_l) < h(θ̃)}   ∈ {0, …, L}

is uniform on {0, …, L} (Talts et al., Theorem 1). Repeating the simulation S times gives S ranks
per summary; a route whose posterior is too narrow puts θ̃ in the tails of its draws too often (a
∪-shaped rank histogram), one that is too wide too rarely (∩-shaped), and one that is biased shifts
the ranks to one side. Beside the ranks this module reports the route's central 50 % and 90 %
interval coverage of θ̃, which a calibrated posterior attains on average over the prior.

The prior is the model's: θ̃ and ỹ come from running the Pyro program that the svi and nuts routes
fit (``model.program``) under :func:`pyro.poutine.uncondition` and :func:`pyro.poutine.trace`, so
that the labels are sampled instead of observed. The design (item features, which pairs are
compared, by which user) is drawn once per simulation and is not a parameter. The problems are
tiny and the GPs exact (every item inducing): a sparse model's program integrates the conditional
noise of the items' utilities into the likelihood, so the items' utilities themselves would not be
in its trace.

DPM's program sums each user's community out in a factor, so it has no label site: its prior
draw (:func:`_dpm_simulate`) takes the sticks and the communities' utilities from the program's
prior trace and draws the memberships and labels beside it, with the program's stick weights and
label directions.

BayesSCDC (Luo et al. 2018, §3) has networks whose weights are point estimates, with no prior to
draw them from; what is Bayesian given the data is q(z) q(π) q(α) q(β). Its draw
(:func:`_scdc_simulate`) follows the model's generative story with the mixture's components fixed:
π, the workers' two-coin α_m, β_m (Eq. 1) from the model's priors (Eq. 6), clusters z_n ~ Cat(π),
observations around fixed centres far apart (the decoder the identity) and the annotations from the
two coins. The observations then fix the partition, whatever μ, Σ and decoder a fit learns, and
p(π, α, β | data) is the conjugate posterior given the true partition — which does not depend on
the fixed components, so the ranks of π and of α, β test the route. Drawing μ, Σ from the NIW and
the observations through a decoder would instead make the ranks judge how well the networks learn
that decoder. The summaries are label-invariant: two workers' α and β, the weight of item 0's
cluster, the largest weight, and whether two items share a cluster (which, with the partition fixed
by the observations, tests that the fit finds it rather than q(z)'s spread). SCDC is not checked
(:data:`UNCHECKED`): its π, α, β are point estimates.

The summaries are functions of the variables that a posterior's ``sample`` returns, which are
computed from the prior trace the same way (:class:`Spec`): a few items' utilities, utility
differences and log scales; for crowdGPPL the consensus and personal utilities F = t + VᵀW, which do
not change when the latent components are permuted or flipped in sign (the components themselves
are not identified, so their ranks would test the labelling rather than the posterior).

``run_one(seed)`` of a :class:`Check` runs simulation ``seed``; ``crowdzoo compare sbc MODEL --route R
--sims S --draws L`` runs S of them through :func:`crowdzoo.comparisons.run` and prints
:func:`summarise`'s table (a rank-histogram figure, :func:`figure`, beside ``--out``).
"""
from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from .markdown import cell

#: the route settings of a simulation's fit (``quick``: a smoke run's). natgrad keeps the length-scales
#: at the median heuristic, as the prior program does (learning them would fit a different model).
ROUTE_SETTINGS = {
    "natgrad": {"learn_kernel": False, "progress_bar": False},
    "ep": {},
    "svi": {"num_steps": 1500, "lr": 0.02, "progress_bar": False},
    "nuts": {"num_samples": 300, "warmup_steps": 300, "num_chains": 1},
    "gibbs": {"n_sweeps": 300, "burn_in": 100, "n_chains": 2, "progress_bar": False},
}
QUICK_SETTINGS = {
    "gibbs": {"n_sweeps": 150, "burn_in": 50, "n_chains": 1, "progress_bar": False},
    "svi": {"num_steps": 300, "lr": 0.05, "progress_bar": False},
    "nuts": {"num_samples": 100, "warmup_steps": 100, "num_chains": 1},
}
#: routes that return a point estimate: its "draws" are one value, so ranks say nothing
POINT_ROUTES = ("map",)


@dataclass(frozen=True)
class Problem:
    """The shape of a simulated problem: items (with ``n_features`` features drawn U[0, 10]), labelled
    pairs drawn uniformly, and for crowd models ``n_users`` users (one per label, uniform)."""

    n_items: int = 8
    n_pairs: int = 30
    n_features: int = 2
    n_users: int = 3


@dataclass(frozen=True)
class Spec:
    """How one model is checked: ``model(problem)`` builds it; ``prior_state(sites, setup)`` maps the
    prior trace's sites (name → value) to the variables that its posterior's ``sample`` returns (name
    → tensor with a leading draw dimension of 1); ``quantities(state)`` maps either to the scalar
    summaries h (name → (n,) tensor) and ``groups`` names each summary's group; ``crowd``: the labels
    have users; ``labels(y, data)``: the program's label draws as the data's y (a ≻ b) where they differ
    (None: the same). ``simulate(model, data, seed)`` → (prior state, labels ỹ): the prior draw of a
    model whose program has no label site to uncondition (None: :func:`prior_draw`).

    A model on other data than pairwise labels says how: ``problem`` is its default shape;
    ``design(problem, rng)`` draws a simulation's design (None: :func:`design`), ``data(design, ỹ)``
    builds the data to fit from the design and what ``simulate`` drew (None: the design's pairs with
    labels ỹ), ``draws(post, L, seed)`` takes L posterior draws of the state (None:
    :func:`posterior_draws`), and ``settings`` / ``quick`` replace :data:`ROUTE_SETTINGS` /
    :data:`QUICK_SETTINGS` for its route."""

    model: Callable
    prior_state: Callable
    quantities: Callable
    groups: dict
    crowd: bool = False
    labels: Callable | None = None
    simulate: Callable | None = None
    problem: Problem = field(default_factory=Problem)
    design: Callable | None = None
    data: Callable | None = None
    draws: Callable | None = None
    settings: dict | None = None
    quick: dict | None = None


# ---------------------------------------------------------------------------------------- GPPL
def _gppl_model(problem: Problem):
    from ..models.gppl.model import GPPL

    return GPPL(n_inducing=None, item_residual=False)


def _gppl_state(sites, setup):
    """f at the training items (exact GP: f = f_m) and the inverse scale s."""
    return {"f": sites["f_m"][None], "s": sites["s"].reshape(1)}


def _gppl_quantities(state):
    f, s = state["f"], state["s"]
    return {"f[0]": f[:, 0], "f[1]": f[:, 1], "f[2]": f[:, 2], "f[0] - f[1]": f[:, 0] - f[:, 1],
            "f[2] - f[3]": f[:, 2] - f[:, 3], "log s": s.log()}


_GPPL_GROUPS = {"f[0]": "utility", "f[1]": "utility", "f[2]": "utility", "f[0] - f[1]": "difference",
                "f[2] - f[3]": "difference", "log s": "log scale"}


# ---------------------------------------------------------------------------------------- crowdGPPL
def _crowd_model(problem: Problem):
    from ..models.crowdgppl.model import CrowdGPPL

    return CrowdGPPL(n_components=2, n_inducing=None, n_inducing_users=None, item_residual=False)


def _crowd_state(sites, setup):
    """t (consensus), V (C, N) and W (C, U) at the training items and users (exact item GP,
    independent users), and the scales, as :meth:`CrowdGPPLPosterior.sample` returns them."""
    from ..models.crowdgppl.model import inducing_values

    vals = inducing_values(setup, {k: v[None] for k, v in sites.items()})
    return {"t": vals["t_m"], "V": vals["v_m"], "W": vals["w_m"], "s_t": vals["s_t"], "s_v": vals["s_v"],
            "s_w": vals["s_w"]}


def _crowd_quantities(state):
    t = state["t"]
    F = t[:, :, None] + torch.einsum("nci,ncu->niu", state["V"], state["W"])  # (n, N, U) = t + VᵀW
    return {"t[0]": t[:, 0], "t[1]": t[:, 1], "t[0] - t[1]": t[:, 0] - t[:, 1],
            "F[0, user 0]": F[:, 0, 0], "F[1, user 1]": F[:, 1, 1],
            "F[0] - F[1], user 0": F[:, 0, 0] - F[:, 1, 0], "log s_t": state["s_t"].log()}


_CROWD_GROUPS = {"t[0]": "consensus", "t[1]": "consensus", "t[0] - t[1]": "consensus difference",
                 "F[0, user 0]": "personal", "F[1, user 1]": "personal",
                 "F[0] - F[1], user 0": "personal difference", "log s_t": "log scale"}


# ---------------------------------------------------------------------------------------- Bradley–Terry
def _bt_model(problem: Problem):
    from ..models.bradley_terry.model import BradleyTerry

    return BradleyTerry()


def _bt_state(sites, setup):
    return {"f": sites["f"][None]}


def _bt_quantities(state):
    f = state["f"]
    return {"f[0]": f[:, 0], "f[1]": f[:, 1], "f[0] - f[1]": f[:, 0] - f[:, 1],
            "f[2] - f[3]": f[:, 2] - f[:, 3]}


_BT_GROUPS = {"f[0]": "utility", "f[1]": "utility", "f[0] - f[1]": "difference", "f[2] - f[3]": "difference"}


# ---------------------------------------------------------------------------------------- collabGP
def _collab_model(problem: Problem):
    from ..models.collabgp.model import CollabGP

    return CollabGP(n_latent=2)


def _collab_state(sites, setup):
    """h (D, P) over the distinct pairs (exact: every item a pseudo-input) and w (U, D), independent
    users, as :meth:`CollabGPPosterior.sample` returns them."""
    return {"h": (sites["a"] @ setup.Phi_h.T)[None], "w": sites["w"][None]}


def _collab_labels(y, data):
    """collabGP's program draws each label relative to its pair's (lo, hi) orientation: back to a ≻ b."""
    return np.where(data.a < data.b, y, 1.0 - y)


def _collab_quantities(state):
    g = torch.einsum("nud,ndp->nup", state["w"], state["h"])  # each user's f_lo − f_hi per pair
    return {"g[user 0, pair 0]": g[:, 0, 0], "g[user 1, pair 0]": g[:, 1, 0], "g[user 0, pair 1]": g[:, 0, 1],
            "g[user 2, pair 2]": g[:, 2, 2]}


_COLLAB_GROUPS = dict.fromkeys(["g[user 0, pair 0]", "g[user 1, pair 0]", "g[user 0, pair 1]",
                                "g[user 2, pair 2]"], "personal difference")

# ---------------------------------------------------------------------------------------- DPM communities
def _dpm_model(problem: Problem):
    from ..models.dpm.model import DPMCommunities

    return DPMCommunities(n_inducing=None, item_residual=False)  # the paper's model


def _dpm_simulate(model, data, seed: int):
    """θ̃ and ỹ of the truncated DPM of the svi and nuts routes. Its program sums the memberships out
    in a factor, so it has no label site to uncondition: the sticks β and the communities' whitened
    utilities u are the program's prior trace; each user's community c_u ~ Cat(π) and each label
    y_p ~ Bernoulli(Φ(G_p·u_{c_u})) are drawn here, as the model's generative story writes them. The
    state is what the posterior's ``sample`` returns: each user's utilities at the items, f_u =
    A (L_mm u_{c_u} / √s), and the memberships z."""
    import pyro

    from ..core.seeds import isolated
    from ..models.dpm.model import stick_weights

    setup = model.setup(data, seed=seed)
    fn, args = model.program(setup, data, None)
    G = args[0]
    with isolated(seed), torch.no_grad():
        tr = pyro.poutine.trace(fn).get_trace(*args)
        u = tr.nodes["u"]["value"]
        T = u.shape[0]
        log_pi = stick_weights(tr.nodes["beta"]["value"]) if T > 1 else torch.zeros(1, dtype=u.dtype)
        z = torch.distributions.Categorical(logits=log_pi).sample((data.n_users,))
        users = torch.as_tensor(data.users, dtype=torch.long)
        p = torch.special.ndtr((G * u[z[users]]).sum(-1))
        y = torch.bernoulli(p).numpy()
        A, _ = setup.gp.item_terms(None)
        f = (u @ setup.gp.L_mm.mT / setup.s ** 0.5) @ A.T  # (T, N): every community's utilities
    return {"f": f[z][None], "z": z[None]}, y


def _dpm_quantities(state):
    """Summaries that do not change when the communities are relabelled: users' utilities and their
    differences, whether two users share a community, and the number of communities among the users."""
    f, z = state["f"], state["z"]
    same = (z[:, :, None] == z[:, None, :]).to(torch.float64)
    seen = torch.stack([(z == c).any(1) for c in range(int(z.max()) + 1)], 1)
    return {"f[0], user 0": f[:, 0, 0], "f[0] - f[1], user 0": f[:, 0, 0] - f[:, 0, 1],
            "f[0] - f[1], user 1": f[:, 1, 0] - f[:, 1, 1], "f[2] - f[3], user 2": f[:, 2, 2] - f[:, 2, 3],
            "users 0, 1 together": same[:, 0, 1], "users 0, 2 together": same[:, 0, 2],
            "communities": seen.sum(1).to(torch.float64)}


_DPM_GROUPS = {"f[0], user 0": "personal", "f[0] - f[1], user 0": "personal difference",
               "f[0] - f[1], user 1": "personal difference", "f[2] - f[3], user 2": "personal difference",
               "users 0, 1 together": "co-membership", "users 0, 2 together": "co-membership",
               "communities": "communities"}


# ---------------------------------------------------------------------------------------- BayesSCDC
#: the fixed design's cluster centres: the vertices of a triangle of side 6 in the first two features,
#: with the items' observations spread around them by sd 0.5 (12 sd between two centres)
SCDC_SIDE, SCDC_SD = 6.0, 0.5


class LinkDesign(NamedTuple):
    """One simulation's annotation design: the annotated pairs (positions ``i`` ≠ ``j``), each one's
    worker (every worker annotating at least once), and the sizes."""

    i: np.ndarray
    j: np.ndarray
    workers: np.ndarray
    n_items: int
    n_features: int
    n_workers: int


def _scdc_model(problem: Problem):
    from ..models.scdc.bayes import BayesSCDC

    return BayesSCDC(n_clusters=3, hidden=(32, 32))


def _scdc_design(problem: Problem, rng: np.random.Generator) -> LinkDesign:
    """``n_pairs`` annotations on uniform pairs i ≠ j of ``n_items`` items, by ``n_users`` workers."""
    N, A, W = problem.n_items, problem.n_pairs, problem.n_users
    i = rng.integers(0, N, A)
    j = (i + rng.integers(1, N, A)) % N
    workers = rng.permutation(np.concatenate([np.arange(W), rng.integers(0, W, A - W)]))
    return LinkDesign(i, j, workers, N, problem.n_features, W)


def scdc_centres(K: int, D: int) -> np.ndarray:
    """K cluster centres (K, D) on a circle in the first two features, neighbours ``SCDC_SIDE`` apart."""
    angle = 2 * np.pi * np.arange(K) / K
    radius = SCDC_SIDE / (2 * np.sin(np.pi / K)) if K > 1 else 0.0
    C = np.zeros((K, D))
    C[:, 0], C[:, 1] = radius * np.cos(angle), radius * np.sin(angle)
    return C


def _scdc_simulate(model, design: LinkDesign, seed: int):
    """θ̃ and ỹ = (observations O, annotations L) from BayesSCDC's generative story (Luo et al. 2018,
    §3, Eq. 6 and Eq. 1) with the mixture's components fixed: π ~ Dirichlet(a₀ 1_K), α_m, β_m ~
    Beta(a, b) (the model's priors), z_n ~ Cat(π), o_n ~ N(c_{z_n}, 0.5² I) around the fixed,
    well-separated centres c_k of :func:`scdc_centres` (the decoder the identity), and
    L_a ~ Bern(α_m) if z_i = z_j, else Bern(1 − β_m) for the design's pairs and workers."""
    rng = np.random.default_rng([seed, 2018, 3])
    K, W = model.n_clusters, design.n_workers
    pi = rng.dirichlet(np.full(K, float(model.dirichlet)))
    alpha, beta = rng.beta(*model.worker_prior, size=(2, W))
    z = rng.choice(K, design.n_items, p=pi)
    O = scdc_centres(K, design.n_features)[z] + SCDC_SD * rng.normal(size=(design.n_items, design.n_features))
    w = design.workers
    same = z[design.i] == z[design.j]
    u = rng.random(len(w))
    L = np.where(same, u < alpha[w], u >= beta[w]).astype(np.float64)
    state = {"pi": torch.as_tensor(pi)[None], "z": torch.as_tensor(z)[None],
             "alpha": torch.as_tensor(alpha)[None], "beta": torch.as_tensor(beta)[None]}
    return state, (O, L, z)


def _scdc_data(design: LinkDesign, y):
    """The LinkData of a simulation: its observations and annotations (the true clusters as labels,
    for evaluation only)."""
    from ..data.links import LinkData

    O, L, z = y
    return LinkData.from_arrays(design.i, design.j, L, O, workers=design.workers,
                                worker_ids=np.arange(design.n_workers), labels=z)


def _scdc_draws(post, L: int, seed: int) -> dict:
    """L draws of q(z) q(α) q(β) (the posterior's ``sample``) and of q(π) = Dirichlet(a)."""
    from ..gp.linalg import gamma_draws

    out = post.sample(L, seed=seed)
    a = torch.as_tensor(post.conjugate["a"], dtype=torch.float64)
    gam = gamma_draws(a, torch.ones_like(a), L, torch.Generator().manual_seed(int(seed) + 1))
    return {**out, "pi": gam / gam.sum(-1, keepdim=True)}


def _scdc_quantities(state):
    """Summaries that do not change when the clusters are relabelled: two workers' α and β, the
    weight of item 0's cluster π_{z_0}, the largest weight, and whether items 0 and 1, and items 0
    and 2, share a cluster."""
    z, pi = state["z"], state["pi"].to(torch.float64)
    a, b = state["alpha"].to(torch.float64), state["beta"].to(torch.float64)
    return {"alpha[0]": a[:, 0], "beta[0]": b[:, 0], "alpha[1]": a[:, 1], "beta[1]": b[:, 1],
            "pi[z[0]]": pi.gather(1, z[:, :1].long())[:, 0], "max pi": pi.max(1).values,
            "items 0, 1 together": (z[:, 0] == z[:, 1]).to(torch.float64),
            "items 0, 2 together": (z[:, 0] == z[:, 2]).to(torch.float64)}


_SCDC_GROUPS = {"alpha[0]": "worker", "beta[0]": "worker", "alpha[1]": "worker", "beta[1]": "worker",
                "pi[z[0]]": "mixture weight", "max pi": "mixture weight",
                "items 0, 1 together": "co-membership", "items 0, 2 together": "co-membership"}

#: BayesSCDC's natgrad in a simulation: the route's defaults but one initialisation (the check is of
#: the posterior a fit gives, not of the search over starts) and 100 epochs of pretraining and 100
#: after, where the defaults' rule gives 30 items 200 and 200 (with three initialisations, 10× the
#: time of a fit); ``quick``: 40 and 5
SCDC_SETTINGS = {"n_init": 1, "pretrain": 100, "n_epochs": 100, "progress_bar": False}
SCDC_QUICK = {"n_init": 1, "pretrain": 40, "n_epochs": 5, "progress_bar": False}

#: models SBC cannot check, and why
UNCHECKED = {
    "scdc": "SCDC's globals π, μ, Σ and the workers' α_m, β_m are point estimates and its q(z | o) is the "
            "encoder's, so it has no posterior to rank a prior draw in; check its Bayesian twin "
            "(crowdzoo compare sbc bayesscdc --route natgrad)",
}

#: the models SBC knows how to check, by their names in the zoo's table
SPECS = {
    "gppl": Spec(_gppl_model, _gppl_state, _gppl_quantities, _GPPL_GROUPS),
    "crowdgppl": Spec(_crowd_model, _crowd_state, _crowd_quantities, _CROWD_GROUPS, crowd=True),
    "bradley-terry": Spec(_bt_model, _bt_state, _bt_quantities, _BT_GROUPS),
    "collabgp": Spec(_collab_model, _collab_state, _collab_quantities, _COLLAB_GROUPS, crowd=True,
                     labels=_collab_labels),
    "dpm": Spec(_dpm_model, None, _dpm_quantities, _DPM_GROUPS, crowd=True, simulate=_dpm_simulate),
    "bayesscdc": Spec(_scdc_model, None, _scdc_quantities, _SCDC_GROUPS, simulate=_scdc_simulate,
                      problem=Problem(n_items=30, n_pairs=60, n_features=2, n_users=3), design=_scdc_design,
                      data=_scdc_data, draws=_scdc_draws, settings=SCDC_SETTINGS, quick=SCDC_QUICK),
}


# ---------------------------------------------------------------------------------------- the statistics
def rank_of(truth: float, draws: np.ndarray, rng: np.random.Generator) -> int:
    """#{l : draws_l < truth}, with draws equal to ``truth`` counted below at random (each tie is
    below with probability ½: the uniform rank of Talts et al.'s Theorem 1 for discrete summaries)."""
    below = int((draws < truth).sum())
    ties = int((draws == truth).sum())
    return below + (int(rng.integers(0, ties + 1)) if ties else 0)


def n_bins(S: int, L: int, most: int = 20) -> int:
    """Bins B of the rank histogram: a divisor of L + 1 (so that each bin holds as many ranks), at
    most ``most``, with S / B ≥ 5 expected ranks a bin where S allows (the chi-square test's rule)."""
    divisors = [b for b in range(2, most + 1) if (L + 1) % b == 0]
    ok = [b for b in divisors if S / b >= 5]
    return max(ok) if ok else (min(divisors) if divisors else 1)


def rank_tests(ranks: np.ndarray, L: int, bins: int | None = None) -> dict:
    """Uniformity of ranks on {0, …, L}: the chi-square test over ``bins`` equal bins (p-value), the
    Kolmogorov–Smirnov distance of the normalised ranks (r + ½) / (L + 1) from U(0, 1), the mean
    normalised rank (½ when unbiased) and the share in the outer tenth on either side (0.2 when the
    spread is right; more: the posterior too narrow, fewer: too wide)."""
    from scipy.stats import chisquare, kstest

    ranks = np.asarray(ranks)
    S = len(ranks)
    B = bins or n_bins(S, L)
    counts = np.bincount((ranks * B) // (L + 1), minlength=B)
    u = (ranks + 0.5) / (L + 1)
    return {"sims": S, "bins": B, "chi2 p": float(chisquare(counts).pvalue),
            "KS D": float(kstest(u, "uniform").statistic), "mean rank": float(u.mean()),
            "tails": float(((u < 0.1) | (u > 0.9)).mean())}


def binomial_band(S: int, B: int, level: float = 0.99) -> tuple[float, float]:
    """The central ``level`` interval of a bin's count when S uniform ranks fall in B bins
    (Binomial(S, 1/B)): the band of Talts et al.'s rank histograms."""
    from scipy.stats import binom

    lo, hi = binom.ppf([(1 - level) / 2, (1 + level) / 2], S, 1.0 / B)
    return float(lo), float(hi)


# ---------------------------------------------------------------------------------------- one simulation
def design(problem: Problem, rng: np.random.Generator, crowd: bool):
    """The labelled pairs' design of one simulation (labels all 1, replaced by the prior's): a
    PairwiseData with item features U[0, 10]^D, uniform pairs a ≠ b and, for crowds, uniform users
    (every user in the data)."""
    from ..data.pairwise import PairwiseData
    from ..data.simulate import random_pairs

    X = rng.uniform(0.0, 10.0, size=(problem.n_items, problem.n_features))
    a, b = random_pairs(rng, problem.n_items, problem.n_pairs)
    users = None
    if crowd:
        users = np.concatenate([np.arange(problem.n_users),
                                rng.integers(0, problem.n_users, problem.n_pairs - problem.n_users)])
        users = rng.permutation(users)
    return PairwiseData.from_arrays(a, b, np.ones(problem.n_pairs), X, users=users)


def prior_draw(model, data, seed: int):
    """θ̃ and ỹ from the model's own generative program: its Pyro program for ``data``'s design run
    with the labels unobserved. Returns (setup, {site: value} of the latent sites, labels ỹ)."""
    import pyro
    from pyro.poutine.util import site_is_subsample

    from ..core.seeds import isolated

    setup = model.setup(data, seed=seed)
    fn, args = model.program(setup, data, None)
    with isolated(seed), torch.no_grad():
        tr = pyro.poutine.trace(pyro.poutine.uncondition(fn)).get_trace(*args)
    sites = {n: s["value"].detach() for n, s in tr.nodes.items()
             if s["type"] == "sample" and n != "y" and not site_is_subsample(s)}
    return setup, sites, tr.nodes["y"]["value"].detach().numpy()


def posterior_draws(post, L: int, seed: int) -> dict:
    """L draws of the posterior's variables: a sampler's or a guide's own draws, thinned evenly to L
    (NUTS's autocorrelation thinned away as Talts et al. advise), or L draws of a route's Gaussian
    (mixture) approximation."""
    G = post.weights.shape[0]
    if G >= L and G > 1 and bool(torch.allclose(post.weights, torch.full_like(post.weights, 1.0 / G))) \
            and getattr(post, "covs", None) is None and getattr(post, "v_cov", None) is None \
            and post.method in ("nuts", "svi"):
        keep = torch.as_tensor(np.linspace(0, G - 1, L).round().astype(np.int64))
        return {k: v[keep] for k, v in post.sample(G, seed=seed).items()}
    return post.sample(L, seed=seed)


class Simulation(NamedTuple):
    """One simulation before its ranks: its seed, each summary of θ̃ (name → value) and of the L
    posterior draws (name → (L,) array), the fit's seconds, and the generator that breaks the ranks'
    ties."""

    seed: int
    truth: dict
    draws: dict
    seconds: float
    rng: np.random.Generator


@dataclass
class Check:
    """SBC of ``model`` (a name of :data:`SPECS`) fitted by ``route`` (None: the model's default
    route): each :meth:`run_one` is one simulation with ``draws`` (L) posterior draws on a
    :class:`Problem` (None: the model's :attr:`Spec.problem`). ``settings`` go to the route on top of
    :data:`ROUTE_SETTINGS` (or the model's own, :attr:`Spec.settings`). ``shrink``: draws
    pulled towards their mean by this factor per summary (1: none) — a deliberately miscalibrated
    posterior, to show that the check can fail. ``label``: the route's name in the tables (default
    ``route``), to tell apart checks of one route with different settings."""

    model: str = "gppl"
    route: str | None = None
    draws: int = 99
    problem: Problem | None = None
    settings: dict = field(default_factory=dict)
    shrink: float = 1.0
    label: str | None = None

    def __post_init__(self):
        from ..errors import DataError
        from ..zoo import entry

        if self.model in UNCHECKED:
            raise DataError(f"sbc: {UNCHECKED[self.model]}")
        if self.model not in SPECS:
            raise DataError(f"sbc: no SBC specification for model {self.model!r}; it checks {sorted(SPECS)}")
        e = entry(self.model)
        self.route = self.route or e.default
        e.route(self.route)  # an unknown route is a DataError naming the model's routes
        if self.route in POINT_ROUTES:
            others = [r for r in e.routes if r not in POINT_ROUTES]
            raise DataError(f"sbc: the {self.route!r} route returns a point estimate, whose ranks are 0 or L "
                            f"whatever the data; check one of {others}")
        if int(self.draws) < 1:
            raise DataError(f"draws: SBC needs at least one posterior draw, got {self.draws}")
        if self.problem is None:
            self.problem = self.spec.problem

    @property
    def spec(self) -> Spec:
        return SPECS[self.model]

    def route_settings(self, quick: bool) -> dict:
        spec = self.spec
        full = spec.settings if spec.settings is not None else ROUTE_SETTINGS.get(self.route, {})
        short = spec.quick if spec.settings is not None else QUICK_SETTINGS.get(self.route)
        base = short if quick and short is not None else full
        return {**base, **self.settings}

    def run_one(self, seed: int, quick: bool = False) -> pd.DataFrame:
        """Simulation ``seed``: draw the design, θ̃ and ỹ, fit the route to ỹ, and rank each summary
        of θ̃ among the summaries of L posterior draws. One row per summary."""
        return self.rank(self.simulate(seed, quick=quick))

    def simulate(self, seed: int, quick: bool = False) -> Simulation:
        """Simulation ``seed`` up to the ranks: the design, θ̃ and ỹ, the route's fit to ỹ and the
        summaries of θ̃ and of L posterior draws (:class:`Simulation`)."""
        from ..zoo import fit

        spec = self.spec
        model = spec.model(self.problem)
        rng = np.random.default_rng([seed, 2018])
        data0 = spec.design(self.problem, rng) if spec.design else design(self.problem, rng, spec.crowd)
        if spec.simulate is not None:
            state, y = spec.simulate(model, data0, seed)
        else:
            setup, sites, y = prior_draw(model, data0, seed)
            state = spec.prior_state(sites, setup)
        truth = {k: float(v[0]) for k, v in spec.quantities(state).items()}
        from ..data.pairwise import PairwiseData

        if spec.labels is not None:
            y = spec.labels(y, data0)
        if spec.data is not None:
            data = spec.data(data0, y)
        else:
            data = PairwiseData.from_arrays(data0.a, data0.b, y, data0.item_features, users=data0.users)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a short run's convergence warnings: the ranks judge it
            post = fit(model, data, method=self.route, seed=seed, check_confidence=False,
                       **self.route_settings(quick))
        seconds = time.perf_counter() - t0
        L = int(self.draws)
        draws = {k: v.detach().to(torch.float64).numpy()
                 for k, v in spec.quantities((spec.draws or posterior_draws)(post, L, seed)).items()}
        return Simulation(seed, truth, draws, seconds, rng)

    def rank(self, sim: Simulation, shrink: float | None = None) -> pd.DataFrame:
        """The rows of simulation ``sim``: each summary's rank among its draws, the draws' mean and sd,
        and whether their central 50 % and 90 % intervals hold θ̃; the draws pulled towards their mean
        by ``shrink`` (None: the check's own)."""
        shrink = self.shrink if shrink is None else shrink
        L = int(self.draws)
        rows = []
        for name, h in sim.draws.items():
            if shrink != 1.0:
                h = h.mean() + shrink * (h - h.mean())
            lo50, hi50, lo90, hi90 = np.quantile(h, [0.25, 0.75, 0.05, 0.95])
            x = sim.truth[name]
            rows.append({"model": self.model, "route": self.label or self.route, "sim": sim.seed,
                         "quantity": name, "group": self.spec.groups[name], "truth": x,
                         "rank": rank_of(x, h, sim.rng), "L": L,
                         "post mean": float(h.mean()), "post sd": float(h.std()),
                         "in 50%": bool(lo50 <= x <= hi50), "in 90%": bool(lo90 <= x <= hi90),
                         "seconds": sim.seconds})
        return pd.DataFrame(rows)

    def summarise(self, df: pd.DataFrame) -> str:
        return summarise(df)

    def figure(self, df: pd.DataFrame, path) -> None:
        figure(df, path)


# ---------------------------------------------------------------------------------------- tables
def summary_frame(df: pd.DataFrame, bins: int | None = None) -> pd.DataFrame:
    """Per model, route and summary: :func:`rank_tests` of its ranks, its 50 % / 90 % coverage and the
    two-sided binomial test of the 90 % coverage against 0.9 (``cover 90% p``: where the posterior's
    spread is wrong, coverage is the more powerful test with few simulations)."""
    from scipy.stats import binomtest

    rows = []
    for (model, route, quantity), g in df.groupby(["model", "route", "quantity"], sort=False):
        L = int(g["L"].iloc[0])
        hits = int(g["in 90%"].sum())
        rows.append({"model": model, "route": route, "quantity": quantity, "group": g["group"].iloc[0],
                     "L": L, **rank_tests(g["rank"].to_numpy(), L, bins),
                     "cover 50%": float(g["in 50%"].mean()), "cover 90%": hits / len(g),
                     "cover 90% p": float(binomtest(hits, len(g), 0.9).pvalue),
                     "seconds": float(g["seconds"].mean())})
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> str:
    """A Markdown table: per model and route, each summary's chi-square p-value of rank uniformity,
    KS distance, mean normalised rank, share of ranks in the outer tenths (0.2 if calibrated) and the
    central 50 % / 90 % interval coverage of the prior draw with the binomial test of the latter; then
    each route's smallest p-values times the number of summaries (Bonferroni: below 0.01, the ranks
    are not uniform, or the 90 % intervals do not cover 90 %)."""
    s = summary_frame(df)
    cols = ["model", "route", "group", "quantity", "sims", "L", "bins", "chi2 p", "KS D", "mean rank",
            "tails", "cover 50%", "cover 90%", "cover 90% p", "seconds"]
    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "|---|---|---|---|" + "---:|" * (len(cols) - 4)]
    for _, r in s.iterrows():
        vals = [r["model"], r["route"], r["group"], r["quantity"], int(r["sims"]), int(r["L"]),
                int(r["bins"]),
                f"{r['chi2 p']:.3g}", f"{r['KS D']:.3f}", f"{r['mean rank']:.3f}", f"{r['tails']:.2f}",
                f"{r['cover 50%']:.2f}", f"{r['cover 90%']:.2f}", f"{r['cover 90% p']:.3g}",
                f"{r['seconds']:.2f}"]
        lines.append("| " + " | ".join(cell(v) for v in vals) + " |")
    lines += ["", "| model | route | summaries | smallest chi2 p × summaries | smallest cover 90% p × "
              "summaries | mean cover 50% | mean cover 90% |", "|---|---|---:|---:|---:|---:|---:|"]
    for (model, route), g in s.groupby(["model", "route"], sort=False):
        adj = min(1.0, float(g["chi2 p"].min()) * len(g))
        adj90 = min(1.0, float(g["cover 90% p"].min()) * len(g))
        lines.append(f"| {cell(model)} | {cell(route)} | {len(g)} | {adj:.3g} | {adj90:.3g} | "
                     f"{g['cover 50%'].mean():.2f} | {g['cover 90%'].mean():.2f} |")
    return "\n".join(lines)


def figure(df: pd.DataFrame, path, bins: int | None = None) -> None:
    """Rank histograms, a row per model and route and a panel per summary (its own in each row),
    with the 99 % band of a bin's count under uniform ranks (Binomial(S, 1/B); Talts et al., Fig. 1),
    written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(zip(df["model"], df["route"])))
    rows = {k: list(dict.fromkeys(df.loc[(df["model"] == k[0]) & (df["route"] == k[1]), "quantity"]))
            for k in keys}
    width = max(len(q) for q in rows.values())
    fig, axes = plt.subplots(len(keys), width, figsize=(2.0 * width, 1.9 * len(keys)), squeeze=False)
    for i, (model, route) in enumerate(keys):
        part = df[(df["model"] == model) & (df["route"] == route)]
        for j in range(width):
            ax = axes[i, j]
            if j >= len(rows[(model, route)]):
                ax.axis("off")
                continue
            q = rows[(model, route)][j]
            r = part.loc[part["quantity"] == q, "rank"].to_numpy()
            L = int(part["L"].iloc[0])
            B = bins or n_bins(len(r), L)
            counts = np.bincount((r * B) // (L + 1), minlength=B)
            lo, hi = binomial_band(len(r), B)
            ax.axhspan(lo, hi, color="0.85", zorder=0)
            ax.axhline(len(r) / B, color="0.5", lw=0.8)
            ax.bar(np.arange(B), counts, width=1.0, color="C0", edgecolor="white", zorder=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(q, fontsize=7)
            if j == 0:
                ax.set_ylabel(f"{model}\n{route}", fontsize=7)
    fig.suptitle("SBC rank histograms (grey: 99 % band of uniform ranks)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (1.9 * len(keys))))  # room for the title
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------------------ the registry's entry
def run_one(seed: int, quick: bool = False) -> pd.DataFrame:
    """One simulation of GPPL by its default route (``crowdzoo compare sbc`` without a model)."""
    return Check().run_one(seed, quick=quick)


__all__ = ["Check", "Simulation", "Problem", "Spec", "SPECS", "UNCHECKED", "ROUTE_SETTINGS", "LinkDesign",
           "scdc_centres", "rank_of", "rank_tests", "n_bins", "binomial_band", "design", "prior_draw",
           "posterior_draws", "summary_frame", "summarise", "figure", "run_one"]
