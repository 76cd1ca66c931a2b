"""BayesSCDC's workers' posterior with the clusters sampled, not averaged: a Gibbs sampler of the
surrogate model that the fit's variational posterior approximates (Eq. 6, 9 and 1), the recognition
potentials ψ(x_n; o_n) = h_nᵀ x_n − ½ x_nᵀ diag(λ_n) x_n standing in for the decoder (Eq. 10):

    p(z, x, π, μ, Σ, α, β | L) ∝ Dir(π; a₀) Π_k NIW(μ_k, Σ_k; m₀, κ₀, S₀, ν₀) Π_m Beta(α_m) Beta(β_m)
        · Π_n π_{z_n} N(x_n; μ_{z_n}, Σ_{z_n}) exp ψ(x_n; o_n)
        · Π_a [α_m^L (1 − α_m)^(1−L)]^{1(z_i = z_j)} [β_m^(1−L) (1 − β_m)^L]^{1(z_i ≠ z_j)}.

A sweep, given the items' clusters z, draws every worker's α_m, β_m from its Beta (prior + the two
coins' counts on the pairs that z calls same and different; :func:`~.bayes.worker_stats`), and,
independently of them, every item's latent point x_n from its Gaussian (precision Σ_{z_n}⁻¹ + diag(λ_n))
and the mixture's π, μ_k, Σ_k from their Dirichlet and NIW posteriors given (x, z) (:func:`mixture_unaries`);
then every item's z_n given the rest:

    log p(z_n = k | ·) = log π_k + log N(x_n; μ_k, Σ_k) + Σ_{a ∋ n} w_a 1(z_{n'} = k) + c,

w_a = log p(L_a | same) − log p(L_a | different) at the drawn α, β. Items that share no annotation are
conditionally independent given the rest, so the items are drawn a colour at a time of a proper
colouring of the annotation graph (:func:`colour_items`), all of a colour at once: an exact Gibbs sweep
in a few tensor operations per colour, whatever the number of items.

The workers' posterior is the average over the kept sweeps of the conditional Betas given each z
(Rao–Blackwellised), reported as the Beta with the same mean and variance. Unlike the mean-field
fixed point, the chain carries the clustering's uncertainty jointly — a pair's agreement is not taken
independent of the others' (:func:`~.bayes.widen_workers` assumes that) — and lets the links move
the mixture: where the fitted mixture cuts across the groups, the annotations pull the sampled
mixture back towards them.
"""
from __future__ import annotations

import math

import torch

from ...errors import DataError
from .bayes import F64, Conjugate

_CHUNK = 4096


