"""BayesSCDC with J's decoder term averaged over S reparameterised draws x̂_n ~ q*(x_n) a step in place of
Algorithm 1's one (Luo et al. 2018, Eq. 16), measured beside the default on :mod:`bench_bayesscdc_step`'s
sets: does a less noisy gradient for the networks move BayesSCDC's training further? An experiment, not a
route: it patches :func:`crowdzoo.models.scdc.natgrad.decoder_terms` for this process only. The first
draw is the route's own (the same ε as the default); the others come from a generator of their own, so
the fit's other random draws are unchanged. Rows are labelled ``graph draws=S`` in ``--out``.

    DRAWS=4 OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/scdc_decoder_draws.py \\
        --set digits-all --seeds 0 1 2 3 4 --methods graph --out benchmarks/results/bayesscdc_graph_step.jsonl
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from crowdzoo.models.scdc import natgrad as ng  # noqa: E402

DRAWS = int(os.environ.get("DRAWS", "4"))
_extra = torch.Generator().manual_seed(12345)
_one_draw = ng.decoder_terms


def decoder_terms(nets, loc, O, eps):
    """The route's decoder term, the mean over DRAWS draws of x̂ (the first at the route's own ``eps``)."""
    draws = [eps] + [torch.randn(eps.shape, generator=_extra, dtype=eps.dtype) for _ in range(DRAWS - 1)]
    return sum(_one_draw(nets, loc, O, e) for e in draws) / DRAWS


ng.decoder_terms = decoder_terms

if __name__ == "__main__":
    import bench_bayesscdc_step as bench

    plain = bench.run
    bench.run = lambda *a, **k: {**(r := plain(*a, **k)), "method": r["method"] + f" draws={DRAWS}"}
    bench.main(sys.argv[1:])
