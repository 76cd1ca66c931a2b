"""Inference routes, one module per algorithm, behind one entry point :func:`fit`."""
from __future__ import annotations

from ..data import PairwiseData
from ..errors import DataError

ROUTES = ("natgrad", "svi", "nuts", "ep", "map")


def fit(model, data: PairwiseData, method: str = "natgrad", seed: int = 0, **settings):
    """Fit ``model`` to ``data`` by ``method`` and return its posterior.

    Methods: ``"natgrad"`` (the paper's natural-gradient SVI, Alg. 1), ``"svi"`` (Pyro SVI with
    any guide), ``"nuts"`` (Pyro NUTS; small problems), ``"ep"`` (expectation propagation);
    ``"map"`` for the crowdBT–GP baseline. collabGP's ``"ep"`` is the paper's EP + VB.
    ``settings`` go to the route (see ``crowdzoo.inference.<route>.fit_<route>``).
    """
    if not isinstance(data, PairwiseData):
        raise DataError(f"data: expected a crowdzoo.PairwiseData, got {type(data).__name__} "
                        "(build one with PairwiseData.from_arrays or .from_frame)")
    if method not in ROUTES:
        raise DataError(f"method: unknown route {method!r}; choose one of {list(ROUTES)}")
    if getattr(model, "name", None) == "gppl-per-user":
        if method != "natgrad":
            raise DataError("method: GPPL-per-user is fitted by 'natgrad' (batched over users), "
                            f"not {method!r}")
        from .natgrad_per_user import fit_natgrad_per_user

        return fit_natgrad_per_user(model, data, seed=seed, **settings)
    if getattr(model, "name", None) == "collabgp":
        if method not in ("ep", "svi", "nuts"):
            raise DataError(f"method: collabGP is fitted by 'ep' (the paper's EP + VB), 'svi' or "
                            f"'nuts', not {method!r}")
        if method == "ep":
            from .ep_collab import fit_ep_collab

            return fit_ep_collab(model, data, seed=seed, **settings)
    if (method == "map") != (getattr(model, "name", None) == "crowdbt-gp"):
        raise DataError("method: 'map' is the route of CrowdBTGP (crowdBT MAP, then GP regression), "
                        "and CrowdBTGP has no other")
    if getattr(model, "name", None) == "crowdbt-gp":
        from .crowdbt_gp import fit_crowdbt_gp

        return fit_crowdbt_gp(model, data, seed=seed, **settings)
    crowd = getattr(model, "name", None) == "crowdgppl"
    if crowd and method == "ep":
        raise DataError("method: crowdGPPL has no EP route (the paper's routes are natgrad; "
                        "svi and nuts are the comparisons); choose 'natgrad', 'svi' or 'nuts'")
    if method == "natgrad" and crowd:
        from .natgrad_crowd import fit_natgrad_crowd as route
    elif method == "natgrad":
        from .natgrad import fit_natgrad as route
    elif method == "svi":
        from .svi import fit_svi as route
    elif method == "nuts":
        from .mcmc import fit_nuts as route
    else:
        from .ep import fit_ep as route
    return route(model, data, seed=seed, **settings)


__all__ = ["fit", "ROUTES"]
