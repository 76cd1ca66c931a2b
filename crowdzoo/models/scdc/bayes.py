"""BayesSCDC: SCDC with conjugate priors on its globals and structured variational inference (Luo et al.
2018 §3; the paper's symbols in brackets).

Generative story (SCDC's, :mod:`~.model`, with priors, Eq. 6):

    π              ~ Dirichlet(a₀ 1_K)                   a₀ = 1.05
    (μ_k, Σ_k)     ~ NIW(m₀, κ₀, S₀, ν₀)                 m₀ = 0, κ₀ = 0.5, S₀ = (d + ½) I, ν₀ = d + ½
    α_m, β_m       ~ Beta(1, 1)                          Eq. 6
    z_n ~ Cat(π),  x_n | z_n ~ N(μ_{z_n}, Σ_{z_n}),  o_n | x_n ~ decoder_γ(x_n)
    L_a | z        ~ Bern(α_m) if z_i = z_j, else Bern(1 − β_m)           Eq. 1

Variational family: q(π) q(μ, Σ) q(α) q(β) q(Z) q(X) with conjugate globals (Dirichlet, NIW per
cluster, Beta per worker). A recognition network turns o_n into a Gaussian potential on x_n,
ψ(x_n; o_n) = h_nᵀ x_n − ½ x_nᵀ diag(λ_n) x_n (Eq. 9), which stands in for the decoder in the
surrogate objective (Eq. 10), so the local optimum is found by mean-field message passing:

    q*(x_n) ∝ exp{Σ_k φ_nk E[log N(x_n; μ_k, Σ_k)] + ψ(x_n; o_n)}                         Eq. 12
    log φ_nk = E[log π_k] + E_{q(x_n)}E[log N(x_n; μ_k, Σ_k)] + Σ_a E[w_a] φ_{n'k} + c    Eq. 14
    w_a = log p(L_a | same) − log p(L_a | different)                   (the paper's w_ij^{(m)})

summed over the annotations a = (n, n') that touch n, alternated for a few sweeps (Eq. 15). The
globals move along the natural gradient η₀ + E_{q*}[t] − η (the first term of Eq. 17; like the
authors' code and Johnson et al.'s SVAE code, the second, through ∂η*/∂η_Θ, is left out) and the
networks along the reparameterised gradient of the objective J (Eq. 16), in which o_n is scored by
the decoder at x̂_n ~ q*(x_n).

The functions below are the conjugate algebra; :mod:`~.natgrad` is the route.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from ...errors import DataError
from ...gp.natural import convex
from .model import SCDCSetup, Standardised, check_architecture, mlp, observation_setup, paper_model
from .model import link_messages as messages  # Eq. 14's relational term, shared with SCDC's q(z)

F64 = torch.float64


@dataclass
class BayesSCDC:
    """Semi-crowdsourced clustering with a deep generative model, fully Bayesian (module docstring).

    Parameters
    ----------
    n_clusters : K, the initial number of clusters (the paper: 50); those that lose their mass are
        switched off by the Dirichlet.
    latent_dim : d; None (the default): set from the data (:func:`~.defaults.default_sizes`; the paper: 8).
    hidden : hidden layer widths of the recognition network and the decoder; None: set from the data
        (the paper: (500, 500)).
    likelihood : "bernoulli", "gaussian" or "auto" (as :class:`~.model.SCDC`).
    dirichlet : a₀ of the symmetric Dirichlet on π (1.05).
    niw_kappa : κ₀ (0.5); ``niw_dof``: ν₀ (default d + 0.5); ``niw_scale``: S₀ = niw_scale · I (default
        d + 0.5); the NIW's mean m₀ is 0.
    worker_prior : (a, b) of the Beta priors on every α_m and β_m ((1, 1)).
    sweeps : message-passing sweeps of Eq. 12 and 14 per mini-batch (the authors' code: 4).
    settings : "auto" or "paper", as :class:`~.model.SCDC`'s (:meth:`paper_mnist`).
    obs_noise : with a Gaussian likelihood, the cap on the decoder's noise sd per feature, as a fraction
        of the feature's sd in the data (0.3): the noise is learned below the cap (from half of it);
        None learns it without a cap (from sd 1). An uncapped noise lets the decoder explain a feature
        as noise and the latent space drop it (posterior collapse: a direction of the data whose
        variance does not exceed the decoder's noise variance is not encoded; Lucas, Tucker, Grosse &
        Norouzi 2019): on low-dimensional data whose groups overlap, the noise grows to about the
        features' own spread, the recognition potentials go flat and the mixture ends in one cluster
        (docs/scdc.md). Under the cap at least 91 % of every feature's variance is left to the latent
        points and the mixture on them.
    standardise : with a Gaussian likelihood, whether the networks read each feature standardised by
        its mean and sd in the training data, the decoder's Gaussian mapped back to the data's units:
        None (the default) where some feature is far from unit scale, True always, False never; as
        :class:`~.model.SCDC`'s. Standardised, the noise cap is ``obs_noise`` in standardised units,
        the same cap.
    """

    n_clusters: int = 50
    latent_dim: int | None = None
    hidden: tuple | None = None
    likelihood: str = "auto"
    dirichlet: float = 1.05
    niw_kappa: float = 0.5
    niw_dof: float | None = None
    niw_scale: float | None = None
    worker_prior: tuple = (1.0, 1.0)
    sweeps: int = 4
    settings: str = "auto"
    obs_noise: float | None = 0.3
    standardise: bool | None = None

    def __post_init__(self):
        check_architecture(self)
        if self.obs_noise is not None and not float(self.obs_noise) > 0:
            raise DataError(f"obs_noise: expected a positive number or None, got {self.obs_noise!r}",
                            arg="obs_noise")
        d = self.latent_dim
        if d is not None:  # with d unset, ν₀ and S₀'s defaults wait for it (set from the data when fitted)
            self.niw_dof = float(d + 0.5 if self.niw_dof is None else self.niw_dof)
            self.niw_scale = float(d + 0.5 if self.niw_scale is None else self.niw_scale)
        for name in ("dirichlet", "niw_kappa", "niw_scale"):
            if getattr(self, name) is not None and not float(getattr(self, name)) > 0:
                raise DataError(f"{name}: expected a positive number, got {getattr(self, name)!r}")
        if d is not None and not self.niw_dof > d - 1:
            raise DataError(f"niw_dof: the NIW needs ν₀ > d − 1 = {d - 1}, got {self.niw_dof!r}")
        self.worker_prior = tuple(float(v) for v in self.worker_prior)
        if len(self.worker_prior) != 2 or min(self.worker_prior) <= 0:
            raise DataError(f"worker_prior: expected two positive Beta parameters, got {self.worker_prior!r}")
        if int(self.sweeps) != self.sweeps or self.sweeps < 1:
            raise DataError(f"sweeps: expected an integer ≥ 1, got {self.sweeps!r}")

    @classmethod
    def paper_mnist(cls, **kw):
        """The paper's MNIST settings (§5.3): K = 50, d = 8, two hidden layers of 500, and in the
        route no pretraining and 200 epochs (``settings="paper"``); ``kw`` overrides any field."""
        return paper_model(cls, kw)

    def setup(self, data, seed: int = 0) -> SCDCSetup:
        return observation_setup(self.likelihood, data.O, self.obs_noise, self.standardise)

    def networks(self, setup: SCDCSetup, seed: int = 0, state: dict | None = None) -> RecognitionNetworks:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            nets = RecognitionNetworks(setup.n_features, self.latent_dim, self.hidden, setup.likelihood,
                                       setup.log_noise, setup.loc, setup.scale)
        if state is not None:
            nets.load_state_dict(state)
        return nets

    def prior(self, n_workers: int, device="cpu") -> Conjugate:
        """The priors of Eq. 6 as a :class:`Conjugate`."""
        K, d = self.n_clusters, self.latent_dim
        kw = dict(dtype=F64, device=device)
        ab = torch.tensor(self.worker_prior, **kw).expand(n_workers, 2)
        return Conjugate(torch.full((K,), float(self.dirichlet), **kw),
                         torch.full((K,), float(self.niw_kappa), **kw), torch.zeros(K, d, **kw),
                         self.niw_scale * torch.eye(d, **kw).expand(K, d, d).clone(),
                         torch.full((K,), self.niw_dof, **kw), ab.clone(), ab.clone())


class RecognitionNetworks(Standardised):
    """Recognition network r(o; φ) (D → hidden → 2d: the potential's h and λ = softplus, Eq. 9) and
    decoder p(o | x; γ) (d → hidden → D), whose Gaussian log noise sd per feature is learned below
    ``log_noise`` (the log caps; a buffer) or, None, learned from 0 without a cap; a Gaussian
    likelihood's features standardised by ``loc``, ``scale`` (:class:`~.model.Standardised`)."""

    def __init__(self, D, d, hidden, likelihood, log_noise=None, loc=None, scale=None):
        super().__init__()
        self._standardise(loc, scale)
        self.D, self.d, self.likelihood = D, d, likelihood
        self.recognition = mlp([D, *hidden, 2 * d])
        self.decoder = mlp([d, *hidden, D])
        if log_noise is None:
            self.log_scale = nn.Parameter(torch.zeros(D))
        else:  # log σ_j = log cap_j − softplus(r_j): learned below the cap, starting at half of it
            self.register_buffer("log_noise_cap", torch.tensor(log_noise, dtype=torch.float32))
            self.noise_raw = nn.Parameter(torch.zeros(D))

    @property
    def noise_log_scale(self):
        if hasattr(self, "noise_raw"):
            return self.log_noise_cap - torch.nn.functional.softplus(self.noise_raw)
        return self.log_scale

    def potentials(self, o):
        """(h, λ) of ψ(x; o) = hᵀx − ½ xᵀ diag(λ) x, in float64."""
        h, raw = self.recognition(self.inputs(o)).split(self.d, -1)
        return h.to(F64), torch.nn.functional.softplus(raw).to(F64) + 1e-4

    def obs_dist(self, x):
        return self.observations(self.decoder(x), self.noise_log_scale)


# ---------------------------------------------------------------------------------------- globals
class Conjugate(NamedTuple):
    """q(π) = Dir(a), q(μ_k, Σ_k) = NIW(m_k, κ_k, S_k, ν_k) (Σ_k ~ IW(S_k, ν_k), μ_k | Σ_k ~ N(m_k, Σ_k/κ_k)),
    q(α_m) = Beta(alpha[m]), q(β_m) = Beta(beta[m]) — or the priors in the same form."""

    a: torch.Tensor
    kappa: torch.Tensor
    m: torch.Tensor
    S: torch.Tensor
    nu: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor


def to_natural(q: Conjugate) -> Conjugate:
    """Coordinates in which the natural-gradient step is a convex combination: (a, κ, κm, S + κmmᵀ, ν,
    Beta parameters) — an affine map of the natural parameters, so the step in these coordinates is
    the natural-gradient step (Eq. 17)."""
    km = q.kappa[:, None] * q.m
    return q._replace(m=km, S=q.S + km[:, :, None] * q.m[:, None, :])


def from_natural(eta: Conjugate) -> Conjugate:
    m = eta.m / eta.kappa[:, None]
    return eta._replace(m=m, S=eta.S - eta.m[:, :, None] * m[:, None, :])


def natgrad_step(q: Conjugate, target: Conjugate, rho: float) -> Conjugate:
    """η ← η + ρ (η₀ + E_{q*}[t] − η) = (1 − ρ) η + ρ η̂, with ``target`` = η̂ in standard form."""
    return from_natural(convex(to_natural(q), to_natural(target), rho))


def conjugate_update(prior: Conjugate, stats: Stats) -> Conjugate:
    """η̂ = η₀ + statistics: the Dirichlet, NIW and Beta posteriors given expected counts and moments."""
    kappa = prior.kappa + stats.n
    km = prior.kappa[:, None] * prior.m + stats.sx
    m = km / kappa[:, None]
    S = (prior.S + prior.kappa[:, None, None] * prior.m[:, :, None] * prior.m[:, None, :] + stats.sxx
         - kappa[:, None, None] * m[:, :, None] * m[:, None, :])
    return Conjugate(prior.a + stats.n, kappa, m, 0.5 * (S + S.transpose(-1, -2)), prior.nu + stats.n,
                     prior.alpha + stats.alpha, prior.beta + stats.beta)


class Expected(NamedTuple):
    """Expectations under the globals that the local updates need (Bishop 2006, Eq. 10.64–10.66)."""

    log_pi: torch.Tensor     # (K,)   E[log π_k]
    Lam: torch.Tensor        # (K,d,d) E[Σ_k⁻¹] = ν S⁻¹
    Lam_mu: torch.Tensor     # (K,d)  E[Σ_k⁻¹ μ_k] = ν S⁻¹ m
    mu_Lam_mu: torch.Tensor  # (K,)   E[μ_kᵀ Σ_k⁻¹ μ_k] = ν mᵀS⁻¹m + d/κ
    logdet: torch.Tensor     # (K,)   E[log |Σ_k⁻¹|]
    ln_a: torch.Tensor       # (W,2)  E[log α_m], E[log(1 − α_m)]
    ln_b: torch.Tensor       # (W,2)  E[log β_m], E[log(1 − β_m)]


def expected(q: Conjugate) -> Expected:
    d = q.m.shape[-1]
    L = torch.linalg.cholesky(q.S)
    S_inv = torch.cholesky_inverse(L)
    Lam = q.nu[:, None, None] * S_inv
    Lam_mu = (Lam @ q.m[:, :, None])[..., 0]
    mu_Lam_mu = (q.m * Lam_mu).sum(-1) + d / q.kappa
    i = torch.arange(1, d + 1, dtype=F64, device=q.nu.device)
    logdet = (torch.digamma((q.nu[:, None] + 1 - i) / 2).sum(-1) + d * math.log(2.0)
              - 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1))
    return Expected(torch.digamma(q.a) - torch.digamma(q.a.sum()), Lam, Lam_mu, mu_Lam_mu, logdet,
                    _beta_logs(q.alpha), _beta_logs(q.beta))


def _beta_logs(ab):
    return torch.digamma(ab) - torch.digamma(ab.sum(-1, keepdim=True))


# ---------------------------------------------------------------------------------------- locals
class Local(NamedTuple):
    """q*(z_n) = Cat(phi_n) and q*(x_n) = N(x_n, (P_chol P_cholᵀ)⁻¹), with E[log N] per cluster."""

    phi: torch.Tensor     # (n, K)
    log_phi: torch.Tensor  # (n, K)
    x: torch.Tensor       # (n, d)
    P_chol: torch.Tensor  # (n, d, d) Cholesky factor of q*(x_n)'s precision
    ell: torch.Tensor     # (n, K)  E_{q(x_n)} E[log N(x_n; μ_k, Σ_k)]


def relational_weights(E: Expected, w, L):
    """E[w_a] = E[log p(L_a | same)] − E[log p(L_a | different)] (Eq. 14's message weight), and the
    two expected log-likelihoods, per annotation by worker ``w`` with label ``L``."""
    same = L * E.ln_a[w, 0] + (1 - L) * E.ln_a[w, 1]
    diff = L * E.ln_b[w, 1] + (1 - L) * E.ln_b[w, 0]
    return same - diff, same, diff


def expected_loglik(E: Expected, x, V):
    """E_{N(x, V)} E_q[log N(x; μ_k, Σ_k)] for every row and cluster (n, K)."""
    d = x.shape[-1]
    quad = (torch.einsum("kab,nab->nk", E.Lam, V + x[:, :, None] * x[:, None, :])
            - 2 * x @ E.Lam_mu.T + E.mu_Lam_mu)
    return 0.5 * (E.logdet - d * math.log(2 * math.pi) - quad)


def local_step(E: Expected, h, lam, li=None, lj=None, w=None, sweeps: int = 4, reduce=None,
               fixed=None) -> Local:
    """The local optimum of Eq. 15: from q(x_n) ∝ exp ψ alone, ``sweeps`` rounds of Eq. 12 (q*(x)) then
    Eq. 14 (q*(z), with messages E[w_a] φ_{n'} along the annotations ``li``–``lj``, weights ``w``),
    every row updated at once, and a last Eq. 12 so that q*(x) matches the final q*(z). ``reduce``
    sums each sweep's messages over the ranks of a distributed fit, each of which holds a shard of the
    annotations (the rows being every item, on every rank). ``fixed`` (n, K): messages into the rows
    from neighbours held fixed (Eq. 14's relational term with q(z_{n'}) given), added to every row's
    logits as they are."""
    x, V = h / lam, torch.diag_embed(1 / lam)
    base = E.log_pi if fixed is None else E.log_pi + fixed
    log_phi = torch.log_softmax(base + expected_loglik(E, x, V), -1)
    phi = log_phi.exp()
    for s in range(sweeps + 1):
        P = torch.einsum("nk,kab->nab", phi, E.Lam) + torch.diag_embed(lam)
        P_chol = torch.linalg.cholesky(P)
        x = torch.cholesky_solve((phi @ E.Lam_mu + h)[:, :, None], P_chol)[..., 0]
        V = torch.cholesky_inverse(P_chol)
        ell = expected_loglik(E, x, V)
        if s == sweeps:
            break
        logits = base + ell
        if reduce is not None:  # every rank calls the collective, whether or not it holds annotations
            logits = logits + reduce(messages(phi, li, lj, w))
        elif li is not None and li.shape[0]:
            logits = logits + messages(phi, li, lj, w)
        log_phi = torch.log_softmax(logits, -1)
        phi = log_phi.exp()
    return Local(phi, log_phi, x, P_chol, ell)


def sample_x(loc: Local, generator=None, eps=None):
    """x̂_n ~ q*(x_n), reparameterised: x + P_chol⁻ᵀ ε (``eps``: the standard normal ε of each row, drawn
    by the caller; else drawn here from ``generator``)."""
    if eps is None:
        eps = torch.randn(loc.x.shape, generator=generator, dtype=loc.x.dtype)
    eps = eps.to(loc.x.device, loc.x.dtype)
    return loc.x + torch.linalg.solve_triangular(loc.P_chol.transpose(-1, -2), eps[:, :, None],
                                                 upper=True)[..., 0]


def local_terms(E: Expected, loc: Local):
    """Per row: E[log p(z_n | π)] + E[log p(x_n | z_n, μ, Σ)] − E[log q(z_n)] − E[log q(x_n)] (everything of
    J's item term but the decoder's)."""
    d = loc.x.shape[-1]
    phi = loc.phi
    entropy_x = 0.5 * d * (1 + math.log(2 * math.pi)) - torch.log(
        torch.diagonal(loc.P_chol, dim1=-2, dim2=-1)).sum(-1)
    return (phi * (E.log_pi + loc.ell - loc.log_phi)).sum(-1) + entropy_x


# ---------------------------------------------------------------------------------------- statistics
class Stats(NamedTuple):
    """Expected sufficient statistics (already scaled to the whole data): counts n_k, Σ φ x, Σ φ E[xxᵀ],
    and per worker the Beta counts for α (must-links, cannot-links among same-cluster pairs) and β
    (cannot-links, must-links among different-cluster pairs)."""

    n: torch.Tensor
    sx: torch.Tensor
    sxx: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor


def item_stats(loc: Local, rows, scale: float):
    """(n_k, Σ φ x, Σ φ (V + xxᵀ)) over ``rows`` of ``loc``, times ``scale``."""
    return moments(loc.phi[rows], loc.x[rows], torch.cholesky_inverse(loc.P_chol[rows]), scale)


def moments(phi, x, V, scale: float = 1.0):
    """(n_k, Σ_n φ_nk x_n, Σ_n φ_nk (V_n + x_n x_nᵀ)) times ``scale``: the NIW's and the Dirichlet's
    statistics of responsibilities ``phi`` (n, K) and Gaussians N(x_n, V_n)."""
    return (scale * phi.sum(0), scale * phi.T @ x,
            scale * torch.einsum("nk,nab->kab", phi, V + x[:, :, None] * x[:, None, :]))


def worker_stats(s, w, L, n_workers: int, scale: float):
    """Beta counts per worker from the annotations' P(same) ``s``, workers ``w`` and labels ``L``."""
    ones = torch.zeros(n_workers, 2, dtype=F64, device=s.device)
    a = ones.index_add(0, w, torch.stack([s * L, s * (1 - L)], -1))
    b = ones.index_add(0, w, torch.stack([(1 - s) * (1 - L), (1 - s) * L], -1))
    return scale * a, scale * b


def pair_same(loc: Local, li, lj, w, same, diff, chunk: int = 65536):
    """P(z_i = z_j) of each annotation a = (i, j) under its pair belief: the endpoints' cavities, q*(z)
    with a's own message taken out (c_i ∝ φ_i exp(−E[w_a] φ_j), Eq. 14), times a's expected likelihood
    (``same`` where z_i = z_j, ``diff`` elsewhere):

        s_a = Σ_k c_ik c_jk e^same / (Σ_k c_ik c_jk e^same + (1 − Σ_k c_ik c_jk) e^diff).

    This is the pairwise belief of belief propagation, exact where the annotation graph is a tree. The
    mean-field E[1(z_i = z_j)] = Σ_k φ_ik φ_jk treats the endpoints as independent and so misses what
    the label says about their agreement: between two items whose features leave three clusters equally
    likely it stays 1/3 whatever the label, where the pair's posterior given a must-link of a worker
    with α = β = 0.8 is 2/3, and 0.11 given a cannot-link. Counted into the workers' Beta posteriors,
    the mean-field's share therefore puts every ambiguous pair's label down to the worker's error and
    pulls α and β down. Computed in chunks of ``chunk`` annotations, so that the temporaries stay
    O(chunk · K) however many annotations there are."""
    out = []
    for lo in range(0, li.shape[0], chunk):
        i, j, v = li[lo:lo + chunk], lj[lo:lo + chunk], w[lo:lo + chunk, None]
        ci = torch.log_softmax(loc.log_phi[i] - v * loc.phi[j], -1)
        cj = torch.log_softmax(loc.log_phi[j] - v * loc.phi[i], -1)
        out.append(torch.logsumexp(ci + cj, -1).exp().clamp(1e-12, 1 - 1e-12))
    p0 = torch.cat(out) if out else same.new_zeros(0)
    return torch.sigmoid(torch.log(p0) - torch.log1p(-p0) + same - diff)


def missing_information(s, w, L, alpha_mean, beta_mean, n_workers: int):
    """Per worker, the 2 × 2 missing information (Louis 1982) of (logit α_m, logit β_m): the variance, over
    the annotations' unknown agreement 1(z_i = z_j) ~ Bern(s_a) taken independent, of the complete-data
    score Σ_a [1_a (L_a − α_m), (1 − 1_a)((1 − L_a) − β_m)] at the means ``alpha_mean``, ``beta_mean``."""
    g = torch.stack([L - alpha_mean[w], -((1 - L) - beta_mean[w])], -1)
    v = (s * (1 - s))[:, None, None] * g[:, :, None] * g[:, None, :]
    return torch.zeros(n_workers, 2, 2, dtype=v.dtype, device=v.device).index_add(0, w, v)


def widen_workers(alpha, beta, missing, prior_alpha, prior_beta):
    """The workers' Beta posteriors ``alpha``, ``beta`` (W, 2; prior + expected counts) widened, their
    means kept, by the clusters' uncertainty (Louis 1982): the observed information of (logit α_m,
    logit β_m) is the complete-data information, diag((a + b) m (1 − m)) of the two Betas, less the
    ``missing`` information (:func:`missing_information`); each Beta's concentration a + b is scaled by
    the ratio of its complete-data variance of the logit to the observed one, and never falls below its
    prior's (where the observed information is not positive definite the clusters leave the worker
    unidentified, and the prior's concentration is kept). The expected counts alone give the Beta that
    a known clustering would give, as if every pair's agreement were known: too narrow wherever the
    features leave clusters ambiguous."""
    m = torch.stack([alpha[:, 0] / alpha.sum(-1), beta[:, 0] / beta.sum(-1)], -1)
    n = torch.stack([alpha.sum(-1), beta.sum(-1)], -1)
    complete = torch.diag_embed(n * m * (1 - m))
    observed = complete - missing
    det = observed[:, 0, 0] * observed[:, 1, 1] - observed[:, 0, 1] * observed[:, 1, 0]
    var = torch.stack([observed[:, 1, 1], observed[:, 0, 0]], -1) / det[:, None]  # diag of the inverse
    ratio = (1 / torch.diagonal(complete, dim1=-2, dim2=-1)) / var
    ok = (det > 0) & (var > 0).all(-1)
    floor = torch.stack([prior_alpha.sum(-1), prior_beta.sum(-1)], -1) / n
    ratio = torch.where(ok[:, None], ratio.clamp(max=1.0), floor).clamp(min=floor)
    return alpha * ratio[:, :1], beta * ratio[:, 1:]


# ---------------------------------------------------------------------------------------- global KL
def kl_globals(q: Conjugate, p: Conjugate) -> torch.Tensor:
    """KL(q(Θ) ‖ p(Θ)): Dirichlet, every NIW and every Beta."""
    D = torch.distributions
    kl = D.kl_divergence(D.Dirichlet(q.a), D.Dirichlet(p.a))
    kl = kl + kl_niw(q, p).sum()
    for name in ("alpha", "beta"):
        qa, pa = getattr(q, name), getattr(p, name)
        if qa.shape[0]:
            kl = kl + D.kl_divergence(D.Beta(qa[:, 0], qa[:, 1]), D.Beta(pa[:, 0], pa[:, 1])).sum()
    return kl


def kl_niw(q: Conjugate, p: Conjugate) -> torch.Tensor:
    """KL(NIW_q ‖ NIW_p) per cluster: the Wishart KL of the precisions plus E_q[KL] of the means."""
    d = q.m.shape[-1]
    Lq, Lp = torch.linalg.cholesky(q.S), torch.linalg.cholesky(p.S)
    logdet_q = 2 * torch.log(torch.diagonal(Lq, dim1=-2, dim2=-1)).sum(-1)
    logdet_p = 2 * torch.log(torch.diagonal(Lp, dim1=-2, dim2=-1)).sum(-1)
    Sq_inv = torch.cholesky_inverse(Lq)
    tr = torch.einsum("kab,kba->k", p.S, Sq_inv)  # tr(S_p S_q⁻¹)
    i = torch.arange(1, d + 1, dtype=F64, device=q.nu.device)
    psi_d = torch.digamma((q.nu[:, None] + 1 - i) / 2).sum(-1)
    wishart = (-0.5 * p.nu * (logdet_p - logdet_q) + 0.5 * q.nu * (tr - d)
               + torch.special.multigammaln(p.nu / 2, d) - torch.special.multigammaln(q.nu / 2, d)
               + 0.5 * (q.nu - p.nu) * psi_d)
    dm = q.m - p.m
    quad = q.nu * (dm[:, None, :] @ Sq_inv @ dm[:, :, None])[:, 0, 0]
    gauss = 0.5 * (d * p.kappa / q.kappa - d + d * torch.log(q.kappa / p.kappa) + p.kappa * quad)
    return wishart + gauss


__all__ = ["BayesSCDC", "RecognitionNetworks", "Conjugate", "Expected", "Local", "Stats", "expected",
           "local_step", "local_terms", "messages", "sample_x", "relational_weights", "expected_loglik",
           "item_stats", "moments", "worker_stats", "pair_same", "missing_information", "widen_workers",
           "conjugate_update", "natgrad_step", "kl_globals", "kl_niw"]
