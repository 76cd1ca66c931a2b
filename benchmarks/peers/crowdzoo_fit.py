"""crowdzoo's side of the peers benchmark: one configuration fit in this process (run by crowdzoo's
.venv/bin/python; see run_peers.py).

``--config`` is a JSON object {"model": "GPPL", "BradleyTerry" or "CrowdGPPL", "model_kwargs": {...},
"fit_kwargs": {...}} and, on a problem with ties, "ties": "model" or "half" (how
``PairwiseData.from_frame`` reads them); the fit timed is ``cz.fit(cz.<model>(**model_kwargs), train,
seed=0, **fit_kwargs)`` (with ``progress_bar=False`` where the route has a progress bar) on the
problem's training pairs (items' features, and the users for CrowdGPPL; GPPL pools a crowd's
labels). Held-out probabilities: ``predict_proba`` (a crowd model's personal prediction for each
held-out label's user, GPPL's pooled one); with ties, the three outcomes' probabilities,
``predict_outcomes`` of a tie model, or a "half" fit's P(a ≻ b) with the training share t of ties
as its tie rate, ((1 − t) p, t, (1 − t)(1 − p)); item scores: the posterior mean of the utilities
(crowdGPPL's consensus t). An option the installed crowdzoo does not take raises TypeError, which
the harness reports as "not available".
"""
from __future__ import annotations

import numpy as np
import torch  # noqa: F401 — imported first so that child.main sets its thread count
from child import main


def _data(cz, prob, config, crowd):
    """The training labels: pairs, or, with ``config["ties"]`` ("model", "half"), labels with ties read
    by ``PairwiseData.from_frame(..., ties=...)`` with the items' features."""
    import pandas as pd

    if "ties" in config:
        frame = pd.DataFrame({"a": prob["a"], "b": prob["b"], "y": prob["y"]})
        items = pd.DataFrame(prob["X"], columns=[f"x{j}" for j in range(prob["X"].shape[1])])
        return cz.PairwiseData.from_frame(frame, items, ties=config["ties"])
    users = {"users": prob["users"], "user_features": prob["U"]} if crowd else {}
    return cz.PairwiseData.from_arrays(prob["a"], prob["b"], prob["y"], prob["X"], **users)


def fit(prob, config):
    import crowdzoo as cz
    from crowdzoo.zoo import entry_for, route_settings

    crowd = config["model"] not in ("GPPL", "BradleyTerry")
    data = _data(cz, prob, config, crowd)
    model = getattr(cz, config["model"])(**config.get("model_kwargs", {}))
    fit_kwargs = dict(config.get("fit_kwargs", {}))
    e = entry_for(model)  # import the route and posterior modules before the clock starts
    route = e.route(fit_kwargs.get("method", e.default))
    if "progress_bar" in route_settings(route):  # a route with a progress bar: off
        fit_kwargs["progress_bar"] = False
    e.posterior_class()
    import sklearn.cluster  # noqa: F401 — imported by the first k-means++ of inducing points: an import, not the fit

    def fit():
        post = cz.fit(model, data, seed=0, **fit_kwargs)
        return lambda: predict(post)

    def predict(post):
        ids = data.item_ids
        at, bt = ids[prob["at"]], ids[prob["bt"]]
        if crowd:
            p = post.predict_proba(at, bt, users=data.user_ids[prob["users_t"]])
        elif "ties" in config and getattr(post, "tau", None) is not None:  # a tie model: three outcomes
            p = post.predict_outcomes(at, bt).to_numpy()
        elif "ties" in config:  # ties as half labels: the training share of ties as the tie rate
            t = float(np.mean(prob["y"] == 0.5))
            q = post.predict_proba(at, bt)
            p = np.column_stack([(1 - t) * q, np.full_like(q, t), (1 - t) * (1 - q)])
        else:
            p = post.predict_proba(at, bt)
        keys = ("iterations", "converged", "learned_lengthscale", "lengthscale")
        notes = {k: post.settings[k] for k in keys if k in post.settings}
        if getattr(post, "tau", None) is not None:
            notes["tau"] = float(post.tau.mean())
        return np.asarray(p), post.utilities()[0].to_numpy(), _plain(notes)

    return fit


def _plain(obj):
    """JSON-able copy (tensors and arrays to lists, numbers rounded)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, 4)
    return obj


if __name__ == "__main__":
    main({"fit": fit})
