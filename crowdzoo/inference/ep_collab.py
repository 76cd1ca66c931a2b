"""EP with a variational-Bayes step for collabGP (Houlsby et al. 2012, supplement a §4).

The posterior is approximated by fully factorised Gaussians on W, H and the labelled entries of G
(supplement a, Eq. 5), the product of four approximate factors f̂₁…f̂₄ of the exact ones

    f₁ = Π Φ(t g)   f₂ = Π δ(g − w_u·h_z)   f₃ = P(W | users)   f₄ = P(H | items)    (Eq. 6)

Each site is kept in natural parameters (τ = 1/v̂, ν = m̂/v̂; τ = 0 is the uniform site EP starts
from). One sweep refines, in the paper's order (§4.2):

* f̂₄ (Eq. 22–25): the GP prior on each h_d against the cavity f̂₂, in the low-rank-plus-diagonal
  form of :mod:`crowdzoo.models.collabgp` — O(P M²) per function, which is the FITC update of §4.4
  (Eq. 53–56, 59–60) and the exact one when δ = 0;
* f̂₃ (Eq. 26–29): the same for each column of W;
* f̂₂ (Eq. 30–38): reversed-KL, i.e. mean-field VB of Q(W, H) against
  S(W, H) = Π N(w_u·h_z | m̂¹, v̂¹) · f̂₃ · f̂₄ (Stern et al. 2009; the paper's choice, mode-seeking
  where plain EP would average over the sign and rotation modes of W H), by coordinate ascent over
  d with every pair (and user) of a row updated at once, run to convergence (at most ``vb_sweeps``
  sweeps) from the current Q; then f̂₂ = Q / cavity on w, h and g;
* f̂₁ (Eq. 39–43): the probit site of each label against the cavity f̂₂.

Every update is damped in natural parameters (Eq. 16–21) with ε starting at 1 and multiplied by
0.95 after each sweep; a site update that would make a variance negative is skipped (end of §4.3).
EP stops when no mean of Q(g) moves by more than ``tol`` between sweeps.

The printed Eq. 23, 27, 31–36 have typos (the braces are inverted and Eq. 31–36 subtract the site's
own old value): the updates here are the standard ones, new site = new marginal ÷ cavity.

The model evidence (§4.3, Eq. 44–52) is written per variable, which stays finite while some sites
are still uniform: log Z = Σ_a log Z̃_a − 3 log Z_Q with Z̃_a the tilted normalisers and Z_Q the
normaliser of Q; log Z̃₂ is the VB lower bound Z₂ of Eq. 47.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch

from ..errors import DataError, NumericalError
from ..linalg import DTYPE, cho_solve, cholesky, logdet_from_chol, solve_lower
from ..models.collabgp import CollabGP, CollabSetup
from ..models.likelihoods import fast_log_ndtr
from ._common import progress

LOG2PI = math.log(2.0 * math.pi)


class Site(NamedTuple):
    """Gaussian site exp(−½ τ x² + ν x), elementwise."""

    tau: torch.Tensor
    nu: torch.Tensor


class EPState(NamedTuple):
    """All site parameters: g1, g2 (L,) on g; h2, h4 (D, P) on H; w2, w3 (D, U) on Wᵀ."""

    g1: Site
    g2: Site
    h2: Site
    h4: Site
    w2: Site
    w3: Site


class GPMarginals(NamedTuple):
    """A GP x = Φ a + √δ ε times Gaussian sites: marginal means/variances of x (…, n), the
    posterior N(mean_a, cov_a) of a, and log ∫ N(x; 0, K) Π sites dx (``log_partition``)."""

    mean: torch.Tensor
    var: torch.Tensor
    mean_a: torch.Tensor | None
    cov_a: torch.Tensor | None
    log_partition: torch.Tensor


def gp_marginals(Phi: torch.Tensor | None, delta: torch.Tensor, site: Site, what: str) -> GPMarginals:
    """Posterior marginals of x = Φ a + √δ ε (a ~ N(0, I_M)) under sites (τ, ν), batched over the
    leading dimension of τ, ν (one GP per latent function). With r = 1/(1 + δτ) and
    A = I + Φᵀ diag(τ r) Φ (Woodbury on K + diag(1/τ), §4.4 / Naish-Guzman & Holden 2007):

        mean_a = A⁻¹ Φᵀ (ν r),   x̄ = r Φ mean_a + δ ν r,   var x = r² diag(Φ A⁻¹ Φᵀ) + δ r,
        log_partition = −½ Σ log(1 + δτ) − ½ log|A| + ½ bᵀ A⁻¹ b + ½ Σ δ ν² r   (b = Φᵀ ν r).
    """
    tau, nu = site
    r = 1.0 / (1.0 + delta * tau)
    base = -0.5 * torch.log1p(delta * tau).sum(-1) + 0.5 * (delta * nu * nu * r).sum(-1)
    if Phi is None:
        return GPMarginals(delta * nu * r, delta * r, None, None, base)
    M = Phi.shape[1]
    A = torch.eye(M, dtype=DTYPE) + torch.einsum("pm,dp,pn->dmn", Phi, tau * r, Phi)
    L = cholesky(A, what=f"I + Φᵀ diag(τ̂) Φ ({what})")
    b = (nu * r) @ Phi  # (D, M)
    mean_a = cho_solve(L, b[..., None])[..., 0]
    V = solve_lower(L, Phi.T.expand(L.shape[0], M, Phi.shape[0]))  # (D, M, n)
    var = r * r * (V * V).sum(-2) + delta * r
    mean = r * (mean_a @ Phi.T) + delta * nu * r
    logZ = base - 0.5 * logdet_from_chol(L) + 0.5 * (b * mean_a).sum(-1)
    return GPMarginals(mean, var, mean_a, torch.cholesky_inverse(L), logZ)


def _damp(old: Site, new: Site, eps: float) -> Site:
    """Damped update in natural parameters (Eq. 16–21); entries whose undamped precision would be
    negative (or not finite) keep their old values (end of §4.3)."""
    ok = torch.isfinite(new.tau) & torch.isfinite(new.nu) & (new.tau >= 0)
    tau = torch.where(ok, eps * new.tau + (1 - eps) * old.tau, old.tau)
    nu = torch.where(ok, eps * new.nu + (1 - eps) * old.nu, old.nu)
    return Site(tau, nu)


def _divide(mean, var, cavity: Site) -> Site:
    """The site that turns ``cavity`` into N(mean, var): marginal ÷ cavity."""
    return Site(1.0 / var - cavity.tau, mean / var - cavity.nu)


def _probit_site(cavity: Site, t: torch.Tensor, old: Site, eps: float) -> Site:
    """f̂₁ (Eq. 39–43) in natural parameters: with cavity N(m, v), z = t m/√(1+v), ratio φ/Φ(z),
    c = ratio (z + ratio)/(1 + v): τ̂₁ = c/(1 − v c), ν̂₁ = (t ratio/√(1+v) + m c)/(1 − v c).
    Labels whose cavity is improper (τ̂₂ ≤ 0) keep their site."""
    ok = cavity.tau > 0
    v = 1.0 / torch.where(ok, cavity.tau, torch.ones_like(cavity.tau))
    m = cavity.nu * v
    s = torch.sqrt(1.0 + v)
    zz = t * m / s
    ratio = torch.exp(-0.5 * zz * zz - 0.5 * LOG2PI - fast_log_ndtr(zz))
    c = ratio * (zz + ratio) / (1.0 + v)
    denom = 1.0 - v * c
    new = Site(c / denom, (t * ratio / s + m * c) / denom)
    new = Site(torch.where(ok, new.tau, -torch.ones_like(new.tau)), new.nu)
    return _damp(old, new, eps)


def g_moments(z, u, mh, vh, mw, vw):
    """Mean and variance of g = w_u·h_z under factorised Q (Eq. 37–38, 12–13): per label."""
    wm, wv, hm, hv = mw[:, u], vw[:, u], mh[:, z], vh[:, z]
    return (wm * hm).sum(0), (wm * wm * hv + wv * hm * hm + wv * hv).sum(0)


def vb_bilinear(z, u, obs: Site, h_prior: Site, w_prior: Site, mh, vh, mw, vw, sweeps: int,
                tol: float = 1e-4):
    """Mean-field VB for Q(W) Q(H) against S(W, H) (Eq. 30): Gaussian pseudo-observations
    exp(−½ τ¹ g² + ν¹ g) of g = w_u·h_z, Gaussian factors ``h_prior`` (D, P) and ``w_prior`` (D, U).
    Coordinate ascent over the latent functions d; within one d every h_d,p (and then every w_d,u)
    is updated at once, which is exact coordinate ascent since they do not interact given the rest.
    Stops after ``sweeps`` sweeps or when no E[g] moves by more than ``tol``. Returns updated
    (mh, vh, mw, vw)."""
    mh, vh, mw, vw = mh.clone(), vh.clone(), mw.clone(), vw.clone()
    D, P = mh.shape
    U = mw.shape[1]
    pred = (mw[:, u] * mh[:, z]).sum(0)
    for _ in range(sweeps):
        pred_old = pred
        for d in range(D):
            wd = mw[d, u]
            resid = obs.nu - obs.tau * (pred - wd * mh[d, z])  # ν¹ − τ¹ Σ_{d'≠d} E[w_d'] E[h_d']
            prec = h_prior.tau[d] + torch.bincount(z, obs.tau * (wd * wd + vw[d, u]), P)
            new = (h_prior.nu[d] + torch.bincount(z, wd * resid, P)) / prec
            pred = pred + wd * (new - mh[d])[z]
            mh[d], vh[d] = new, 1.0 / prec
            hd = mh[d, z]
            resid = obs.nu - obs.tau * (pred - mw[d, u] * hd)
            prec = w_prior.tau[d] + torch.bincount(u, obs.tau * (hd * hd + vh[d, z]), U)
            new = (w_prior.nu[d] + torch.bincount(u, hd * resid, U)) / prec
            pred = pred + (new - mw[d])[u] * hd
            mw[d], vw[d] = new, 1.0 / prec
        if float((pred - pred_old).abs().max()) < tol:
            break
    return mh, vh, mw, vw


def _A(site: Site) -> torch.Tensor:
    """Σ log ∫ exp(−½ τ x² + ν x) dx = Σ [ν²/(2τ) + ½ log(2π/τ)]."""
    return (site.nu ** 2 / (2 * site.tau) + 0.5 * (LOG2PI - torch.log(site.tau))).sum()


def _add(s1: Site, s2: Site) -> Site:
    return Site(s1.tau + s2.tau, s1.nu + s2.nu)


def log_evidence(setup: CollabSetup, st: EPState) -> float:
    """EP approximation of log P(T | X, U) (§4.3), per variable:

    Σ_l [log Φ(β_l) + A(g₂) − A(g₁ + g₂)] + Σ_d log Z_w,d(w₂) − A(w₂ + w₃) + Σ_d log Z_h,d(h₂)
    − A(h₂ + h₄) + Z₂, with A the log normaliser of a site, log Z_·,d the GP factors' log-partitions
    (Eq. 49, 51, 57, 58) and Z₂ the VB bound of Eq. 47 at Q(W)Q(H) = sites 2·3 and 2·4."""
    z, u, t = setup.z, setup.u, setup.t
    v2 = 1.0 / st.g2.tau
    beta = t * st.g2.nu * v2 / torch.sqrt(1.0 + v2)
    out = fast_log_ndtr(beta).sum() + _A(st.g2) - _A(_add(st.g1, st.g2))
    out = out + gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users").log_partition.sum()
    out = out + gp_marginals(setup.Phi_h, setup.delta_h, st.h2, "items").log_partition.sum()
    qw, qh = _add(st.w2, st.w3), _add(st.h2, st.h4)
    out = out - _A(qw) - _A(qh)
    vw, vh = 1.0 / qw.tau, 1.0 / qh.tau
    mw, mh = qw.nu * vw, qh.nu * vh
    mg, vg = g_moments(z, u, mh, vh, mw, vw)
    z2 = (-0.5 * st.g1.tau * (mg * mg + vg) + st.g1.nu * mg).sum()
    z2 = z2 + (-0.5 * st.w3.tau * (mw * mw + vw) + st.w3.nu * mw).sum()
    z2 = z2 + (-0.5 * st.h4.tau * (mh * mh + vh) + st.h4.nu * mh).sum()
    z2 = z2 + 0.5 * (torch.log(vw) + LOG2PI + 1).sum() + 0.5 * (torch.log(vh) + LOG2PI + 1).sum()
    return float(out + z2)


def run_ep(setup: CollabSetup, max_iter: int = 200, tol: float = 1e-3, damping: float = 0.95,
           vb_sweeps: int = 50, seed: int = 0, progress_bar=None):
    """The EP–VB sweeps of the module docstring. Returns (EPState, trace dict)."""
    D, P, U, L = setup.D, setup.P, setup.n_users, setup.L
    z, u, t = setup.z, setup.u, setup.t
    zeros = lambda *s: torch.zeros(*s, dtype=DTYPE)  # noqa: E731
    # prior variances of h and w: diag(Φ Φᵀ) + δ
    prior_h = (setup.Phi_h ** 2).sum(-1) + setup.delta_h
    prior_w = setup.delta_w if setup.Phi_w is None else (setup.Phi_w ** 2).sum(-1) + setup.delta_w
    # f̂₁ from the prior predictive of g, so that the first VB step has data to break symmetry
    g2 = Site(1.0 / (D * prior_w[u] * prior_h[z]), zeros(L))
    st = EPState(g1=_probit_site(g2, t, Site(zeros(L), zeros(L)), 1.0), g2=g2,
                 h2=Site(zeros(D, P), zeros(D, P)), h4=Site(zeros(D, P), zeros(D, P)),
                 w2=Site(zeros(D, U), zeros(D, U)), w3=Site(zeros(D, U), zeros(D, U)))
    gen = torch.Generator().manual_seed(seed)
    eps, mg_old = 1.0, None
    trace = {"max_change": [], "damping": []}
    t0 = time.perf_counter()
    with progress(max_iter, "ep", progress_bar) as bar:
        for it in range(max_iter):
            # f̂₄ and f̂₃: the GP priors against their cavities f̂₂ (Eq. 22–29)
            qh = gp_marginals(setup.Phi_h, setup.delta_h, st.h2, "items")
            h4 = _damp(st.h4, _divide(qh.mean, qh.var, st.h2), eps)
            qw = gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users")
            w3 = _damp(st.w3, _divide(qw.mean, qw.var, st.w2), eps)
            # f̂₂ by VB (Eq. 30–38), from the current Q(W) Q(H)
            sh, sw = _add(st.h2, h4), _add(st.w2, w3)
            vh, vw = 1.0 / sh.tau, 1.0 / sw.tau
            mh, mw = sh.nu * vh, sw.nu * vw
            if it == 0:  # random user weights break the sign/rotation symmetry (Stern et al. 2009)
                mw = torch.randn(D, U, generator=gen, dtype=DTYPE) * prior_w.sqrt()
            mh, vh, mw, vw = vb_bilinear(z, u, st.g1, h4, w3, mh, vh, mw, vw, vb_sweeps)
            mg, vg = g_moments(z, u, mh, vh, mw, vw)
            h2 = _damp(st.h2, _divide(mh, vh, h4), eps)
            w2 = _damp(st.w2, _divide(mw, vw, w3), eps)
            g2 = _damp(st.g2, _divide(mg, vg, st.g1), eps)
            # f̂₁: probit sites against the cavity f̂₂ (Eq. 39–43)
            g1 = _probit_site(g2, t, st.g1, eps)
            st = EPState(g1, g2, h2, h4, w2, w3)
            q = _add(g1, g2)
            mean_g = q.nu / q.tau
            if not torch.isfinite(mean_g).all():
                raise NumericalError(
                    f"EP for collabGP: the posterior of g became NaN at sweep {it}. Try: a smaller "
                    "n_latent, a stronger damping (damping=0.8), or longer length-scales.")
            change = float("inf") if mg_old is None else float((mean_g - mg_old).abs().max())
            mg_old = mean_g
            trace["max_change"].append(change)
            trace["damping"].append(eps)
            bar.set_postfix(change=f"{change:.2e}")
            bar.update()
            if change < tol:
                break
            eps *= damping
    trace["seconds"] = time.perf_counter() - t0
    trace["n_iter"] = it + 1
    trace["converged"] = change < tol
    return st, trace


def fit_ep_collab(model: CollabGP, data, seed: int = 0, max_iter: int = 200, tol: float = 1e-3,
                  damping: float = 0.95, vb_sweeps: int = 50, evidence: bool = True,
                  progress_bar=None, setup: CollabSetup | None = None):
    """Fit collabGP by EP + VB (supplement a §4). Returns a
    :class:`~crowdzoo.posterior_collab.CollabGPPosterior` with ``log_evidence`` (§4.3)."""
    from ..posterior_collab import CollabGPPosterior

    if not isinstance(model, CollabGP):
        raise DataError(f"model: the collabGP EP route needs a CollabGP, got {type(model).__name__}")
    if not 0.0 < damping <= 1.0:
        raise DataError(f"damping: the per-sweep factor must be in (0, 1], got {damping}")
    setup = setup or model.setup(data, seed=seed)
    st, trace = run_ep(setup, max_iter=max_iter, tol=tol, damping=damping, vb_sweeps=vb_sweeps, seed=seed,
                       progress_bar=progress_bar)
    qh = gp_marginals(setup.Phi_h, setup.delta_h, st.h2, "items")
    qw = gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users")
    w_site = _add(st.w2, st.w3)
    w_var = 1.0 / w_site.tau
    logz = log_evidence(setup, st) if evidence else None
    return CollabGPPosterior(
        model=model, setup=setup, data=data, method="ep", weights=torch.ones(1, dtype=DTYPE),
        a_mean=qh.mean_a[None], a_cov=qh.cov_a, w_mean=(w_site.nu * w_var).T[None], w_var=w_var.T,
        b_mean=None if qw.mean_a is None else qw.mean_a[None], b_cov=qw.cov_a, log_evidence=logz,
        trace=trace, settings=dict(seed=seed, max_iter=max_iter, tol=tol, damping=damping,
                                   vb_sweeps=vb_sweeps), state=st)


__all__ = ["fit_ep_collab", "run_ep", "gp_marginals", "vb_bilinear", "log_evidence", "EPState", "Site"]
