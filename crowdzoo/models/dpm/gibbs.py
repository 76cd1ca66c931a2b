"""The Gibbs + EP route of the DPM community model (Abbasnejad et al. 2013, supplement §1–2).

Given the memberships c, each active community's GP posterior q(f^c) = N(μ^c, Σ^c) over the
inducing utilities is fitted by expectation propagation with one rank-one probit site per label of
its members (:func:`crowdzoo.inference.ep.ep_fixed_s`, vectorised over labels; the standard probit
EP in natural parameters, not the supplement's printed Eq. 9–15, which have typos). Then each c_u in
turn is drawn from Eq. 19–21,

    p(c_u = c | c_−u, D) ∝ n_−u,c · E_{q(f^c | D_c∖D_u)}[p(D_u | f^c)]     (active community c)
    p(c_u = new | c_−u, D) ∝ λ · E_{GP prior}[p(D_u | f)]                    (a new community)

with the CRP denominator U − 1 + λ common to all (U users; the supplement's "N = number of
communities" is a typo) and u's own sites taken out of its current community before it is scored
(otherwise its labels would count twice). Two readings of the expectation:

* ``membership="marginal"`` (the paper's): the product of per-label predictive probabilities
  Π_p Φ(h_pᵀμ / √(1 + h_pᵀΣh_p)) (α inside h_p), which ignores correlations between u's labels;
  u's current community is scored under its cavity (u's sites dropped, the others kept);
* ``membership="joint"``: the collapsed conditional Z_EP(D_c ∪ D_u) / Z_EP(D_c), a ratio of EP
  evidences (u's current community refitted without u).

Each community is held in whitened coordinates v = L⁻¹ f^c (prior N(0, I), L the Cholesky factor of
K_mm / s), where u's labels have directions g_p = Lᵀ h_p and its posterior is the precision
B_c = I + Σ_p τ_p g_p g_pᵀ with shift b_c = Σ_p ν_p g_p (:class:`Community`). Under the marginal rule
the sampler is incremental, so that a sweep costs time linear in the number of users: u's cavity is
(B_c − G_uᵀ diag τ_u G_u, b_c − G_uᵀ ν_u), whatever the community's size; when u moves, the community
it leaves becomes that cavity and u's sites alone are refitted against the community it joins (EP
over u's labels with the others' sites held); after the sweep, each community whose members changed
is refitted by EP to convergence, warm-started. Under the joint rule every community's EP is fitted
to convergence and cached by its member set (one EP fit per candidate community per user: small
problems). Empty communities are dropped. With ``concentration_prior`` λ is resampled after each
sweep by Escobar & West (1995). The sampler loops over users (in a random order each sweep) and
chains in Python; a user's step is vectorised over labels and candidate communities. All randomness
comes from ``numpy.random.default_rng([seed, chain])``.

Ties (``ties="model"``): every label's site is the ordered probit's (:mod:`crowdzoo.inference.ep`,
a tie the interval Φ(τ_p − z) − Φ(−τ_p − z) of z = h_pᵀ f^c), with label p's threshold
τ_p = τ α/√(α² + c_p/s) as in the Pyro program (:func:`~crowdzoo.models.dpm.model.tie_scale`), and the
membership scores use the three-outcome predictive (marginal: each label's closed form
P(y_p) = ∫ N(z; m, v) P(y_p | z, τ_p) dz; joint: the EP evidences of the ordinal sites). τ, started
where a tie of equal items is as common as ties are in the data (natgrad's start), is sampled once
per sweep, after the memberships and λ, by a **random-walk Metropolis step on log τ** against
log p(τ) + log τ + Σ_c log Z_EP(D_c; τ): the communities' EP evidences at the current and the
proposed τ (EP refitted, warm-started, at the proposal). Metropolis rather than a slice step because
each evaluation of the target costs an EP fit of every community, and a random-walk step costs
exactly two, whatever the shape of the target; its step size is adapted during burn-in towards the
one-dimensional optimum acceptance of 0.44 (Roberts & Rosenthal 2001) and then held fixed. Z_EP is
EP's approximation of the marginal likelihood p(D_c | τ) (f^c integrated out), so the chain samples τ
from that approximate conditional, not from the exact p(τ | c, D); on the crowds tried its τ ran
.00–.05 below NUTS's and its held-out three-way log loss within .01 of NUTS's and svi's
(docs/dpm.md). With ``tie_threshold="per_user"`` each user's τ_u takes its own random-walk step (step
sizes adapted apart) against log p(τ_u) + log τ_u + log Z_EP(D_c; τ) of u's community c alone, the only
evidence τ_u enters: two EP fits of one community per user and sweep.

Weights (``PairwiseData.weights``): a label of weight w is w copies of it: its EP site holds w copies'
natural parameters, updated by power EP (:mod:`crowdzoo.inference.ep`), its term of the marginal rule's
Π_p is raised to the power w (its log-probability times w), its terms of the EP evidence count w times,
and τ starts at the weighted share of ties.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch.special import log_ndtr

from ...data.tensors import weight_tensor
from ...errors import DataError
from ...gp.linalg import DTYPE, cho_solve, cholesky, solve_lower
from ...gp.ordinal import initial_tau
from ...inference.common import progress
from ...inference.ep import ep_fixed_s, ordinal_log_normaliser, probit_site_update
from .model import tie_scale
from .posterior import DPMPosterior
from .setup import check_data, user_labels

LOCAL_ITER, LOCAL_DAMPING, LOCAL_TOL = 10, 1.0, 1e-4  # EP over a moving user's own sites (see _Marginal)
TIE_STEP, TIE_ACCEPT = 0.3, 0.44  # the first step of log τ's random walk, the acceptance it adapts to


class Community(NamedTuple):
    """One community's EP posterior in whitened coordinates v = L⁻¹ f^c (prior N(0, I)): the
    precision B = I + Σ_p τ_p g_p g_pᵀ and shift b = Σ_p ν_p g_p over its labels' sites, the
    Cholesky C of B and the mean m = B⁻¹ b."""

    B: torch.Tensor
    b: torch.Tensor
    C: torch.Tensor
    m: torch.Tensor

    @classmethod
    def of(cls, B, b):
        C = cholesky(B, what="a community's EP precision I + Gᵀ diag(τ) G")
        return cls(B, b, C, cho_solve(C, b[:, None])[:, 0])


class _Rule:
    """What both membership rules share: the whitened label directions G = H L (P, M), the labels'
    signs (0 a tie), each user's labels, the sites (τ, ν) of every label under its user's community,
    and with ties each label's threshold τ_p = τ · tie scale (``threshold``; None without ties)."""

    def __init__(self, setup, data, ep):
        self.L = cholesky(setup.K, what="K_mm / s (community prior)")
        self.M = self.L.shape[0]
        self.I = torch.eye(self.M, dtype=DTYPE)
        self.G = setup.H @ self.L
        self.sgn = 2.0 * torch.as_tensor(data.y, dtype=DTYPE) - 1.0
        lab, mask = user_labels(data.users, data.n_users)  # each user's labels, padded
        self.labels = [row[m > 0] for row, m in zip(lab, mask)]
        self.label_user = np.asarray(data.users)
        self.ep = ep
        P = self.G.shape[0]
        self.tau, self.nu = torch.zeros(P, dtype=DTYPE), torch.zeros(P, dtype=DTYPE)
        self.w = weight_tensor(data)  # each label's weight (None: every label 1)
        self.threshold = None
        if data.has_ties:
            a, b = (torch.as_tensor(x, dtype=torch.long) for x in (data.a, data.b))
            self.tie_scale = tie_scale(setup.gp.pair_terms(a, b)[1], setup.s, setup.alpha)

    def set_tie_threshold(self, tau):
        """Each label's threshold τ_p = τ · its tie scale (τ a number, or (U,) one per user)."""
        tau = torch.as_tensor(tau, dtype=DTYPE)
        self.threshold = (tau[self.label_user] if tau.dim() else tau) * self.tie_scale

    def _thresholds(self, idx):
        return None if self.threshold is None else self.threshold[idx]

    def _weights(self, idx):
        return None if self.w is None else self.w[idx]

    def ep_fit(self, idx):
        """EP to convergence on the labels ``idx`` under the prior N(0, I), warm-started from (and
        writing back) their sites; returns (m, Σ_w, log Z_EP)."""
        m, Sigma, tau, nu, log_Z, _ = ep_fixed_s(self.I, self.G[idx], self.sgn[idx], self.tau[idx],
                                                self.nu[idx], L=self.I, threshold=self._thresholds(idx),
                                                weights=self._weights(idx), **self.ep)
        self.tau[idx], self.nu[idx] = tau, nu
        return m, Sigma, log_Z

    def log_evidence(self, z) -> float:
        """Σ_c log Z_EP(D_c) over the communities of memberships z (each community's EP refitted,
        warm-started, at the current thresholds)."""
        return sum(self.ep_fit(idx)[2] for idx in self.groups(z).values())

    def groups(self, z):
        """{community: label indices of its members} for memberships z (vectorised over labels)."""
        zl = z[self.label_user]
        order = np.argsort(zl, kind="stable")
        keys, first = np.unique(zl[order], return_index=True)
        return {int(k): torch.as_tensor(g) for k, g in zip(keys, np.split(order, first[1:]))}


