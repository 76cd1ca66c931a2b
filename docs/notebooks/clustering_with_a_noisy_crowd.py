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
# # Clustering with a noisy crowd
#
# We have a few hundred items and an observation o_n of each (here a point in the plane). We would
# like to group them, and for a small number of item pairs some crowd workers have told us
# "these two belong together" (a **must-link**, 1) or "these two do not" (a **cannot-link**, 0).
# Workers make mistakes, and some make more than others. SCDC (Luo, Tian, Shi, Zhu & Zhang,
# *Semi-crowdsourced clustering with deep generative models*, NeurIPS 2018) uses both sources at
# once: a deep generative model of the observations and a two-coin model of each worker:
#
#     z_n ~ Cat(π)                         cluster of item n
#     x_n | z_n ~ N(μ_{z_n}, Σ_{z_n})       a latent point, dimension d
#     o_n | x_n ~ decoder(x_n)             a neural network maps the latent point to the observation
#     L_a | z ~ Bern(α_m)      if z_i = z_j    worker m's label on the pair (i, j)
#     L_a | z ~ Bern(1 − β_m)  if z_i ≠ z_j
#
# α_m is worker m's **sensitivity** (how often they say "same" when the pair is in the same
# cluster) and β_m their **specificity** (how often they say "different" when it is not). The model
# estimates both from the data — nobody tells it which workers are careful.
#
# Here we fit the model two ways, SCDC (point estimates of the globals, by SVI) and BayesSCDC
# (posterior distributions over them, by natural-gradient structured VI), with and without the
# crowd, and look at what each one learned. `docs/scdc.md` has the details of both.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.collections import LineCollection

import crowdzoo as cz
from crowdzoo.cluster_metrics import ami, hungarian_accuracy, nmi
from crowdzoo.data.links import same_cluster_counts

FAST = os.environ.get("CROWDZOO_FAST") == "1"
torch.set_num_threads(1)  # small networks and mini-batches: one thread is the fastest
# the fast mode's short fits: 20 epochs of pretraining, 40 of training, one initialisation; the full
# mode leaves everything to the defaults (sizes and epochs from the data, the best of 3 starts)
FIT = dict(pretrain=20, n_epochs=40, n_init=1) if FAST else {}
print("fast mode: short fits, the numbers below are rough" if FAST else "full mode")

# %% [markdown]
# ## The pinwheel
#
# The paper's toy problem: 500 points on the five arms of a pinwheel, 100 per arm. The arms curl
# around each other, so a mixture of five Gaussians fitted directly to the points does poorly; a
# mixture in a learned latent space, mapped to the plane by a neural network, can do better.
# `simulate_links` also picks 100 of the points at random and shows them to 20 simulated workers.
# `truth` keeps each point's arm (the labels we are *not* allowed to use for fitting) and the
# workers' true α and β.

# %%
data, truth = cz.simulate_links(seed=0)
labels = truth["labels"]
annotated = truth["annotated"]
print(data)
print(f"{data.n_items} points, {len(np.unique(labels))} arms, {annotated.size} annotated points")
print("true alpha, beta of the workers:", np.unique(truth["alpha"]), np.unique(truth["beta"]))

# %%
O = data.O  # (N, 2): the observations, one row per item
colors = plt.get_cmap("tab10")
fig, ax = plt.subplots(figsize=(5, 5))
for k in np.unique(labels):
    ax.scatter(*O[labels == k].T, s=8, color=colors(k), label=f"arm {k}")
ax.scatter(*O[annotated].T, s=40, facecolors="none", edgecolors="k", linewidths=0.8,
           label="shown to workers")
ax.set_aspect("equal")
ax.legend(fontsize=7, loc="upper left")
ax.set_title("the pinwheel, coloured by true arm")
plt.show()

# %% [markdown]
# ## The annotations
#
# Each worker was handed a window of 50 of the 100 annotated points and labelled 49 pairs inside
# it, so 20 × 49 = 980 annotations in all. `data.to_frame()` shows them with their ids: one row
# per annotation, the worker, the two items and the label (1 must-link, 0 cannot-link).

