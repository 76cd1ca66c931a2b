"""collabGP's ArviZ converter."""
from __future__ import annotations

import functools

import numpy as np
import torch
from torch.special import log_ndtr

from ...diagnostics.arviz import chain_shape, finish


def to_arviz(post, n_draws: int = 500, seed: int = 0):
    """collabGP: posterior W (user, latent) and H (latent, pair) at the training pairs, whose ids
    are "a|b" (oriented lo < hi in the data's item order); log-likelihood and replicated labels per
    label. W and H are identified only up to sign and rotation (read diagnostics on g, the
    length-scales and predictions); ``lengthscale`` (dim) and ``user_lengthscale`` (user_dim), when
    those were inferred under a prior, are identified. ``optimisation`` holds EP's largest change of a
    mean of g per sweep."""
    sample_based = post.a_cov is None
    n = post.weights.shape[0] if sample_based else n_draws
    chains = post.n_chains if sample_based else 1
    dr = post.sample(n, seed=seed)
    st = post.setup
    g = (dr["w"][:, st.u, :] * dr["h"][:, :, st.z].transpose(1, 2)).sum(-1)  # (n, L), oriented lo < hi
    loglik = log_ndtr(st.t * g)
    gen = torch.Generator().manual_seed(seed + 1)
    t_rep = torch.where(torch.rand(g.shape, generator=gen, dtype=g.dtype) < torch.special.ndtr(g), 1.0, -1.0)
    orient = st.t * (2.0 * torch.as_tensor(post.data.y) - 1.0)  # +1 where the label's a is the pair's lo
    y_rep = (t_rep * orient > 0).to(torch.int64)  # 1 = a ≻ b, as in the data

    shape = functools.partial(chain_shape, chains=chains)

    ids = np.asarray(post.data.item_ids)
    P = st.pairs.numpy()
    coords = {"user": np.asarray(post.data.user_ids), "latent": np.arange(st.D),
              "pair": np.array([f"{ids[i]}|{ids[j]}" for i, j in P]), "label": np.arange(st.L)}
    dims = {"W": ["user", "latent"], "H": ["latent", "pair"], "y": ["label"]}
    posterior = {"W": shape(dr["w"]), "H": shape(dr["h"])}
    identified = []
    for name, dim in (("lengthscale", "dim"), ("user_lengthscale", "user_dim")):
        if name in dr:  # one ℓ per draw, identified (unlike W and H)
            posterior[name] = shape(dr[name])
            coords[dim] = np.arange(dr[name].shape[1])
            dims[name] = [dim]
            identified.append(name)
    groups = {"posterior": posterior,
              "posterior_predictive": {"y": shape(y_rep)}, "log_likelihood": {"y": shape(loglik)},
              "observed_data": {"y": post.data.y.astype(np.int64)}}
    return finish(post, groups, coords, dims, "label", identified=" ".join(identified))