class _Marginal(_Rule):
    """``membership="marginal"``: incremental EP states (:class:`Community`). Scoring u under its own
    community subtracts u's sites from (B, b) (an O(M³ + n_u M²) cavity, whatever the community's
    size); a move subtracts them from the old community and fits u's sites alone against the new
    one's current state (undamped EP passes over u's labels, the others' sites held, at most
    ``LOCAL_ITER``: the end-of-sweep refit settles what they leave); at the end of a
    sweep every community whose members changed is refitted by EP to convergence (warm-started), so a
    sweep costs O(U (C M² n_u + M³)) plus EP over the changed communities' labels: linear in users."""

    def start(self, z):
        self.comms = {c: self._refit(idx) for c, idx in self.groups(z).items()}
        self.changed = set()
        self._stack = None

    def _refit(self, idx):
        self.ep_fit(idx)
        Gi = self.G[idx]
        return Community.of(self.I + Gi.T @ (self.tau[idx, None] * Gi), Gi.T @ self.nu[idx])

    def score(self, u, c0, counts, lam):
        """(candidate ids, log n_c + log E_c[p(D_u | f)]) over the communities and a new one (−1)."""
        if self._stack is None:
            self._ids = list(self.comms)
            zero = torch.zeros(self.M, dtype=DTYPE)
            self._stack = (torch.stack([self.comms[c].C for c in self._ids] + [self.I]),
                           torch.stack([self.comms[c].m for c in self._ids] + [zero]))
        idx = self.labels[u]
        Gu, tu, nu_u = self.G[idx], self.tau[idx], self.nu[idx]
        Cs, ms = self._stack
        n = torch.tensor([float(counts[c]) for c in self._ids] + [lam], dtype=DTYPE)
        slot = self._ids.index(c0)
        n[slot] -= 1.0
        self._cavity = None
        if n[slot] > 0:  # u's own community without u's sites
            cav = Community.of(self.comms[c0].B - Gu.T @ (tu[:, None] * Gu), self.comms[c0].b - Gu.T @ nu_u)
            Cs, ms = Cs.clone(), ms.clone()
            Cs[slot], ms[slot] = cav.C, cav.m
            self._cavity = cav
        mean = ms @ Gu.T  # (K, n_u)
        V = torch.linalg.solve_triangular(Cs, Gu.T.expand(Cs.shape[0], -1, -1), upper=False)
        var = (V * V).sum(1)
        if self.threshold is None:
            loglik = log_ndtr(self.sgn[idx] * mean / torch.sqrt(1.0 + var))
        else:  # the three-outcome predictive of each label
            loglik = ordinal_log_normaliser(mean, var, self.sgn[idx], self.threshold[idx])
        loglik = (loglik if self.w is None else loglik * self.w[idx]).sum(-1)
        return self._ids + [-1], torch.log(n) + loglik  # log 0 = −inf: a singleton's own slot

    def move(self, u, c0, c1, new_id):
        """u leaves c0 (its cavity becomes c0, or c0 is dropped) and joins c1 (−1: a new community
        ``new_id``), its sites refitted against c1's state."""
        if self._cavity is None:
            del self.comms[c0]
        else:
            self.comms[c0] = self._cavity
            self.changed.add(c0)
        if c1 == -1:
            c1, base = new_id, Community(self.I, torch.zeros(self.M, dtype=DTYPE), self.I,
                                         torch.zeros(self.M, dtype=DTYPE))
        else:
            base = self.comms[c1]
        idx = self.labels[u]
        Gu, s = self.G[idx], self.sgn[idx]
        tau, nu = self.tau[idx], self.nu[idx]
        for _ in range(LOCAL_ITER):
            C = cholesky(base.B + Gu.T @ (tau[:, None] * Gu), what="a community's EP precision")
            m = cho_solve(C, (base.b + Gu.T @ nu)[:, None])[:, 0]
            V = solve_lower(C, Gu.T)
            tau_new, nu_new = probit_site_update(Gu @ m, (V * V).sum(0), tau, nu, s, LOCAL_DAMPING,
                                                 self._thresholds(idx), self._weights(idx))
            done = float((tau_new - tau).abs().max() + (nu_new - nu).abs().max()) < LOCAL_TOL
            tau, nu = tau_new, nu_new
            if done:
                break
        self.tau[idx], self.nu[idx] = tau, nu
        self.comms[c1] = Community.of(base.B + Gu.T @ (tau[:, None] * Gu), base.b + Gu.T @ nu)
        self.changed.add(c1)
        self._stack = None
        return c1

    def end_sweep(self, z):
        """Refit (EP to convergence, warm-started) every community whose members changed."""
        if self.changed:
            groups = self.groups(z)
            for c in self.changed & set(self.comms):
                self.comms[c] = self._refit(groups[c])
            self.changed.clear()
            self._stack = None

    def summary(self, c):
        """(m, Σ_w) of community c in whitened coordinates."""
        st = self.comms[c]
        return st.m, cho_solve(st.C, self.I)


