"""Table 2 of Simpson & Gurevych (2020): personal preferences on the Sushi data (§5.2).

Protocols (``--data-dir`` holds Kamishima's files; see :mod:`crowdzoo.data.sushi`):

* ``sushi-a-small``: Set A (10 items), 100 random users, 5 training + 25 test pairs each;
* ``sushi-a``: Set A, 100 random users, 20 + 25 pairs each;
* ``sushi-b``: Set B (100 items), all users, 10 + 1 pairs each;
* ``dpm-sushi-a``: the ``sushi-a`` protocol with a DPM communities row (the paper's
  model, ``DPMCommunities(item_residual=False)``, otherwise defaults, Gibbs, 300 sweeps with 100
  burn-in × 2 chains; quick 100 / 50) beside crowdGPPL (both natgrads), GPPL, GPPL-per-user and
  collabGP; the DPM is not in the paper, so its row has no paper value.

Methods as in Table 2: crowdGPPL (C = 20, the paper's linearised natgrad, and our exact-likelihood
natgrad as an extra row) and its variants ``\\inducing``, ``\\u``, ``\\u\\x``, ``\\u\\t``, GPPL
pooled over users, GPPL-per-user; ε = 1, r = 0.9, P_i = 200 (A) / 2000 (B); priors Gamma(1, 100)
for GPPL and t, Gamma(1, 10) for v and w (§5.2). M = 25 inducing items (all 10 items on Set A),
M_u = 25 inducing users. Metrics on the test pairs of each user: accuracy, cross-entropy error
(CEE) and Kendall τ between the user's predicted utilities and their full ranking of 10 items,
averaged over users. collabGP and collabGP\\u (Houlsby et al. 2012; D = 20, P₀ = U₀ = 25
pseudo-inputs, EP + VB) give pairwise predictions but no utilities, so they have no τ (as in the
paper). GPVU is not in the zoo.

Differences from the paper, said here so that the numbers are read right: the paper gives
crowdGPPL a Matérn user kernel on 10 of its 20 components and the identity on the other 10; our
CrowdGPPL uses one user kernel for all components (``\\u`` is the identity on all). Set A's items
are mapped to their own rows of ``sushi3.idata`` (ids 0–4, 6, 7, 8, 26, 29), not to rows 0–9.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics
from ._paper import PaperComparison

PROTOCOLS = {"sushi-a-small": ("a", 100, 5, 25, 200), "sushi-a": ("a", 100, 20, 25, 200),
             "sushi-b": ("b", None, 10, 1, 2000), "dpm-sushi-a": ("a", 100, 20, 25, 200)}
# dpm-sushi-a: the sushi-a protocol with a DPM row beside these
DPM_ROWS = ("DPM (gibbs)", "crowdGPPL", "crowdGPPL (exact natgrad)", "GPPL", "GPPL-per-user", "collabGP")
# Table 2 of the paper (acc, CEE, τ), the rows DESIGN.md lists; None where not listed
PAPER = {
    "sushi-a-small": {"crowdGPPL": (.71, .56, .48), "GPPL": (.65, .62, .31),
                      "GPPL-per-user": (.67, .64, .42), "collabGP": (.69, .58, None)},
    "sushi-a": {"crowdGPPL": (.84, .33, .79), "GPPL-per-user": (.83, .40, .79), "collabGP": (.83, .35, None)},
    "sushi-b": {"crowdGPPL": (.76, .50, .54), "crowdGPPL\\u": (.78, .50, .57),
                "GPPL-per-user": (.75, .60, .60), "collabGP": (.76, .49, None)},
}


def methods(batch_size: int, n_inducing: int = 25, quick: bool = False):
    """name → (model, fit keyword arguments) for the rows of Table 2."""
    import crowdzoo as cz

    C = 5 if quick else 20
    crowd = dict(n_components=C, n_inducing=n_inducing, n_inducing_users=25, shape_t0=1, rate_t0=100,
                 shape_v0=1, rate_v0=10, shape_w0=1, rate_w0=10, item_residual=False)
    ng = dict(batch_size=batch_size, max_iter=60 if quick else 500, likelihood="linearised",
              learn_kernel=False)  # the paper's: the median heuristic
    gppl = dict(n_inducing=n_inducing, shape_s0=1.0, rate_s0=100.0, item_residual=False)
    collab = cz.CollabGP.paper(n_latent=5 if quick else 20)  # the paper's
    return {
        "crowdGPPL": (cz.CrowdGPPL(**crowd), ng),
        "crowdGPPL (exact natgrad)": (cz.CrowdGPPL(**crowd), {**ng, "likelihood": "exact"}),
        "crowdGPPL\\inducing": (cz.CrowdGPPL(**crowd).variant("\\inducing"), ng),
        "crowdGPPL\\u": (cz.CrowdGPPL(**crowd).variant("\\u"), ng),
        "crowdGPPL\\u\\x": (cz.CrowdGPPL(**crowd).variant("\\u\\x"), ng),
        "crowdGPPL\\u\\t": (cz.CrowdGPPL(**crowd).variant("\\u\\t"), ng),
        "GPPL": (cz.GPPL(**gppl), ng),
        "GPPL-per-user": (cz.GPPLPerUser(**gppl), {"max_iter": ng["max_iter"]}),
        "collabGP": (collab, {"method": "ep"}),
        "collabGP\\u": (collab.variant("\\u"), {"method": "ep"}),
        "DPM (gibbs)": (cz.DPMCommunities(item_residual=False),  # dpm-sushi-a only; the paper's model
                        {"method": "gibbs", "n_chains": 2, "n_sweeps": 100 if quick else 300,
                         "burn_in": 50 if quick else 100}),
    }


def personal_tau(F: np.ndarray, item_ids, orders: np.ndarray) -> float:
    """Mean over users of Kendall τ_b between predicted utilities F (items × users, rows in
    ``item_ids`` order) and each user's ranking (U, 10), best first — over all users at once
    (the ranking has no ties, so τ_b = Σ sign(Δgold)·sign(Δpred) / √(n₀ (n₀ − ties in pred)))."""
    pos = np.searchsorted(item_ids, orders)  # item_ids are sorted (np.unique)
    util = np.take_along_axis(F.T, pos, axis=1)  # (U, 10) predicted utility in ranked order
    hi, lo = np.triu_indices(orders.shape[1], k=1)  # position hi ranks above position lo
    agree = np.sign(util[:, hi] - util[:, lo])
    n0 = hi.size
    ties = (agree == 0).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = agree.sum(1) / np.sqrt(n0 * (n0 - ties))
    return float(np.nanmean(tau))


def run_one(seed: int, name: str, data_dir=None, quick: bool = False) -> pd.DataFrame:
    import crowdzoo as cz

    from ..data.sushi import load_sushi, sample_pairs

    variant, n_users, n_train, n_test, P_i = PROTOCOLS[name]
    sushi = load_sushi(data_dir, variant)
    if quick:
        n_users = min(n_users or 40, 40)
    # the same users and pairs for every method; with or without the user features
    split = {uf: sample_pairs(sushi, n_users, n_train, n_test, seed=seed, user_features=uf)
             for uf in (True, False)}
    rows = []
    for method, (model, kw) in methods(P_i, quick=quick).items():
        if not (method in DPM_ROWS if name == "dpm-sushi-a" else method != "DPM (gibbs)"):
            continue
        train, test, orders = split[not method.startswith(("crowdGPPL\\u", "GPPL"))]
        kw = {"method": "natgrad", **kw}
        post = cz.fit(model, train, seed=seed, progress_bar=False, **kw)
        ids, users = test.item_ids, test.user_ids
        a, b = ids[test.a], ids[test.b]
        if method == "GPPL":
            p = post.predict_proba(a, b)
            F = np.repeat(post.utilities()[0].to_numpy()[:, None], len(users), axis=1)
        else:
            p = post.predict_proba(a, b, users=users[test.users])
            F = None if method.startswith("collabGP") else post.utilities(users=users)[0].to_numpy()
        vals = {"acc": metrics.accuracy(test.y, p), "CEE": metrics.cross_entropy(test.y, p)}
        if F is not None:
            vals["tau"] = personal_tau(F, ids, orders)
        rows += [{"seed": seed, "dataset": name, "method": method, "metric": k, "value": v}
                 for k, v in vals.items()]
    return pd.DataFrame(rows)


NOTE = "{n} repeat(s); the paper's are means over 25 repeats."
sushi_a_small, sushi_a, sushi_b = (
    PaperComparison(name, run_one, PAPER[name], NOTE, missing="not in the zoo", needs_data_dir=True)
    for name in list(PROTOCOLS)[:3])
dpm_sushi_a = PaperComparison("dpm-sushi-a", run_one, PAPER["sushi-a"],
                              NOTE + " The DPM row is not in the paper.", missing="not in the zoo",
                              needs_data_dir=True)
