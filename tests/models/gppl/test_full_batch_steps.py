"""The full-batch steps and residual sweeps that end a mini-batch natgrad fit of GPPL move its iterate
towards the full-batch posterior."""
import math

import numpy as np
import pytest

import crowdzoo as cz


def _fit(data, **kw):
    return cz.fit(cz.GPPL(n_inducing=10), data, method="natgrad", seed=0, progress_bar=False,
                  learn_kernel=False, **kw)


def test_full_batch_steps_bring_a_mini_batch_fit_towards_the_full_batch_posterior(many_per_item):
    """Reference: the full batch, 150 steps of ρ = ½. Mini-batches of P/50 labels (each item in a
    handful of labels per batch) end far from it (RMS 0.5 in the log-odds of every pair); each further
    full-batch step after them comes closer, and the residual sweeps that end the fit by default (q(r)
    settled with q(f_m) held) come closer than ten full-batch steps."""
    data = many_per_item
    P, N = data.n_pairs, data.n_items
    a, b = np.triu_indices(N, 1)

    def logit(post):
        p = post.predict_proba(a, b)
        return np.log(p) - np.log1p(-p)

    ref = logit(_fit(data, batch_size=P, rho_min=0.5, tol=0, max_iter=150, eval_every=150))
    errs = {}
    for steps in (0, None, 10):  # None: the default without the residual sweeps, 3
        post = _fit(data, batch_size=math.ceil(P / 50), polish=steps, residual_sweeps=0)
        steps = 3 if steps is None else steps
        assert post.settings["polish"] == steps
        errs[steps] = float(np.sqrt(np.mean((logit(post) - ref) ** 2)))
    assert errs[0] > 0.3
    assert errs[10] < errs[3] < errs[0] and errs[10] < 0.75 * errs[0]
    swept = _fit(data, batch_size=math.ceil(P / 50))  # the default: sweeps, no full-batch step
    assert swept.settings["polish"] == 0 and swept.settings["residual_sweeps"] > 0
    assert float(np.sqrt(np.mean((logit(swept) - ref) ** 2))) < 0.5 * errs[10]


def test_polish_is_refused_where_it_does_not_apply(many_per_item):
    with pytest.raises(cz.DataError, match="polish: expected a whole number"):
        _fit(many_per_item, batch_size=500, polish=-1)
    with pytest.raises(cz.DataError, match="polish: the full-batch steps take the exact likelihood"):
        _fit(many_per_item, batch_size=500, likelihood="linearised", polish=2)
    # a full-batch fit takes none by default: its iterate is the full-batch one
    assert _fit(many_per_item, batch_size=many_per_item.n_pairs, max_iter=20, tol=0).settings["polish"] == 0