# %%
ann = data.to_frame()
print(ann.head())
same_arm = labels[data.i] == labels[data.j]
ml = data.same == 1
correct = ml == same_arm
print(f"{ann.shape[0]} annotations: {ml.sum()} must-links, {(~ml).sum()} cannot-links")
print(f"{same_arm.sum()} of the pairs are on the same arm, {(~same_arm).sum()} on different arms")
print(f"wrong labels: {(ml & ~same_arm).sum()} must-links across arms, "
      f"{(~ml & same_arm).sum()} cannot-links within an arm ({(~correct).mean():.1%} of all)")

# %% [markdown]
# With five arms of equal size, a random pair is on the same arm only about one time in five, so
# most annotations are cannot-links: the crowd says far more about which points are apart than
# about which belong together. Drawn as lines between the points (wrong ones in red):

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 5))
for ax, is_ml, name in ((axes[0], True, "must-links"), (axes[1], False, "cannot-links")):
    ax.scatter(*O.T, s=4, c=[colors(k) for k in labels], alpha=0.3)
    for ok, col, lw, alpha in ((True, "0.2", 0.6, 0.4), (False, "red", 1.0, 0.9)):
        rows = (ml == is_ml) & (correct == ok)
        segs = np.stack([O[data.i[rows]], O[data.j[rows]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=col, linewidths=lw, alpha=alpha,
                                         label=f"{'correct' if ok else 'wrong'} ({rows.sum()})"))
    ax.set_aspect("equal")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(name)
plt.show()

# %% [markdown]
# How noisy is each worker? Since we know the arms here, we can count: of the pairs worker m saw
# that are on the same arm, the fraction they called must-link is their empirical α̂_m; of the
# pairs on different arms, the fraction they called cannot-link is β̂_m.
# `same_cluster_counts(data, z)` does this count for any clustering z. All workers were simulated
# with α = β = 0.9, but each sees only about ten same-arm pairs, so α̂ scatters widely around 0.9;
# β̂, from about forty pairs, scatters less. Keep these numbers in mind: they are the best any
# method could hope to recover from this crowd.

# %%
empirical = same_cluster_counts(data, labels)
print(empirical.round(3).to_string())
print(f"\nmean alpha_hat {empirical.alpha_hat.mean():.3f}, mean beta_hat {empirical.beta_hat.mean():.3f}")

# %% [markdown]
# ## SCDC: a deep generative model and a two-coin crowd, by SVI
#
# SCDC's guide is an encoder network that reads o_n and returns q(z_n | o_n), the probabilities
# of each cluster, and q(x_n | o_n, z_n), where the latent point lies. The mixture's π, μ_k, Σ_k
# and the workers' α_m, β_m are point estimates. Training maximises the ELBO over mini-batches of
# items and of annotations: the observations pull the clusters one way, and every annotation adds
# a reward for putting the pair in the same cluster (a must-link) or in different ones (a
# cannot-link), weighted by how reliable its worker currently seems.
#
# We give the model K = 5 clusters, the number of arms we expect, and nothing else: the sizes
# (a latent space of min(D, 8) = 2 dimensions, two hidden layers of 64) and the schedule (200 epochs
# of pretraining, then 200 of training, for 500 items) follow from the data by the rule in
# `crowdzoo/models/scdc/defaults.py`; `post.model` and `post.settings` record what was used. Give K
# the number of groups you expect rather than a generous surplus: pretraining starts the mixture
# from a Gaussian mixture of K components on the pretrained latent points, and spare components
# there split arms. If a fit warns that its ELBO is still rising, it needs more epochs
# (the fast mode's short fits do).
#
# A fit is the best of `n_init=3` initialisations by its final ELBO (three fits' time; `n_init=1`
# for one, as the fast mode does), and it warns (`CollapseWarning`) when fewer than K clusters
# hold 1 % of the items: a collapse, if the data have K clusters.

# %%
K = 5
scdc = cz.fit(cz.SCDC(n_clusters=K), data, progress_bar=False, seed=0, **FIT)
print(scdc)
print(scdc.predict().head())

# %% [markdown]
# `predict()` gives each item its most probable cluster (a Series indexed by item id) and
# `cluster_proba()` the whole N × K table of probabilities behind it.
#
# ## BayesSCDC: the same story with priors, by structured VI
#
# BayesSCDC puts priors on the globals — a Dirichlet on π, a normal-inverse-Wishart on each
# (μ_k, Σ_k), a Beta on each α_m and β_m — and keeps a posterior *distribution* over them. Its
# default route (`method="natgrad"`) is structured variational inference: a recognition network
# turns each observation into a Gaussian "potential" on x_n, and with that stand-in the model is
# conjugate, so each mini-batch finds its best q(x) and q(z) by message passing. The annotations
# send messages too: a must-link from a reliable worker nudges the two items towards the same
# cluster. The globals then take a natural-gradient step. Before that, the networks are pretrained
# as a variational autoencoder and the mixture starts from a Gaussian mixture on their latent points.

# %%
bayes = cz.fit(cz.BayesSCDC(n_clusters=K), data, progress_bar=False, seed=0, **FIT)
print(bayes)

fig, axes = plt.subplots(1, 2, figsize=(9, 3))
for ax, (name, post) in zip(axes, (("SCDC", scdc), ("BayesSCDC", bayes))):
    ax.plot(post.trace["elbo"])
    ax.set_xlabel("epoch")
    ax.set_title(f"{name}: objective per epoch")
plt.tight_layout()
plt.show()

# %% [markdown]
# (SCDC's curve is its ELBO; BayesSCDC's is its surrogate bound. Both start after pretraining.)
#
# ## How good are the clusters? With and without the crowd
#
# Cluster numbers are arbitrary ("cluster 7" may be arm 2), so we score clusterings with measures
# that do not care about names:
#
# - **accuracy** (Hungarian): match clusters to arms one to one in the best possible way and count
#   the items that land on their arm. Had we given more clusters than arms, only five could be
#   matched, and items in surplus clusters would count as wrong.
# - **NMI**, normalised mutual information: how much knowing the cluster tells you about the arm,
#   from 0 to 1.
# - **AMI**, adjusted mutual information: NMI corrected for chance, so that random clusterings
#   score about 0. Careful when reading the paper: what it calls "NMI" is AMI in its code.
#
# To see what the crowd adds, we fit both models again on `data.without_annotations()`: the same
# points, no labels at all, so plain (deep) clustering.

# %%
alone = data.without_annotations()
fits = {("SCDC", "980 annotations"): scdc, ("BayesSCDC", "980 annotations"): bayes}
fits["SCDC", "none"] = cz.fit(cz.SCDC(n_clusters=K), alone, progress_bar=False, seed=0, **FIT)
fits["BayesSCDC", "none"] = cz.fit(cz.BayesSCDC(n_clusters=K), alone, progress_bar=False, seed=0, **FIT)
rows = []
for (model, crowd), post in fits.items():
    z = post.predict().to_numpy()
    rows.append({"model": model, "annotations": crowd, "accuracy": hungarian_accuracy(labels, z),
                 "NMI": nmi(labels, z), "AMI": ami(labels, z),
                 "clusters in use": len(post.clusters_in_use())})
table = pd.DataFrame(rows).sort_values(["model", "annotations"], ascending=[False, True])
print(table.round(3).to_string(index=False))

# %%
for model in ("SCDC", "BayesSCDC"):
    r = table.set_index(["model", "annotations"]).loc[model]
    print(f"{model}: accuracy {r.loc['none', 'accuracy']:.3f} without the crowd, "
          f"{r.loc['980 annotations', 'accuracy']:.3f} with it")

# %% [markdown]
# One fit on one pinwheel is one draw: a different seed gives a different initialisation and can
# move these numbers by several points, with or without the crowd. The comparison in
# `docs/scdc-pinwheel.md` repeats the experiment ten times; there, on both models, the annotations
# raise the mean accuracy and narrow its spread, and the worst of the ten fits is better with the
# crowd than without: the annotations mostly protect against the bad fits. Only 100 of the 500
# points were annotated, yet the effect reaches all of them: the networks and the mixture are
# shared, so what the crowd teaches about the annotated points carries over to their neighbours.
#
# ## The latent space
#
# Each model has mapped every point to a latent x_n (`post.x_mean`, the N × d means). Colouring
# them by the predicted cluster shows what the mixture sees: the curled arms of the pinwheel
# should have become compact blobs, one per cluster, with the components' means (crosses) at their
# centres.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
cluster_colors = plt.get_cmap("tab20")
for ax, (name, post) in zip(axes, (("SCDC", scdc), ("BayesSCDC", bayes))):
    x = post.x_mean.numpy()
    z = post.predict().to_numpy()
    ax.scatter(*x.T, s=6, c=[cluster_colors(k % 20) for k in z])
    used = post.clusters_in_use().index.to_numpy()
    mu = post.mu.numpy()[used]
    ax.scatter(*mu.T, marker="x", s=60, c="k")
    ax.set_title(f"{name}: latent x coloured by cluster ({used.size} in use)")
    ax.set_xlabel("x[0]")
    ax.set_ylabel("x[1]")
plt.tight_layout()
plt.show()

# %% [markdown]
# And back in the plane, the same predicted clusters on the original points:

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 5))
for ax, (name, post) in zip(axes, (("SCDC", scdc), ("BayesSCDC", bayes))):
    z = post.predict().to_numpy()
    ax.scatter(*O.T, s=6, c=[cluster_colors(k % 20) for k in z])
    ax.set_aspect("equal")
    ax.set_title(f"{name}: predicted clusters (accuracy {hungarian_accuracy(labels, z):.3f})")
