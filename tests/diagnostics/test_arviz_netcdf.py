"""ArviZ trees leave crowdzoo and come back: a fit's tree through NetCDF (h5netcdf) gives the report's
numbers again, and the report reads a tree made by hand from a plain-Pyro NUTS fit, refusing one that
lacks a group it needs."""
from __future__ import annotations

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
import xarray as xr
from arviz_base import from_dict
from pyro.infer import MCMC, NUTS

import crowdzoo as cz

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one torch thread


@pytest.fixture(scope="module")
def small_fit():
    data, _ = cz.simulate_gppl(n_items=8, n_pairs=80, n_features=2, seed=4)
    return data, cz.fit(cz.GPPL(), data, method="natgrad", progress_bar=False)


def test_a_fit_through_netcdf_gives_the_same_report(small_fit, tmp_path):
    data, post = small_fit
    dt = post.to_arviz(n_draws=300, seed=1)
    dt.to_netcdf(tmp_path / "fit.nc")  # xarray picks h5netcdf (a dependency of crowdzoo)
    back = xr.open_datatree(tmp_path / "fit.nc")
    assert back.attrs["checksum_labels"] == dt.attrs["checksum_labels"]
    assert np.array_equal(back.posterior["f"].values, dt.posterior["f"].values)
    direct = cz.report(post, tmp_path / "direct.md", n_draws=300, seed=1)
    read = cz.report(back, tmp_path / "read.md")
    theirs = {c.name: (c.verdict, c.value) for c in read.checks}
    shared = [c for c in direct.checks if c.name in theirs]
    assert len(shared) >= 5 and any(c.name == "PSIS-LOO" for c in shared)
    assert all(theirs[c.name] == (c.verdict, c.value) for c in shared), \
        [(c.name, c.value, theirs[c.name]) for c in shared]
    assert np.allclose(read.summary.to_numpy(dtype=float), direct.summary.to_numpy(dtype=float))
    assert read.settings["route"] == "natgrad" and read.settings["model"] == "gppl"


def _plain_pyro_tree(seed=0):
    """Thurstone's model of 5 items written in plain Pyro, sampled by Pyro's NUTS, and the DataTree
    built by hand from its draws (arviz-base has no from_pyro)."""
    rng = np.random.default_rng(seed)
    f_true = np.linspace(-1, 1, 5)
    a = rng.integers(0, 5, 60)
    b = (a + rng.integers(1, 5, 60)) % 5
    y = (rng.random(60) < 0.5 * (1 + np.tanh(f_true[a] - f_true[b]))).astype(np.int64)
    a_t, b_t, y_t = torch.as_tensor(a), torch.as_tensor(b), torch.as_tensor(y, dtype=torch.float64)

    def model():
        f = pyro.sample("f", dist.Normal(torch.zeros(5, dtype=torch.float64), 1.0).to_event(1))
        pyro.sample("y", dist.Bernoulli(logits=f[a_t] - f[b_t]).to_event(1), obs=y_t)

    chains, div = [], []
    for c in range(2):
        pyro.set_rng_seed(seed + c)
        mcmc = MCMC(NUTS(model), num_samples=200, warmup_steps=150, disable_progbar=True)
        mcmc.run()
        chains.append(mcmc.get_samples()["f"].numpy())
        div.append(np.zeros(200, dtype=bool))
    f = np.stack(chains)  # (chain, draw, item)
    z = f[..., a] - f[..., b]
    loglik = np.where(y == 1, -np.logaddexp(0, -z), -np.logaddexp(0, z))
    return from_dict({"posterior": {"f": f}, "log_likelihood": {"y": loglik}, "observed_data": {"y": y},
                      "sample_stats": {"diverging": np.stack(div)}},
                     dims={"f": ["item"], "y": ["pair"]})


def test_the_report_reads_a_plain_pyro_nuts_tree_and_names_a_missing_group(tmp_path):
    dt = _plain_pyro_tree()
    rep = cz.report(dt, tmp_path / "pyro.html")
    v = {c.name: c for c in rep.checks}
    # every posterior variable is checked, for a tree that names none as identified
    assert v["r̂"].verdict != "fail" and "per-label log-likelihood, f" in v["r̂"].detail
    assert v["ESS (bulk, tail)"].verdict != "skip"  # the tree has sample_stats: MCMC draws
    assert v["divergences"].verdict == "pass" and v["PSIS-LOO"].verdict == "pass"
    assert v["PPC"].verdict == "skip" and "constant_data" in v["PPC"].detail
    assert rep.settings["route"] == "nuts" and list(rep.summary.index)[:1] == ["f[0]"]
    for group in ("log_likelihood", "posterior"):
        with pytest.raises(cz.DataError, match=f"no '{group}' group") as err:
            cz.report(dt.drop_nodes(group), tmp_path / "x.html")
        assert err.value.arg == "posterior"
