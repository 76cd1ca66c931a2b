"""Choices among k items: the probit (Thurstone) and logit (Plackett–Luce) first stage, best and worst.

A row offers a set of k items (k may vary from row to row; rows are padded to k_max with a ``mask``)
and records the item chosen as best and, for a best–worst (MaxDiff) row, the one rejected as worst.
Each item j of the set has a noisy utility U_j = f_j + ε_j and the best is the largest.

**Probit** (GPPL, crowdGPPL, Thurstone): ε_j ~ N(0, σ_j²) independent, σ_j² = ½ + v_j, where v_j is a
variance of f_j that the model integrates out (0 for a point f; the sparse GP's conditional
variance c_j / s). With ε_i = σ_i x, x ~ N(0, 1), the chance that i beats every other member is the
one-dimensional integral

    P(i best) = ∫ φ(x) Π_{j ≠ i} Φ((f_i − f_j + σ_i x) / σ_j) dx,

the multinomial probit with independent noise (Thurstone 1927, case V; Hausman & Wise 1978). At
k = 2 and v = 0 it is Φ(f_a − f_b), the zoo's pairwise likelihood (Simpson & Gurevych 2020, Eq. 2
with σ² = ½); rows of two items take that closed form, Φ((f_i − f_j) / √(σ_i² + σ_j²)), so that
they equal the pairwise model to rounding. Rows of k > 2 take Gauss–Hermite quadrature centred
and scaled at the integrand's mode (the integrand's log is concave in x; a few Newton steps find the
mode, and the Laplace width sets the scale), which keeps the relative error small far in the tails,
where a fixed rule fails.

**Logit** (Bradley–Terry): ε_j iid Gumbel gives the multinomial logit, the first stage of
Plackett–Luce (Luce 1959), P(i best) = exp(f_i) / Σ_j exp(f_j); at k = 2 it is σ(f_a − f_b).

**Worst** (best–worst scaling, the sequential MaxDiff model of Marley & Louviere 2005): after the
best is taken out, the worst is the smallest of the rest, P(w worst | rest) = P(w best | rest)
with f → −f, for either link.

Both stages are categoricals over the set's slots (logits = these log P, padding −∞;
:class:`SetChoice`, whose ``log_prob`` computes only the observed member's), so that Pyro's svi, nuts
and map engines and ArviZ's per-row log-likelihood take them unchanged.
"""
from __future__ import annotations

import math

import pyro.distributions as dist
import torch
from torch.special import log_ndtr

from .probit import gauss_hermite

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
NOISE_VAR = 0.5  # var ε_j of the probit: var(ε_a − ε_b) = 1, Φ(f_a − f_b) at k = 2
LINKS = ("probit", "logit")


def _probit_best(f: torch.Tensor, mask: torch.Tensor, var: torch.Tensor | None, n: int, newton: int,
                 slots: torch.Tensor | None = None):
    """log P(i best) (…, R, C) for the members i in ``slots`` (…, R, C) of each row (None: every slot,
    C = k_max; probit, module docstring)."""
    K = f.shape[-1]
    sig2 = NOISE_VAR + (torch.zeros_like(f) if var is None else var.clamp_min(0.0))
    sig = sig2.sqrt()
    if slots is None:
        slots = torch.arange(K).expand(f.shape)
    f_i, sig_i, sig2_i = (x.gather(-1, slots) for x in (f, sig, sig2))
    cand = mask.expand(f.shape).gather(-1, slots)
    others = cand[..., :, None] & mask[..., None, :] & (slots[..., :, None] != torch.arange(K))
    zero = torch.zeros((), dtype=f.dtype)
    # the integrand's log: g(x) = −x²/2 + Σ_j log Φ(α_ij x + β_ij)
    alpha = torch.where(others, sig_i[..., :, None] / sig[..., None, :], zero)
    beta = torch.where(others, (f_i[..., :, None] - f[..., None, :]) / sig[..., None, :], zero)
    with torch.no_grad():  # the quadrature's centre and width (the value's gradient needs neither)
        x = torch.zeros(f_i.shape, dtype=f.dtype)
        for step in range(newton + 1):
            z = alpha * x[..., None] + beta
            r = torch.where(others, torch.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_ndtr(z)), zero)
            curv = 1.0 + (alpha * alpha * r * (z + r)).sum(-1)
            if step < newton:
                x = x + (-x + (alpha * r).sum(-1)) / curv
        width = curv.rsqrt()
    t, w = gauss_hermite(n)
    xs = x[..., None] + width[..., None] * t  # (…, R, C, n)
    zs = alpha[..., None] * xs[..., None, :] + beta[..., None]  # (…, R, C, K, n)
    logs = torch.where(others[..., None], log_ndtr(zs), zero).sum(-2)  # (…, R, C, n)
    # P = ∫ exp(g(x)) dx / √(2π) = width · E_t[exp(g(x̂ + width t) + t²/2)], t ~ N(0, 1)
    quad = width.log() + torch.logsumexp(-0.5 * xs * xs + logs + 0.5 * t * t + w.log(), -1)
    # rows of two: the closed form Φ((f_i − f_j) / √(σ_i² + σ_j²))
    two = mask.sum(-1, keepdim=True) == 2
    other = torch.where(others, f[..., None, :], zero).sum(-1)
    other_var = torch.where(others, sig2[..., None, :], zero).sum(-1)
    closed = log_ndtr((f_i - other) / (sig2_i + other_var).sqrt())
    out = torch.where(two, closed, quad)
    return torch.where(cand, out, torch.full((), -math.inf, dtype=f.dtype))