class _Joint(_Rule):
    """``membership="joint"``: the collapsed conditional Z_EP(D_c ∪ D_u) / Z_EP(D_c), every
    community's EP fitted to convergence and cached by its member set (a community is refitted only
    when its members change); scoring u costs one EP fit per community, so this rule is for small
    problems and for checking the marginal rule."""

    def __init__(self, setup, data, ep, cache_size):
        super().__init__(setup, data, ep)
        self.cache_size = cache_size

    def start(self, z):
        self.cache = {}
        self.comms = {int(c): self.fit(tuple(np.flatnonzero(z == c).tolist())) for c in np.unique(z)}

    def fit(self, members):
        hit = self.cache.get(members)
        if hit is None:
            idx = torch.cat([self.labels[u] for u in members])
            if len(self.cache) >= self.cache_size:
                self.cache.clear()
            hit = self.cache[members] = (members,) + self.ep_fit(idx)
        return hit

    def score(self, u, c0, counts, lam):
        ids, logp = [], []
        rest0 = tuple(m for m in self.comms[c0][0] if m != u)
        for c, (members, _, _, log_Z) in self.comms.items():
            if c == c0:
                if rest0:
                    ids.append(c)
                    logp.append(math.log(len(rest0)) + log_Z - self.fit(rest0)[3])
            else:
                ids.append(c)
                logp.append(math.log(len(members)) + self.fit(tuple(sorted(members + (u,))))[3] - log_Z)
        ids.append(-1)
        logp.append(math.log(lam) + self.fit((u,))[3])
        self._rest0 = rest0
        return ids, torch.tensor(logp, dtype=DTYPE)

    def move(self, u, c0, c1, new_id):
        if self._rest0:
            self.comms[c0] = self.fit(self._rest0)
        else:
            del self.comms[c0]
        if c1 == -1:
            c1, members = new_id, (u,)
        else:
            members = tuple(sorted(self.comms[c1][0] + (u,)))
        self.comms[c1] = self.fit(members)
        return c1

    def end_sweep(self, z):
        pass

    def summary(self, c):
        return self.comms[c][1], self.comms[c][2]


