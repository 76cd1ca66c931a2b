"""BayesSCDC with a structured local posterior, q(z_n) q(x_n | z_n), in place of the paper's mean field
q(z_n) q(x_n) (Eq. 11–15), measured beside the default on :mod:`bench_bayesscdc_step`'s sets. An
experiment, not a route: it patches :mod:`crowdzoo.models.scdc.natgrad` for this process only.

Given the globals and the recognition potential ψ(x) = hᵀx − ½ xᵀ diag(λ) x, the surrogate bound's
optimum over q(x_n | z_n = k) is N(P_k⁻¹ b_k, P_k⁻¹) with P_k = E[Σ_k⁻¹] + diag λ and
b_k = E[Σ_k⁻¹ μ_k] + h, and q(z_n = k) ∝ exp(E[log π_k] + log Z_k + messages), log Z_k the Gaussian
integral of cluster k's expected density times exp ψ: x is integrated out per cluster (as the workers'
Gibbs sampler does, :func:`crowdzoo.models.scdc.gibbs.mixture_unaries`), with no alternation between x
and z. The networks' objective J takes the decoder at every cluster's own draw x̂_nk ~ q(x_n | k),
weighted by q(z_n = k) (K decoder passes, as SCDC's item term; ``DECODER=mean`` in the environment
takes one pass at Σ_k q(k) x̂_nk), and the mixture's statistics (Eq. 17) each cluster's own moments.
Rows are labelled ``graph structured`` in ``--out``.

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/scdc_structured_local.py \\
        --set digits-all --seeds 0 1 2 3 4 --methods graph --out benchmarks/results/bayesscdc_graph_step.jsonl
"""
import math
import os
import sys
from typing import NamedTuple

import torch

sys.path.insert(0, os.path.dirname(__file__))
from crowdzoo.models.scdc import natgrad as ng  # noqa: E402
from crowdzoo.models.scdc.bayes import F64, messages  # noqa: E402
from crowdzoo.models.scdc.model import DTYPE  # noqa: E402

DECODER = os.environ.get("DECODER", "all")  # "all": K decoder passes; "mean": one at the mixture's draw


class JLocal(NamedTuple):
    phi: torch.Tensor
    log_phi: torch.Tensor
    x: torch.Tensor        # (n, d) the mixture's mean Σ_k φ_k x_k
    P_chol: torch.Tensor   # (n, d, d) of the most probable cluster (unused by the patched code)
    ell: torch.Tensor      # (n, K) E_{q(x|k)} E log N(x; μ_k, Σ_k)
    xk: torch.Tensor       # (n, K, d)
    Pk_chol: torch.Tensor  # (n, K, d, d)


def local_step(E, h, lam, li=None, lj=None, w=None, sweeps=4, reduce=None, fixed=None):
    """The local optimum under q(z) q(x | z): every row's per-cluster Gaussians, then ``sweeps`` rounds
    of Eq. 14's messages on q(z) alone (the same signature and meaning as ``bayes.local_step``)."""
    n, d = h.shape
    P = E.Lam[None] + torch.diag_embed(lam)[:, None]
    Pk_chol = torch.linalg.cholesky(P)
    b = E.Lam_mu[None] + h[:, None]
    xk = torch.cholesky_solve(b[..., None], Pk_chol)[..., 0]
    logdetP = 2 * torch.log(torch.diagonal(Pk_chol, dim1=-2, dim2=-1)).sum(-1)
    logZ = 0.5 * (E.logdet - E.mu_Lam_mu)[None] + 0.5 * (b * xk).sum(-1) - 0.5 * logdetP
    base = E.log_pi + logZ if fixed is None else E.log_pi + logZ + fixed
    log_phi = torch.log_softmax(base, -1)
    phi = log_phi.exp()
    for _ in range(sweeps):
        if reduce is not None:
            logits = base + reduce(messages(phi, li, lj, w))
        elif li is not None and li.shape[0]:
            logits = base + messages(phi, li, lj, w)
        else:
            break
        log_phi = torch.log_softmax(logits, -1)
        phi = log_phi.exp()
    Vk = torch.cholesky_inverse(Pk_chol)
    # E_{q(x|k)} of cluster k's own expected log density
    quad = (torch.einsum("kab,nkab->nk", E.Lam, Vk + xk[..., :, None] * xk[..., None, :])
            - 2 * (xk * E.Lam_mu[None]).sum(-1) + E.mu_Lam_mu)
    ell = 0.5 * (E.logdet - d * math.log(2 * math.pi) - quad)
    x = (phi[..., None] * xk).sum(1)
    top = phi.argmax(-1)
    return JLocal(phi, log_phi, x, Pk_chol[torch.arange(n), top], ell, xk, Pk_chol)


