"""Every natural-gradient fit of tests/fixtures/make_natgrad_fixture.py predicts what it predicted when
the fixture was saved: the same probabilities, utilities and bound trace to 1e-12, in the same number
of iterations. The fixture is regenerated only on purpose, by running that script."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "make_natgrad_fixture.py"
_spec = importlib.util.spec_from_file_location("make_natgrad_fixture", _SCRIPT)
fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture)

SAVED = np.load(fixture.FIXTURE)


@pytest.mark.parametrize("name", list(fixture.CASES))
def test_natgrad_fit_matches_the_saved_fixture(name):
    got = fixture.fit_case(name)
    keys = sorted(k.split(":", 1)[1] for k in SAVED.files if k.startswith(name + ":"))
    assert sorted(got) == keys
    for k in keys:
        want = SAVED[f"{name}:{k}"]
        assert got[k].shape == want.shape, (name, k)
        np.testing.assert_allclose(got[k], want, rtol=1e-12, atol=1e-12, err_msg=f"{name}: {k}")
