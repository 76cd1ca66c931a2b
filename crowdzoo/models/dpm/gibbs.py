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

When u moves, the two communities it leaves and joins are refitted (warm-started from the latest
sites of their labels); every fit is cached by its member set, so a community is refitted only when
its members change. Empty communities are dropped. With ``concentration_prior`` λ is resampled after
each sweep by Escobar & West (1995). The sampler loops over users (in a random order each sweep)
and over chains in Python; everything inside a user's step is vectorised over labels and candidate
communities. All randomness comes from ``numpy.random.default_rng([seed, chain])``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch.special import log_ndtr

from ...data.pairwise import _show
from ...errors import DataError
from ...gp.linalg import DTYPE, cholesky
from ...inference.common import progress
from ...inference.ep import ep_fixed_s, site_posterior
from .model import user_labels
from .posterior import DPMPosterior


class Fit(NamedTuple):
    """EP posterior of one community: its members, their labels, N(mu, Sigma), log Z_EP, sites."""

    members: tuple
    idx: torch.Tensor
    mu: torch.Tensor
    Sigma: torch.Tensor
    log_Z: float
    tau: torch.Tensor
    nu: torch.Tensor


def check_data(model, data):
    """DataErrors for data the sampler cannot use: no users, users without labels."""
    if data.users is None:
        raise DataError("users: the DPM community model needs a user per label "
                        "(PairwiseData(..., users=...))")
    counts = np.bincount(data.users, minlength=data.n_users)
    if data.n_pairs == 0:
        raise DataError("data: no labels")
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise DataError(f"users: user id {_show(data.user_ids[empty[0]])} has no labels ({empty.size} such "
                        "user(s)); drop them (predict_proba treats unseen users by the CRP prior predictive)")


class _Sampler:
    def __init__(self, setup, data, damping, max_iter, tol, cache_size):
        self.H = setup.H
        self.sgn = 2.0 * torch.as_tensor(data.y, dtype=DTYPE) - 1.0
        self.K = setup.K
        self.L = cholesky(self.K, what="K_mm / s (community prior)")
        self.M = self.K.shape[0]
        lab, mask = user_labels(data.users, data.n_users)  # each user's labels, padded
        self.labels = [row[m > 0] for row, m in zip(lab, mask)]
        self.ep = dict(damping=damping, max_iter=max_iter, tol=tol)
        self.cache, self.cache_size = {}, cache_size
        self.prior_mu = torch.zeros(self.M, dtype=DTYPE)

    def fit(self, members, tau_ws, nu_ws) -> Fit:
        """EP for the community of ``members`` (sorted tuple), cached by member set."""
        hit = self.cache.get(members)
        if hit is not None:
            return hit
        idx = torch.cat([self.labels[u] for u in members])
        mu, Sigma, tau, nu, log_Z, _ = ep_fixed_s(self.K, self.H[idx], self.sgn[idx], tau_ws[idx], nu_ws[idx],
                                                  L=self.L, **self.ep)
        tau_ws[idx], nu_ws[idx] = tau, nu
        if len(self.cache) >= self.cache_size:
            self.cache.clear()
        out = self.cache[members] = Fit(members, idx, mu, Sigma, log_Z, tau, nu)
        return out

    def from_sites(self, idx, tau, nu):
        """N(mu, Sigma) of the prior times the given sites (no EP iteration: a cavity)."""
        mu, Sigma, _, _ = site_posterior(self.L, self.H[idx], tau, nu)
        return mu, Sigma

    def log_pred(self, mus, Sigmas, u):
        """Σ_p log Φ(sgn_p h_pᵀμ_c / √(1 + h_pᵀΣ_c h_p)) over u's labels, for each candidate c (C,)."""
        idx = self.labels[u]
        Hu, s = self.H[idx], self.sgn[idx]
        m = mus @ Hu.T
        v = torch.einsum("pm,cmn,pn->cp", Hu, Sigmas, Hu)
        return log_ndtr(s * m / torch.sqrt(1.0 + v)).sum(-1)