def colour_items(li, lj, n_items: int, reduce=None):
    """A proper colouring of the annotation graph (no annotation joins two items of one colour) by first
    fit in a random order, vectorised: the items, ordered by a random priority, are cut into blocks of
    about 2N / (mean degree) consecutive items, so that an item has about two neighbours in its own
    block; block by block, every uncoloured item of the block takes the smallest colour that none of
    its coloured neighbours in this or an earlier block holds, all at once, and where two neighbours
    took the same colour the one of lower priority gives it back and tries again (speculative
    colouring, Gebremedhin and Manne 2000). The item of highest priority among its uncoloured
    neighbours keeps its colour, so every round colours at least one item, and with two neighbours a
    block the rounds are few: every annotation is read in a few rounds, not in one round per colour.
    An item's colour is at most its number of neighbours. ``reduce`` sums, over the ranks of a
    distributed fit (each holding a shard of the annotations; the priorities, drawn from the same
    seed, agree), the number of annotations, the colours each uncoloured item's neighbours hold and
    its clashes, so that every rank makes the same colouring. Returns each item's colour (n_items,)."""
    dev = li.device
    prio = torch.rand(n_items, dtype=F64).to(dev)
    order = torch.argsort(prio, descending=True)
    rank = torch.empty(n_items, dtype=torch.long, device=dev)
    rank[order] = torch.arange(n_items, device=dev)
    n_ann = torch.tensor([float(li.shape[0])], dtype=F64, device=dev)
    n_ann = float((reduce(n_ann) if reduce is not None else n_ann)[0])
    # half the mean degree 2A / N blocks: about two of an item's neighbours share its block
    n_blocks = int(min(max(math.ceil(n_ann / max(n_items, 1)), 1), max(n_items, 1)))
    block = (rank * n_blocks // max(n_items, 1)).to(_index_dtype(n_items))
    src, dst = _directed(li, lj, n_items)
    keep = block[src] <= block[dst]  # a later source is coloured after its target and reads its colour then
    src, dst = src[keep], dst[keep]
    del keep
    into_block = block[dst]
    n_into = torch.bincount(into_block, minlength=n_blocks).tolist()
    by_block = torch.argsort(into_block, stable=True)
    del into_block
    n_in = torch.bincount(block, minlength=n_blocks)
    row = rank - (torch.cumsum(n_in, 0) - n_in)[block]  # an item's row within its block
    colour = torch.full((n_items,), -1, dtype=torch.long, device=dev)
    src, dst = src[by_block].split(n_into), dst[by_block].split(n_into)
    for items, s, t in zip(order.split(n_in.tolist()), src, dst):
        while bool((colour[items] < 0).any()):
            into = colour[t] < 0
            s, t = s[into], t[into]  # annotations into items coloured already are not read again
            held = colour[s] >= 0
            taken = torch.zeros(items.shape[0], int(colour.max()) + 2, dtype=F64, device=dev)
            taken = taken.index_put((row[t[held]], colour[s[held]]), torch.ones(1, dtype=F64, device=dev))
            if reduce is not None:
                taken = reduce(taken)
            free = colour[items] < 0
            colour[items[free]] = (taken[free] == 0).to(torch.int8).argmax(-1)  # the first colour free
            clash = ~held & (colour[s] == colour[t]) & (prio[t] < prio[s])
            lose = torch.zeros(items.shape[0], dtype=F64, device=dev)
            lose = lose.index_add(0, row[t[clash]], torch.ones(int(clash.sum()), dtype=F64, device=dev))
            if reduce is not None:
                lose = reduce(lose)
            colour[items[lose > 0]] = -1
    return colour


def _groups(colour, li, lj, key):
    """Per colour: its items, and the directed annotations into them (each one's target among the
    colour's items, its source item, and ``key`` of its annotation), from one sort of the directed
    annotations by their target's colour."""
    N, dev = colour.shape[0], colour.device
    C = int(colour.max()) + 1 if N else 0
    idx = _index_dtype(N)
    items = torch.argsort(colour, stable=True)
    n_items = torch.bincount(colour, minlength=C)
    pos = torch.empty(N, dtype=idx, device=dev)
    first = torch.repeat_interleave(torch.cumsum(n_items, 0) - n_items, n_items)  # each colour's first row
    pos[items] = (torch.arange(N, device=dev) - first).to(idx)
    dst, src = _directed(li, lj, N)
    by_colour = colour.to(idx)[dst]
    n_into = torch.bincount(by_colour, minlength=C).tolist()
    order = torch.argsort(by_colour, stable=True)
    del by_colour
    return list(zip(items.split(n_items.tolist()), pos[dst[order]].split(n_into), src[order].split(n_into),
                    torch.cat([key, key])[order].split(n_into)))


def _index_dtype(n: int):
    """int32 for indices into n items where they fit (half int64's memory on the annotations' copies)."""
    return torch.int32 if n < 2**31 else torch.long


def _directed(li, lj, n_items: int):
    """Every annotation in both directions, (sources, targets) = ([i, j], [j, i]), as int32 where the
    items' indices fit."""
    idx = _index_dtype(n_items)
    i, j = li.to(idx), lj.to(idx)
    return torch.cat([i, j]), torch.cat([j, i])


def _counts(same, code, n_workers: int):
    """The two coins' counts per worker (:func:`~.bayes.worker_stats` at P(same) = ``same``, a 0/1
    indicator): [Σ same·L, Σ same·(1 − L)] and [Σ (1 − same)(1 − L), Σ (1 − same)·L], from one bincount
    of ``code`` = 4 w + 2 L (each annotation's worker and label) plus ``same``."""
    c = torch.bincount(code + same, minlength=4 * n_workers)
    c = c.view(n_workers, 2, 2).to(F64)  # [worker, L, same]
    return torch.stack([c[:, 1, 1], c[:, 0, 1]], -1), torch.stack([c[:, 0, 0], c[:, 1, 0]], -1)


def _beta(ab):
    """Draws of Beta(ab[..., 0], ab[..., 1]) from two Gamma draws."""
    g = torch.distributions.Gamma(ab, torch.ones_like(ab), validate_args=False).sample()
    return g[..., 0] / g.sum(-1)


def _wishart_chol(S, nu):
    """The Cholesky factor C (lower) of a draw Λ = C Cᵀ ~ Wishart(S⁻¹, ν) per cluster (Bartlett's
    decomposition: C = chol(S⁻¹) B, B lower triangular with √χ²(ν − i) on the diagonal, i = 0..d−1,
    and standard normals below it): Λ is the precision Σ⁻¹ of a draw Σ ~ IW(S, ν)."""
    K, d, _ = S.shape
    LV = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(S)))
    df = nu[:, None] - torch.arange(d, dtype=F64, device=S.device)
    B = torch.randn(K, d, d, dtype=F64, device=S.device).tril(-1)
    B = B + torch.diag_embed(torch.distributions.Chi2(df, validate_args=False).sample().sqrt())
    return LV @ B