def _escobar_west(rng, lam, k, n, a, b):
    """One Escobar & West (1995) draw of λ | k communities among n users, λ ~ Gamma(a, rate b)."""
    eta = rng.beta(lam + 1.0, n)
    rate = b - math.log(eta)
    odds = (a + k - 1.0) / (n * rate)
    shape = a + k if rng.random() < odds / (1.0 + odds) else a + k - 1.0
    return float(rng.gamma(shape, 1.0 / rate))


def _log_p(prior, tau: float) -> float:
    """log p(θ) of θ = log τ under τ's prior: log p(τ) + log τ."""
    return float(prior.log_prob(torch.tensor(tau, dtype=DTYPE))) + math.log(tau)


def _tie_step(rule, z, tau: np.ndarray, step: np.ndarray, prior, rng):
    """One random-walk Metropolis step on θ = log τ against log p(τ) + θ + Σ_c log Z_EP(D_c; τ)
    (module docstring); the rule's sites and communities are those of the τ it returns."""
    saved = rule.tau.clone(), rule.nu.clone()
    here = rule.log_evidence(z)
    proposal = tau * math.exp(step * rng.standard_normal())
    rule.set_tie_threshold(proposal)
    there = rule.log_evidence(z)

    if math.log(rng.random()) < there - here + _log_p(prior, proposal) - _log_p(prior, tau):
        rule.start(z)  # every community at the new thresholds (the sites already fitted there)
        return proposal, True
    rule.set_tie_threshold(tau)
    rule.tau, rule.nu = saved
    return tau, False