def _escobar_west(rng, lam, k, n, a, b):
    """One Escobar & West (1995) draw of λ | k communities among n users, λ ~ Gamma(a, rate b)."""
    eta = rng.beta(lam + 1.0, n)
    rate = b - math.log(eta)
    odds = (a + k - 1.0) / (n * rate)
    shape = a + k if rng.random() < odds / (1.0 + odds) else a + k - 1.0
    return float(rng.gamma(shape, 1.0 / rate))


def fit_gibbs(model, data, seed: int = 0, n_sweeps: int = 300, burn_in: int = 100, n_chains: int = 2,
              thin: int = 1, membership: str = "marginal", damping: float = 0.5, ep_max_iter: int = 200,
              ep_tol: float = 1e-6, cache_size: int = 20000, progress_bar: bool | None = None,
              setup=None) -> DPMPosterior:
    """Blocked Gibbs sampling of the memberships with EP per community (module docstring).

    ``n_sweeps`` per chain, of which the first ``burn_in`` are dropped and every ``thin``-th after
    is kept; ``n_chains`` chains from independent CRP-prior initialisations; ``membership``
    "marginal" (the paper's product of per-label predictive probabilities) or "joint" (the EP
    evidence ratio); ``damping``, ``ep_max_iter``, ``ep_tol`` for each community's EP;
    ``cache_size`` community fits kept (by member set) before the cache is emptied.
    """
    if membership not in ("marginal", "joint"):
        raise DataError(f"membership: expected 'marginal' or 'joint', got {membership!r}")
    for name, v, lo in (("n_sweeps", n_sweeps, 1), ("n_chains", n_chains, 1), ("thin", thin, 1),
                        ("burn_in", burn_in, 0)):
        if int(v) != v or v < lo:
            raise DataError(f"{name}: expected an integer ≥ {lo}, got {v!r}")
    if burn_in >= n_sweeps:
        raise DataError(f"burn_in: must be smaller than n_sweeps ({n_sweeps}), got {burn_in}")
    check_data(model, data)
    setup = setup or model.setup(data, seed=seed)
    smp = _Sampler(setup, data, damping, ep_max_iter, ep_tol, cache_size)
    U, P = data.n_users, data.n_pairs
    prior = model.concentration_prior
    a_l, b_l = (None, None) if prior is None else (float(prior.concentration), float(prior.rate))
    kept, trace_k, trace_lam = [], np.zeros((n_chains, n_sweeps), np.int64), np.zeros((n_chains, n_sweeps))
    joint = membership == "joint"
    with progress(n_sweeps * n_chains, "dpm gibbs", progress_bar) as bar:
        for chain in range(n_chains):
            rng = np.random.default_rng([int(seed), chain])
            tau_ws, nu_ws = torch.zeros(P, dtype=DTYPE), torch.zeros(P, dtype=DTYPE)
            lam = float(model.concentration)
            # initial memberships: one draw from the CRP prior
            z = np.zeros(U, np.int64)
            sizes = []
            for u in range(U):
                p = np.array(sizes + [lam], dtype=np.float64)
                c = int(rng.choice(len(p), p=p / p.sum()))
                if c == len(sizes):
                    sizes.append(0)
                sizes[c] += 1
                z[u] = c
            comms = {c: smp.fit(tuple(np.flatnonzero(z == c).tolist()), tau_ws, nu_ws)
                     for c in range(len(sizes))}
            next_id = len(sizes)
            for sweep in range(n_sweeps):
                for u in rng.permutation(U).tolist():
                    c0 = int(z[u])
                    rec0 = comms[c0]
                    rest0 = tuple(m for m in rec0.members if m != u)
                    ids, counts, mus, Sigmas, ratio = [], [], [], [], []
                    for c, rec in comms.items():
                        if c == c0:
                            if not rest0:
                                continue
                            if joint:
                                ratio.append(rec0.log_Z - smp.fit(rest0, tau_ws, nu_ws).log_Z)
                            else:
                                keep = torch.isin(rec0.idx, smp.labels[u], invert=True)
                                mu, Sigma = smp.from_sites(rec0.idx[keep], rec0.tau[keep], rec0.nu[keep])
                                mus.append(mu)
                                Sigmas.append(Sigma)
                            counts.append(len(rest0))
                        else:
                            if joint:
                                both = tuple(sorted(rec.members + (u,)))
                                ratio.append(smp.fit(both, tau_ws, nu_ws).log_Z - rec.log_Z)
                            else:
                                mus.append(rec.mu)
                                Sigmas.append(rec.Sigma)
                            counts.append(len(rec.members))
                        ids.append(c)
                    ids.append(-1)  # a new community: the prior GP
                    counts.append(lam)
                    if joint:
                        ratio.append(smp.fit((u,), tau_ws, nu_ws).log_Z)
                        loglik = torch.tensor(ratio, dtype=DTYPE)
                    else:
                        mus.append(smp.prior_mu)
                        Sigmas.append(smp.K)
                        loglik = smp.log_pred(torch.stack(mus), torch.stack(Sigmas), u)
                    logp = torch.log(torch.tensor(counts, dtype=DTYPE)) + loglik
                    prob = torch.softmax(logp, 0).numpy()
                    k = int(np.searchsorted(np.cumsum(prob), rng.random() * prob.sum()))
                    pick = ids[min(k, len(ids) - 1)]
                    if pick == c0:
                        continue
                    if rest0:
                        comms[c0] = smp.fit(rest0, tau_ws, nu_ws)
                    else:
                        del comms[c0]
                    if pick == -1:
                        pick, next_id = next_id, next_id + 1
                        comms[pick] = smp.fit((u,), tau_ws, nu_ws)
                    else:
                        comms[pick] = smp.fit(tuple(sorted(comms[pick].members + (u,))), tau_ws, nu_ws)
                    z[u] = pick
                if prior is not None:
                    lam = _escobar_west(rng, lam, len(comms), U, a_l, b_l)
                trace_k[chain, sweep] = len(comms)
                trace_lam[chain, sweep] = lam
                if sweep >= burn_in and (sweep - burn_in) % thin == 0:
                    kept.append(_snapshot(z, comms, lam))
                bar.update(1)
    return _posterior(model, setup, data, kept, n_chains, smp,
                      trace={"n_communities": trace_k, "concentration": trace_lam},
                      settings=dict(seed=seed, n_sweeps=n_sweeps, burn_in=burn_in, n_chains=n_chains,
                                    thin=thin, membership=membership, damping=damping,
                                    ep_max_iter=ep_max_iter, ep_tol=ep_tol))


