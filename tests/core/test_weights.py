"""Every (model, route) of the zoo's table honours label weights. Fitted with one seed on its tiny
example with the labels weighted 1, 2, 3, 1, 2, 3, …, each route gives the predictions of the same
example with those labels written once, twice and three times: to round-off for the deterministic
routes (natgrad full-batch, ep, map, gibbs) and, since a weighted program draws the same random numbers
as the duplicated one, for svi and nuts too. Beside the examples: ties as a third outcome, the paper's
linearised likelihood, a sparse GP with the item residual, the DPM's joint membership rule and
collabGP's factorised EP; the order effect's posterior of δ; every model's Pyro program (with and
without length-scale priors, with the order effect) has the
duplicated data's log joint at the same latent values, and the weights follow a mini-batch; 10 wins and
10 ties as halves fit as 15 wins and 5 losses; counts per pair fit as the rows they count; a route
outside its entry's ``weights`` refuses weighted data; a weighted fit saves, loads and converts to
ArviZ with its weights."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.poutine.util import site_is_subsample

import crowdzoo as cz
from crowdzoo import zoo

#: quick settings of the generic engines (each example gives those of its model's own routes)
QUICK = {zoo.SVI: dict(num_steps=15, n_draws=12), zoo.MAP: dict(max_iter=50),
         zoo.NUTS: dict(num_samples=6, warmup_steps=6, num_chains=1, jit_compile=False, max_tree_depth=4)}
ROUTES = [(e.name, m) for e in zoo.ZOO if e.data != "links" for m in e.routes]
PATTERN = (1, 2, 3)


def weighted_and_duplicated(data):
    """(``data`` with the weights 1, 2, 3, 1, …, the same labels written 1, 2, 3, 1, … times)."""
    w = np.resize(PATTERN, data.n_pairs)
    duplicated = data.subset(np.repeat(np.arange(data.n_pairs), w))
    return dataclasses.replace(data, weights=w.astype(float)), duplicated


def _predict(post, data):
    users = {"users": data.user_ids[data.users]} if zoo.takes_users(zoo.entry(post.name)) else {}
    return post.predict_proba(data.item_ids[data.a], data.item_ids[data.b], **users)


def _same_fit(model, data, method, atol=1e-9, **settings):
    """Fit the weighted and the duplicated ``data`` with one seed and compare their predictions on
    ``data``'s pairs."""
    weighted, duplicated = weighted_and_duplicated(data)
    posts = [cz.fit(model, d, method=method, seed=1, check_confidence=False, **settings)
             for d in (weighted, duplicated)]
    p = [_predict(post, data) for post in posts]
    np.testing.assert_allclose(p[0], p[1], rtol=0, atol=atol)
    if posts[0].order_means is not None:  # the order effect δ's posterior too
        oe = [post.order_effect() for post in posts]
        assert oe[0] == pytest.approx(oe[1], rel=0, abs=atol), oe
    return posts


@pytest.mark.parametrize("name, method", ROUTES)
def test_every_route_fits_weighted_labels_as_the_duplicated_rows(name, method):
    e = zoo.entry(name)
    assert method in e.weights, f"{name}'s {method!r} route does not declare label weights"
    example = e.make_example(seed=0)
    _same_fit(example.model, example.data, method,
              **{**QUICK.get(e.routes[method], {}), **example.settings.get(method, {})})


def _ties(data, every: int = 4):
    """``data`` with every ``every``-th label a tie (y = ½, ``ties="model"``)."""
    y = data.y.copy()
    y[::every] = 0.5
    return dataclasses.replace(data, y=y)


NATGRAD = dict(max_iter=8, tol=0, progress_bar=False)