def _tie_steps_per_user(rule, z, tau: np.ndarray, step: np.ndarray, prior, rng):
    """``tie_threshold="per_user"``: one random-walk Metropolis step on each log τ_u in turn, against
    log p(τ_u) + log τ_u + log Z_EP(D_c; τ) of u's community c alone (the only evidence τ_u enters);
    returns (τ, which were accepted), the rule's communities refitted at the new τ."""
    groups = rule.groups(z)
    accepted = np.zeros(tau.shape[0], bool)

    for u in rng.permutation(tau.shape[0]).tolist():
        idx = groups[int(z[u])]
        saved = rule.tau[idx].clone(), rule.nu[idx].clone()
        here = rule.ep_fit(idx)[2]
        proposal = tau.copy()
        proposal[u] = tau[u] * math.exp(step[u] * rng.standard_normal())
        rule.set_tie_threshold(proposal)
        there = rule.ep_fit(idx)[2]
        if math.log(rng.random()) < there - here + _log_p(prior, proposal[u]) - _log_p(prior, tau[u]):
            tau, accepted[u] = proposal, True
        else:
            rule.set_tie_threshold(tau)
            rule.tau[idx], rule.nu[idx] = saved
    if accepted.any():
        rule.start(z)
    return tau, accepted


def fit_gibbs(model, data, seed: int = 0, n_sweeps: int = 300, burn_in: int = 100, n_chains: int = 2,
              thin: int = 1, membership: str = "marginal", damping: float = 0.5, ep_max_iter: int = 200,
              ep_tol: float = 1e-6, cache_size: int = 20000, progress_bar: bool | None = None,
              setup=None) -> DPMPosterior:
    """Blocked Gibbs sampling of the memberships with EP per community (module docstring).

    ``n_sweeps`` per chain, of which the first ``burn_in`` are dropped and every ``thin``-th after
    is kept; ``n_chains`` chains from independent CRP-prior initialisations; ``membership``
    "marginal" (the paper's product of per-label predictive probabilities) or "joint" (the EP
    evidence ratio); ``damping``, ``ep_max_iter``, ``ep_tol`` for each community's EP;
    ``cache_size`` community fits the joint rule keeps (by member set) before emptying its cache.
    Labels with ties add τ to the sweep (module docstring; trace "tau" and "tau_accepted"), or with
    ``tie_threshold="per_user"`` a τ_u per user, each by its own Metropolis step against its
    community's EP evidence (U EP fits a sweep: for small crowds).
    """
    if membership not in ("marginal", "joint"):
        raise DataError(f"membership: expected 'marginal' or 'joint', got {membership!r}", arg="membership")
    for name, v, lo in (("n_sweeps", n_sweeps, 1), ("n_chains", n_chains, 1), ("thin", thin, 1),
                        ("burn_in", burn_in, 0)):
        if int(v) != v or v < lo:
            raise DataError(f"{name}: expected an integer ≥ {lo}, got {v!r}", arg=name)
    if burn_in >= n_sweeps:
        raise DataError(f"burn_in: must be smaller than {{n_sweeps}} ({n_sweeps}), got {burn_in}",
                        arg="burn_in", settings=("n_sweeps",))
    check_data(model, data)
    setup = setup or model.setup(data, seed=seed)
    U = data.n_users
    prior = model.concentration_prior
    a_l, b_l = (None, None) if prior is None else (float(prior.concentration), float(prior.rate))
    kept, trace_k, trace_lam = [], np.zeros((n_chains, n_sweeps), np.int64), np.zeros((n_chains, n_sweeps))
    ties = data.has_ties
    per_user = ties and model.tie_threshold == "per_user"
    shape = (n_chains, n_sweeps) + ((U,) if per_user else ())
    trace_tau, trace_acc = np.full(shape, np.nan), np.zeros(shape, bool)
    ep = dict(damping=damping, max_iter=ep_max_iter, tol=ep_tol)
    joint = membership == "joint"
    with progress(n_sweeps * n_chains, "dpm gibbs", progress_bar) as bar:
        for chain in range(n_chains):
            rng = np.random.default_rng([int(seed), chain])
            lam = float(model.concentration)
            z = _crp_draw(rng, U, lam)
            rule = _Joint(setup, data, ep, cache_size) if joint else _Marginal(setup, data, ep)
            if ties:  # every user starts at the crowd's share of ties
                share = np.average(data.y == 0.5, weights=data.label_weights)
                tau = np.full(shape[2:], float(initial_tau(share)))
                step = np.full(shape[2:], TIE_STEP)
                rule.set_tie_threshold(tau)
            rule.start(z)
            counts = {int(c): int(n) for c, n in zip(*np.unique(z, return_counts=True))}
            next_id = int(z.max()) + 1
            for sweep in range(n_sweeps):
                for u in rng.permutation(U).tolist():
                    c0 = int(z[u])
                    ids, logp = rule.score(u, c0, counts, lam)
                    prob = torch.softmax(logp, 0).numpy()
                    k = int(np.searchsorted(np.cumsum(prob), rng.random() * prob.sum()))
                    pick = ids[min(k, len(ids) - 1)]
                    if pick == c0:
                        continue
                    c1 = rule.move(u, c0, pick, next_id)
                    next_id = max(next_id, c1 + 1)
                    counts[c0] -= 1
                    if counts[c0] == 0:
                        del counts[c0]
                    counts[c1] = counts.get(c1, 0) + 1
                    z[u] = c1
                rule.end_sweep(z)
                if prior is not None:
                    lam = _escobar_west(rng, lam, len(counts), U, a_l, b_l)
                if ties:
                    if per_user:
                        tau, accepted = _tie_steps_per_user(rule, z, tau, step, setup.tie_prior, rng)
                    else:
                        tau, accepted = _tie_step(rule, z, tau, step, setup.tie_prior, rng)
                    if sweep < burn_in:  # Robbins–Monro on log step towards the target acceptance
                        step = step * np.exp((accepted - TIE_ACCEPT) / (sweep + 1) ** 0.6)
                    trace_tau[chain, sweep], trace_acc[chain, sweep] = tau, accepted
                trace_k[chain, sweep] = len(counts)
                trace_lam[chain, sweep] = lam
                if sweep >= burn_in and (sweep - burn_in) % thin == 0:
                    kept.append(_snapshot(z, rule, counts, lam) + ((tau.copy(),) if ties else ()))
                bar.update(1)
    trace = {"n_communities": trace_k, "concentration": trace_lam}
    if ties:
        trace.update(tau=trace_tau, tau_accepted=trace_acc)
    return _posterior(model, setup, data, kept, n_chains, rule.L, trace=trace,
                      settings=dict(seed=seed, n_sweeps=n_sweeps, burn_in=burn_in, n_chains=n_chains,
                                    thin=thin, membership=membership, damping=damping,
                                    ep_max_iter=ep_max_iter, ep_tol=ep_tol))


