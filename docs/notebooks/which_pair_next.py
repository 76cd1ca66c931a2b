# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Which pair next?
#
# Labels cost money and annotators' patience. Once a model is fitted to the comparisons we have, it
# can say which comparison would teach it most. This notebook fits GPPL to a few labels of a
# simulated problem, asks `post.suggest` for the next pairs by **BALD**, by **maximum entropy** and at
# **random**, explains what BALD computes (Houlsby, Huszár, Ghahramani & Lengyel 2011, "Bayesian
# active learning for classification and preference learning", arXiv:1112.5745; Houlsby et al. 2012,
# "Collaborative Gaussian processes for preference learning", NIPS, §4), and draws a short learning
# curve of the three.
#
# Equation numbers are those of the 2012 paper (its main text and supplement a).
# Set `CROWDZOO_FAST=1` for a quick run (a smaller problem, fewer rounds, one seed).

# %%
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch.special import ndtr

import crowdzoo as cz
from crowdzoo import metrics
from crowdzoo.core.suggest import bald_score, binary_entropy, entropy_score

FAST = os.environ.get("CROWDZOO_FAST") == "1"
warnings.filterwarnings("ignore")  # short fits of small problems warn that they could run longer

# %% [markdown]
# ## 1. A problem and a first fit
#
# `cz.simulate_gppl` draws items with 2-D features, a utility f from GPPL's prior and labels
# y ~ Bernoulli(Φ(f_a − f_b)). We keep the true f to answer any query we choose to ask (an *oracle*)
# and to score the fits, and start from a handful of random labels.

# %%
n_items, n_start = (20, 10) if FAST else (40, 20)
sim, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=2, seed=0)
X = np.asarray(sim.item_features)


def ask(a, b, rng):
    """The oracle: a label for each pair (a, b), drawn from the true utilities."""
    return (rng.uniform(size=len(a)) < ndtr(torch.as_tensor(f_true[a] - f_true[b])).numpy()).astype(float)


def random_pairs(n, seed):
    r = np.random.default_rng(seed)
    a = r.integers(0, n_items, n)
    return a, (a + r.integers(1, n_items, n)) % n_items


a0, b0 = random_pairs(n_start, 1)
y0 = ask(a0, b0, np.random.default_rng(0))
settings = dict(progress_bar=False, learn_kernel=False)  # the median heuristic: the truth's kernel
post = cz.fit(cz.GPPL(), cz.PairwiseData.from_arrays(a0, b0, y0, X), seed=0, **settings)
print(f"{n_start} labels on {n_items} items; {n_items * (n_items - 1) // 2} pairs could be asked next")

# %% [markdown]
# ## 2. What BALD scores
#
# A query is a pair (a, b); its label y depends on the latent difference g = f_a − f_b. The best
# query is the one whose answer would shrink our uncertainty about g the most — the expected drop
# in the posterior's entropy (Eq. 11):
#
#     H[p(g | D)] − E_{y ~ p(y | D)} H[p(g | y, D)].
#
# Computed this way it needs a posterior update for every candidate and both answers. The drop is
# the mutual information I[y; g | D], which is symmetric, so it can be written with entropies of the
# *label* instead (Eq. 12):
#
#     H[p(y | D)] − E_{g ~ p(g | D)} H[p(y | g)].
#
# The first term is how unsure we are of the answer; the second how unsure we would still be if we
# knew g — the noise of the label itself, which no amount of asking removes. BALD ("Bayesian active
# learning by disagreement") wants the pairs where the plausible g's disagree about the answer,
# not the ones that are a coin flip for everybody. With a Gaussian posterior g ~ N(μ, σ²) and the
# probit likelihood both terms are closed form, using h[Φ(x)] ≈ exp(−x²/(π ln 2)) (supplement a,
# Eq. 4; h the binary entropy), which gives (Eq. 13)
#
#     BALD(μ, σ²) = h[Φ(μ / √(σ² + 1))] − C / √(σ² + C²) · exp(−μ² / (2 (σ² + C²))),  C² = π ln 2 / 2.
#
# **Maximum entropy** keeps only the first term. First, how good is the approximation of h[Φ(x)]?

# %%
x = torch.linspace(-4, 4, 401, dtype=torch.float64)
approx = torch.exp(-x * x / (np.pi * np.log(2)))
error = float((binary_entropy(ndtr(x)) - approx).abs().max())
print(f"largest error of h[Φ(x)] ≈ exp(−x²/(π ln 2)): {error:.4f} bits")

# %% [markdown]
# Two pairs with the same predictive probability ½ show the difference between the two scores: one
# the model knows well to be a near tie (μ = 0, σ² = 0.05), one it knows nothing about (μ = 0, σ² = 4).
# Maximum entropy scores both near 1 bit; BALD sees that only the second would teach anything.
# And BALD against a Monte-Carlo estimate of Eq. 12 on a few (μ, σ²):