def _variants():
    gppl, crowd = zoo.entry("gppl").make_example().data, zoo.entry("crowdgppl").make_example().data
    return {
        "gppl natgrad, ties": (cz.GPPL(), _ties(gppl), "natgrad", NATGRAD),
        "gppl natgrad, linearised": (cz.GPPL(), gppl, "natgrad", dict(NATGRAD, learn_kernel=False,
                                                                       likelihood="linearised")),
        "gppl natgrad, sparse with the item residual": (cz.GPPL(n_inducing=4, item_residual=True), gppl,
                                                        "natgrad", NATGRAD),
        "gppl ep, ties": (cz.GPPL(), _ties(gppl), "ep", dict(n_grid=3, max_iter=30)),
        "gppl svi, ties": (cz.GPPL(), _ties(gppl), "svi", QUICK[zoo.SVI]),
        "crowdgppl natgrad, a tie threshold per user": (
            cz.CrowdGPPL(n_components=2, n_inducing=5, tie_threshold="per_user"), _ties(crowd), "natgrad",
            NATGRAD),
        "crowdgppl natgrad, linearised": (cz.CrowdGPPL(n_components=2, n_inducing=5), crowd, "natgrad",
                                          dict(NATGRAD, likelihood="linearised", learn_kernel=False)),
        "bradley-terry map, ties": (cz.BradleyTerry(), _ties(gppl), "map", QUICK[zoo.MAP]),
        "dpm gibbs, ties": (cz.DPMCommunities(), _ties(crowd), "gibbs", dict(n_sweeps=4, burn_in=1)),
        "dpm gibbs, joint rule": (cz.DPMCommunities(), crowd, "gibbs",
                                  dict(n_sweeps=3, burn_in=1, membership="joint")),
        "collabgp ep, factorised": (cz.CollabGP(n_latent=2), crowd, "ep",
                                    dict(max_iter=4, vb_sweeps=5, gp_factors="factorised")),
        "gppl natgrad, order effect": (cz.GPPL(order_effect=True), gppl, "natgrad", NATGRAD),
        "gppl natgrad, linearised, order effect": (
            cz.GPPL(order_effect=True), gppl, "natgrad",
            dict(NATGRAD, learn_kernel=False, likelihood="linearised")),
        "gppl ep, order effect": (cz.GPPL(order_effect=True), gppl, "ep", dict(n_grid=3, max_iter=30)),
        "crowdgppl natgrad, order effect": (
            cz.CrowdGPPL(n_components=2, n_inducing=5, order_effect=True), crowd, "natgrad", NATGRAD),
        "bradley-terry map, order effect": (cz.BradleyTerry(order_effect=True), gppl, "map", QUICK[zoo.MAP]),
    }


@pytest.mark.parametrize("case", list(_variants()))
def test_weights_reach_ties_and_the_other_paths_of_the_routes(case):
    model, data, method, settings = _variants()[case]
    _same_fit(model, data, method, atol=1e-8, **settings)


def _programs():
    """(model, data) for every model with a Pyro program: its example's, with ties where it models them,
    and with its length-scales under a prior where it has one."""
    prior = dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    out = {}
    for e in zoo.ZOO:
        if not any(e.is_generic(m) for m in e.routes):
            continue
        ex = e.make_example()
        out[e.name] = (ex.model, ex.data)
        if any(e.is_generic(m) for m in e.ties):
            out[f"{e.name}, ties"] = (ex.model, _ties(ex.data))
        if "lengthscale_prior" in {f.name for f in dataclasses.fields(ex.model)}:
            under = dataclasses.replace(ex.model, lengthscale_prior=prior)
            out[f"{e.name}, length-scales under a prior"] = (under, ex.data)
        if e.honours.get("order_effect"):
            out[f"{e.name}, order effect"] = (dataclasses.replace(ex.model, order_effect=True), ex.data)
    return out


@pytest.mark.parametrize("case", list(_programs()))
def test_each_program_has_the_duplicated_rows_log_joint(case):
    """At the latent values of one prior draw, the program on weighted labels and the program on the
    duplicated labels have one log joint (what svi's ELBO and nuts's potential are made of)."""
    model, data = _programs()[case]
    joints = []
    values = None
    for d in weighted_and_duplicated(data):
        setup = model.setup(d, seed=0)
        fn, args = model.program(setup, d, None)
        with pyro.poutine.block(), torch.no_grad():
            pyro.set_rng_seed(0)
            if values is None:  # one draw of every latent site, shared by both programs
                trace = pyro.poutine.trace(fn).get_trace(*args)
                values = {n: s["value"] for n, s in trace.nodes.items()
                          if s["type"] == "sample" and not s["is_observed"] and not site_is_subsample(s)}
            trace = pyro.poutine.trace(pyro.poutine.condition(fn, data=values)).get_trace(*args)
        joints.append(float(trace.log_prob_sum()))
    assert joints[0] == pytest.approx(joints[1], rel=1e-12, abs=1e-9)


def test_a_mini_batch_scales_each_label_by_its_weight():
    """Under subsampling the observed site's scale is P / P_i times the weights of the batch's labels."""
    data = zoo.entry("gppl").make_example().data
    weighted, _ = weighted_and_duplicated(data)
    model = cz.GPPL()
    fn, args = model.program(model.setup(weighted), weighted, subsample_size=7)
    pyro.set_rng_seed(0)
    trace = pyro.poutine.trace(fn).get_trace(*args)
    idx = trace.nodes["pairs"]["value"]
    expected = data.n_pairs / 7 * torch.as_tensor(weighted.weights)[idx]
    torch.testing.assert_close(trace.nodes["y"]["scale"], expected)


