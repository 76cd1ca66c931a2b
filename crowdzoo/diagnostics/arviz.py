"""The parts of every model's ArviZ converter (arviz-base ``from_dict``); each model's own converter
lives in its package (``crowdzoo/models/<name>/arviz.py``).

Groups: ``posterior`` (f over items, s), ``posterior_predictive`` (replicated labels),
``observed_data``, ``constant_data`` (the two items and the user of each label, as the user's own
ids, and each label's weight where the labels are weighted), ``log_likelihood`` (per label, the
label's own log p(y_p | θ): a label of weight w enters the data's log-likelihood as w times that
value, so that Σ_p w_p log p(y_p | θ) is the weighted fit's, and PSIS-LOO over this group leaves out
one label at a time, whatever its weight), ``sample_stats`` (NUTS: diverging, lp, tree_depth, energy)
and, for optimisation routes, ``optimisation`` (the loss, bound or EP's largest change per
iteration; GPPL's EP: the log evidence over its grid of s). Draws of an approximate route are
draws from the approximation: the root attribute ``approximate`` says so. Root attributes also
name the model, the route and the identified posterior variables (``identified``; W and V, W and H
of the factor models are identified only up to sign and rotation), and carry a SHA-256 checksum of
each part of the fitted data (``checksum_labels``, ``checksum_items``, ``checksum_users``,
``checksum_features``: :func:`data_checksums`), so that a comparison of two trees can tell whether
they were fitted to the same data.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch
from arviz_base import from_dict
from torch.special import log_ndtr

#: routes whose draws are Markov chains on the exact posterior (NUTS; the DPM's Gibbs + EP is exact in
#: its memberships but uses EP for each community's GP: its chains are still checked for mixing)
EXACT_SAMPLERS = ("nuts", "gibbs")


def chain_shape(x, chains=1):
    """(chains × draws, ...) tensor → (chain, draw, ...) array."""
    x = x.numpy()
    return x.reshape((chains, x.shape[0] // chains) + x.shape[1:])


def probit_labels(z, y, seed):
    """Per-label log-likelihood log Φ((2y − 1) z) and replicated labels y_rep ~ Bernoulli(Φ(z)) for
    the draws of z = f_a − f_b (draws, labels)."""
    g = torch.Generator().manual_seed(seed + 1)
    y_rep = (torch.rand(z.shape, generator=g, dtype=z.dtype) < torch.special.ndtr(z)).to(torch.int64)
    return log_ndtr((2 * torch.as_tensor(y) - 1) * z), y_rep


def outcome_labels(z, y, tau, link, seed):
    """Per-label log-likelihood of the three outcomes (a tie y = ½; :mod:`crowdzoo.gp.ordinal`) and
    replicated labels y_rep ∈ {0, ½, 1}, for the draws of z = f_a − f_b (draws, labels) and of the
    threshold τ (draws,)."""
    from ..gp.ordinal import outcome_codes, outcome_log_probs, sample_outcomes

    tau = torch.as_tensor(tau, dtype=z.dtype)
    tau = tau.reshape(-1, 1) if tau.dim() <= 1 else tau  # (draws, labels): a τ per label's user
    k = outcome_codes(torch.as_tensor(y)).expand(z.shape)
    loglik = outcome_log_probs(z, tau, link).gather(-1, k[..., None])[..., 0]
    return loglik, sample_outcomes(z, tau, link, torch.Generator().manual_seed(seed + 1))


def _sha(*parts) -> str:
    """SHA-256 of arrays (values, dtype and shape) and id lists (as text), in order; None parts count."""
    h = hashlib.sha256()
    for x in parts:
        if x is None:
            h.update(b"none;")
            continue
        x = np.asarray(x)
        if x.dtype.kind in "OUS":  # ids: their text, whatever their Python type
            h.update(("\x1f".join(map(str, x.ravel())) + f"|{x.shape};").encode())
        else:
            h.update(f"{x.dtype.str}{x.shape};".encode())
            h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def data_checksums(data) -> dict:
    """SHA-256 checksums of what a fit saw: ``labels`` (each label's items, user and outcome, as
    positions, and each label's weight where the labels are weighted), ``items`` and ``users`` (the ids,
    in order), ``features`` (item and user features).
    For choices: each row's set, best, worst and user. For links: the annotations (worker, i, j,
    same), item and worker ids, the observations O."""
    if hasattr(data, "a"):
        weights = () if getattr(data, "weights", None) is None else (data.weights,)
        return {"labels": _sha(data.a, data.b, data.users, data.y, *weights), "items": _sha(data.item_ids),
                "users": _sha(data.user_ids), "features": _sha(data.item_features, data.user_features)}
    if hasattr(data, "sets"):  # choices: each row's set, best and worst, and user
        return {"labels": _sha(data.sets, data.best, data.worst, data.users), "items": _sha(data.item_ids),
                "users": _sha(data.user_ids), "features": _sha(data.item_features, data.user_features)}
    return {"labels": _sha(data.worker, data.i, data.j, data.same), "items": _sha(data.item_ids),
            "users": _sha(data.worker_ids), "features": _sha(data.O)}


def choice_groups(f, data, link: str, seed: int, var=None):
    """Per-row log-likelihood of choices (best, and worst given the best where a row has one;
    :mod:`crowdzoo.gp.choice`) and replicated best (and worst) slots, for the draws of the items'
    utilities ``f`` (draws, N) (``var`` (draws, N): each item's integrated variance, or None).
    Returns (loglik, {"best": rep, ("worst": rep)}, {"best": observed, ("worst": observed)})."""
    from ..gp.choice import row_log_lik, sample_choices

    items = torch.as_tensor(data.sets).clamp_min(0)
    mask = torch.as_tensor(data.sets >= 0)
    fs, vs = f[:, items], None if var is None else var[:, items]
    best = torch.as_tensor(data.best)
    worst = None if data.worst is None else torch.as_tensor(data.worst)
    loglik = row_log_lik(fs, mask, best, worst, link, vs)
    gen = torch.Generator().manual_seed(seed + 1)
    b_rep, w_rep = sample_choices(fs, mask, link, gen, vs, worst is not None)
    rep, obs = {"best": b_rep}, {"best": data.best.copy()}
    if worst is not None:
        rep["worst"], obs["worst"] = w_rep, data.worst.copy()
    return loglik, rep, obs


def finish(post, groups, coords, dims, obs_dim, identified):
    """Constant data, sample stats (NUTS), root attributes and the optimisation trace, shared by
    every model."""
    d = post.data
    ids = np.asarray(d.item_ids)
    if hasattr(d, "a"):  # preferences: the two items (and user) of each label
        const = {"a": ids[d.a], "b": ids[d.b]}
        if d.users is not None:
            const["user"] = np.asarray(d.user_ids)[d.users]
        if getattr(d, "weights", None) is not None:
            const["weight"] = np.asarray(d.weights)
    elif hasattr(d, "sets"):  # choices: the item chosen as best (and the user) of each row
        const = {"chosen": ids[d.chosen_items]}
        if d.users is not None:
            const["user"] = np.asarray(d.user_ids)[d.users]
        # the items of each set as positions among the items (−1 after a row's last member): what the
        # choice-rate PPC maps replicated slots to items with
        const["set_item"] = np.asarray(d.sets, dtype=np.int64)
    else:  # links (LinkData): the two items and the worker of each annotation
        const = {"i": ids[d.i], "j": ids[d.j], "worker": np.asarray(d.worker_ids)[d.worker]}
    groups["constant_data"] = const
    dims.update({k: [obs_dim, "slot"] if k == "set_item" else [obs_dim] for k in const})
    if post.sample_stats:
        st = post.sample_stats
        groups["sample_stats"] = {"diverging": np.asarray(st["diverging"]),
                                  "lp": -np.asarray(st["potential_energy"])}
        for k in ("tree_depth", "energy"):
            if k in st:
                groups["sample_stats"][k] = np.asarray(st[k])
    # draws of a Markov chain that targets the posterior itself (r̂ and ESS apply to them)
    attrs = {"/": {"inference": post.method, "approximate": int(post.method not in EXACT_SAMPLERS),
                   "model": post.name, "identified": identified,
                   "max_tree_depth": int(post.settings.get("max_tree_depth", 0) or 0)}}
    attrs["/"].update({f"checksum_{k}": v for k, v in data_checksums(d).items()})
    converged = post.settings.get("converged", (post.trace or {}).get("converged"))
    if converged is not None:  # optimisation routes that stop on a tolerance
        attrs["/"]["converged"] = int(bool(converged))
    for k in ("elbo_rel_change", "elbo_rel_noise"):  # svi: how flat its ELBO was at the end
        if post.settings.get(k) is not None:
            attrs["/"][k] = float(post.settings[k])
    for k in ("learned_lengthscale", "start_lengthscale", "learned_s"):  # routes that learn the kernel
        if post.settings.get(k) is not None:
            attrs["/"][k] = np.asarray(post.settings[k], dtype=np.float64)
    dt = from_dict(groups, coords=coords, dims=dims, attrs=attrs)
    tr = post.trace or {}
    import xarray as xr

    if "bound" in tr and "bound_iteration" in tr:
        opt = xr.Dataset({"bound": ("iteration", np.asarray(tr["bound"]))},
                         coords={"iteration": np.asarray(tr["bound_iteration"])})
    elif "s_grid" in tr:
        opt = xr.Dataset({"log_evidence": ("s", np.asarray(tr["log_evidence"]))},
                         coords={"s": np.asarray(tr["s_grid"])})
    else:
        opt = xr.Dataset({k: ("iteration", np.asarray(v)) for k, v in tr.items()
                          if k in ("loss", "bound", "max_change", "elbo")})
    if opt.data_vars:
        dt["optimisation"] = xr.DataTree(opt)
    return dt
