"""The zoo's architecture (one model, one home): one table drives fit, load, the CLI and the
docs; every (model, route) of the table, fitted on the model's own tiny example, is reproducible
from its seed without touching the caller's random state and saves and loads to the same
predictions (no list of models here: a new entry is tested as it is added), and so does every route
that takes choices on its model's tiny choice example; natgrad fits resume
after an interrupt; priors and kernels are objects; a Bradley–Terry model added through the table
matches an independent fit."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyro.distributions as dist
import pytest
import torch

import crowdzoo as cz
from crowdzoo import zoo
from crowdzoo.cli import METHODS, MODELS, main
from crowdzoo.gp import Kernel, SparseGP
from crowdzoo.gp.linalg import DTYPE

PKG = Path(cz.__file__).parent


#: quick settings of the generic engines (a model's example gives those of its own routes)
QUICK = {zoo.SVI: dict(num_steps=15, n_draws=12), zoo.MAP: dict(max_iter=50),
         zoo.NUTS: dict(num_samples=8, warmup_steps=8, num_chains=1, jit_compile=False, max_tree_depth=5)}
ROUTES = [(e.name, m) for e in zoo.ZOO for m in e.routes]
CHOICE_ROUTES = [(e.name, m) for e in zoo.ZOO for m in e.choices]


def quick_settings(e, method, example):
    """The settings with which ``e``'s route ``method`` fits its example in about a second."""
    return {**QUICK.get(e.routes[method], {}), **example.settings.get(method, {})}


def _predict(post, data):
    e = zoo.entry(post.name)
    if e.data == "links":
        return post.predict_proba(data.item_ids[data.i], data.item_ids[data.j])
    users = {"users": data.user_ids[data.users]} if e.data == "crowd pairs" else {}
    return post.predict_proba(data.item_ids[data.a], data.item_ids[data.b], **users)


def round_trip(e, method, tmp_path):
    """Fit ``e``'s example by ``method`` twice with one seed (identical predictions, the caller's RNGs
    untouched), save, load (same class, method, name, predictions and utilities) and return the fit."""
    example = e.make_example(seed=0)
    model, data, kw = example.model, example.data, quick_settings(e, method, example)
    torch.manual_seed(123)
    np.random.seed(123)
    before_t, before_np = torch.get_rng_state(), np.random.get_state()[1].copy()
    p1 = cz.fit(model, data, method=method, seed=3, **kw)
    assert torch.equal(torch.get_rng_state(), before_t), "the route changed torch's global RNG"
    assert np.array_equal(np.random.get_state()[1], before_np), "the route changed numpy's global RNG"
    p2 = cz.fit(model, data, method=method, seed=3, **kw)
    q1, q2 = _predict(p1, data), _predict(p2, data)
    assert np.isfinite(q1).all() and ((q1 >= 0) & (q1 <= 1)).all()
    assert np.array_equal(q1, q2), "same seed, different posterior"
    p1.save(tmp_path / "post.pt")
    back = cz.load(tmp_path / "post.pt")
    assert type(back) is type(p1) and back.method == method and back.name == e.name
    assert np.array_equal(_predict(back, data), q1)
    try:
        m1, _ = p1.utilities()
    except (NotImplementedError, cz.DataError):
        return p1
    if method != "nuts":  # NUTS utilities are means of draws; the check above covers its predictions
        np.testing.assert_array_equal(back.utilities()[0].to_numpy(), m1.to_numpy())
    return p1


def test_every_table_entry_resolves_and_the_cli_reads_the_table(capsys):
    for e in zoo.ZOO:
        assert isinstance(e.model_class(), type)
        assert issubclass(e.posterior_class(), cz.core.posterior.Posterior)
        assert e.data in zoo.DATA_KINDS
        for m in e.routes:
            assert callable(e.route(m))
    assert MODELS == tuple(e.name for e in zoo.ZOO)
    assert set(METHODS) == {m for e in zoo.ZOO for m in e.routes}
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for e in zoo.ZOO:
        assert e.name in out and all(m in out for m in e.routes)


def test_a_route_a_model_lacks_is_refused_with_the_routes_it_has(crowd):
    with pytest.raises(cz.DataError, match=r"crowdgppl has no route 'ep'.*\['natgrad', 'svi', 'nuts'\]"):
        cz.fit(cz.CrowdGPPL(), crowd, method="ep")
    with pytest.raises(cz.DataError, match="not a setting of gppl's 'natgrad' route"):
        cz.fit(cz.GPPL(), crowd, method="natgrad", max_iters=3)
    with pytest.raises(cz.DataError, match="needs a user per label"):
        single = cz.PairwiseData.from_arrays(crowd.a, crowd.b, crowd.y, crowd.item_features)
        cz.fit(cz.CrowdGPPL(), single)