def best_log_probs(f: torch.Tensor, mask: torch.Tensor, link: str = "probit", var=None, n: int = 24,
                   newton: int = 6) -> torch.Tensor:
    """log P(i chosen as best) for every slot i of each row: shape f's (…, R, K), −∞ at padding.

    ``f`` (…, R, K): the members' utilities (any value at padding); ``mask`` (R, K) bool: the slots
    that hold an item. ``link``: "probit" (module docstring; ``var`` (…, R, K) or None adds each member's
    integrated variance to its noise; ``n`` Gauss–Hermite nodes, ``newton`` steps to the mode) or
    "logit" (the multinomial logit; ``var`` must be None)."""
    if link == "logit":
        if var is not None and bool((torch.as_tensor(var) > 0).any()):
            raise ValueError("best_log_probs: the logit choice has no closed form under a Gaussian f")
        return torch.log_softmax(torch.where(mask, f, torch.full((), -math.inf, dtype=f.dtype)), -1)
    return _probit_best(f, mask, var, n, newton)


def worst_log_probs(f: torch.Tensor, mask: torch.Tensor, best: torch.Tensor, link: str = "probit", var=None,
                    **kw) -> torch.Tensor:
    """log P(i rejected as worst | the best, slot ``best`` (R,), is taken out): the best among the rest
    with f → −f (Marley & Louviere 2005); −∞ at padding and at the best."""
    rest = mask & (torch.arange(mask.shape[-1]) != best[..., None])
    return best_log_probs(-f, rest, link, var, **kw)


class SetChoice(dist.TorchDistribution):
    """The slot chosen as best from each row's set: a categorical over the set whose ``log_prob``
    evaluates only the observed member (``member``: the slots that hold one; for the probit, k times
    less quadrature than every member's, which ``sample`` and ``logits`` compute). ``f`` (…, R, k_max),
    ``mask`` (R, k_max) or (…, R, k_max)."""

    arg_constraints = {}
    has_enumerate_support = False

    def __init__(self, f, mask, link="probit", var=None, validate_args=False):
        self.f, self.member, self.link, self.var = f, mask.expand(f.shape), link, var
        super().__init__(f.shape[:-1], validate_args=validate_args)

    @property
    def support(self):
        return dist.constraints.integer_interval(0, self.f.shape[-1] - 1)

    @property
    def logits(self) -> torch.Tensor:
        return best_log_probs(self.f, self.member, self.link, self.var)

    def expand(self, batch_shape, _instance=None):
        shape = torch.Size(batch_shape) + self.f.shape[-1:]
        return SetChoice(self.f.expand(shape), self.member.expand(shape), self.link,
                         None if self.var is None else self.var.expand(shape))

    def log_prob(self, value):
        slot = value.long().expand(self.batch_shape)[..., None]
        if self.link == "logit":
            return self.logits.gather(-1, slot)[..., 0]
        return _probit_best(self.f, self.member, self.var, 24, 6, slot)[..., 0]

    def sample(self, sample_shape=()):
        with torch.no_grad():
            return dist.Categorical(logits=self.logits).sample(sample_shape)


def best_distribution(f, mask, link="probit", var=None) -> SetChoice:
    """The best's slot as a categorical over each row's set (:class:`SetChoice`)."""
    return SetChoice(f, mask, link, var)


def worst_distribution(f, mask, best, link="probit", var=None) -> SetChoice:
    """The worst's slot, given the best's, as a categorical over the rest of each row's set, f → −f."""
    rest = mask & (torch.arange(mask.shape[-1]) != best[..., None])
    return SetChoice(-f, rest, link, var)


