"""BayesSCDC with J's decoder term averaged over S reparameterised draws x̂_n ~ q*(x_n) a step in place of
Algorithm 1's one (Luo et al. 2018, Eq. 16), measured beside the default on :mod:`bench_bayesscdc_step`'s
sets: does a less noisy gradient for the networks move BayesSCDC's training further? An experiment, not a
route: it patches :mod:`crowdzoo.models.scdc.natgrad` for this process only. The first draw is the
route's own (the same ε as the default); the others come from a generator of their own, so the fit's
other random draws are unchanged. Rows are labelled ``graph draws=S`` in ``--out``.

    DRAWS=4 OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/scdc_decoder_draws.py \\
        --set digits-all --seeds 0 1 2 3 4 --methods graph --out benchmarks/results/bayesscdc_graph_step.jsonl
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from crowdzoo.models.scdc import natgrad as ng  # noqa: E402
from crowdzoo.models.scdc.bayes import F64, local_step, local_terms, relational_weights, sample_x  # noqa: E402
from crowdzoo.models.scdc.model import DTYPE  # noqa: E402

DRAWS = int(os.environ.get("DRAWS", "4"))
_extra = torch.Generator().manual_seed(12345)


def step_objective(batch, nets, E, sweeps, eps, fixed=None):
    """``natgrad.step_objective`` with the decoder's log-likelihood the mean over DRAWS draws of x̂."""
    h, lam = nets.potentials(batch.O)
    w, same, diff = relational_weights(E, batch.w, batch.L)
    loc = local_step(E, h, lam, batch.li, batch.lj, w, sweeps, fixed=fixed)
    n = batch.n_uniform
    terms = local_terms(E, loc)[:n]
    if fixed is not None:
        terms = terms + (loc.phi[:n] * fixed[:n]).sum(-1)
    if n:
        rows = loc._replace(x=loc.x[:n], P_chol=loc.P_chol[:n])
        decoder = 0
        for s in range(DRAWS):
            e = eps if s == 0 else torch.randn(eps.shape, generator=_extra, dtype=F64)
            decoder = decoder + nets.obs_dist(sample_x(rows, eps=e).to(DTYPE)).log_prob(batch.O[:n]).to(F64)
        terms = decoder / DRAWS + terms
    J = batch.item_scale * terms.sum()
    s = (loc.phi[batch.li] * loc.phi[batch.lj]).sum(-1)
    if batch.L.shape[0]:
        J = J + batch.ann_scale * (s * same + (1 - s) * diff).sum()
    return J, loc, s


ng.step_objective = step_objective

if __name__ == "__main__":
    import bench_bayesscdc_step as bench

    plain = bench.run
    bench.run = lambda *a, **k: {**(r := plain(*a, **k)), "method": r["method"] + f" draws={DRAWS}"}
    bench.main(sys.argv[1:])