plt.show()

# %% [markdown]
# ## Clusters in use
#
# Neither model has to use all K clusters. In BayesSCDC the Dirichlet prior on π does the pruning:
# a cluster that no item takes keeps only the prior's pseudo-count, so its expected weight E[π_k]
# falls to a_0 / Σ a (the dashed line) — the cluster is switched off. With K = 5 for five arms none
# should be. `post.pi` holds E[π] (for SCDC, the point estimate), `post.conjugate["a"]` the
# Dirichlet's parameters, and `clusters_in_use()` the sizes of the clusters that are some item's
# most probable one.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
for ax, (name, post) in zip(axes, (("SCDC", scdc), ("BayesSCDC", bayes))):
    pi = np.sort(post.pi.numpy())[::-1]
    ax.bar(np.arange(pi.size), pi, color="C0")
    ax.set_xlabel("cluster (sorted by weight)")
    ax.set_title(f"{name}: {'E[π]' if name == 'BayesSCDC' else 'π'}")
a = bayes.conjugate["a"].numpy()
axes[1].axhline(bayes.model.dirichlet / a.sum(), ls="--", c="k", lw=0.8, label="prior's mass only")
axes[1].legend(fontsize=8)
axes[0].set_ylabel("mixture weight")
plt.tight_layout()
plt.show()
print("BayesSCDC, items per cluster in use:", bayes.clusters_in_use().to_dict())
print("BayesSCDC, Dirichlet parameters a (sorted):", np.round(np.sort(a)[::-1], 1))