def row_log_lik(f, mask, best, worst=None, link="probit", var=None) -> torch.Tensor:
    """log p(row) (…, R): log P(best) + log P(worst | rest) where a row has a worst (``worst`` slot ≥ 0;
    None or −1: best only)."""
    lp = best_log_probs(f, mask, link, var).gather(-1, best.expand(f.shape[:-1])[..., None])[..., 0]
    if worst is None:
        return lp
    has = worst >= 0
    slot = worst.clamp_min(0).expand(f.shape[:-1])[..., None]
    lw = worst_log_probs(f, mask, best, link, var).gather(-1, slot)
    return lp + torch.where(has, lw[..., 0], torch.zeros(()))


def sample_choices(f, mask, link, gen: torch.Generator, var=None, worst: bool = False):
    """Replicated choices: the best's slot (…, R) and, with ``worst``, the worst's (…, R)."""
    def draw(logp):
        u = torch.rand(logp.shape[:-1] + (1,), generator=gen, dtype=logp.dtype)
        p = logp.exp()
        return (p.cumsum(-1) < u * p.sum(-1, keepdim=True)).sum(-1).clamp_max(f.shape[-1] - 1)

    best = draw(best_log_probs(f, mask, link, var))
    if not worst:
        return best, None
    return best, draw(worst_log_probs(f, mask, best, link, var))


def observe_choices(f, mask, best, worst, link: str = "probit", var=None) -> None:
    """The Pyro sites of one plate of rows: "best" (the best's slot) and, for best–worst data, "worst"
    (the worst's slot among the rest, masked out of rows without one). ``best`` None: drawn (prior
    or posterior predictive), and the worst given the drawn best."""
    import pyro

    b = pyro.sample("best", best_distribution(f, mask, link, var), obs=best)
    if worst is None:
        return
    has = worst >= 0
    stand_in = (b == 0).long()  # a valid slot other than the best's, for rows without a worst
    pyro.sample("worst", worst_distribution(f, mask, b, link, var).mask(has),
                obs=torch.where(has, worst, stand_in))


def normal_points(dim: int, n: int = 256, seed: int = 0) -> torch.Tensor:
    """2n fixed points (2n, dim) for expectations over N(0, I_dim): n scrambled Sobol points taken
    through Φ⁻¹ and their mirror images −t (antithetic pairs, so that every odd moment is exact), each of
    weight 1/(2n). Fixed points make the expectation a deterministic function of the Gaussian's
    moments, so that a natural-gradient fit has a bound that does not jitter between iterations."""
    u = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed).draw(n, dtype=torch.float64)
    t = torch.special.ndtri(u.clamp(1e-12, 1.0 - 1e-12))
    return torch.cat([t, -t])


def _two_item_rows(mu, cov, mask, best, var, n_gh):
    """:func:`expected_row_log_lik` on rows of two items: E[log Φ(Δ/σ)], Δ = f_best − f_other ~ N(μ_Δ, v_Δ),
    σ² = 1 + var_best + var_other, by the pairwise route's Gauss–Hermite rule (the same numbers as a
    pairwise label), with the chain rule to the row's μ, Σ and var."""
    from .probit import expected_log_probit

    K = mask.shape[-1]
    slots = torch.arange(K)
    other = (mask & (slots != best[:, None])).long().argmax(-1)
    d = (slots == best[:, None]).to(mu.dtype) - (slots == other[:, None]).to(mu.dtype)  # (R, K)
    mu_d = (d * mu).sum(-1)
    v_d = torch.einsum("rk,rkl,rl->r", d, cov, d)
    sig2 = 1.0 + (torch.zeros_like(mu_d) if var is None else (d.abs() * var).sum(-1))
    sig = sig2.sqrt()
    ell, g_m, g_v = expected_log_probit(torch.ones_like(mu_d), mu_d / sig, v_d / sig2, n_gh)
    d_mu = (g_m / sig)[:, None] * d
    d_cov = (g_v / sig2)[:, None, None] * d[:, :, None] * d[:, None, :]
    d_var = None
    if var is not None:  # ∂/∂σ² of μ_Δ/σ and v_Δ/σ², σ² = 1 + var_best + var_other
        d_sig2 = -0.5 * g_m * mu_d / (sig2 * sig) - g_v * v_d / (sig2 * sig2)
        d_var = d_sig2[:, None] * d.abs()
    return ell, d_mu, d_cov, d_var