def test_no_model_name_is_compared_outside_its_package_and_the_table():
    names = [e.name for e in zoo.ZOO]
    alternatives = "|".join(map(re.escape, names))
    pat = re.compile(r"""(==|!=|\bin)\s*[\(\[{]?\s*["'](""" + alternatives + r""")["']""")
    offenders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel == "zoo.py" or rel.startswith("models/"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pat.search(line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, offenders
    for path in (PKG / "inference").glob("*.py"):  # generic engines know no model
        assert "models" not in "".join(re.findall(r"^\s*from \S+ import", path.read_text(), re.M)), path


@pytest.mark.parametrize("name,method", ROUTES)
def test_every_route_is_reproducible_leaves_the_rng_alone_and_round_trips(name, method, tmp_path):
    round_trip(zoo.entry(name), method, tmp_path)


def _predict_choices(post, data):
    """P(chosen) of every member of the choice example's own sets (R, k_max), by each row's user for a
    model of personal utilities."""
    ids = np.asarray(data.item_ids)
    users = {"users": data.user_ids[data.users]} if zoo.takes_users(zoo.entry(post.name)) else {}
    return post.predict_choice([ids[row[row >= 0]] for row in data.sets], **users)


@pytest.mark.parametrize("name,method", CHOICE_ROUTES)
def test_every_choice_route_is_reproducible_leaves_the_rng_alone_and_round_trips(name, method, tmp_path):
    """Each route the table says takes choices fits its model's tiny choice example: twice with one seed
    to the same predictions, without touching the caller's RNGs, and through save and load."""
    e = zoo.entry(name)
    example = e.make_example(seed=0)
    data, kw = example.choices, quick_settings(e, method, example)
    torch.manual_seed(123)
    np.random.seed(123)
    before_t, before_np = torch.get_rng_state(), np.random.get_state()[1].copy()
    p1 = cz.fit(example.model, data, method=method, seed=3, **kw)
    assert torch.equal(torch.get_rng_state(), before_t), "the route changed torch's global RNG"
    assert np.array_equal(np.random.get_state()[1], before_np), "the route changed numpy's global RNG"
    q1 = _predict_choices(p1, data)
    assert np.allclose(q1.sum(1), 1.0, atol=1e-9) and np.all(q1[~data.mask] == 0)
    p2 = cz.fit(example.model, data, method=method, seed=3, **kw)
    assert np.array_equal(_predict_choices(p2, data), q1), "same seed, different posterior"
    p1.save(tmp_path / "post.pt")
    back = cz.load(tmp_path / "post.pt")
    assert type(back) is type(p1) and back.method == method and back.name == name
    assert np.array_equal(_predict_choices(back, data), q1)


def test_every_entry_has_a_tiny_example_of_its_data_kind():
    from crowdzoo.data import ChoiceData, LinkData, PairwiseData

    for e in zoo.ZOO:
        ex = e.make_example(seed=1)
        assert isinstance(ex.model, e.model_class()), e.name
        assert isinstance(ex.data, LinkData if e.data == "links" else PairwiseData), e.name
        # a choice example exactly where the table lists routes that take choices
        assert isinstance(ex.choices, ChoiceData) if e.choices else ex.choices is None, e.name
        assert not set(ex.settings) - set(e.routes), f"{e.name}'s example sets routes it has not"
        for m, kw in ex.settings.items():
            assert not set(kw) - set(zoo.route_settings(e.route(m))), f"{e.name} {m}: unknown settings"


@pytest.mark.parametrize("name", ["gppl", "crowdgppl", "gppl-per-user"])
def test_an_interrupted_natgrad_fit_resumes_to_the_same_posterior(name, crowd, tmp_path):
    model = zoo.entry(name).make_example().model
    kw = dict(max_iter=30, tol=0, progress_bar=False, eval_every=5)
    if name != "gppl-per-user":
        kw["batch_size"] = 16  # mini-batches: the generator's state must be carried over
    whole = cz.fit(model, crowd, method="natgrad", seed=1, **kw)

    def stop_at_17(i, state):
        if i == 17:
            raise KeyboardInterrupt

    ckpt = tmp_path / "fit.ckpt"
    with pytest.raises(KeyboardInterrupt, match="resume=") as stopped:
        cz.fit(model, crowd, method="natgrad", seed=1, checkpoint=ckpt, callback=stop_at_17, **kw)
    assert stopped.value.iteration == 16  # the last finished iteration, which the checkpoint holds
    resumed = cz.fit(model, crowd, method="natgrad", seed=1, resume=ckpt, **kw)
    assert resumed.settings["iterations"] == whole.settings["iterations"] == 30
    assert np.array_equal(_predict(resumed, crowd), _predict(whole, crowd))
    np.testing.assert_array_equal(resumed.trace["bound"], whole.trace["bound"])


def test_priors_and_kernels_are_objects(crowd, tmp_path):
    k = Kernel("se") + Kernel("matern32")
    model = cz.CrowdGPPL(n_components=2, n_inducing=5, n_inducing_users=None, kernel=k,
                         prior_v=dist.LogNormal(torch.tensor(0.0, dtype=DTYPE),
                                                torch.tensor(1.0, dtype=DTYPE)))
    post = cz.fit(model, crowd, method="svi", num_steps=30, n_draws=20, seed=0)
    assert np.isfinite(_predict(post, crowd)).all()
    K = post.setup.items.K_mm
    assert torch.allclose(K.diagonal(), torch.full((K.shape[0],), 2.0, dtype=DTYPE))  # two unit kernels
    post.save(tmp_path / "p.pt")
    assert np.array_equal(_predict(cz.load(tmp_path / "p.pt"), crowd), _predict(post, crowd))
    with pytest.raises(cz.DataError, match="prior_v: the natgrad route needs a Gamma prior"):
        cz.fit(model, crowd, method="natgrad")

    def rbf(x1, x2):
        return torch.exp(-0.5 * ((x1[..., :, None, :] - x2[..., None, :, :]) ** 2).sum(-1))

    g = cz.fit(cz.GPPL(kernel=rbf), crowd, method="natgrad", max_iter=5, tol=0, seed=0)
    ref = cz.fit(cz.GPPL(kernel=Kernel("se", torch.ones(2, dtype=DTYPE))), crowd, method="natgrad",
                 max_iter=5, tol=0, seed=0)
    np.testing.assert_allclose(_predict(g, crowd), _predict(ref, crowd), rtol=1e-10)
    with pytest.raises(cz.DataError, match="cannot store .*rbf"):
        g.save(tmp_path / "g.pt")


def test_the_sparse_conditional_matches_the_dense_gp_conditional():
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(9, 2)), dtype=DTYPE)
    Z = X[:4]
    k = Kernel("matern32", torch.tensor([0.7, 1.3], dtype=DTYPE)) * Kernel("se", torch.ones(2, dtype=DTYPE))
    gp = SparseGP.build(k, X, Z, 1e-10, exact=False)
    A, c = gp.item_terms()
    K_xz, K_zz = k(X, Z), k(Z, Z)
    np.testing.assert_allclose(A, K_xz @ torch.linalg.inv(K_zz), atol=1e-8)
    np.testing.assert_allclose(c, k.diag(X) - (K_xz @ torch.linalg.solve(K_zz, K_xz.T)).diagonal(), atol=1e-8)
    a, b = torch.tensor([4, 5, 8]), torch.tensor([6, 0, 7])
    dA, cd = gp.pair_rows(a, b)
    full = k(X, X) - K_xz @ torch.linalg.solve(K_zz, K_xz.T)
    np.testing.assert_allclose(dA, A[a] - A[b], atol=1e-8)
    np.testing.assert_allclose(cd, full[a, a] + full[b, b] - 2 * full[a, b], atol=1e-8)
    np.testing.assert_allclose(k.pairs(X[a], X[b]), k(X, X)[a, b], atol=1e-12)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_bradley_terry_map_matches_an_independent_optimiser(link, crowd, tmp_path):
    from scipy.optimize import minimize
    from scipy.stats import norm

    sd = 1.5
    a, b, y, N = crowd.a, crowd.b, crowd.y, crowd.n_items

    def neg_log_post(f):
        z = f[a] - f[b]
        if link == "logit":
            ll = y * -np.logaddexp(0, -z) + (1 - y) * -np.logaddexp(0, z)
        else:
            ll = y * norm.logcdf(z) + (1 - y) * norm.logcdf(-z)
        return -(ll.sum() - 0.5 * (f ** 2).sum() / sd ** 2)

    ref = minimize(neg_log_post, np.zeros(N), method="BFGS", options={"gtol": 1e-10}).x
    post = cz.fit(cz.BradleyTerry(link=link, prior_sd=sd), crowd, method="map")
    np.testing.assert_allclose(post.f[0].numpy(), ref, atol=1e-5)
    mean, _ = post.utilities()
    assert list(mean.index) == list(crowd.item_ids)
    # the report reads a point estimate: PSIS-LOO says it does not apply instead of failing
    checks = {c.name: c for c in cz.report(post, tmp_path / "r.md").checks}
    assert checks["PSIS-LOO"].verdict == "skip" and checks["optimisation converged"].verdict == "pass"


def test_the_docs_tables_are_written_from_the_table():
    """The site's route table (docs/design.md) and model API page (docs/api/models.md) are written from
    ZOO by the mkdocs hook, so a new entry needs no page edited; every module an entry names is on
    the API page once."""
    import importlib.util

    root = PKG.parent
    spec = importlib.util.spec_from_file_location("zoo_tables", root / "docs" / "hooks" / "zoo_tables.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert "docs/hooks/zoo_tables.py" in (root / "mkdocs.yml").read_text()
    design = (root / "docs" / "design.md").read_text()
    assert design.count(hook.ROUTE_TABLE) == 1 and "| gppl |" not in design  # nothing pasted to go stale
    page = hook.on_page_markdown(design)
    assert zoo.route_table() in page and hook.ROUTE_TABLE not in page
    api = hook.on_page_markdown((root / "docs" / "api" / "models.md").read_text())
    shown = re.findall(r"^::: (\S+)$", api, re.M)
    assert len(shown) == len(set(shown))
    for e in zoo.ZOO:
        assert f"(`{e.name}`)" in api
        for path in e.paths():
            assert path in zoo.GENERIC or path.partition(":")[0] in shown, (e.name, path)