def local_terms(E, loc):
    d = loc.xk.shape[-1]
    H = (0.5 * d * (1 + math.log(2 * math.pi))
         - torch.log(torch.diagonal(loc.Pk_chol, dim1=-2, dim2=-1)).sum(-1))  # entropy of q(x | k)
    return (loc.phi * (E.log_pi + loc.ell - loc.log_phi + H)).sum(-1)


def jmoments(phi, xk, Pk_chol, scale=1.0):
    Vk = torch.cholesky_inverse(Pk_chol)
    return (scale * phi.sum(0), scale * torch.einsum("nk,nkd->kd", phi, xk),
            scale * torch.einsum("nk,nkab->kab", phi, Vk + xk[..., :, None] * xk[..., None, :]))


def mixture_stats(loc, part):
    B = part.batch
    if part.weight is None:
        n = B.n_uniform
        return jmoments(loc.phi[:n], loc.xk[:n], loc.Pk_chol[:n], B.item_scale)
    return jmoments(loc.phi * part.weight[:, None], loc.xk, loc.Pk_chol)


def step_objective(batch, nets, E, sweeps, eps, fixed=None):
    h, lam = nets.potentials(batch.O)
    w, same, diff = ng.relational_weights(E, batch.w, batch.L)
    loc = local_step(E, h, lam, batch.li, batch.lj, w, sweeps, fixed=fixed)
    n = batch.n_uniform
    terms = local_terms(E, loc)[:n]
    if fixed is not None:
        terms = terms + (loc.phi[:n] * fixed[:n]).sum(-1)
    if n:
        xk, Lk = loc.xk[:n], loc.Pk_chol[:n]
        K = xk.shape[1]
        e = eps.to(xk.dtype)[:, None, :, None].expand(-1, K, -1, -1)
        x_hat = xk + torch.linalg.solve_triangular(Lk.transpose(-1, -2), e, upper=True)[..., 0]
        if DECODER == "all":
            O = batch.O[:n]
            lp = nets.obs_dist(x_hat.reshape(n * K, -1).to(DTYPE)).log_prob(
                O[:, None].expand(-1, K, -1).reshape(n * K, -1)).to(F64).reshape(n, K)
            terms = terms + (loc.phi[:n] * lp).sum(-1)
        else:
            xm = (loc.phi[:n, :, None] * x_hat).sum(1)
            terms = terms + nets.obs_dist(xm.to(DTYPE)).log_prob(batch.O[:n]).to(F64)
    J = batch.item_scale * terms.sum()
    s = (loc.phi[batch.li] * loc.phi[batch.lj]).sum(-1)
    if batch.L.shape[0]:
        J = J + batch.ann_scale * (s * same + (1 - s) * diff).sum()
    return J, loc, s


def item_stats(loc, rows, scale):
    return jmoments(loc.phi[rows], loc.xk[rows], loc.Pk_chol[rows], scale)


ng.local_step = local_step
ng.step_objective = step_objective
ng.mixture_stats = mixture_stats
ng.item_stats = item_stats

if __name__ == "__main__":
    import bench_bayesscdc_step as bench

    plain = bench.run
    bench.run = lambda *a, **k: {**(r := plain(*a, **k)), "method": r["method"] + " structured"
                                 + (" decoder=mean" if DECODER == "mean" else "")}
    bench.main(sys.argv[1:])
