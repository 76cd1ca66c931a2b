"""The zoo's models, one package each: ``<name>/model.py`` holds the generative story, beside it its
posterior, its own routes, its ArviZ converter and its tiny example. ``crowdzoo.zoo`` is the table
that ties them to ``crowdzoo.fit``.

The models' classes are importable from here by name (``from crowdzoo.models import GPPL``): the
names are those of the table's models that live in this package, imported on first use."""
from __future__ import annotations

import importlib
import importlib.util


def _models() -> dict:
    """{class name: "module:name"} of the table's models inside this package."""
    from ..zoo import ZOO

    return {e.model.rpartition(":")[2]: e.model for e in ZOO if e.model.startswith(__name__ + ".")}


def __getattr__(name):
    if name == "__all__":
        return list(_models())
    path = _models().get(name)
    if path is not None:
        module, _, attr = path.partition(":")
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # a model's package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_models()))
