"""The workers' update at the items' mean-field fixed point, with fixed unaries in place of a fitted
mixture: the reference the workers' tests hold the sampler and the exact posteriors against."""
import numpy as np
import torch

from crowdzoo.models.scdc.bayes import Local, missing_information, pair_same, widen_workers, worker_stats


def workers_fixed_point(log_u, i, j, L, w, counts: str, widen: bool, rounds: int = 30, n_workers: int = 1,
                         posteriors: bool = False):
    """finish_workers' update with workers="louis" and fixed unaries ``log_u`` in place of the fitted
    mixture: the items' mean-field fixed point (Eq. 14) on the annotation graph under the workers'
    current q, then the Beta counts from the pair beliefs (``counts="pair"``) or the mean-field
    products (``"mean-field"``), and
    at the fixed point widened by the missing information (``widen``) or not. Returns the first worker's
    means and sds of α and β, or (``posteriors``) every worker's Beta parameters."""
    prior = torch.ones(n_workers, 2, dtype=torch.float64)
    alpha = beta = torch.tensor([[10.0, 1.0]], dtype=torch.float64).repeat(n_workers, 1)
    for _ in range(rounds):
        la = torch.digamma(alpha) - torch.digamma(alpha.sum(-1, keepdim=True))
        lb = torch.digamma(beta) - torch.digamma(beta.sum(-1, keepdim=True))
        same, diff = L * la[w, 0] + (1 - L) * la[w, 1], L * lb[w, 1] + (1 - L) * lb[w, 0]
        wt = same - diff
        phi = torch.softmax(log_u, -1)
        for _ in range(30):  # every item's mean-field fixed point at once
            msg = torch.zeros_like(phi).index_add(0, i, wt[:, None] * phi[j])
            msg = msg.index_add(0, j, wt[:, None] * phi[i])
            log_phi = torch.log_softmax(log_u + msg, -1)
            phi = log_phi.exp()
        loc = Local(phi, log_phi, None, None, None)
        s = pair_same(loc, i, j, wt, same, diff) if counts == "pair" else (phi[i] * phi[j]).sum(-1)
        a, b = worker_stats(s, w, L, n_workers, 1.0)
        alpha, beta = prior + a, prior + b
    if widen:  # once, at the fixed point, as finish_workers does
        miss = missing_information(s, w, L, alpha[:, 0] / alpha.sum(-1), beta[:, 0] / beta.sum(-1), n_workers)
        alpha, beta = widen_workers(alpha, beta, miss, prior, prior)
    if posteriors:
        return alpha.numpy(), beta.numpy()
    mean = lambda p: float(p[0, 0] / p.sum())  # noqa: E731
    sd = lambda p: float(np.sqrt(p[0, 0] * p[0, 1] / (p.sum() ** 2 * (p.sum() + 1))))  # noqa: E731
    return mean(alpha), mean(beta), sd(alpha), sd(beta)
