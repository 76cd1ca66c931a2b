"""crowdzoo's side of the peers benchmark: one configuration fit in this process (run by crowdzoo's
.venv/bin/python; see run_peers.py).

``--config`` is a JSON object {"model": "GPPL" or "CrowdGPPL", "model_kwargs": {...},
"fit_kwargs": {...}}; the fit timed is ``cz.fit(cz.<model>(**model_kwargs), train, seed=0,
progress_bar=False, **fit_kwargs)`` on the problem's training pairs (items' features, and the
users for CrowdGPPL; GPPL pools a crowd's labels). Held-out probabilities: ``predict_proba`` (a
crowd model's personal prediction for each held-out label's user, GPPL's pooled one); item scores:
the posterior mean of the utilities (crowdGPPL's consensus t). An option the installed crowdzoo
does not take raises TypeError, which the harness reports as "not available".
"""
from __future__ import annotations

import numpy as np
import torch  # noqa: F401 — imported first so that child.main sets its thread count
from child import main


def fit(prob, config):
    import crowdzoo as cz
    from crowdzoo.zoo import entry_for

    crowd = config["model"] != "GPPL"
    users = {"users": prob["users"], "user_features": prob["U"]} if crowd else {}
    data = cz.PairwiseData.from_arrays(prob["a"], prob["b"], prob["y"], prob["X"], **users)
    model = getattr(cz, config["model"])(**config.get("model_kwargs", {}))
    fit_kwargs = config.get("fit_kwargs", {})
    e = entry_for(model)  # import the route and posterior modules before the clock starts
    e.route(fit_kwargs.get("method", e.default))
    e.posterior_class()
    import sklearn.cluster  # noqa: F401 — imported by the first k-means++ of inducing points: an import, not the fit

    def fit():
        post = cz.fit(model, data, seed=0, progress_bar=False, **fit_kwargs)
        return lambda: predict(post)

    def predict(post):
        ids = data.item_ids
        at, bt = ids[prob["at"]], ids[prob["bt"]]
        if crowd:
            p = post.predict_proba(at, bt, users=data.user_ids[prob["users_t"]])
        else:
            p = post.predict_proba(at, bt)
        keys = ("iterations", "converged", "learned_lengthscale", "lengthscale")
        notes = {k: post.settings[k] for k in keys if k in post.settings}
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
