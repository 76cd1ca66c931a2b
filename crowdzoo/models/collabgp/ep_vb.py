"""EP with a variational-Bayes step for collabGP (Houlsby et al. 2012, supplement a §4).

The posterior is approximated by Gaussians on W, H and the labelled entries of G (supplement a,
Eq. 5), the product of four approximate factors f̂₁…f̂₄ of the exact ones

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
  sweeps, tolerance ``tol``) from the current Q; then f̂₂ = Q / cavity on w, h and g;
* f̂₁ (Eq. 39–43): the probit site of each label against the cavity f̂₂.

That is ``gp_factors="factorised"``, the paper's scheme as printed. The default, ``"exact"``, keeps
f₃ and f₄ exact instead of replacing them by factorised sites: the VB step updates each h_d (and
each column of W) against its full GP prior, so Q(h_d) is the GP posterior under the Gaussian
messages f̂₂ sends it (structured mean field: Q(W) Q(H) = Π_d Q(w_·,d) Q(h_d), each jointly
Gaussian over its inputs; only marginals enter the bilinear updates, each O(P M²) as above), and
f̂₃ = f₃, f̂₄ = f₄ need no updates. The factorised f̂₄ is a poor stand-in for a GP over pairs that
are linear combinations of one another (h(i, k) = h(i, j) + h(j, k)): with many pairs and about one
label each (Sushi-B's shape) its sites grow without bound and EP diverges, while the exact factors
converge (docs/collabgp.md; ``test_ep_with_many_pairs_and_few_labels_each``). With 10 items both
agree.

With ``learn_scale`` (the default) the prior of h_d is GP(0, K_items / s_d) with s_d ~ Gamma(α₀, β₀),
and the VB step carries a factor q(s_d) = Gamma(α_d, β_d) beside Q(W) Q(H) (mean-field, as GPPL's
natgrad treats its inverse scale, Simpson & Gurevych 2020 Eq. 15): Q(h_d) is the GP posterior at
s̄_d = E[s_d] = α_d/β_d, and after each update of Q(h_d)

    α_d = α₀ + n_h/2,   β_d = β₀ + ½ E_Q[ãᵀã],

where h_d = Φ_h a_d + √δ_h ε (a_d, ε ~ N(0, I/s_d)), ã = (a_d, ε where δ_h > 0) and n_h its length:
the standard conjugate update, E_Q[ãᵀã] = E_Q[h_dᵀ K_items⁻¹ h_d] (:meth:`Scales.energy`; directions
of a_d that no training pair sees are left out, as they drop out of the evidence). With the
factorised sites q(s_d) is updated once per sweep, from the GP marginals that refine f̂₄. The paper
keeps s_d = 1 (main paper Eq. 5; ``CollabGP.paper()``).

Every update is damped in natural parameters (Eq. 16–21) with ε starting at 1 and multiplied by
0.95 after each sweep; a site update that would make a variance negative is skipped (end of §4.3).
EP stops when no mean of Q(g) moves by more than ``tol`` between sweeps.

The printed Eq. 23, 27, 31–36 have typos (the braces are inverted and Eq. 31–36 subtract the site's
own old value): the updates here are the standard ones, new site = new marginal ÷ cavity.

A label of weight w (``setup.w``) is w copies of it with its own g: each copy keeps the label's sites
f̂₁, f̂₂, the messages to W and H sum the copies' (w times the label's), and its terms of the
evidence count w times; for a whole w this is EP–VB on the label written w times, update for update.

The model evidence (§4.3, Eq. 44–52) is written per variable, which stays finite while some sites
are still uniform (:func:`log_evidence`); log Z̃₂ is the VB lower bound Z₂ of Eq. 47.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch

from ...errors import DataError, NumericalError
from ...gp.conjugate import gamma_moments, kl_gamma, q_s
from ...gp.linalg import DTYPE, cholesky, logdet_from_chol
from ...gp.probit import fast_log_ndtr
from ...inference.common import progress
from .model import CollabGP
from .setup import CollabSetup

LOG2PI = math.log(2.0 * math.pi)


class Site(NamedTuple):
    """Gaussian site exp(−½ τ x² + ν x), elementwise."""

    tau: torch.Tensor
    nu: torch.Tensor


class EPState(NamedTuple):
    """All site parameters: g1, g2 (L,) on g; h2, h4 (D, P) on H; w2, w3 (D, U) on Wᵀ; ``scales`` the
    Gamma factors q(s_d) on the inverse scales of h (None: s_d = 1)."""

    g1: Site
    g2: Site
    h2: Site
    h4: Site
    w2: Site
    w3: Site
    scales: ScaleFactors | None = None


class ScaleFactors(NamedTuple):
    """The Gamma factors q(s_d) = Gamma(``shape``_d, ``rate``_d) of a fit, under the prior Gamma(``shape0``,
    ``rate0``), each over ``n`` numbers (the n_h of :class:`Scales`)."""

    shape: torch.Tensor
    rate: torch.Tensor
    shape0: float
    rate0: float
    n: int

    @property
    def mean(self) -> torch.Tensor:
        """E[s_d] = α_d / β_d."""
        return self.shape / self.rate

    def bound(self) -> float:
        """What q(s) adds to the VB bound beside the Gaussian terms taken at s̄ = E[s]:
        Σ_d [(n/2)(E[log s_d] − log s̄_d) − KL(Gamma(α_d, β_d) ‖ Gamma(α₀, β₀))]."""
        mean, e_log = gamma_moments(self.shape, self.rate)
        kl = kl_gamma(self.shape, self.rate, self.shape0, self.rate0)
        return float((0.5 * self.n * (e_log - torch.log(mean)) - kl).sum())


class Scales:
    """q(s_d) = Gamma(α_d, β_d), d = 1..D: the inverse output scales of h_d under the prior Gamma(α₀, β₀)
    (module docstring). ``mean`` E[s_d] = α_d/β_d; :meth:`update` sets one d from E_Q[ãᵀã]."""

    def __init__(self, prior: tuple[float, float], D: int, start: float, Phi: torch.Tensor,
                 delta: torch.Tensor):
        self.shape0, self.rate0 = (float(v) for v in prior)
        self.shape = torch.full((D,), self.shape0, dtype=DTYPE)
        self.rate = self.shape / float(start)
        self.Phi, self.delta = Phi, delta
        # FITC residuals ε that carry variance (δ at round-off level is the exact prior's zero)
        self.resid = delta > 1e-6 * float(((Phi * Phi).sum(-1) + delta).max())
        # directions of a that no training pair sees (with every item a pseudo-input: f's constant, and
        # one more per further component of the graph of labelled pairs) keep their prior N(0, I/s_d):
        # they drop out of the evidence and are left out of q(s_d)'s update
        self.n_null = Phi.shape[1] - int(torch.linalg.matrix_rank(Phi))
        self.n = Phi.shape[1] - self.n_null + int(self.resid.sum())

    def energy(self, site: Site, q: GPMarginals, s: torch.Tensor) -> torch.Tensor:
        """E_Q[ãᵀã] per d: ã = (a_d in the directions the training pairs see, ε where δ > 0), Q(a_d) =
        N(mean_a, cov_a) of :func:`scaled_marginals` at ``s`` (its unseen directions at the prior, which
        contribute (M − rank Φ)/s_d to E[a_dᵀa_d]) and, given a_d, each ε_p Gaussian with precision
        s_d + δ_p τ_p and mean √δ_p (ν_p − τ_p φ_pᵀa_d)/(s_d + δ_p τ_p), so that
        E[ε_p²] = 1/(s_d + δ_p τ_p) + δ_p E[(ν_p − τ_p φ_pᵀa_d)²]/(s_d + δ_p τ_p)²."""
        out = ((q.mean_a * q.mean_a).sum(-1) + torch.diagonal(q.cov_a, dim1=-2, dim2=-1).sum(-1)
               - self.n_null / s)
        if bool(self.resid.any()):
            tau, nu, sd = site.tau[:, self.resid], site.nu[:, self.resid], s[:, None]
            P_r, dl = self.Phi[self.resid], self.delta[self.resid]
            fm = q.mean_a @ P_r.T
            fv = ((P_r @ q.cov_a) * P_r).sum(-1)
            prec = sd + dl * tau
            out = out + (1.0 / prec + dl * ((nu - tau * fm) ** 2 + tau * tau * fv) / prec**2).sum(-1)
        return out

    @property
    def mean(self) -> torch.Tensor:
        return self.shape / self.rate

    def update(self, d, energy: torch.Tensor) -> None:
        """α_d = α₀ + n_h/2, β_d = β₀ + ½ E_Q[ãᵀã] (``energy``; ``d`` an index or a slice)."""
        self.shape[d], self.rate[d] = q_s(self.shape0, self.rate0, self.n, energy)

    def factors(self) -> ScaleFactors:
        """The current q(s) as plain tensors and numbers (what a fit's state keeps)."""
        return ScaleFactors(self.shape.clone(), self.rate.clone(), self.shape0, self.rate0, self.n)


class GPMarginals(NamedTuple):
    """A GP x = Φ a + √δ ε times Gaussian sites: marginal means/variances of x (…, n), the
    posterior N(mean_a, cov_a) of a, and log ∫ N(x; 0, K) Π sites dx (``log_partition``)."""

    mean: torch.Tensor
    var: torch.Tensor
    mean_a: torch.Tensor | None
    cov_a: torch.Tensor | None
    log_partition: torch.Tensor


class PairBasis(NamedTuple):
    """Φ_h of the exact item prior, kept factored: with every item a pseudo-input, h(i, j) = f(x_i) − f(x_j)
    and f = B a (B = K_items L⁻ᵀ, (N, M)), so Φ_h = E B with E (P, N) the pairs' rows e_lo − e_hi. The
    products :func:`gp_marginals` needs then go through B and sums over the pairs — Φᵀ diag(w) Φ =
    Bᵀ (Eᵀ diag(w) E) B with Eᵀ diag(w) E the graph Laplacian of the labelled pairs — at O(P + N²M)
    per latent function instead of O(P M²) (P pairs ≫ N items when many pairs are labelled)."""

    B: torch.Tensor
    lo: torch.Tensor
    hi: torch.Tensor

    @classmethod
    def of(cls, setup: CollabSetup) -> PairBasis | None:
        """The factored Φ_h of ``setup`` where its item prior is exact (every item a pseudo-input),
        else None (FITC: Φ_h as it is)."""
        if setup.items.Zb is not None:
            return None
        B = torch.linalg.solve_triangular(setup.items.L_zz, setup.items.kernel(setup.items.Za, setup.X),
                                          upper=False).T  # row x: k(x, Z) L⁻ᵀ
        return cls(B, setup.pairs[:, 0], setup.pairs[:, 1])

    def rmul(self, v: torch.Tensor) -> torch.Tensor:
        """v Φ for v (D, P): (Eᵀ v)ᵀ B."""
        N = self.B.shape[0]
        u = torch.zeros(v.shape[0], N, dtype=DTYPE)
        u.index_add_(1, self.lo, v)
        u.index_add_(1, self.hi, -v)
        return u @ self.B

    def gram(self, w: torch.Tensor) -> torch.Tensor:
        """Φᵀ diag(w_d) Φ for w (D, P): Bᵀ Λ_d B, Λ_d = Eᵀ diag(w_d) E."""
        D, N = w.shape[0], self.B.shape[0]
        lap = torch.zeros(D, N * N, dtype=DTYPE)
        for i, j, sign in ((self.lo, self.lo, 1.0), (self.hi, self.hi, 1.0), (self.lo, self.hi, -1.0),
                           (self.hi, self.lo, -1.0)):
            lap.index_add_(1, i * N + j, sign * w)
        return self.B.T @ lap.reshape(D, N, N) @ self.B

    def quad(self, C: torch.Tensor) -> torch.Tensor:
        """diag(Φ C_d Φᵀ) for C (D, M, M): (B C_d Bᵀ) at (lo, lo) + (hi, hi) − 2 (lo, hi)."""
        S = self.B @ C @ self.B.T
        return S[:, self.lo, self.lo] + S[:, self.hi, self.hi] - 2.0 * S[:, self.lo, self.hi]


def gp_marginals(Phi: torch.Tensor | PairBasis | None, delta: torch.Tensor, site: Site,
                 what: str) -> GPMarginals:
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
    if isinstance(Phi, PairBasis):
        M = Phi.B.shape[1]
        A = torch.eye(M, dtype=DTYPE) + Phi.gram((tau * r).reshape(-1, tau.shape[-1]))
        L = cholesky(A, what=f"I + Φᵀ diag(τ̂) Φ ({what})")
        b = Phi.rmul((nu * r).reshape(-1, nu.shape[-1]))
        C = torch.cholesky_inverse(L)
        mean_a = (C @ b[..., None])[..., 0]
        f = mean_a @ Phi.B.T
        var = r * r * Phi.quad(C) + delta * r
        mean = r * (f[:, Phi.lo] - f[:, Phi.hi]) + delta * nu * r
        logZ = base - 0.5 * logdet_from_chol(L) + 0.5 * (b * mean_a).sum(-1)
        return GPMarginals(mean, var, mean_a, C, logZ)
    M = Phi.shape[1]
    A = torch.eye(M, dtype=DTYPE) + Phi.T @ ((tau * r)[..., None] * Phi)  # (D, M, M), GEMMs only
    L = cholesky(A, what=f"I + Φᵀ diag(τ̂) Φ ({what})")
    b = (nu * r) @ Phi  # (D, M)
    C = torch.cholesky_inverse(L)
    mean_a = (C @ b[..., None])[..., 0]
    var = r * r * ((Phi @ C) * Phi).sum(-1) + delta * r
    mean = r * (mean_a @ Phi.T) + delta * nu * r
    logZ = base - 0.5 * logdet_from_chol(L) + 0.5 * (b * mean_a).sum(-1)
    return GPMarginals(mean, var, mean_a, C, logZ)


def scaled_marginals(Phi: torch.Tensor, delta: torch.Tensor, site: Site, s: torch.Tensor | None,
                     what: str) -> GPMarginals:
    """:func:`gp_marginals` of h_d = Φ a_d + √δ ε under the prior GP(0, (ΦΦᵀ + diag δ) / s_d) (a_d, ε ~
    N(0, I/s_d)), batched over d (``s`` (D,); None: s_d = 1): y = √s_d h_d has the unit prior and the
    sites (τ/s_d, ν/√s_d), so its marginals are :func:`gp_marginals`', rescaled — means by 1/√s_d,
    variances by 1/s_d, the log-partition unchanged. ``mean_a``, ``cov_a`` are a_d's (h = Φ a_d + √δ ε)."""
    if s is None:
        return gp_marginals(Phi, delta, site, what)
    r = s.sqrt()[:, None]
    out = gp_marginals(Phi, delta, Site(site.tau / s[:, None], site.nu / r), what)
    return GPMarginals(out.mean / r, out.var / s[:, None], out.mean_a / r, out.cov_a / s[:, None, None],
                       out.log_partition)


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


def factorised_posterior(prior: Site):
    """q(x_d) = prior_d × Gaussian likelihood sites, elementwise (the paper's f̂₃, f̂₄ as priors)."""
    def post(d, lik: Site):
        prec = prior.tau[d] + lik.tau
        return (prior.nu[d] + lik.nu) / prec, 1.0 / prec
    return post


def gp_posterior(Phi: torch.Tensor | None, delta: torch.Tensor, what: str, scales: Scales | None = None):
    """q(x_d) = GP(0, ΦΦᵀ + diag δ) × Gaussian likelihood sites, jointly over every input; only
    its marginals are needed by the bilinear VB step (each label touches one pair and one user).
    With ``scales`` the prior is GP(0, (ΦΦᵀ + diag δ) / s̄_d) and q(s_d) is updated after q(x_d)."""
    def post(d, lik: Site):
        lik = Site(lik.tau[None], lik.nu[None])
        if scales is None:
            out = gp_marginals(Phi, delta, lik, what)
            return out.mean[0], out.var[0]
        s = scales.mean[d:d + 1]
        out = scaled_marginals(Phi, delta, lik, s, what)
        scales.update(d, scales.energy(lik, out, s)[0])
        return out.mean[0], out.var[0]
    return post


def vb_bilinear(z, u, obs: Site, h_post, w_post, mh, vh, mw, vw, sweeps: int, tol: float = 1e-4):
    """Mean-field VB for Q(W) Q(H) against S(W, H) (Eq. 30): Gaussian pseudo-observations
    exp(−½ τ¹ g² + ν¹ g) of g = w_u·h_z, and priors given as ``h_post(d, lik)`` / ``w_post(d, lik)``
    returning the marginals of q(h_d) / q(w_·,d) under Gaussian likelihood sites ``lik`` (P,) /
    (U,): :func:`factorised_posterior` for the paper's factorised f̂₄, f̂₃, :func:`gp_posterior` for
    the exact GP priors. Coordinate ascent over the latent functions d; within one d every h_d,p
    (and then every w_d,u) is updated at once — each label's expected log pseudo-likelihood is
    quadratic in h_d,p with

        τ_p = Σ_{l: z_l = p} τ¹_l E[w_u,d²],
        ν_p = Σ_{l: z_l = p} E[w_u,d] (ν¹_l − τ¹_l Σ_{d'≠d} E[w_u,d'] E[h_d',p]),

    the message f̂₂ sends to h_d (and the same with the roles of W and H swapped). Stops after
    ``sweeps`` sweeps or when no E[g] moves by more than ``tol``. Returns (mh, vh, mw, vw, h_lik,
    w_lik): the marginals and the last likelihood sites (D, P), (D, U) of every d."""
    mh, vh, mw, vw = mh.clone(), vh.clone(), mw.clone(), vw.clone()
    D, P = mh.shape
    U = mw.shape[1]
    h_tau, h_nu = torch.zeros_like(mh), torch.zeros_like(mh)
    w_tau, w_nu = torch.zeros_like(mw), torch.zeros_like(mw)
    pred = (mw[:, u] * mh[:, z]).sum(0)
    for _ in range(sweeps):
        pred_old = pred
        for d in range(D):
            wd = mw[d, u]
            resid = obs.nu - obs.tau * (pred - wd * mh[d, z])  # ν¹ − τ¹ Σ_{d'≠d} E[w_d'] E[h_d']
            h_tau[d] = torch.bincount(z, obs.tau * (wd * wd + vw[d, u]), P)
            h_nu[d] = torch.bincount(z, wd * resid, P)
            new, vh[d] = h_post(d, Site(h_tau[d], h_nu[d]))
            pred = pred + wd * (new - mh[d])[z]
            mh[d] = new
            hd = mh[d, z]
            resid = obs.nu - obs.tau * (pred - mw[d, u] * hd)
            w_tau[d] = torch.bincount(u, obs.tau * (hd * hd + vh[d, z]), U)
            w_nu[d] = torch.bincount(u, hd * resid, U)
            new, vw[d] = w_post(d, Site(w_tau[d], w_nu[d]))
            pred = pred + (new - mw[d])[u] * hd
            mw[d] = new
        if float((pred - pred_old).abs().max()) < tol:
            break
    return mh, vh, mw, vw, Site(h_tau, h_nu), Site(w_tau, w_nu)


def _A(site: Site, w=None) -> torch.Tensor:
    """Σ log ∫ exp(−½ τ x² + ν x) dx = Σ [ν²/(2τ) + ½ log(2π/τ)] (each term times its weight ``w``)."""
    return _sum(site.nu ** 2 / (2 * site.tau) + 0.5 * (LOG2PI - torch.log(site.tau)), w)


def _sum(x, w=None):
    """Σ x, each term times its weight ``w`` where given (a label of weight w: w copies of it)."""
    return x.sum() if w is None else (w * x).sum()


def _weighted(site: Site, w=None) -> Site:
    """The site of each label times its weight (the copies' sites summed), as the VB step sees it."""
    return site if w is None else Site(w * site.tau, w * site.nu)


def _add(s1: Site, s2: Site) -> Site:
    return Site(s1.tau + s2.tau, s1.nu + s2.nu)


def _expected(site: Site, m, v, w=None):
    """Σ E[−½ τ x² + ν x] under x ~ N(m, v), elementwise (each term times its weight ``w``)."""
    return _sum(-0.5 * site.tau * (m * m + v) + site.nu * m, w)


def log_evidence(setup: CollabSetup, st: EPState, gp_factors: str = "exact") -> float:
    """EP approximation of log P(T | X, U) (§4.3), per variable:

        Σ_l [log Φ(β_l) + A(g₂) − A(g₁ + g₂)] + Z₂,
        Z₂ = E_Q[Σ_l log f̂₁] + Σ_d (log Z_h,d(h₂) − E_Q[log f̂₂(h_d)])
                             + Σ_d (log Z_w,d(w₂) − E_Q[log f̂₂(w_d)]),

    with A the log normaliser of a site and log Z_·,d the GP factors' log-partitions under the f̂₂
    sites (Eq. 49, 51, 57, 58). Z₂ is the VB bound of Eq. 47: for an exact GP factor
    log Z_d − E_Q[log f̂₂] = E_Q[log-lik sites] − KL(Q ‖ GP); for the paper's factorised f̂₃, f̂₄
    (``gp_factors="factorised"``) Q is the product of sites 2·3 and 2·4 and the same expression
    is Eq. 47's entropy and cross terms rearranged. With learned scales (``st.scales``) Q(h_d) is the
    GP posterior at s̄_d = E[s_d] and the bound adds :meth:`Scales.bound` (the terms of q(s)). A label
    of weight w is w copies of it, each with the label's sites: its terms count w times."""
    z, u, t, w = setup.z, setup.u, setup.t, setup.w
    v2 = 1.0 / st.g2.tau
    beta = t * st.g2.nu * v2 / torch.sqrt(1.0 + v2)
    out = _sum(fast_log_ndtr(beta), w) + _A(st.g2, w) - _A(_add(st.g1, st.g2), w)
    gw = gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users")
    s = None if st.scales is None else st.scales.mean
    gh = scaled_marginals(PairBasis.of(setup) or setup.Phi_h, setup.delta_h, st.h2, s, "items")
    out = out + gw.log_partition.sum() + gh.log_partition.sum()
    if st.scales is not None:
        out = out + st.scales.bound()
    if gp_factors == "exact":
        mw, vw, mh, vh = gw.mean, gw.var, gh.mean, gh.var
    else:
        qw, qh = _add(st.w2, st.w3), _add(st.h2, st.h4)
        vw, vh = 1.0 / qw.tau, 1.0 / qh.tau
        mw, mh = qw.nu * vw, qh.nu * vh
    mg, vg = g_moments(z, u, mh, vh, mw, vw)
    out = out + _expected(st.g1, mg, vg, w) - _expected(st.w2, mw, vw) - _expected(st.h2, mh, vh)
    return float(out)


def run_ep(setup: CollabSetup, max_iter: int = 200, tol: float = 1e-3, damping: float = 0.95,
           vb_sweeps: int = 50, seed: int = 0, progress_bar=None, gp_factors: str = "exact"):
    """The EP–VB sweeps of the module docstring. Returns (EPState, trace dict)."""
    if gp_factors not in ("exact", "factorised"):
        raise DataError(f"gp_factors: 'exact' or 'factorised', got {gp_factors!r}", arg="gp_factors")
    D, P, U, L = setup.D, setup.P, setup.n_users, setup.L
    z, u, t = setup.z, setup.u, setup.t
    zeros = lambda *s: torch.zeros(*s, dtype=DTYPE)  # noqa: E731
    # prior variances of h and w: diag(Φ Φᵀ) + δ
    # q(s_d) starts at E[s_d] = D/2: g's prior variance Σ_d 1/s̄_d = 2 per unit of k_pref, whatever D
    # is and however weak the prior (started at a vague prior's mean, every h_d would start at a scale
    # the labels cannot lift it from, or pull none of them down)
    scales = None if setup.scale_prior is None else Scales(setup.scale_prior, D, 0.5 * D, setup.Phi_h,
                                                                 setup.delta_h)
    prior_h = (setup.Phi_h ** 2).sum(-1) + setup.delta_h
    Phi_h = PairBasis.of(setup) or setup.Phi_h
    if scales is not None:
        prior_h = prior_h / scales.mean[0]
    prior_w = setup.delta_w if setup.Phi_w is None else (setup.Phi_w ** 2).sum(-1) + setup.delta_w
    # f̂₁ from the prior predictive of g, so that the first VB step has data to break symmetry
    g2 = Site(1.0 / (D * prior_w[u] * prior_h[z]), zeros(L))
    st = EPState(g1=_probit_site(g2, t, Site(zeros(L), zeros(L)), 1.0), g2=g2,
                 h2=Site(zeros(D, P), zeros(D, P)), h4=Site(zeros(D, P), zeros(D, P)),
                 w2=Site(zeros(D, U), zeros(D, U)), w3=Site(zeros(D, U), zeros(D, U)),
                 scales=None if scales is None else scales.factors())
    gen = torch.Generator().manual_seed(seed)
    # Q(W) Q(H): zero means at the prior variances, random user weights to break the
    # sign/rotation symmetry (Stern et al. 2009)
    mh, vh = zeros(D, P), prior_h.expand(D, P).clone()
    mw, vw = torch.randn(D, U, generator=gen, dtype=DTYPE) * prior_w.sqrt(), prior_w.expand(D, U).clone()
    if gp_factors == "exact":
        h_post = gp_posterior(Phi_h, setup.delta_h, "items", scales)
        w_post = gp_posterior(setup.Phi_w, setup.delta_w, "users")
    eps, mg_old = 1.0, None
    trace = {"max_change": [], "damping": []}
    t0 = time.perf_counter()
    with progress(max_iter, "ep", progress_bar) as bar:
        for it in range(max_iter):
            h4, w3 = st.h4, st.w3
            if gp_factors == "factorised":
                # f̂₄ and f̂₃: the GP priors against their cavities f̂₂ (Eq. 22–29)
                s = None if scales is None else scales.mean.clone()
                qh = scaled_marginals(Phi_h, setup.delta_h, st.h2, s, "items")
                h4 = _damp(st.h4, _divide(qh.mean, qh.var, st.h2), eps)
                if scales is not None and it > 0:
                    scales.update(slice(None), scales.energy(st.h2, qh, s))
                qw = gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users")
                w3 = _damp(st.w3, _divide(qw.mean, qw.var, st.w2), eps)
                h_post, w_post = factorised_posterior(h4), factorised_posterior(w3)
                if it > 0:
                    sh, sw = _add(st.h2, h4), _add(st.w2, w3)
                    vh, vw = 1.0 / sh.tau, 1.0 / sw.tau
                    mh, mw = sh.nu * vh, sw.nu * vw
            # f̂₂ by VB (Eq. 30–38), from the current Q(W) Q(H)
            obs = _weighted(st.g1, setup.w)  # a label of weight w: the messages of its w copies
            mh, vh, mw, vw, h_lik, w_lik = vb_bilinear(z, u, obs, h_post, w_post, mh, vh, mw, vw, vb_sweeps,
                                                       tol)
            mg, vg = g_moments(z, u, mh, vh, mw, vw)
            if gp_factors == "factorised":
                h2 = _damp(st.h2, _divide(mh, vh, h4), eps)
                w2 = _damp(st.w2, _divide(mw, vw, w3), eps)
            else:  # the exact GP factors need no sites: f̂₂'s messages are Q's likelihood terms
                h2, w2 = h_lik, w_lik
            g2 = _damp(st.g2, _divide(mg, vg, st.g1), eps)
            # f̂₁: probit sites against the cavity f̂₂ (Eq. 39–43)
            g1 = _probit_site(g2, t, st.g1, eps)
            st = EPState(g1, g2, h2, h4, w2, w3, None if scales is None else scales.factors())
            q = _add(g1, g2)
            mean_g = q.nu / q.tau
            if not torch.isfinite(mean_g).all():
                raise NumericalError(
                    f"EP for collabGP: the posterior of g became NaN at sweep {it}. Try: a smaller "
                    "n_latent, a stronger {damping} ({damping=0.8}), or longer length-scales.",
                    settings=("damping",))
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


def fit_ep(model: CollabGP, data, seed: int = 0, max_iter: int = 200, tol: float = 1e-3,
           damping: float = 0.95, vb_sweeps: int = 50, evidence: bool = True,
           gp_factors: str = "exact", learn_kernel: bool = False, kernel_iter: int = 40, progress_bar=None,
           setup: CollabSetup | None = None):
    """Fit collabGP by EP + VB (supplement a §4). Returns a
    :class:`~crowdzoo.models.collabgp.posterior.CollabGPPosterior` with ``log_evidence`` (§4.3).

    ``gp_factors="factorised"`` runs the paper's scheme as printed, with the GP priors replaced by
    the factorised EP sites f̂₃, f̂₄; ``"exact"`` (default) keeps the GP priors exact inside the VB
    step (module docstring) — the paper's scheme diverges with many pairs and few labels each.

    ``learn_kernel=True`` first maximises the EP log evidence (§4.3) over the log length-scales of
    the item kernel and, with user features, the user kernel (isotropic, as the model's), from the
    median distance (the paper's choice) — what supplement a §9 does by hand on a grid (Fig. 2;
    docs/collabgp-evidence.md) — by Nelder–Mead with at most ``kernel_iter`` evidence evaluations, a
    full EP run each (the EP fixed point is not differentiated through). The learned values are in
    ``settings`` and the posterior's model."""
    from .posterior import CollabGPPosterior

    if not 0.0 < damping <= 1.0:
        raise DataError(f"damping: the per-sweep factor must be in (0, 1], got {damping}", arg="damping")
    learned = {}
    if learn_kernel:
        if setup is not None:
            raise DataError("learn_kernel: the setup fixes the kernels; pass setup=None to learn them",
                            arg="learn_kernel")
        model, learned = learn_kernel_ep(model, data, seed, dict(max_iter=max_iter, tol=tol, damping=damping,
                                                                 vb_sweeps=vb_sweeps, gp_factors=gp_factors),
                                         kernel_iter)
    setup = setup or model.setup(data, seed=seed)
    st, trace = run_ep(setup, max_iter=max_iter, tol=tol, damping=damping, vb_sweeps=vb_sweeps, seed=seed,
                       progress_bar=progress_bar, gp_factors=gp_factors)
    s = None if st.scales is None else st.scales.mean
    qh = scaled_marginals(PairBasis.of(setup) or setup.Phi_h, setup.delta_h, st.h2, s, "items")
    qw = gp_marginals(setup.Phi_w, setup.delta_w, st.w2, "users")
    if gp_factors == "exact":
        w_mean, w_var = qw.mean, qw.var
    else:
        w_site = _add(st.w2, st.w3)
        w_var = 1.0 / w_site.tau
        w_mean = w_site.nu * w_var
    logz = log_evidence(setup, st, gp_factors) if evidence else None
    return CollabGPPosterior(
        model=model, setup=setup, data=data, method="ep", weights=torch.ones(1, dtype=DTYPE),
        a_mean=qh.mean_a[None], a_cov=qh.cov_a, w_mean=w_mean.T[None], w_var=w_var.T,
        b_mean=None if qw.mean_a is None else qw.mean_a[None], b_cov=qw.cov_a, log_evidence=logz,
        h_scale=None if s is None else (1.0 / s)[None],
        trace=trace, settings=dict(seed=seed, max_iter=max_iter, tol=tol, damping=damping,
                                   vb_sweeps=vb_sweeps, gp_factors=gp_factors, learn_kernel=learn_kernel,
                                   **learned), state=st)


def learn_kernel_ep(model: CollabGP, data, seed: int, ep_kw: dict, kernel_iter: int):
    """(the model with the length-scales of highest EP evidence, what was learned); see :func:`fit_ep`."""
    import dataclasses

    import numpy as np
    from scipy.optimize import minimize

    if np.asarray(data.item_features).shape[1] == 0 or not isinstance(model.kernel, str):
        raise DataError("learn_kernel: collabGP learns the length-scale of a named item kernel ('se', "
                        "'matern32') on items with features; pass {kernel='se'} with item features, or "
                        "{learn_kernel=False}", arg="learn_kernel", settings=("kernel", "learn_kernel"))
    base = model.setup(data, seed=seed)
    # one log factor per side on the starting length-scales (isotropic or per-dimension): the
    # evidence is searched along the start's direction, as the paper's grid searches one value
    starts = [base.items.kernel.lengthscale.reshape(-1).clone()]
    if base.users is not None and isinstance(model.user_kernel, str):
        starts.append(base.users.kernel.lengthscale.reshape(-1).clone())

    def value(v):
        return float(v[0]) if bool((v == v[0]).all()) else v.numpy()

    def with_ell(log_f):
        kw = {"lengthscale": value(starts[0] * float(np.exp(log_f[0])))}
        if len(log_f) > 1:
            kw["user_lengthscale"] = value(starts[1] * float(np.exp(log_f[1])))
        return dataclasses.replace(model, **kw)

    def neg_evidence(log_f):
        su = with_ell(log_f).setup(data, seed=seed)
        st, _ = run_ep(su, seed=seed, progress_bar=False, **ep_kw)
        return -log_evidence(su, st, ep_kw["gp_factors"])

    x0 = np.zeros(len(starts))
    res = minimize(neg_evidence, x0, method="Nelder-Mead",
                   options=dict(maxfev=kernel_iter, xatol=0.02, fatol=0.05,
                                initial_simplex=np.vstack([x0, x0 + 0.5 * np.eye(len(x0))])))
    learned = with_ell(res.x)

    def shown(v):
        return v if isinstance(v, float) else np.asarray(v).tolist()

    out = {"learned_lengthscale": shown(learned.lengthscale), "start_lengthscale": shown(value(starts[0])),
           "kernel_evaluations": int(res.nfev), "kernel_converged": bool(res.success)}
    if len(starts) > 1:
        out.update(learned_user_lengthscale=shown(learned.user_lengthscale),
                   start_user_lengthscale=shown(value(starts[1])))
    return learned, out


__all__ = ["fit_ep", "run_ep", "gp_marginals", "scaled_marginals", "vb_bilinear",
           "log_evidence", "EPState", "ScaleFactors", "Scales", "Site"]