# %% [markdown]
# Count the clusters in use against the five arms: a surplus cluster is usually a piece of an arm
# split off (often the sparse outer tip), and a shortfall means two arms were merged. Both cost
# accuracy in the table above.
#
# ## The workers: who can be trusted?
#
# `post.workers()` returns each worker's estimated α and β, the weight logit α + logit β (how much
# one of their annotations counts: 0 for a worker no better than a coin, large for a reliable
# one) and the number of annotations. BayesSCDC adds 90 % intervals of the Beta posteriors
# (alpha_lo … alpha_hi, beta_lo … beta_hi).

# %%
w_scdc, w_bayes = scdc.workers(), bayes.workers()
print(w_bayes.round(3).to_string())

# %% [markdown]
# Now compare the estimates with the empirical α̂, β̂ counted from the true arms above. A model
# does not know the arms; it counts against its own clusters, softly. So when its clusters match
# the arms, its α and β should track the empirical ones — including the workers who happened to
# be luckier or unluckier than 0.9 — and when they do not (two arms merged, say), α and β are
# pulled down. BayesSCDC's intervals are wide for α and narrow for β, because each worker saw far
# fewer same-arm pairs than different-arm ones: the model knows how little it knows.
#
# Expect BayesSCDC's α to sit below an empirical α̂ of 1. A worker who got all ten of their
# same-arm pairs right has α̂ = 10/10, but the Beta(1, 1) prior plus ten successes is Beta(11, 1),
# whose mean is 11/12 ≈ 0.92: ten pairs are not enough to be sure that anyone is perfect. That is
# the prior at work, and it is why an interval can miss an empirical value at the top. SCDC has no
# prior; its point estimates follow the (soft) counts against its current clusters, so they are
# only as good as those clusters: while the clusters are still vague, every pair looks less alike
# than it is, and α is underestimated.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
for ax, p in zip(axes, ("alpha", "beta")):
    emp = empirical[f"{p}_hat"].to_numpy()
    ax.errorbar(emp, w_bayes[p], yerr=[w_bayes[p] - w_bayes[f"{p}_lo"], w_bayes[f"{p}_hi"] - w_bayes[p]],
                fmt="o", ms=4, capsize=2, label="BayesSCDC (90 % interval)")
    ax.scatter(emp, w_scdc[p], marker="s", s=16, c="C1", label="SCDC", zorder=3)
    ax.plot([0, 1], [0, 1], c="k", lw=0.6, label="estimate = empirical")
    ax.axhline(truth[p].mean(), ls=":", c="0.5", lw=0.8, label="simulated value (mean)")
    ax.set_xlim(min(0.45, np.nanmin(emp) - 0.05), 1.02)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel(f"empirical {p} (counted from the true arms)")
    ax.set_ylabel(f"estimated {p}")
    ax.legend(fontsize=8, loc="lower right")