def _snapshot(z, comms, lam):
    """Memberships relabelled by first appearance (0, 1, …) and the communities' posteriors in that order."""
    order = list(dict.fromkeys(z.tolist()))
    relabel = {c: i for i, c in enumerate(order)}
    zz = np.array([relabel[c] for c in z.tolist()], dtype=np.int64)
    return zz, [comms[c] for c in order], lam


def _posterior(model, setup, data, kept, n_chains, smp, trace, settings):
    S, U, M = len(kept), data.n_users, smp.M
    C = max(len(f) for _, f, _ in kept)
    means = torch.zeros(S, C, M, dtype=DTYPE)
    covs = smp.K.expand(S, C, M, M).clone()  # unused slots hold the prior
    counts = torch.zeros(S, C, dtype=torch.long)
    z = torch.zeros(S, U, dtype=torch.long)
    lam = torch.zeros(S, dtype=DTYPE)
    for i, (zz, fits, la) in enumerate(kept):
        z[i] = torch.as_tensor(zz)
        lam[i] = la
        for c, f in enumerate(fits):
            means[i, c], covs[i, c], counts[i, c] = f.mu, f.Sigma, len(f.members)
    return DPMPosterior(model=model, setup=setup, data=data, method="gibbs",
                        weights=torch.full((S,), 1.0 / S, dtype=DTYPE), n_chains=n_chains, trace=trace,
                        settings=settings, z=z, means=means, covs=covs, counts=counts, concentration=lam)
