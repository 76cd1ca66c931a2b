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
# # Communities of taste
#
# People who like the same things tend to agree on other things too. The DPM community model
# (Abbasnejad, Sanner, Bonilla & Poupart 2013) puts this in a prior: users fall into an
# **unbounded number of communities**, each community has its own GP utility over the items'
# features, and a user's labels come from their community's utility:
#
#     π ~ GEM(λ),   c_u ~ Cat(π),   f^c ~ GP(0, K_x / s),   P(a ≻ b | u) = Φ(f^{c_u}_a − f^{c_u}_b)
#
# The number of communities is not fixed in advance: the Dirichlet process lets the data decide.
# Here we simulate users in a few communities, fit the model by the paper's Gibbs sampler and by
# SVI, and read what the posterior says about who belongs with whom.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score

import crowdzoo as cz
from crowdzoo.data.simulate_dpm import simulate_communities

FAST = os.environ.get("CROWDZOO_FAST") == "1"
torch.set_num_threads(1)  # small problems, many tiny operations: one thread is the fastest

# %% [markdown]
# ## Users in three communities
#
# Three communities, each with its own utility over items with 2-D features; users are dealt to
# the communities in turn, and each labels a few random pairs. `truth` keeps each user's community
# and each community's utilities. A fifth of the labels are held out for the predictions below.

# %%
n_users, n_items, n_labels = (24, 20, 16) if FAST else (60, 30, 20)
data, truth = simulate_communities(n_users=n_users, n_items=n_items, n_labels=n_labels, n_communities=3,
                                   seed=0)
train, test = cz.split_pairs(data, 0.2, seed=0)
print(f"{train.n_pairs} training labels, {n_items} items, {n_users} users, 3 true communities")

# %% [markdown]
# ## Fit by Gibbs sampling (the paper's route)
#
# Given the memberships, EP fits each community's GP; given the GPs, each user's community is
# redrawn from the Chinese restaurant process prior times how well each community explains their
# labels (a new, empty community is always a candidate). The kernel and the utility scale are fixed
# here at the simulation's (`lengthscale`, and `shape_s0 / rate_s0` = E[s] = 1/4: utilities with
# standard deviation 2).

# %%
model = cz.DPMCommunities(kernel="se", lengthscale=[0.3, 0.3], shape_s0=1.0, rate_s0=4.0, truncation=8)
gibbs = cz.fit(model, train, method="gibbs", n_sweeps=60 if FAST else 300, burn_in=15 if FAST else 75,
               n_chains=2, seed=0, progress_bar=False)
print(gibbs)

# %% [markdown]
# ## How many communities?
#
# Every kept sample has its own partition of the users, so the number of communities has a
# posterior distribution. (The truth is 3.)

# %%
print(gibbs.n_communities().round(3).to_string())

# %% [markdown]
# ## Who belongs with whom: the co-clustering matrix
#
# Community labels mean nothing by themselves — "community 0" in one sample may be "community 2" in
# the next (label switching). What *is* meaningful is whether two users share a community:
# the co-clustering matrix P(c_u = c_v | data), averaged over samples. `memberships()` returns it
# together with a **point partition**, the sample closest to it (posterior expected Binder loss).
# Ordered by that partition, the communities show as bright blocks.

# %%
co, partition = gibbs.memberships()
order = np.argsort(partition.to_numpy(), kind="stable")
fig, ax = plt.subplots(figsize=(4.5, 4))
im = ax.imshow(co.to_numpy()[np.ix_(order, order)], vmin=0, vmax=1, cmap="viridis")
fig.colorbar(im, ax=ax, label="P(same community)")
ax.set_xlabel("user (ordered by the point partition)")
ax.set_title("Gibbs co-clustering")
plt.show()

# %% [markdown]
# ## The point partition against the truth
#
# The adjusted Rand index compares two partitions whatever their labels: 1 is a perfect match, 0 is
# what chance gives.

# %%
ari_gibbs = adjusted_rand_score(truth["communities"], partition.to_numpy())
print(f"adjusted Rand index, Gibbs: {ari_gibbs:.2f}")
print(partition.groupby(truth["communities"]).value_counts().rename("users").to_string())

