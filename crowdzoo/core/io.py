"""Save and load any posterior (and natgrad checkpoints) without unpickling arbitrary objects.

Everything is written with ``torch.save`` as nested dicts and lists of tensors, numbers and strings,
and read back with ``torch.load(weights_only=True)``. A posterior, its model, setup and data are
dataclasses; they are encoded field by field with the class's import path, which the loader
resolves only inside ``crowdzoo``, ``torch``/``pyro`` distributions (for priors) and the packages
named by :func:`trust` (``crowdzoo.zoo`` names those of the models registered outside crowdzoo), and
only to a dataclass, a NamedTuple or a distribution. So a new model gets save and load with no code
of its own; what cannot be stored (a kernel or prior written as a Python function) is refused with
an error naming it.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .._version import __version__
from ..errors import DataError

FORMAT = "crowdzoo-posterior/2"
CHECKPOINT = "crowdzoo-checkpoint/2"
_ALLOWED = ("crowdzoo", "pyro.distributions", "torch.distributions")
#: packages outside crowdzoo whose classes a file may name (see :func:`trust`)
_TRUSTED: set = set()


def trust(packages) -> None:
    """Let :func:`load` resolve classes in ``packages`` (and their subpackages) too: the packages of
    models outside crowdzoo, which ``crowdzoo.zoo.register`` names."""
    _TRUSTED.update(packages)


def _inside(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _path(obj_or_cls) -> str:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve(path: str, kind: str):
    """The class at ``path`` ("module:Name"), if it is inside crowdzoo, a distribution, or in a trusted
    package, and of ``kind`` ("dataclass", "namedtuple" or "distribution")."""
    module, _, name = path.partition(":")
    if not name or not _inside(module, (*_ALLOWED, *_TRUSTED)):
        raise DataError(f"load: the file names class {path!r}, outside crowdzoo and the packages of the "
                        "models registered in its table; import the module that registers that model "
                        "(crowdzoo.register(Entry(...))) before loading the file")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise DataError(f"load: the file names class {path!r}, which cannot be found ({err}); was it "
                        "renamed or moved since the file was written?") from None
    ok = isinstance(obj, type) and (
        (kind == "dataclass" and dataclasses.is_dataclass(obj))
        or (kind == "namedtuple" and issubclass(obj, tuple) and hasattr(obj, "_fields"))
        or (kind == "distribution" and issubclass(obj, torch.distributions.Distribution)))
    if not ok:
        raise DataError(f"load: the file names {path!r} as a {kind}, which it is not")
    return obj


def encode(x, where: str = "posterior"):
    """``x`` as nested dicts/lists of tensors and plain values; ``where`` names the field in errors."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "biuf":
            t = torch.from_numpy(np.ascontiguousarray(x)) if x.flags.writeable else torch.tensor(x)
            return {"__ndarray__": t}
        return {"__ndarray__": [encode(v, where) for v in x.tolist()], "dtype": str(x.dtype)}
    if isinstance(x, pd.Series):
        return {"__series__": encode(x.to_numpy(), where), "index": encode(x.index.to_numpy(), where),
                "name": encode(x.name, where), "index_name": encode(x.index.name, where)}
    if isinstance(x, torch.distributions.Distribution):
        params = None
        for keys in (list(x.arg_constraints), [k for k in x.arg_constraints if k in x.__dict__]):
            try:
                cand = {k: getattr(x, k) for k in keys}
                type(x)(**cand)
                params = cand
                break
            except (TypeError, ValueError, AttributeError, NotImplementedError):
                continue
        if not params:
            raise DataError(f"save: cannot store {where} ({type(x).__name__}: only distributions "
                            "defined by their parameters are stored)")
        return {"__dist__": _path(x), "params": {k: encode(v, where) for k, v in params.items()}}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"__dataclass__": _path(x),
                "fields": {f.name: encode(getattr(x, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(x)}}
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # NamedTuple
        return {"__namedtuple__": _path(x),
                "fields": [encode(v, f"{where}.{k}") for k, v in zip(x._fields, x)]}
    if isinstance(x, tuple):
        return {"__tuple__": [encode(v, where) for v in x]}
    if isinstance(x, list):
        return [encode(v, where) for v in x]
    if isinstance(x, dict):
        bad = [k for k in x if not isinstance(k, (str, int))]
        if bad:
            raise DataError(f"save: cannot store {where}: key {bad[0]!r} is not a string or integer")
        return {"__dict__": {k: encode(v, f"{where}[{k!r}]") for k, v in x.items()}}
    what = getattr(x, "__name__", type(x).__name__)
    raise DataError(f"save: cannot store {where} ({what}, a {type(x).__name__}): a posterior is saved as "
                    "tensors and plain values, so a kernel or prior written as a Python function cannot "
                    "be stored. Use the built-in kernels (and their sums and products) and Pyro "
                    "distributions to save the fit, or keep the Python object and refit.")


def decode(x):
    """Inverse of :func:`encode`."""
    if isinstance(x, list):
        return [decode(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "__ndarray__" in x:
        v = x["__ndarray__"]
        if isinstance(v, torch.Tensor):
            return v.numpy()
        return np.array([decode(e) for e in v], dtype=x["dtype"])
    if "__series__" in x:
        return pd.Series(decode(x["__series__"]), index=pd.Index(decode(x["index"]), name=x["index_name"]),
                         name=x["name"])
    if "__dist__" in x:
        return _resolve(x["__dist__"], "distribution")(**{k: decode(v) for k, v in x["params"].items()})
    if "__dataclass__" in x:
        cls = _resolve(x["__dataclass__"], "dataclass")
        obj = object.__new__(cls)
        for k, v in x["fields"].items():
            object.__setattr__(obj, k, decode(v))
        return obj
    if "__namedtuple__" in x:
        return _resolve(x["__namedtuple__"], "namedtuple")(*[decode(v) for v in x["fields"]])
    if "__tuple__" in x:
        return tuple(decode(v) for v in x["__tuple__"])
    if "__dict__" in x:
        return {k: decode(v) for k, v in x["__dict__"].items()}
    raise DataError("load: unexpected entry in the file")


def save(post, path) -> None:
    """Write any posterior (see the module docstring)."""
    state = {"format": FORMAT, "model": post.name, "crowdzoo": __version__,
             "posterior": encode(post)}
    torch.save(state, path)


def read(path, fmt: str, what: str):
    """The dict stored at ``path`` in format ``fmt``, or a DataError saying what the file is not."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{what}: {path} is not a file", arg=what)
    try:
        state = torch.load(p, weights_only=True)
    except Exception as err:  # truncated, empty, text or foreign files
        with open(p, "rb") as fh:
            head = fh.read(4)
        if not head:
            raise DataError(f"{what}: {path} is empty (0 bytes): the write that made it did not finish; "
                            "save the posterior again, or refit", arg=what) from None
        if head == b"PK\x03\x04":  # torch.save's zip container, cut short or damaged
            raise DataError(f"{what}: {path} is damaged or truncated ({p.stat().st_size:,} bytes of a zip "
                            "archive that could not be read: was it copied or written only in part?); save "
                            "the posterior again, or refit", arg=what) from None
        raise DataError(f"{what}: {path} is not a crowdzoo file ({fmt}); it could not be read "
                        f"({type(err).__name__}). Was it written by posterior.save()?", arg=what) from None
    if not isinstance(state, dict) or state.get("format") != fmt:
        found = state.get("format") if isinstance(state, dict) else None
        extra = (f" (it is {found!r}: written by another version of crowdzoo; refit)"
                 if isinstance(found, str) and found.startswith("crowdzoo") else "")
        raise DataError(f"{what}: {path} is not a crowdzoo file of format {fmt}{extra}", arg=what)
    return state


def load(path):
    """Load a posterior written by ``posterior.save(path)``; predictions are identical."""
    state = read(path, FORMAT, "load")
    post = decode(state["posterior"])
    if not getattr(post, "model_name", "") and isinstance(state.get("model"), str):
        post.model_name = state["model"]  # a posterior stored without the field: the name the file keeps
    return post