def _quadrature_rows(mu, cov, mask, best, worst, var, points):
    """:func:`expected_row_log_lik` on rows of any size: the fixed ``points`` t (n, K) through
    f = μ + C t, C Cᵀ = Σ (padding slots decoupled, unit variance), the value and its exact derivatives
    (autograd, through the Cholesky factor) of that rule."""
    K = mask.shape[-1]
    eye = torch.eye(K, dtype=mu.dtype)
    pair_mask = mask[:, :, None] & mask[:, None, :]
    with torch.enable_grad():
        mu = mu.detach().requires_grad_(True)
        cov = cov.detach().requires_grad_(True)
        v = None if var is None else var.detach().requires_grad_(True)
        sigma = torch.where(pair_mask, cov, eye) + 1e-10 * eye
        C, info = torch.linalg.cholesky_ex(sigma)
        if bool((info > 0).any()):
            from ..errors import NumericalError
            raise NumericalError("choices: a row's covariance under q is not positive definite; try a larger "
                                 "{delay} ε or {forgetting_rate} r (smaller steps)",
                                 settings=("delay", "forgetting_rate"))
        f = mu + torch.einsum("rkl,nl->nrk", C, points)  # (n, R, K)
        vv = None if v is None else v.expand(f.shape)
        lp = _probit_best(f, mask, vv, 24, 6, best.expand(f.shape[:-1])[..., None])[..., 0]
        if worst is not None:
            has = worst >= 0
            rest = mask & (torch.arange(K) != best[:, None])
            slot = worst.clamp_min(0).expand(f.shape[:-1])[..., None]
            lw = _probit_best(-f, rest, vv, 24, 6, slot)[..., 0]
            lp = lp + torch.where(has, lw, torch.zeros((), dtype=f.dtype))
        ell = lp.mean(0)
        grads = torch.autograd.grad(ell.sum(), [mu, cov] + ([] if v is None else [v]))
    return ell.detach(), grads[0], grads[1], None if v is None else grads[2]