def mixture_unaries(h, lam, prior: Conjugate, start: Conjugate):
    """A function of the clusters z that draws x and the mixture's globals given z and returns
    log π_k + log N(x_n; μ_k, Σ_k) (N, K), the items' own terms of z's conditional (module docstring):

    * x_n | z, μ, Σ ~ N(P_n⁻¹(Σ_k⁻¹ μ_k + h_n), P_n⁻¹), P_n = Σ_k⁻¹ + diag(λ_n), k = z_n, drawn with the
      previous sweep's μ, Σ (at first the means of ``start``'s q(μ_k, Σ_k), the fitted mixture);
    * Σ_k⁻¹ ~ Wishart(S_N⁻¹, ν_N), μ_k | Σ_k ~ N(m_N, Σ_k / κ_N), π ~ Dir(a₀ + n), the conjugate
      posteriors given the cluster's points (Bishop 2006, §2.3.6; :func:`~.bayes.conjugate_update`'s).
    """
    N, d = h.shape
    K = prior.m.shape[0]
    nu = torch.where(start.nu > d + 1, start.nu - d - 1, start.nu)
    Sigma = start.S / nu[:, None, None]
    state = {"C": torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(Sigma))), "mu": start.m}

    def draw(z):
        C, mu = state["C"], state["mu"]
        Lam = C @ C.transpose(-1, -2)
        P = torch.linalg.cholesky(Lam[z] + torch.diag_embed(lam))
        mean = torch.cholesky_solve(((Lam @ mu[:, :, None])[..., 0][z] + h)[:, :, None], P)[..., 0]
        eps = torch.randn(N, d, 1, dtype=F64, device=h.device)
        x = mean + torch.linalg.solve_triangular(P.transpose(-1, -2), eps, upper=True)[..., 0]
        n = torch.bincount(z, minlength=K).to(F64)
        sx = torch.zeros(K, d, dtype=F64, device=h.device).index_add(0, z, x)
        sxx = torch.zeros(K, d, d, dtype=F64, device=h.device).index_add(0, z, x[:, :, None] * x[:, None, :])
        kappa = prior.kappa + n
        m = (prior.kappa[:, None] * prior.m + sx) / kappa[:, None]
        S = (prior.S + prior.kappa[:, None, None] * prior.m[:, :, None] * prior.m[:, None, :] + sxx
             - kappa[:, None, None] * m[:, :, None] * m[:, None, :])
        C = _wishart_chol(0.5 * (S + S.transpose(-1, -2)), prior.nu + n)
        eps = torch.randn(K, d, 1, dtype=F64, device=h.device)
        mu = m + torch.linalg.solve_triangular(C.transpose(-1, -2), eps / kappa.sqrt()[:, None, None],
                                               upper=True)[..., 0]
        state["C"], state["mu"], state["x"] = C, mu, x
        pi = torch.distributions.Dirichlet(prior.a + n, validate_args=False).sample()
        log_pi = state["log_pi"] = torch.log(pi.clamp_min(1e-300))
        half_logdet = torch.log(torch.diagonal(C, dim1=-2, dim2=-1)).sum(-1)
        Lam = C @ C.transpose(-1, -2)  # (x − μ)ᵀ Σ⁻¹ (x − μ) = vec(xxᵀ)·vec(Σ⁻¹) − 2 xᵀ Σ⁻¹μ + μᵀ Σ⁻¹ μ
        Lam_mu = (Lam @ mu[:, :, None])[..., 0]
        const = log_pi + half_logdet - 0.5 * (mu * Lam_mu).sum(-1) - 0.5 * d * math.log(2 * math.pi)
        out = []
        for lo in range(0, N, _CHUNK):
            xc = x[lo:lo + _CHUNK]
            xx = (xc[:, :, None] * xc[:, None, :]).reshape(-1, d * d)
            out.append(const - 0.5 * (xx @ Lam.reshape(K, d * d).T) + xc @ Lam_mu.T)
        return torch.cat(out)

    draw.state = state  # the latest draw's x (N, d), μ (K, d), C (Σ⁻¹'s Cholesky factor) and log π
    return draw