def test_ties_as_halves_fit_as_their_wins_and_losses():
    """10 wins and 10 ties, the ties as halves (½ + ½), fit as 15 wins and 5 losses: P(a ≻ b) agrees."""
    pairs = pd.DataFrame({"a": ["p", "q", "r", "p"], "b": ["q", "r", "s", "s"]})
    with_ties = pairs.assign(wins=[10, 4, 2, 6], losses=[0, 3, 1, 2], tied=[10, 2, 4, 0])
    halves = cz.PairwiseData.from_counts(with_ties, tied="tied", ties="half")
    decided = cz.PairwiseData.from_counts(with_ties.assign(wins=with_ties.wins + with_ties.tied / 2,
                                                           losses=with_ties.losses + with_ties.tied / 2),
                                          tied=None)
    assert decided.n_pairs == 8 and halves.n_pairs == 13
    for model, method, kw in ((cz.BradleyTerry(), "map", {}), (cz.GPPL(), "ep", dict(n_grid=5))):
        p = [cz.fit(model, d, method=method, check_confidence=False, **kw).predict_proba(pairs.a, pairs.b)
             for d in (halves, decided)]
        np.testing.assert_allclose(p[0], p[1], rtol=0, atol=1e-9)


def test_counts_fit_as_the_rows_they_count():
    """A frame of counts per pair (and user) and the frame with one row per label give one posterior,
    ties modelled as a third outcome."""
    counts = pd.DataFrame({"a": ["p", "q", "r", "p", "q"], "b": ["q", "r", "s", "s", "s"],
                           "rater": ["u1", "u1", "u2", "u2", "u1"], "wins": [3, 2, 0, 1, 2],
                           "losses": [1, 0, 2, 1, 1], "tied": [1, 0, 1, 2, 0]})
    rows = [(r.a, r.b, r.rater, y) for r in counts.itertuples()
            for y, n in ((1.0, r.wins), (0.0, r.losses), (0.5, r.tied)) for _ in range(n)]
    long = pd.DataFrame(rows, columns=["a", "b", "rater", "y"])
    data = [cz.PairwiseData.from_counts(counts, tied="tied", ties="model", user="rater"),
            cz.PairwiseData.from_frame(long, ties="model", user="rater")]
    for model, method, kw in ((cz.BradleyTerry(), "map", {}),
                              (cz.CrowdGPPL(n_components=2), "natgrad", dict(NATGRAD))):
        posts = [cz.fit(model, d, method=method, seed=0, check_confidence=False, **kw) for d in data]
        users = {"users": counts.rater} if method == "natgrad" else {}
        out = [post.predict_outcomes(counts.a, counts.b, **users).to_numpy() for post in posts]
        np.testing.assert_allclose(out[0], out[1], rtol=0, atol=1e-9)


def test_a_route_without_label_weights_refuses_weighted_data():
    e = dataclasses.replace(zoo.entry("bradley-terry"), weights=("svi",))
    weighted, duplicated = weighted_and_duplicated(zoo.entry("bradley-terry").make_example().data)
    zoo._check_data(e, duplicated, "map")  # no weights: taken
    zoo._check_data(e, weighted, "svi")
    with pytest.raises(cz.DataError, match=r"weights: row 1: a label of weight 2, and bradley-terry's 'map' "
                                           r"route does not take label weights: fit it with method='svi'"):
        zoo._check_data(e, weighted, "map")
    with pytest.raises(cz.DataError, match="weights: bradley-terry has no route 'gibbs'"):
        dataclasses.replace(e, weights=("gibbs",))


def test_a_weighted_fit_saves_loads_and_converts_with_its_weights(tmp_path):
    data = zoo.entry("bradley-terry").make_example().data
    weighted, _ = weighted_and_duplicated(data)
    post = cz.fit(cz.BradleyTerry(), weighted, method="map", check_confidence=False)
    post.save(tmp_path / "post.pt")
    back = cz.load(tmp_path / "post.pt")
    assert np.array_equal(back.data.weights, weighted.weights)
    np.testing.assert_array_equal(_predict(back, data), _predict(post, data))
    tree = post.to_arviz(n_draws=5)
    assert tree.constant_data["weight"].values.tolist() == weighted.weights.tolist()
    assert tree.log_likelihood["y"].shape[-1] == data.n_pairs  # one value per label, whatever its weight
    plain = cz.fit(cz.BradleyTerry(), data, method="map", check_confidence=False).to_arviz(n_draws=5)
    assert tree.attrs["checksum_labels"] != plain.attrs["checksum_labels"]  # weights are part of the labels