# %%
g = torch.Generator().manual_seed(0)
rows = []
for mu, var in ((0.0, 0.05), (0.0, 4.0), (1.0, 1.0), (-2.0, 0.5)):
    draws = mu + np.sqrt(var) * torch.randn(200_000, generator=g, dtype=torch.float64)
    p = ndtr(draws)
    rows.append({"μ": mu, "σ²": var, "entropy": float(entropy_score(torch.tensor([mu]), torch.tensor([var]))),
                 "BALD (Eq. 13)": float(bald_score(torch.tensor([mu]), torch.tensor([var]))),
                 "Monte Carlo I[y; g]": float(binary_entropy(p.mean()) - binary_entropy(p).mean())})
pd.DataFrame(rows).round(3)

# %% [markdown]
# ## 3. Asking for the next pairs
#
# `post.suggest(n, strategy=...)` scores every pair of the training items (or the rows of a
# `candidates=` frame) and returns the best n, with their scores. The posterior's mean and variance
# of each pair's g come from the fitted GPPL; here are the next five by each strategy:

# %%
for strategy in ("bald", "entropy", "random"):
    print(strategy)
    print(post.suggest(5, strategy=strategy, seed=0).round(3).to_string(index=False))

# %% [markdown]
# **Batches.** Asking five at once raises a question one at a time does not: the second-best pair
# may be nearly the same question as the best (two pairs sharing an item and close in features). So
# a batch is chosen greedily, and after each choice the posterior is updated *as if* it had been
# answered — the EP update of that label, averaged over the two answers. The means stay where they
# are (on average an answer moves them neither way) but the variances of every pair correlated with
# the chosen one shrink, and with them their BALD scores. Without that step (the top five by score)
# a batch crowds onto a few items:

# %%
from crowdzoo.core.suggest import candidates, greedy  # noqa: E402

a, b, _ = candidates(post.data.item_ids, None)
queries = post._queries(a, b, None)
top = np.argsort(-queries.scores("bald", np.random.default_rng(0)).numpy())[:8]
chosen, _ = greedy(post._queries(a, b, None), 8, "bald")
for name, pick in (("top 8 by score", top), ("greedy batch of 8", chosen)):
    items = np.r_[a[pick], b[pick]]
    print(f"{name}: {len(np.unique(items))} distinct items, "
          f"the most asked one in {np.bincount(items).max()} pairs")

# %% [markdown]
# ## 4. A short learning curve
#
# The loop active learning runs: fit, ask the strategy's batch, get the answers, refit. Each
# strategy starts from the same random labels and gets the same number of labels per round; a fit
# is scored by its log loss on held-out pairs drawn from the truth (the `active` comparison,
# `crowdzoo compare active-gppl`, runs this over ten seeds and a crowdGPPL problem too;
# see docs/active.md).

# %%
rounds, batch, seeds = (3, 5, [0]) if FAST else (8, 10, [0, 1, 2])
test_a, test_b = random_pairs(400, 2)
test_y = ask(test_a, test_b, np.random.default_rng(4))
curves = []
for seed in seeds:
    for strategy in ("bald", "entropy", "random"):
        rng = np.random.default_rng([seed, 3])
        a_s, b_s = random_pairs(n_start, [seed, 1])
        y_s = ask(a_s, b_s, rng)
        for r in range(rounds + 1):
            fit = cz.fit(cz.GPPL(), cz.PairwiseData.from_arrays(a_s, b_s, y_s, X), seed=seed, **settings)
            p = fit.predict_proba(test_a, test_b)
            curves.append({"seed": seed, "strategy": strategy, "labels": len(a_s),
                           "log loss": metrics.cross_entropy(test_y, p)})
            if r == rounds:
                break
            nxt = fit.suggest(batch, strategy=strategy, seed=1000 * seed + r)
            na, nb = nxt["a"].to_numpy(dtype=int), nxt["b"].to_numpy(dtype=int)
            a_s, b_s, y_s = np.r_[a_s, na], np.r_[b_s, nb], np.r_[y_s, ask(na, nb, rng)]
curves = pd.DataFrame(curves)
mean = curves.groupby(["strategy", "labels"])["log loss"].mean().unstack(0)
mean.round(3)

# %%
fig, ax = plt.subplots(figsize=(5, 3.2))
for strategy in ("bald", "entropy", "random"):
    ax.plot(mean.index, mean[strategy], marker="o", ms=3, label=strategy)
ax.set_xlabel("labels")
ax.set_ylabel("held-out log loss (nats)")
ax.set_title(f"GPPL, {n_items} items, {len(seeds)} seed(s)")
ax.legend()
plt.show()

# %% [markdown]
# With few seeds the curves are noisy; over ten seeds (docs/active.md) BALD reaches random's final
# log loss with 70 % of its labels on this problem, and maximum entropy does no better than random:
# it keeps asking about near ties, whose answers are noise. Two things to take away:
#
# * BALD needs the posterior's *spread*, not just its mean: a fit whose variances are too narrow
#   (an under-dispersed approximation) mis-ranks the pairs, however good its predictions.
# * For crowd models (`CrowdGPPL`, `DPMCommunities`, ...) `suggest` also says *whom* to ask: a query is
#   (user, a, b), and a label of one user teaches the shared parts of the model too.
