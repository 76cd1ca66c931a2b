"""Save and load fitted posteriors without unpickling arbitrary objects.

A posterior is written with ``torch.save`` as a dict of tensors, numbers, strings and lists only,
and read back with ``torch.load(weights_only=True)``; the model is rebuilt from its settings.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .data import PairwiseData
from .errors import DataError
from .linalg import DTYPE

FORMAT = "crowdzoo-posterior/1"


def _prior_to_dict(d):
    if d is None:
        return None
    params = {k: getattr(d, k).tolist() for k in d.arg_constraints if hasattr(d, k)}
    return {"class": type(d).__name__, "module": type(d).__module__, "params": params}


def _prior_from_dict(spec):
    if spec is None:
        return None
    import pyro.distributions as dist

    cls = getattr(dist, spec["class"], None)
    if cls is None:
        raise DataError(f"load: cannot rebuild prior distribution {spec['class']!r}")
    return cls(**{k: torch.tensor(v, dtype=DTYPE) for k, v in spec["params"].items()})


def _ids(x):
    x = np.asarray(x)
    return x.tolist()


_CROWD_TENSORS = ("weights", "t_m", "v_m", "w_m", "s_t", "s_v", "s_w", "t_cov", "v_cov", "w_cov")


def save_posterior(post, path) -> None:
    model = post.model
    if model.name == "crowdgppl":
        return _save_crowd(post, path)
    cfg = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    if cfg.get("s_prior") is not None:
        cfg["s_prior"] = _prior_to_dict(cfg["s_prior"])
    if cfg.get("lengthscale") is not None:
        cfg["lengthscale"] = np.asarray(cfg["lengthscale"], dtype=float).tolist()
    data = post.data
    state = {
        "format": FORMAT,
        "model": {"name": model.name, "config": cfg},
        "method": post.method,
        "setup": {"kernel": post.setup.kernel.name, "lengthscale": post.setup.kernel.lengthscale,
                  "Z": post.setup.Z, "exact": post.setup.exact},
        "posterior": {"weights": post.weights, "means": post.means, "covs": post.covs,
                      "s": post.s, "s_shape": post.s_shape, "s_rate": post.s_rate,
                      "n_chains": post.n_chains},
        "data": {"a": torch.as_tensor(data.a), "b": torch.as_tensor(data.b),
                 "y": torch.as_tensor(data.y), "item_features": torch.as_tensor(data.item_features),
                 "item_ids": _ids(data.item_ids),
                 "users": None if data.users is None else torch.as_tensor(data.users),
                 "user_ids": None if data.user_ids is None else _ids(data.user_ids)},
        "trace": {k: torch.as_tensor(np.asarray(v)) for k, v in post.trace.items()},
        "sample_stats": {k: torch.as_tensor(np.asarray(v)) for k, v in post.sample_stats.items()},
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in post.settings.items()},
    }
    torch.save(state, path)


def _data_dict(data):
    return {"a": torch.as_tensor(data.a), "b": torch.as_tensor(data.b), "y": torch.as_tensor(data.y),
            "item_features": torch.as_tensor(data.item_features), "item_ids": _ids(data.item_ids),
            "users": None if data.users is None else torch.as_tensor(data.users),
            "user_features": None if data.user_features is None else torch.as_tensor(data.user_features),
            "user_ids": None if data.user_ids is None else _ids(data.user_ids)}


def _data_from(d):
    uf = d.get("user_features")
    return PairwiseData(a=d["a"].numpy(), b=d["b"].numpy(), y=d["y"].numpy(),
                        item_features=d["item_features"].numpy(),
                        users=None if d["users"] is None else d["users"].numpy(),
                        user_features=None if uf is None else uf.numpy(), item_ids=np.asarray(d["item_ids"]),
                        user_ids=None if d["user_ids"] is None else np.asarray(d["user_ids"]))


def _save_crowd(post, path) -> None:
    model = post.model
    cfg = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    for k in ("lengthscale", "user_lengthscale"):
        if cfg.get(k) is not None:
            cfg[k] = np.asarray(cfg[k], dtype=float).reshape(-1).tolist()

    def side(s):
        return None if s is None else {"kernel": s.kernel.name, "lengthscale": s.kernel.lengthscale,
                                       "Z": s.Z, "exact": s.exact}

    state = {
        "format": FORMAT, "model": {"name": model.name, "config": cfg}, "method": post.method,
        "setup": {"items": side(post.setup.items), "users": side(post.setup.users)},
        "posterior": {k: getattr(post, k) for k in _CROWD_TENSORS},
        "gamma": {k: [v[0], v[1]] for k, v in post.gamma.items()}, "n_chains": post.n_chains,
        "data": _data_dict(post.data),
        "trace": {k: torch.as_tensor(np.asarray(v)) for k, v in post.trace.items()},
        "sample_stats": {k: torch.as_tensor(np.asarray(v)) for k, v in post.sample_stats.items()},
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in post.settings.items()},
    }
    torch.save(state, path)


def _load_crowd(state):
    from .models.crowdgppl import CrowdGPPL
    from .models.gppl import GPPLSetup
    from .models.kernels import Kernel
    from .posterior_crowd import CrowdGPPLPosterior

    model = CrowdGPPL(**state["model"]["config"])
    data = _data_from(state["data"])
    setup = model.setup(data)

    def side(spec, X):
        if spec is None:
            return None
        X = X if spec["kernel"] != "identity" else torch.arange(X.shape[0], dtype=DTYPE)[:, None]
        Z = X if spec["exact"] else spec["Z"]
        return GPPLSetup.build(Kernel(spec["kernel"], spec["lengthscale"]), X, Z, None, model.jitter,
                               exact=spec["exact"])

    st = state["setup"]
    setup.items = side(st["items"], torch.as_tensor(data.item_features, dtype=DTYPE))
    setup.users = side(st["users"], None if data.user_features is None
                       else torch.as_tensor(data.user_features, dtype=DTYPE))
    return CrowdGPPLPosterior(model=model, setup=setup, data=data, method=state["method"],
                              **state["posterior"], gamma={k: tuple(v) for k, v in state["gamma"].items()},
                              n_chains=state["n_chains"],
                              trace={k: v.numpy() for k, v in state["trace"].items()},
                              sample_stats={k: v.numpy() for k, v in state["sample_stats"].items()},
                              settings=state["settings"])


def load(path):
    """Load a posterior written by ``posterior.save(path)``; predictions are identical."""
    from .models.gppl import GPPL, GPPLSetup
    from .models.kernels import Kernel
    from .posterior import GPPLPosterior

    state = torch.load(path, weights_only=True)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise DataError(f"load: {path} is not a crowdzoo posterior ({FORMAT})")
    if state["model"]["name"] == "crowdgppl":
        return _load_crowd(state)
    cfg = dict(state["model"]["config"])
    cfg["s_prior"] = _prior_from_dict(cfg.get("s_prior"))
    model = GPPL(**cfg)
    d = state["data"]
    data = PairwiseData(a=d["a"].numpy(), b=d["b"].numpy(), y=d["y"].numpy(),
                        item_features=d["item_features"].numpy(),
                        users=None if d["users"] is None else d["users"].numpy(),
                        user_features=None, item_ids=np.asarray(d["item_ids"]),
                        user_ids=None if d["user_ids"] is None else np.asarray(d["user_ids"]))
    st = state["setup"]
    X = d["item_features"].to(DTYPE)
    Z = X if st["exact"] else st["Z"]
    setup = GPPLSetup.build(Kernel(st["kernel"], st["lengthscale"]), X, Z, model.prior_s(),
                            model.jitter, exact=st["exact"])
    p = state["posterior"]
    return GPPLPosterior(model=model, setup=setup, data=data, method=state["method"],
                         weights=p["weights"], means=p["means"], covs=p["covs"], s=p["s"],
                         s_shape=p["s_shape"], s_rate=p["s_rate"], n_chains=p["n_chains"],
                         trace={k: v.numpy() for k, v in state["trace"].items()},
                         sample_stats={k: v.numpy() for k, v in state["sample_stats"].items()},
                         settings=state["settings"])
