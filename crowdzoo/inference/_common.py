"""Small pieces every route shares: tensors from data, progress bars, NaN checks."""
from __future__ import annotations

import sys

import torch
from tqdm.auto import tqdm

from ..errors import NumericalError
from ..linalg import DTYPE


def label_tensors(data):
    """(a, b, y) of a PairwiseData as torch tensors (long, long, float64), sharing memory with
    the data's own arrays when their dtypes allow (the labels are held once, not copied)."""
    def view(x, dtype):
        t = torch.from_numpy(x) if x.flags.writeable else torch.tensor(x)
        return t.to(dtype)

    return view(data.a, torch.long), view(data.b, torch.long), view(data.y, DTYPE)


def progress(total: int, desc: str, enabled: bool | None):
    """A tqdm bar; shown by default only when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def check_finite(value: float, what: str, step: int, advice: str) -> None:
    if value != value or value in (float("inf"), float("-inf")):
        raise NumericalError(f"{what} became {value} at iteration {step}. Try: {advice}")


def is_crowd(model) -> bool:
    return getattr(model, "name", None) == "crowdgppl"


def is_collab(model) -> bool:
    return getattr(model, "name", None) == "collabgp"


def model_setup(model, data, seed: int):
    """The model's fixed GP algebra for ``data`` (kernels, inducing inputs, projections)."""
    if is_crowd(model) or is_collab(model):
        return model.setup(data, seed=seed)
    return model.setup(data.item_features, seed=seed)


def pyro_program(model, setup, data, subsample_size=None):
    """(Pyro model function, its arguments) for ``data``."""
    if is_collab(model):
        from ..models.collabgp import collabgp_model

        return collabgp_model, (setup, subsample_size)
    a, b, y = label_tensors(data)
    if is_crowd(model):
        from ..models.crowdgppl import crowdgppl_model

        j = torch.from_numpy(data.users).long()
        return crowdgppl_model, (setup, a, b, j, y, subsample_size)
    from ..models.gppl import gppl_model

    return gppl_model, (setup, a, b, y, subsample_size)


def posterior_from_draws(model, setup, data, sites: dict, method: str, n_chains: int = 1, **kw):
    """A posterior whose components are the draws ``sites`` (name → (S, ...) tensors of the
    model's latent sites), each with weight 1/S."""
    S = next(iter(sites.values())).shape[0]
    weights = torch.full((S,), 1.0 / S, dtype=DTYPE)
    sites = {k: v.to(DTYPE) for k, v in sites.items()}
    if is_collab(model):
        return _collab_from_draws(model, setup, data, sites, method, n_chains, weights, **kw)
    if is_crowd(model):
        from ..models.crowdgppl import inducing_values
        from ..posterior_crowd import CrowdGPPLPosterior

        iv = inducing_values(setup, sites)
        return CrowdGPPLPosterior(model=model, setup=setup, data=data, method=method, weights=weights,
                                  t_m=iv.get("t_m"), v_m=iv["v_m"], w_m=iv["w_m"], s_t=iv.get("s_t"),
                                  s_v=iv["s_v"], s_w=iv["s_w"], n_chains=n_chains, **kw)
    from ..posterior import GPPLPosterior

    s = sites["s"]
    f_m = (sites["u"] @ setup.L_mm.T) / s.sqrt()[:, None]
    return GPPLPosterior(model=model, setup=setup, data=data, method=method, weights=weights, means=f_m,
                         covs=None, s=s, n_chains=n_chains, **kw)


def _collab_from_draws(model, setup, data, sites, method, n_chains, weights, **kw):
    """collabGP draws (a, and w or b [+ e_w]) as zero-covariance components."""
    from ..posterior_collab import CollabGPPosterior

    if "w" in sites:
        w = sites["w"]
    else:
        w = sites["b"] @ setup.Phi_w.T  # (S, D, U)
        w = w.transpose(1, 2)
        if "e_w" in sites:
            w = w + setup.delta_w.sqrt()[:, None] * sites["e_w"]
    return CollabGPPosterior(model=model, setup=setup, data=data, method=method, weights=weights,
                             a_mean=sites["a"], a_cov=None, w_mean=w, w_var=None, b_mean=sites.get("b"),
                             n_chains=n_chains, **kw)