plt.tight_layout()
plt.show()
for name, w in (("SCDC", w_scdc), ("BayesSCDC", w_bayes)):
    err = (w[["alpha", "beta"]].to_numpy() - empirical[["alpha_hat", "beta_hat"]].to_numpy())
    print(f"{name}: mean |estimate − empirical| alpha {np.nanmean(np.abs(err[:, 0])):.3f}, "
          f"beta {np.nanmean(np.abs(err[:, 1])):.3f}")
cover = ((w_bayes.alpha_lo <= empirical.alpha_hat) & (empirical.alpha_hat <= w_bayes.alpha_hi)).mean()
print(f"BayesSCDC's 90 % intervals of alpha contain the empirical alpha for {cover:.0%} of the workers")

# %% [markdown]
# ## Does the model believe the wrong annotations?
#
# `same_cluster_proba(i, j)` is the model's probability that items i and j share a cluster,
# Σ_k q(z_i = k) q(z_j = k). For each annotation we can ask whether the model sides with the
# worker or with the truth. A good fit agrees with the correct annotations and overrules most of
# the wrong ones: the observations and the other workers outvote a single mistaken label.

# %%
for name, post in (("SCDC", scdc), ("BayesSCDC", bayes)):
    p_same = post.same_cluster_proba(data.item_ids[data.i], data.item_ids[data.j])
    sides_with_truth = (p_same > 0.5) == same_arm
    print(f"{name}: agrees with {sides_with_truth[correct].mean():.1%} of the {correct.sum()} correct "
          f"annotations, overrules {sides_with_truth[~correct].mean():.1%} of the {(~correct).sum()} "
          "wrong ones")

# %% [markdown]
# ## New points
#
# The fitted networks cluster observations they have never seen: `cluster_proba(O_new)` and
# `predict(O_new)` run the encoder (for BayesSCDC, the recognition network and one pass of the
# local updates with the fitted globals) on new rows. There are no annotations for new points, so
# only the observation speaks. A fresh pinwheel from another seed has the same arms:

# %%
new, new_truth = cz.simulate_links(seed=1)
for name, post in (("SCDC", scdc), ("BayesSCDC", bayes)):
    z_new = post.predict(new.O).to_numpy()
    print(f"{name}: accuracy on 500 new points {hungarian_accuracy(new_truth['labels'], z_new):.3f}")

# %% [markdown]
# ## Beyond point summaries
#
# `post.to_arviz()` exports the posterior for ArviZ: draws of the number of clusters in use and of
# every worker's α and β, the per-annotation log-likelihood (for LOO), and the objective's trace.
# `cz.report(post, "scdc.html")` runs the zoo's diagnostic checks on a fit.

# %%
idata = bayes.to_arviz()
print(idata.posterior["n_clusters"].to_series().value_counts().sort_index().to_string())

# %% [markdown]
# **Try**: make the crowd worse (`cz.simulate_links(alpha=0.7, beta=0.7)`) or mix careful and
# careless workers (`alpha=np.r_[np.full(10, 0.95), np.full(10, 0.6)]`, the same for `beta`) and
# see whether the worker weights pick out the careless ones; annotate more points
# (`n_annotated=300`); or change the seed of `cz.fit` and watch how much a single fit without the
# crowd varies compared with one with it.
