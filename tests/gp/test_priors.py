"""Every model refuses a bad prior when it is built: a distribution over a positive quantity (an
inverse scale, a length-scale) without positive support, a Gamma shape or rate, prior sd or Beta
parameter that is not a positive number; each a DataError naming the field and saying what to use,
never a raw Pyro or Python error."""
from __future__ import annotations

import math

import pyro.distributions as dist
import pytest

import crowdzoo as cz

NORMAL = dist.Normal(0.0, 1.0)

CASES = [  # model, field, bad value, what the message must say beside the field
    ("GPPL", "s_prior", NORMAL, "inverse scales are positive.*Gamma"),
    ("GPPL", "shape_s0", -1, "positive Gamma shape"),
    ("GPPL", "rate_s0", 0.0, "positive Gamma rate"),
    ("GPPL", "lengthscale_prior", NORMAL, "length-scales are positive.*LogNormal"),
    ("GPPLPerUser", "shape_s0", math.nan, "positive Gamma shape"),
    ("GPPLPerUser", "s_prior", dist.Uniform(-1.0, 1.0), "inverse scales are positive"),
    ("CrowdGPPL", "shape_t0", -1, "positive Gamma shape"),
    ("CrowdGPPL", "rate_v0", -2.0, "positive Gamma rate"),
    ("CrowdGPPL", "shape_w0", "two", "positive Gamma shape"),
    ("CrowdGPPL", "prior_t", NORMAL, "inverse scales are positive"),
    ("CrowdGPPL", "prior_v", dist.StudentT(3.0), "inverse scales are positive"),
    ("CrowdGPPL", "prior_w", dist.Poisson(1.0), "inverse scales are positive"),  # discrete
    ("CrowdGPPL", "user_lengthscale_prior", NORMAL, "length-scales are positive"),
    ("CollabGP", "lengthscale_prior", NORMAL, "length-scales are positive"),
    ("CollabGP", "user_lengthscale_prior", 1.0, "expected a positive Pyro distribution"),
    ("CollabGP", "shape_s0", 0.0, "positive Gamma shape"),
    ("CollabGP", "rate_s0", -1e-3, "positive Gamma rate"),
    ("DPMCommunities", "s_prior", NORMAL, "inverse scales are positive"),
    ("DPMCommunities", "shape_s0", -1, "positive Gamma shape"),
    ("DPMCommunities", "rate_s0", math.inf, "positive Gamma rate"),
    ("DPMCommunities", "lengthscale_prior", NORMAL, "length-scales are positive"),
    ("BradleyTerry", "prior_sd", -1.0, "positive number"),
    ("CrowdBTGP", "score_sd", 0, "positive number"),
    ("CrowdBTGP", "reliability_prior", (4.0, -1.0), "positive Beta parameters"),
    ("CrowdBTGP", "reliability_prior", 4.0, "positive Beta parameters"),
    ("CrowdBTGP", "reliable_share", 0.0, r"number in \(0, 1\]"),
    ("CrowdBTGP", "reliable_share", 1.5, r"number in \(0, 1\]"),
    ("BayesSCDC", "dirichlet", -1.0, "positive number"),
    ("BayesSCDC", "worker_prior", (1.0, 0.0), "positive Beta parameters"),
]


@pytest.mark.parametrize("model, field, bad, says", CASES,
                         ids=[f"{m}-{f}-{i}" for i, (m, f, _, _) in enumerate(CASES)])
def test_a_bad_prior_is_refused_at_construction_naming_the_field(model, field, bad, says):
    cls = getattr(cz, model)
    with pytest.raises(cz.DataError, match=f"^{field}: .*{says}") as err:
        cls(**{field: bad})
    assert err.value.arg in (field, None) and field in str(err.value)


def test_every_model_with_priors_is_covered_and_good_priors_pass():
    """The cases name every model of the zoo that has priors (SCDC has none: its workers' and
    clusters' parameters are point estimates), and positive priors are accepted."""
    in_zoo = {e.model.rpartition(":")[2] for e in cz.ZOO if e.model.startswith("crowdzoo.")}
    assert {m for m, *_ in CASES} == in_zoo - {"SCDC"}
    gamma, lognormal = dist.Gamma(2.0, 2.0), dist.LogNormal(0.0, 1.0)
    cz.GPPL(s_prior=gamma, lengthscale_prior=lognormal, shape_s0=0.5, rate_s0=3)
    cz.CrowdGPPL(prior_t=dist.HalfNormal(1.0), prior_v=gamma, prior_w=lognormal, rate_v0=None)
    cz.DPMCommunities(s_prior=dist.Exponential(1.0))
    cz.CrowdBTGP(reliability_prior=[2, 2])
