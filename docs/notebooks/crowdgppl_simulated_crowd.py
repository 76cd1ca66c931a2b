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
# # crowdGPPL on a simulated crowd
#
# A crowd does not agree. crowdGPPL (Simpson & Gurevych 2020, Eq. 5–6) writes user j's utility
# for item i as a **consensus** plus a **personal** part from C latent components:
#
#     F[i, j] = t(x_i) + Σ_c v_c(x_i) w_c(u_j)
#
# with GP priors on t, on each item component v_c and on each user weight w_c. Here we simulate a
# crowd from the model, fit it by the paper's natural-gradient SVI, and look at what it learnt.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import crowdzoo as cz

FAST = os.environ.get("CROWDZOO_FAST") == "1"

# %% [markdown]
# ## A crowd with a consensus and two kinds of taste
#
# 2 true components; each user weighs them differently. `truth` keeps t, V, W and F.

# %%
n_items, n_users, n_pairs = (20, 8, 600) if FAST else (40, 20, 3000)
data, truth = cz.simulate_crowd(n_items=n_items, n_users=n_users, n_pairs=n_pairs, n_components=2,
                                s_t=1.0, s_v=1.0, s_w=1.0, seed=0)
train, test = cz.split_pairs(data, 0.2, seed=0)
print(f"{train.n_pairs} labels, {n_items} items, {n_users} users")

# %% [markdown]
# ## Fit: consensus + C = 4 components (more than the truth's 2)

# %%
model = cz.CrowdGPPL(n_components=4)
post = cz.fit(model, train, method="natgrad", max_iter=150 if FAST else 500, progress_bar=False)
t_mean, t_var = post.utilities()  # the consensus t
F_mean, _ = post.utilities(users=list(train.user_ids))  # personal utilities, items × users

# %% [markdown]
# ## Consensus against personal preferences
#
# The consensus recovers t; the personal utilities recover each user's F — which differs from the
# consensus as much as the users differ from each other.

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
axes[0].scatter(truth["t"], t_mean.to_numpy(), s=12)
axes[0].set_xlabel("true consensus t")
axes[0].set_ylabel("posterior mean")
r_t = np.corrcoef(truth["t"], t_mean.to_numpy())[0, 1]
axes[0].set_title(f"consensus (r = {r_t:.2f})")
F_true = truth["F"]
axes[1].scatter(F_true.ravel(), F_mean.to_numpy().ravel(), s=4, alpha=0.5)
r_F = np.corrcoef(F_true.ravel(), F_mean.to_numpy().ravel())[0, 1]
axes[1].set_xlabel("true personal F")
axes[1].set_title(f"personal utilities (r = {r_F:.2f})")
plt.show()

users = test.user_ids[test.users]
p_personal = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b], users=users)
p_consensus = post.predict_proba(test.item_ids[test.a], test.item_ids[test.b])
for name, p in (("personal", p_personal), ("consensus", p_consensus)):
    print(f"held-out accuracy, {name:9s} predictions: {np.mean((p > 0.5) == (test.y > 0.5)):.3f}")

# %% [markdown]
# ## What the components mean
#
# Each component c contributes var(v_c) · mean(w_c²) to the spread of personal utilities. With more
# components than the truth needs, the surplus ones are switched off (their scales shrink) — the
# paper's Fig. 3. The report plots this too.

# %%
dt = post.to_arviz(n_draws=200)
V = dt.posterior["V"].values.reshape(-1, *dt.posterior["V"].shape[2:])
W = dt.posterior["W"].values.reshape(-1, *dt.posterior["W"].shape[2:])
contrib = V.var(-1) * (W ** 2).mean(-1)
plt.figure(figsize=(5, 3))
plt.bar(np.arange(contrib.shape[1]), contrib.mean(0))
plt.xlabel("component")
plt.ylabel("var(v_c) · mean(w_c²)")
plt.show()
print("contribution per component:", np.round(contrib.mean(0), 3))

# %% [markdown]
# The components themselves are identified only up to sign and rotation (swap two and flip one:
# the same F); compare predictions and contributions, not v_c one by one. The notebook
# *Diagnosing a posterior* shows what that does to r̂.
