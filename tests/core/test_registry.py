"""A model outside the package: a copy of Bradley–Terry written to a temporary package, plus one
``crowdzoo.register(Entry(...))``, passes the zoo's round trip (fit, reproducibility, save, load,
predict) by every route and gets a report, with no file of crowdzoo touched; ``load`` resolves the
classes a file names only in crowdzoo and the registered models' packages. Also: an Entry's fields
are checked when it is written."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_zoo import _predict, quick_settings, round_trip

import crowdzoo as cz
from crowdzoo import zoo

BT = Path(cz.__file__).parent / "models" / "bradley_terry"

ENTRY = '''
from crowdzoo import Entry, register, zoo

register(Entry(name="my-bt", model="mybt.model:BradleyTerry", data="pairs",
               routes={"map": zoo.MAP, "svi": zoo.SVI, "nuts": zoo.NUTS},
               posterior="mybt.posterior:BradleyTerryPosterior", example="mybt.examples:tiny",
               n_draws=1000, paper="Bradley & Terry 1952", summary="a copy outside crowdzoo"))
'''


def write_copy(root: Path) -> Path:
    """Bradley–Terry's package copied to ``root/mybt``, its imports of crowdzoo made absolute, its
    ``__init__`` registering it."""
    pkg = root / "mybt"
    pkg.mkdir(parents=True)
    for src in BT.glob("*.py"):
        text = re.sub(r"from \.\.\.(\w)", r"from crowdzoo.\1", src.read_text())
        (pkg / src.name).write_text(text + (ENTRY if src.name == "__init__.py" else ""))
    return pkg


@pytest.fixture
def mybt(tmp_path, monkeypatch):
    write_copy(tmp_path / "src")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    n = len(zoo.ZOO)
    import mybt

    yield mybt
    zoo.ZOO.remove(zoo.entry("my-bt"))
    assert len(zoo.ZOO) == n
    for name in [m for m in sys.modules if m == "mybt" or m.startswith("mybt.")]:
        del sys.modules[name]


@pytest.mark.parametrize("method", ["map", "svi", "nuts"])
def test_a_model_in_a_package_of_ones_own_round_trips_by_every_route(method, mybt, tmp_path):
    e = zoo.entry("my-bt")
    assert e.model_class() is mybt.BradleyTerry and e.model_class() is not cz.BradleyTerry
    post = round_trip(e, method, tmp_path)
    assert type(post).__module__ == "mybt.posterior" and post.name == "my-bt"
    # the copy is fitted as it is written: the same predictions as crowdzoo's own Bradley–Terry
    ex, ours = e.make_example(), zoo.entry("bradley-terry")
    ref = cz.fit(cz.BradleyTerry(), ex.data, method=method, seed=3, **quick_settings(ours, method, ex))
    np.testing.assert_array_equal(_predict(post, ex.data), _predict(ref, ex.data))
    if method == "map":
        checks = {c.name: c for c in cz.report(post, tmp_path / "report.md").checks}
        assert checks["optimisation converged"].verdict == "pass"
        assert "my-bt" in (tmp_path / "report.md").read_text()


def _rename_classes(x, old: str, new: str):
    if isinstance(x, dict):
        return {k: (v.replace(old, new, 1) if k in ("__dataclass__", "__namedtuple__") and isinstance(v, str)
                    else _rename_classes(v, old, new)) for k, v in x.items()}
    if isinstance(x, list):
        return [_rename_classes(v, old, new) for v in x]
    return x


def test_load_resolves_classes_only_in_registered_packages(mybt, tmp_path):
    e = zoo.entry("my-bt")
    ex = e.make_example()
    post = cz.fit(ex.model, ex.data, method="map", seed=0)
    post.save(tmp_path / "post.pt")
    state = torch.load(tmp_path / "post.pt", weights_only=True)
    outside = r"'strangers\.posterior:BradleyTerryPosterior', outside crowdzoo and the packages of the models"
    for old, new, message in [("mybt.", "strangers.", outside),
                              ("mybt.posterior:BradleyTerryPosterior", "crowdzoo.zoo:fit",
                               r"names 'crowdzoo\.zoo:fit' as a dataclass, which it is not")]:
        torch.save(_rename_classes(state, old, new), tmp_path / "other.pt")
        with pytest.raises(cz.DataError, match=message):
            cz.load(tmp_path / "other.pt")


def test_a_new_process_loads_a_registered_models_file_once_its_package_is_imported(mybt, tmp_path):
    """What a user does: fit and save in one session, load in another — refused until the module that
    registers the model is imported, then identical predictions."""
    e = zoo.entry("my-bt")
    ex = e.make_example()
    post = cz.fit(ex.model, ex.data, method="map", seed=0)
    post.save(tmp_path / "post.pt")
    np.save(tmp_path / "p.npy", _predict(post, ex.data))
    script = f'''
import sys
import numpy as np
import pandas as pd
import crowdzoo as cz
sys.path.insert(0, {str(Path(mybt.__file__).parents[1])!r})
try:
    cz.load({str(tmp_path / "post.pt")!r})
except cz.DataError as err:
    print("refused:", err)
import mybt
from crowdzoo import zoo
post = cz.load({str(tmp_path / "post.pt")!r})
d = zoo.entry("my-bt").make_example().data
p = post.predict_proba(d.item_ids[d.a], d.item_ids[d.b])
print("same:", np.array_equal(p, np.load({str(tmp_path / "p.npy")!r})), type(post).__module__)
'''
    root = Path(cz.__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "refused: load: the file names class 'mybt." in out.stdout
    assert "import the module that registers that model" in out.stdout
    assert "same: True mybt.posterior" in out.stdout


def test_an_entry_is_checked_when_written_and_registered():
    good = dict(name="x", model="m:X", data="pairs", routes={"map": zoo.MAP}, posterior="m:P",
                example="m:tiny")
    with pytest.raises(cz.DataError, match="name: a model's name is a word without spaces"):
        zoo.Entry(**{**good, "name": "my model"})
    with pytest.raises(cz.DataError, match=r"data: x's data kind must be one of \['pairs'"):
        zoo.Entry(**{**good, "data": "triples"})
    with pytest.raises(cz.DataError, match="routes: x needs at least one route"):
        zoo.Entry(**{**good, "routes": {}})
    with pytest.raises(cz.DataError, match=r"example: x names it by import path 'package\.module:name', got"):
        zoo.Entry(**{**good, "example": "m.tiny"})
    with pytest.raises(TypeError):
        zoo.Entry("x", "m:X", "pairs", {"map": zoo.MAP}, "m:P", "m:tiny")  # keywords only
    with pytest.raises(cz.DataError, match="the zoo has a model called 'gppl' already"):
        cz.register(zoo.Entry(**{**good, "name": "gppl"}))
    with pytest.raises(cz.DataError, match="is in the zoo already, as 'gppl'"):
        cz.register(zoo.Entry(**{**good, "model": zoo.entry("gppl").model}))
    assert "x" not in [e.name for e in zoo.ZOO]


def test_crowdzoos_model_names_are_the_tables_and_cost_no_torch():
    """``crowdzoo.X`` and ``crowdzoo.models.X`` are the table's classes; listing them (``__all__``,
    ``dir``) imports no torch, so ``import crowdzoo`` and the CLI's ``--help`` stay light."""
    import crowdzoo.models

    for e in zoo.ZOO:
        name = e.model.rpartition(":")[2]
        assert getattr(cz, name) is getattr(crowdzoo.models, name) is e.model_class()
        assert name in cz.__all__ and name in dir(cz) and name in crowdzoo.models.__all__
    script = ("import sys, crowdzoo, crowdzoo.models; crowdzoo.__all__; dir(crowdzoo); "
              "crowdzoo.models.__all__; print('torch' in sys.modules)")
    root = Path(cz.__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False", out.stderr


def test_an_installed_package_declares_its_model_to_the_command_line(tmp_path):
    """An installed package (here a dist-info folder on the path) whose entry point in the group
    ``crowdzoo.models`` names its registering module: the command line lists the model, fits it from
    CSV files and predicts from the run in a new process, with no import written by the user."""
    src = tmp_path / "src"
    write_copy(src)
    info = src / "mybt-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mybt\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{zoo.ENTRY_POINTS}]\nmy-bt = mybt\n")
    rng = np.random.default_rng(0)
    items = [f"dish{i}" for i in range(6)]
    pairs = pd.DataFrame([rng.choice(items, 2, replace=False) for _ in range(40)],
                         columns=["winner", "loser"])
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}

    def cli(*argv):
        cmd = [sys.executable, "-c", "from crowdzoo.cli import entry; entry()", *map(str, argv)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)

    assert "my-bt" in cli("models").stdout
    fit = cli("fit", "my-bt", "--pairs", "pairs.csv", "--a-col", "winner", "--b-col", "loser",
              "--winner-first", "--out", "run")
    assert fit.returncode == 0, fit.stderr
    pred = cli("predict", "run", "--pairs", "pairs.csv", "-o", "p.csv")
    assert pred.returncode == 0, pred.stderr
    p = pd.read_csv(tmp_path / "p.csv")["p"].to_numpy()
    assert len(p) == 40 and np.all((p > 0) & (p < 1)) and (p > 0.5).mean() > 0.6
