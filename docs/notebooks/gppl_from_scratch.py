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
# # GPPL from scratch
#
# Gaussian-process preference learning (Chu & Ghahramani 2005; Simpson & Gurevych 2020, Eq. 1–4)
# in three pieces: a **GP prior** over the utility f(x) of each item, a **probit likelihood** for
# each pairwise label "a is preferred to b", and **inference** — here the same posterior by EP,
# NUTS and Pyro SVI, side by side.
#
# Set `CROWDZOO_FAST=1` for a quick run (smaller problem, shorter chains).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import torch

import crowdzoo as cz
from crowdzoo.gp.kernels import Kernel

FAST = os.environ.get("CROWDZOO_FAST") == "1"
torch.manual_seed(0)

# %% [markdown]
# ## 1. The prior: f ~ GP(0, k / s)
#
# Items are described by features x; similar items should have similar utilities. The kernel k says
# how similar (Matérn 3/2 with length-scale ℓ, the paper's choice); s is an inverse scale with a
# Gamma prior (Eq. 4). Draws from the prior on a grid of one-dimensional items:

# %%
x = torch.linspace(0, 10, 200, dtype=torch.float64)[:, None]
k = Kernel("matern32", torch.tensor([1.5], dtype=torch.float64))
K = k(x, x) + 1e-8 * torch.eye(200, dtype=torch.float64)
L = torch.linalg.cholesky(K)
fig, ax = plt.subplots(figsize=(7, 3))
for s in (0.5, 2.0):
    f = L @ torch.randn(200, 3, dtype=torch.float64) / s ** 0.5
    ax.plot(x[:, 0], f, lw=1, color="tab:blue" if s == 0.5 else "tab:orange")
ax.set_xlabel("item feature x")
ax.set_ylabel("utility f(x)")
ax.set_title("prior draws: s = 0.5 (blue, larger scale) and s = 2 (orange)")
plt.show()

# %% [markdown]
# ## 2. The likelihood: P(a ≻ b | f) = Φ(f_a − f_b)
#
# A label compares two items. Its probability depends only on the utility *difference* through
# the standard normal CDF Φ (a probit; Eq. 1–2): two items one unit apart are ordered "correctly"
# 84 % of the time. The scale of f therefore sets how consistent the labels are.

# %%
from scipy.stats import norm  # noqa: E402

d = np.linspace(-3, 3, 100)
plt.figure(figsize=(4, 3))
plt.plot(d, norm.cdf(d))
plt.xlabel("f_a − f_b")
plt.ylabel("P(a ≻ b)")
plt.show()

# %% [markdown]
# ## 3. Data from the model
#
# `cz.simulate_gppl` draws item features, a utility function from the prior and labels from the
# likelihood; we keep the true utilities to check the fits.

# %%
n_items, n_pairs = (12, 80) if FAST else (30, 300)
data, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=n_pairs, n_features=1, seed=1)
train, test = cz.split_pairs(data, 0.2, seed=0)
print(train.n_pairs, "training labels over", train.n_items, "items")

# %% [markdown]
# ## 4. Three routes to the same posterior
#
# * **EP** (expectation propagation; Chu & Ghahramani 2005) replaces each probit factor by a
#   Gaussian site matched in its first two moments;
# * **NUTS** samples the exact posterior (slow, the reference);
# * **SVI** fits a multivariate normal guide by maximising the ELBO with Pyro.

# %%
draws = 80 if FAST else 600
fits = {
    "EP": cz.fit(cz.GPPL(), train, method="ep"),
    "NUTS": cz.fit(cz.GPPL(), train, method="nuts", num_samples=draws, warmup_steps=draws),
    "SVI": cz.fit(cz.GPPL(), train, method="svi", num_steps=300 if FAST else 3000, progress_bar=False),
}
order = np.argsort(f_true)
fig, ax = plt.subplots(figsize=(8, 3.5))
for i, (name, post) in enumerate(fits.items()):
    mean, var = post.utilities()
    m, sd = mean.to_numpy()[order], np.sqrt(var.to_numpy()[order])
    ax.errorbar(np.arange(n_items) + 0.2 * (i - 1), m - m.mean(), 2 * sd, fmt="o", ms=3, label=name)
ax.plot(np.arange(n_items), f_true[order] - f_true.mean(), "k_", ms=12, label="truth")
ax.set_xlabel("items, by true utility")
ax.set_ylabel("utility (centred), ± 2 sd")
ax.legend()
plt.show()

# %% [markdown]
# The three agree closely. How closely, in numbers — the report's agreement check measures each
# approximation against NUTS (mean |Δ mean| in NUTS sds, and the ratio of sds):

# %%
for name in ("EP", "SVI"):
    rep = cz.report(fits[name], f"gppl-{name.lower()}.html", test=test, reference=fits["NUTS"])
    print(name, {c.name: c.value for c in rep.checks if c.name.startswith("agreement")})
for name, post in fits.items():
    p = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b])
    print(f"{name:5s} held-out accuracy {np.mean((p > 0.5) == (test.y > 0.5)):.3f}")

# %% [markdown]
# **Try**: change the length-scale (`cz.GPPL(lengthscale=[0.3])`) or the scale prior
# (`cz.GPPL(shape_s0=20, rate_s0=2)`) and refit — which route moves most?