def expected_row_log_lik(mu, cov, mask, best, worst=None, var=None, n_gh: int = 20, points=None,
                         chunk: int = 2_000_000):
    """E[log p(row | f)] of the probit choice (best, and worst given best) for each row's utilities
    f ~ N(μ, Σ), with its derivatives: (ell (R,), dμ (R, K), dΣ (R, K, K), dvar (R, K) or None).

    ``mu`` (R, K), ``cov`` (R, K, K) the members' joint Gaussian (any value at padding); ``var`` (R, K)
    or None: each member's extra noise variance (a sparse GP's conditional variance c_j / s), in the
    likelihood as in :func:`best_log_probs`; dΣ is the symmetric gradient (dE = tr(dΣ · δΣ)), what a
    natural-gradient step needs (−2 Aᵀ dΣ A is the likelihood's precision). Rows of two items take
    the pairwise likelihood's 1-D Gauss–Hermite rule (``n_gh`` nodes) on Δ = f_best − f_other, so that
    they give a pairwise label's numbers; larger rows the mode-centred probit of each point of the
    fixed rule ``points`` (default :func:`normal_points` of dimension K), ``chunk`` numbers of the
    inner quadrature at a time."""
    R, K = mask.shape
    ell = torch.zeros(R, dtype=mu.dtype)
    d_mu, d_cov = torch.zeros_like(mu), torch.zeros_like(cov)
    d_var = None if var is None else torch.zeros_like(var)
    two = mask.sum(-1) == 2
    parts = []
    if bool(two.any()):
        i = two.nonzero()[:, 0]
        parts.append((i, _two_item_rows(mu[i], cov[i], mask[i], best[i], None if var is None else var[i],
                                        n_gh)))
    if bool((~two).any()):
        if points is None:
            points = normal_points(K)
        rest = (~two).nonzero()[:, 0]
        per = max(1, chunk // (points.shape[0] * K * K * 24))
        for lo in range(0, rest.numel(), per):
            i = rest[lo:lo + per]
            parts.append((i, _quadrature_rows(mu[i], cov[i], mask[i], best[i],
                                              None if worst is None else worst[i],
                                              None if var is None else var[i], points)))
    for i, (e, gm, gc, gv) in parts:
        ell[i], d_mu[i], d_cov[i] = e, gm, gc
        if gv is not None:
            d_var[i] = gv
    return ell, d_mu, d_cov, d_var


def block_natural_params(A_J, g_mu, g_cov, own, kappa=None, e=None, g_noise=None):
    """The likelihood's natural parameters (Λ_lik, η_lik) of a Gaussian block q(x) = N(m, S), before the
    batch's scale π, from the rows' derivatives of :func:`expected_row_log_lik` (g = ∂E/∂μ_r (R, K),
    G = ∂E/∂Σ_r (R, K, K), symmetric).

    Row r's members take κ_r A_J,r x from the block (``A_J`` (R, K, M), zero at padding; ``kappa`` (R,)
    an independent factor's mean κ̂_r, ``e`` (R,) its second moment E[κ_r²]; None: κ = 1), so that the
    block adds κ̂ o_r to μ_r (``own`` o_r = A_J,r m (R, K)) and E[κ²] A_J S A_Jᵀ + var κ · o oᵀ to Σ_r.
    ``g_noise`` (R, K) or None: ∂E/∂(noise variance) of each member times the multiplier of its second
    moment E[o_i² + (A S Aᵀ)_ii] in that member's noise (the conditional variance of the factor κ). Then
    (Eq. 17, the gradient in the block's mean parameters)

        Λ_lik = −2 Σ_r A_Jᵀ (E[κ²] G_r + diag g_noise,r) A_J,        η_lik = Σ_r A_Jᵀ (κ̂ g_r − 2 κ̂² G_r o_r):

    the terms quadratic in m that var κ and the noise add to ∂E/∂m cancel against −2 (∂E/∂S) m. A row of
    two items gives the pairwise label's −2 g_v E[κ²] d dᵀ and d (κ̂ g_μ − 2 κ̂² g_v d·m), d = A_a − A_b
    (Simpson & Gurevych 2020, Eq. 32–37 with the exact likelihood)."""
    M = A_J.shape[-1]
    G_eff = g_cov if e is None else e[:, None, None] * g_cov
    if g_noise is not None:
        G_eff = G_eff + torch.diag_embed(g_noise)
    rows = A_J.reshape(-1, M)
    Lam = -2.0 * rows.T @ (G_eff @ A_J).reshape(-1, M)
    Go = (g_cov @ own[..., None])[..., 0]
    resid = g_mu - 2.0 * Go if kappa is None else kappa[:, None] * g_mu - 2.0 * (kappa * kappa)[:, None] * Go
    return 0.5 * (Lam + Lam.T), rows.T @ resid.reshape(-1)


def gaussian_choice_probs(mu, cov, var, mask, points):
    """P(each member is chosen as best) (R, K) when the members' utilities are jointly Gaussian,
    f ~ N(μ, Σ) (``mu`` (R, K), ``cov`` (R, K, K), any value at padding), each with its own extra noise
    variance ``var`` (R, K) (a sparse GP's conditional variance; zeros for none): sets of two in closed
    form, Φ((μ_i − μ_j) / √(1 + v_Δ + var_i + var_j)), larger ones by the fixed ``points`` (n, K) through
    f = μ + C t, C Cᵀ = Σ (:func:`normal_points`), 0 at padding. ``-mu`` gives the worst's."""
    from .probit import predictive_prob

    R, K = mask.shape
    slots = torch.arange(K)
    two = mask.sum(-1) == 2
    first = mask.long().argmax(-1)
    second = (mask & (slots != first[:, None])).long().argmax(-1)
    p = torch.zeros(R, K, dtype=mu.dtype)
    rows = torch.arange(R)
    i, j = first, second
    mu_d = mu[rows, i] - mu[rows, j]
    v_d = cov[rows, i, i] + cov[rows, j, j] - 2.0 * cov[rows, i, j]
    p_i = predictive_prob(mu_d, v_d + var[rows, i] + var[rows, j])
    p[rows, i], p[rows, j] = p_i, 1.0 - p_i
    if bool((~two).any()):
        r = (~two).nonzero()[:, 0]
        eye = torch.eye(K, dtype=mu.dtype)
        sig = torch.where(mask[r, :, None] & mask[r, None, :], cov[r], eye) + 1e-10 * eye
        f = mu[r] + torch.einsum("rkl,nl->nrk", torch.linalg.cholesky(sig), points)
        p[r] = best_log_probs(f, mask[r], "probit", var[r].expand(f.shape)).exp().mean(0)
    return p


def negative_part(G):
    """The negative semi-definite matrix nearest each G (R, K, K) (Frobenius norm: its eigenvalues
    clamped at 0). The choice's log-likelihood is concave in f (log-concave noise; Prékopa), so the
    true ∂E/∂Σ = ½ E[∇² log p] is negative semi-definite and the projection of the rule's estimate can
    only bring it closer; without it a finite rule's estimate has positive directions (on 400 random
    best–worst rows of 2 to 5 items, 271 with 16 pairs of points, 163 with 64, 152 with 256), which made
    a mini-batch step's precision indefinite for GPPL and crowdGPPL alike
    (tests/models/crowdgppl/test_crowdgppl_natgrad_choices.py, tests/models/gppl/test_natgrad_choices.py)."""
    ev, U = torch.linalg.eigh(G)
    return (U * ev.clamp_max(0.0)[..., None, :]) @ U.mT
