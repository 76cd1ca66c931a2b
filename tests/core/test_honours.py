"""Routes declare the model settings they honour (``Entry.honours``), and ``crowdzoo.fit`` refuses a
setting in use on a route that would ignore it, from that one declaration."""
from __future__ import annotations

import dataclasses

import pytest

import crowdzoo as cz
from crowdzoo import zoo


@dataclasses.dataclass
class Toy:
    prior: object = None
    mode: object = "auto"


def toy_entry(**honours):
    return zoo.Entry(name="toy", model="toy:Toy", data="pairs", posterior="toy:Post", example="toy:tiny",
                     routes={"a": "toy:fit_a", "b": "toy:fit_b", "c": "toy:fit_c"}, honours=honours)


def test_a_setting_in_use_is_refused_on_the_routes_that_do_not_honour_it():
    e = toy_entry(prior=("a", "b if learn", "c if learn != False"), mode=("a",))
    check = zoo._check_honoured
    for method in "abc":  # settings at None or their defaults are not in use: every route takes them
        check(e, Toy(), method, {}, {"learn": None})
    check(e, Toy(prior=1.0), "a", {}, {})
    check(e, Toy(prior=1.0), "b", {"learn": True}, {"learn": None})
    with pytest.raises(cz.DataError, match=r"prior: toy's 'b' route would ignore it;.*'b' with learn=True"):
        check(e, Toy(prior=1.0), "b", {}, {"learn": None})  # "if learn": only when the fit passes it
    check(e, Toy(prior=1.0), "c", {}, {"learn": None})  # "!= False": unset, the route decides
    with pytest.raises(cz.DataError, match=r"'c' route would ignore it with learn=False") as err:
        check(e, Toy(prior=1.0), "c", {"learn": False}, {"learn": None})
    assert err.value.arg == "prior" and "method" in err.value.settings
    with pytest.raises(cz.DataError, match=r"mode: .*'b' route.*honour it: 'a' \(drop mode, or fit with "
                                           r"method='a'\)"):
        check(e, Toy(mode=True), "b", {}, {})
    check(e, Toy(mode=False), "b", {}, {})  # False: the setting is off


def test_an_entry_names_only_routes_it_has_in_a_known_form():
    with pytest.raises(cz.DataError, match="honours: toy has no route 'd'"):
        toy_entry(prior=("a", "d"))
    with pytest.raises(cz.DataError, match="honours\\['prior'\\]: expected one of"):
        toy_entry(prior=("a if learn == True",))


def test_every_declared_setting_is_one_of_its_model():
    for e in zoo.ZOO:
        cls = e.model_class()
        names = {f.name for f in dataclasses.fields(cls)} | {n for n in dir(cls) if not n.startswith("_")}
        assert not set(e.honours) - names, f"{e.name} declares settings its model has not"


def test_fit_refuses_from_the_declaration(crowd):
    """The table's declarations reach ``crowdzoo.fit``: a model whose setting a route would ignore is
    refused before any fitting, naming the routes that honour it."""
    import pyro.distributions as dist

    prior = dist.Gamma(2.0, 2.0)
    with pytest.raises(cz.DataError, match=r"lengthscale_prior: dpm's 'gibbs' route would ignore it; the "
                                           r"routes that honour it: 'svi', 'nuts'"):
        cz.fit(cz.DPMCommunities(lengthscale_prior=prior), crowd, method="gibbs")
    with pytest.raises(cz.DataError, match=r"user_lengthscale_prior: crowdgppl's 'natgrad'.*'natgrad' with "
                                           r"learn_kernel=True"):
        cz.fit(cz.CrowdGPPL(user_lengthscale_prior=prior), crowd, method="natgrad")