def gibbs_workers(unaries, li, lj, w, L, prior_alpha, prior_beta, z0, n_clusters: int, n_sweeps: int = 500,
                  burn: int = 100, reduce=None):
    """The workers' posterior Beta(alpha), Beta(beta) (each (W, 2)) from the Gibbs sampler of the module
    docstring. ``unaries``: the items' own log terms of z's conditional, either a fixed tensor (N, K)
    (the mixture held fixed) or a function of z that draws them (:func:`mixture_unaries`);
    annotations ``li``–``lj`` by workers ``w`` with labels ``L``; Beta priors ``prior_alpha``,
    ``prior_beta`` (W, 2); the chain starts from the clusters ``z0`` (of ``n_clusters``) and runs
    ``n_sweeps`` sweeps of which the first ``burn`` are dropped. Each kept sweep's conditional Beta
    posteriors are averaged as a mixture, returned as the Beta with the mixture's mean and variance,
    with the share of the kept sweeps in which each item sat in each cluster (N, K). ``reduce``: in a
    distributed fit, where each rank holds a shard of the annotations, sums the workers' counts and each
    colour's messages over the ranks; every rank draws the same numbers from the same seed and so
    holds the same chain."""
    if not 0 <= burn < n_sweeps:
        raise DataError(f"burn: expected 0 ≤ burn < the number of sweeps ({n_sweeps}), got {burn!r}",
                        arg="burn")
    N = z0.shape[0]
    W = prior_alpha.shape[0]
    dev = z0.device
    total = (lambda *x: x if len(x) > 1 else x[0]) if reduce is None else reduce
    code = (4 * w + 2 * L.to(torch.long)).to(torch.int32 if 4 * W < 2**31 else torch.long)
    groups = _groups(colour_items(li, lj, N, reduce), li, lj, code // 2)  # key 2w + L: w_a's table entry
    z = z0.clone()
    fixed = torch.is_tensor(unaries)
    K = unaries.shape[1] if fixed else n_clusters
    eye = torch.eye(K, dtype=F64, device=dev)
    wide = N * K >= 2**31  # a colour's (items, K) table indexed past int32
    m1 = torch.zeros(W, 2, dtype=F64, device=dev)  # Σ over kept sweeps of the conditional means …
    m2 = torch.zeros(W, 2, dtype=F64, device=dev)  # … and of their second moments
    visits, kept = 0, 0
    for t in range(n_sweeps):
        a, b = total(*_counts(z[li] == z[lj], code, W))
        A, B = prior_alpha + a, prior_beta + b
        if t >= burn:
            for k, P in enumerate((A, B)):
                mean = P[:, 0] / P.sum(-1)
                m1[:, k] += mean
                m2[:, k] += mean * (P[:, 0] + 1) / (P.sum(-1) + 1)
            kept += 1
            visits = visits + eye[z]
        alpha, beta = _beta(A), _beta(B)
        la, l1a, lb, l1b = alpha.log(), (-alpha).log1p(), beta.log(), (-beta).log1p()
        table = torch.stack([l1a - lb, la - l1b], -1).reshape(-1)  # w_a by worker and label (2m + L)
        u = torch.rand(N, K, dtype=F64, device=dev).clamp(1e-300, 1.0)
        noisy = (unaries if fixed else unaries(z)) - torch.log(-torch.log(u))  # Gumbel-max: a draw per item
        for rows, tgt, src, key in groups:
            at = (tgt.long() if wide else tgt) * K + z[src]  # each message's entry of the colour's table
            if reduce is None:
                logits = noisy[rows].reshape(-1).index_add(0, at, table[key]).view(-1, K)
            else:
                msg = torch.zeros(rows.shape[0] * K, dtype=F64, device=dev).index_add(0, at, table[key])
                logits = noisy[rows] + reduce(msg).view(-1, K)
            z[rows] = logits.argmax(-1)
    mean, var = m1 / kept, (m2 / kept) - (m1 / kept) ** 2
    conc = (mean * (1 - mean) / var.clamp_min(1e-300) - 1).clamp_min(1e-6)
    ab = torch.stack([mean * conc, (1 - mean) * conc], -1)  # (W, [α, β], Beta parameters)
    return ab[:, 0], ab[:, 1], visits / kept