def _crp_draw(rng, U, lam):
    """Memberships of U users drawn from the CRP prior with concentration λ (labels 0, 1, …)."""
    z, sizes = np.zeros(U, np.int64), []
    for u in range(U):
        p = np.array(sizes + [lam], dtype=np.float64)
        c = int(rng.choice(len(p), p=p / p.sum()))
        if c == len(sizes):
            sizes.append(0)
        sizes[c] += 1
        z[u] = c
    return z


def _snapshot(z, rule, counts, lam):
    """Memberships relabelled by first appearance (0, 1, …) and, in that order, the communities'
    whitened posteriors (m, Σ_w) and sizes."""
    order = list(dict.fromkeys(z.tolist()))
    relabel = {c: i for i, c in enumerate(order)}
    zz = np.array([relabel[c] for c in z.tolist()], dtype=np.int64)
    return zz, [rule.summary(c) + (counts[c],) for c in order], lam


def _posterior(model, setup, data, kept, n_chains, L, trace, settings):
    """The DPMPosterior of the kept samples: each community's f_m^c = L v ~ N(L m, L Σ_w Lᵀ), and the
    sample's τ with ties."""
    S, U, M = len(kept), data.n_users, L.shape[0]
    C = max(len(k[1]) for k in kept)
    m_w = torch.zeros(S, C, M, dtype=DTYPE)
    S_w = torch.eye(M, dtype=DTYPE).expand(S, C, M, M).clone()  # unused slots hold the prior
    counts = torch.zeros(S, C, dtype=torch.long)
    z = torch.zeros(S, U, dtype=torch.long)
    lam = torch.zeros(S, dtype=DTYPE)
    for i, (zz, fits, la, *_) in enumerate(kept):
        z[i] = torch.as_tensor(zz)
        lam[i] = la
        for c, (m, Sigma, n) in enumerate(fits):
            m_w[i, c], S_w[i, c], counts[i, c] = m, Sigma, n
    return DPMPosterior(model=model.resolved(setup), setup=setup, data=data, method="gibbs",
                        weights=torch.full((S,), 1.0 / S, dtype=DTYPE), n_chains=n_chains, trace=trace,
                        settings=settings, z=z, means=m_w @ L.T, covs=L @ S_w @ L.T, counts=counts,
                        concentration=lam, tau=torch.tensor(np.stack([k[3] for k in kept]), dtype=DTYPE)
                        if len(kept[0]) > 3 else None)
