"""The peers benchmark's problems, written once to .npz files that every method reads.

Three kinds of problem, all read by crowdzoo's venv and by the peers' venv (numpy only at load):

* ``gppl_problem(N)`` — the sine problem's generator: N items with D features uniform on (−2, 2), the true
  utility f = sin x₀ + 0.5 cos 2x₁ + 0.3 x₀x₂ (further features irrelevant), random distinct item
  pairs, y ~ Bernoulli(Φ(f_a − f_b)), one ``numpy.random.default_rng(seed)`` drawing X, then the
  training pairs, then the held-out pairs (the draw of ``tests/models/gppl/test_learn_kernel.py`` at N = 100).
  Sizes: N = 100 → D = 3, 1000 training and 1000 held-out pairs (the sine problem of the tests); N up to
  200 → D = 4 (x₃ irrelevant), 10 N training pairs and 1000 held out (N = 150: 1500); larger N → D = 5,
  max(2·10⁴, 10 N) training pairs (N = 1000: 2·10⁴; N = 5000: 5·10⁴) and 5000 held out.
* ``crowd_problem()`` — the simulated crowd of docs/benchmarks.md's crowdGPPL speed target
  (benchmarks/bench_crowd.py): ``cz.simulate_crowd(n_items=50, n_users=20, n_pairs=1250,
  n_components=3, seed=0)`` split by ``cz.split_pairs(data, 0.2, seed=0)`` into 1000 training and
  250 held-out labels. The truth scored by τ is the consensus t; the held-out labels are each
  user's own (drawn from their personal utilities F).
* ``ties_problem(tau)`` — a taste panel whose labels include ties (y = ½), drawn from GPPL's ordered
  probit at the tie threshold ``tau`` (run_ties.py's problems).

Arrays in a problem file: ``X`` (N, D) item features, ``a``, ``b``, ``y`` training pairs (y = 1
when a is preferred), ``at``, ``bt``, ``yt`` held-out pairs, ``f`` the true item utility, and for
the crowd ``users``, ``users_t`` (the user of each training / held-out label), ``U`` user features
and ``F`` (N, U) personal utilities; ``name`` and ``description`` as 0-d strings.
"""
from __future__ import annotations

import numpy as np


def true_utility(X):
    """The sine problem's f = sin x₀ + 0.5 cos 2x₁ + 0.3 x₀x₂ (columns beyond the third are irrelevant)."""
    return np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + 0.3 * X[:, 0] * X[:, 2]


IRRELEVANT = {3: "", 4: " (x₃ irrelevant)", 5: " (x₃, x₄ irrelevant)"}


def gppl_sizes(n_items):
    """(D, training pairs, held-out pairs) for N items."""
    if n_items <= 100:
        return 3, 1000, 1000
    if n_items <= 200:
        return 4, 10 * n_items, 1000
    return 5, max(20_000, 10 * n_items), 5000


def gppl_problem(n_items, seed=0):
    """The sine problem scaled to ``n_items``: a dict of arrays (see the module docstring)."""
    from scipy.stats import norm

    D, n_train, n_test = gppl_sizes(n_items)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n_items, D))
    f = true_utility(X)

    def pairs(n):
        a = rng.integers(n_items, size=n)
        b = (a + 1 + rng.integers(n_items - 1, size=n)) % n_items
        return a, b, (rng.random(n) < norm.cdf(f[a] - f[b])).astype(float)

    (a, b, y), (at, bt, yt) = pairs(n_train), pairs(n_test)
    desc = (f"N = {n_items:,} items, D = {D} features uniform on (−2, 2), f = sin x₀ + 0.5 cos 2x₁ + "
            f"0.3 x₀x₂{IRRELEVANT[D]}, {n_train:,} training and {n_test:,} "
            f"held-out random distinct pairs, y ~ Bernoulli(Φ(f_a − f_b)), seed {seed}")
    return dict(name=f"N = {n_items:,}", description=desc, X=X, f=f, a=a, b=b, y=y, at=at, bt=bt, yt=yt)


def crowd_problem(seed=0):
    """The crowdGPPL speed target's crowd (needs crowdzoo: run in its venv)."""
    import crowdzoo as cz

    data, truth = cz.simulate_crowd(n_items=50, n_users=20, n_pairs=1250, n_components=3, seed=seed)
    train, test = cz.split_pairs(data, 0.2, seed=seed)
    desc = ("crowdGPPL's simulated crowd (the speed target of docs/benchmarks.md): 50 items and 20 users "
            "with 2-D features, 3 true components, `cz.simulate_crowd(n_items=50, n_users=20, n_pairs=1250, "
            f"n_components=3, seed={seed})` split by `cz.split_pairs(data, 0.2, seed={seed})` into 1000 "
            "training and 250 held-out labels")
    return dict(name="crowd", description=desc, X=np.asarray(data.item_features, dtype=float),
                U=np.asarray(data.user_features, dtype=float), f=truth["t"], F=truth["F"],
                a=train.a, b=train.b, y=train.y.astype(float), users=train.users,
                at=test.a, bt=test.b, yt=test.y.astype(float), users_t=test.users)


def ties_problem(tau, seed=0, n_items=30, n_labels=800, test=0.25):
    """A taste panel with ties (needs crowdzoo: run in its venv), as docs/ties.md's comparison draws it:
    ``cz.simulate_gppl(n_items=30, n_pairs=800, s=0.5, tau=tau, seed=seed)``, 30 items with two
    features, labels from the ordered probit of ``crowdzoo.gp.ordinal`` (y = ½ a tie), a quarter held
    out (``numpy.random.default_rng(seed + 1)``). The truth scored by τ is the items' utility f."""
    from crowdzoo.data.simulate import simulate_gppl

    data, f = simulate_gppl(n_items=n_items, n_pairs=n_labels, s=0.5, tau=tau, seed=seed)
    held = np.random.default_rng(seed + 1).random(n_labels) < test
    y = np.asarray(data.y, dtype=float)
    desc = (f"a taste panel with ties: `cz.simulate_gppl(n_items={n_items}, n_pairs={n_labels}, s=0.5, "
            f"tau={tau}, seed={seed})`, 30 items with 2 features, labels from the ordered probit (threshold "
            f"τ = {tau}; {np.mean(y == 0.5):.0%} ties), {int((~held).sum())} training and {int(held.sum())} "
            "held-out labels")
    return dict(name=f"ties, τ = {tau}", description=desc, X=np.asarray(data.item_features, dtype=float),
                f=np.asarray(f, dtype=float), a=data.a[~held], b=data.b[~held], y=y[~held], at=data.a[held],
                bt=data.b[held], yt=y[held])


def save(path, problem):
    np.savez(path, **{k: np.asarray(v) for k, v in problem.items()})


def load(path):
    """A problem file as a dict: arrays, and ``name`` / ``description`` as str."""
    with np.load(path) as z:
        out = {k: z[k] for k in z.files}
    for k in ("name", "description"):
        out[k] = str(out[k])
    return out