# %% [markdown]
# ## Fit by SVI
#
# The SVI route truncates the stick-breaking at T = 8 communities and sums each user's membership
# out exactly; the guide is over the sticks and the communities' inducing utilities. It reports the
# same label-free summaries, so the two fits compare directly.

# %%
svi = cz.fit(model, train, method="svi", num_steps=1000 if FAST else 3000, seed=0, progress_bar=False)
co_svi, partition_svi = svi.memberships()
print(svi.n_communities().round(3).to_string())
print(f"adjusted Rand index, SVI: {adjusted_rand_score(truth['communities'], partition_svi.to_numpy()):.2f}")
print(f"mean |co-clustering, SVI − Gibbs|: {np.abs(co_svi.to_numpy() - co.to_numpy()).mean():.3f}")

fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
for ax, (name, P) in zip(axes, (("Gibbs", co), ("SVI", co_svi))):
    ax.imshow(P.to_numpy()[np.ix_(order, order)], vmin=0, vmax=1, cmap="viridis")
    ax.set_title(f"{name} co-clustering")
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()

# %% [markdown]
# SVI's approximation is a single optimum: with few steps it can keep a surplus community or two
# alive, which shows as a wider spread of the number of communities. Both share the ordering
# by Gibbs' partition above, so the same blocks should appear.
#
# ## Personal predictions
#
# A user's predictions come from their community's utility (averaged over the samples of their
# membership). A user never seen gets the CRP prior predictive (`users=None`): the communities
# weighted by their sizes, plus a fresh community. On the held-out labels:

# %%
a, b = test.item_ids[test.a], test.item_ids[test.b]
users = test.user_ids[test.users]
y = test.y > 0.5
for name, post in (("Gibbs", gibbs), ("SVI", svi)):
    p_personal = post.predict_proba(a, b, users=users)
    p_new = post.predict_proba(a, b)
    print(f"{name:5s} held-out accuracy: personal {np.mean((p_personal > 0.5) == y):.3f}, "
          f"as a new user {np.mean((p_new > 0.5) == y):.3f}")
f_true = truth["f"][truth["communities"][test.users]]
rows = np.arange(test.n_pairs)
print(f"the true utilities themselves: {np.mean((f_true[rows, test.a] > f_true[rows, test.b]) == y):.3f}")

# %% [markdown]
# The personal utilities recover each community's utility (up to an additive constant: only
# differences are identified):

# %%
mean, _ = gibbs.utilities(users=list(train.user_ids))
fig, ax = plt.subplots(figsize=(4, 3.5))
for c in range(3):
    members = np.flatnonzero(truth["communities"] == c)
    f_hat = mean.iloc[:, members].mean(axis=1).to_numpy()
    r = np.corrcoef(truth["f"][c], f_hat)[0, 1]
    ax.scatter(truth["f"][c], f_hat, s=12, label=f"community {c} (r = {r:.2f})")
ax.set_xlabel("true community utility")
ax.set_ylabel("posterior mean (its members)")
ax.legend(fontsize=7)
plt.show()

# %% [markdown]
# ## The diagnostic report
#
# `cz.report` runs the zoo's checks on the fit — posterior predictive checks, calibration on the
# training and the held-out labels, PSIS-LOO — and, since this posterior is over communities of
# users, adds the co-clustering heat map to its plots. The Gibbs chains are Markov chains on the
# memberships, so r̂ and ESS are computed — on label-invariant quantities (the number of
# communities, λ, each user's utilities), since community labels switch between draws. Short
# chains (the fast mode) fail them: run more sweeps before trusting the numbers.

# %%
rep = cz.report(gibbs, "communities-gibbs.html", test=test)
print(f"overall: {rep.verdict}")
for c in rep.checks:
    print(f"  {c.verdict:5s} {c.name}: {c.value}")
print("figures:", *rep.figures, sep="\n  ")

# %% [markdown]
# Open `communities-gibbs.html` to see the plots.
#
# **Try**: make the communities harder to tell apart (`scale=1.0`, or fewer `n_labels` per user)
# and watch the co-clustering blocks blur and the number of communities spread; or raise
# `concentration` (λ) and see how strongly the prior pushes towards more communities.
