"""The flags ``crowdzoo fit`` generates from the zoo's models and routes, read from their source files
with ``ast`` so that ``--help`` answers without importing torch: each route's settings with their
defaults and annotations (:func:`route_signature_static`), the flags made of them
(:func:`route_flags`), and each model's dataclass defaults (:func:`model_defaults_static`).
"""
from __future__ import annotations

import dataclasses
import functools

from .. import zoo
from ..errors import DataError
from ..zoo import ZOO, Entry


def _source_file(module: str):
    """The source file of ``module`` without importing it (or its package's ``__init__``)."""
    from importlib.util import find_spec
    from pathlib import Path

    top, *rest = module.split(".")
    spec = find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None if spec is None or spec.origin is None else Path(spec.origin)
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _static_function(module: str, name: str, depth: int = 0):
    """The ``ast.FunctionDef`` of ``module:name``, following ``from X import name`` re-exports."""
    import ast

    path = _source_file(module)
    if path is None or depth > 4:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            if node.level:
                package = module.split(".")
                package = package[:len(package) - node.level] if path.name != "__init__.py" else \
                    package[:len(package) - node.level + 1]
                source = ".".join(package + ([node.module] if node.module else []))
            else:
                source = node.module
            return _static_function(source, original, depth + 1)
    return None


_NO_DEFAULT = object()


_STATIC_CACHE: dict = {}


def route_signature_static(e: Entry, method: str) -> dict:
    """{setting: (default, annotation)} of a route, read from its source with ``ast`` (nothing is
    imported, so the CLI builds its flags without torch). Like :func:`crowdzoo.zoo.route_settings`, the model,
    data, ``seed`` and ``entry`` parameters are left out; a default that is not a Python literal is
    ``_NO_DEFAULT``, a missing annotation ``None`` (annotations as written, e.g. ``"float | None"``)."""
    import ast

    if method not in e.routes:
        e.route(method)  # the DataError naming the model's routes
    path = e.routes[method]
    if path not in _STATIC_CACHE:
        module, _, name = path.partition(":")
        fn = _static_function(module, name)
        if fn is None:
            raise DataError(f"method: cannot read the signature of {path} from its source")
        args = fn.args
        positional = args.posonlyargs + args.args
        defaults = [_NO_DEFAULT] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params = list(zip(positional, defaults))[2:] + list(zip(args.kwonlyargs, args.kw_defaults))
        out = {}
        for arg, default in params:
            if arg.arg in ("seed", "entry"):
                continue
            if default is not _NO_DEFAULT and default is not None:
                try:
                    default = ast.literal_eval(default)
                except ValueError:
                    default = _NO_DEFAULT
            out[arg.arg] = (default, None if arg.annotation is None else ast.unparse(arg.annotation))
        _STATIC_CACHE[path] = out
    return dict(_STATIC_CACHE[path])


def route_settings_static(e: Entry, method: str) -> dict:
    """{setting: default} of a route (as :func:`crowdzoo.zoo.route_settings`), read from source
    without imports."""
    return {k: d for k, (d, _) in route_signature_static(e, method).items()}


def model_defaults_static(e: Entry) -> dict:
    """{field: default} of a model's dataclass, read from its source with ``ast`` (nothing imported):
    the defaults ``Model()`` builds with, which the CLI shows in ``fit --help`` and passes on unchanged
    (a default that is not a Python literal is left out)."""
    import ast

    module, _, name = e.model.partition(":")
    path = _source_file(module)
    if path is None:
        return {}
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    out = {}
    for base in ([] if cls is None else cls.bases):  # fields a model inherits from a zoo model (GPPLPerUser)
        parent = next((x for x in ZOO if x.model.split(":")[1] == getattr(base, "id", None)), None)
        if parent is not None:
            out.update(model_defaults_static(parent))
    for node in [] if cls is None else cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            try:
                out[node.target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def method_defaults_static(module: str, cls: str, name: str) -> dict:
    """{parameter: default} of the method ``cls.name`` of ``module``, read from its source with ``ast``
    (nothing imported; a default that is not a Python literal is left out): the Python API's defaults
    that the command line's options share (e.g. the columns of ``ChoiceData.from_frame``)."""
    import ast

    path = _source_file(module)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    args = fn.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    out = {}
    for arg, default in pairs:
        try:
            out[arg.arg] = ast.literal_eval(default)
        except ValueError:
            continue
    return out


#: CLI option → the model setting it fills (only models with that setting receive it)
MODEL_OPTIONS = {"n_inducing": "n_inducing", "kernel": "kernel", "components": "n_components",
                 "n_inducing_users": "n_inducing_users", "item_residual": "item_residual",
                 "order_effect": "order_effect"}

#: the model options that are switches (a bare flag turns the setting on; its help names its models)
SWITCHES = frozenset({"order_effect"})


def has_setting(e: Entry, name: str) -> bool:
    """Whether the model of ``e`` has the setting ``name`` (a field of its dataclass, read from source),
    and its table entry does not declare that no route honours it (a setting inherited from another
    model, ``honours={name: ()}``)."""
    return name in model_defaults_static(e) and e.honours.get(name, True) != ()


#: the model settings the links options fill: {CLI option: model setting}
LINK_MODEL_OPTIONS = {"components": "n_clusters", "latent_dim": "latent_dim", "hidden": "hidden",
                      "standardise": "standardise"}


#: route parameters that are not command-line flags (objects, or set by the CLI itself)
NOT_FLAGS = frozenset({"setup", "callback", "resume", "checkpoint", "progress_bar", "guide", "entry", "seed"})


#: ``--n-inducing all``: every item inducing (the model setting None)
ALL = "all"


_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


def _setting_type(default, annotation):
    """The CLI type of a route setting: from its default, else its annotation (``float | None``)."""
    if isinstance(default, bool | int | float | str):
        return type(default)
    if default is None and annotation:
        for name in (t.strip() for t in annotation.split("|")):
            if name in _TYPES:
                return _TYPES[name]
    return None


@dataclasses.dataclass(frozen=True)
class RouteFlag:
    """One generated flag: the route setting ``name`` of every route that has it."""

    name: str
    flag: str
    type: type
    defaults: tuple  # ((default, (route, ...)), ...)

    @property
    def dest(self) -> str:
        return f"route_{self.name}"

    def help(self) -> str:
        shown = "; ".join(f"{'unset' if d is None else repr(d)} ({', '.join(routes)})"
                          for d, routes in self.defaults)
        unset = UNSET.get(self.name) if any(d is None for d, _ in self.defaults) else None
        return f"route setting {self.name}; default {shown}" + (f"; unset: {unset}" if unset else "")


#: what a route setting left unset (None) does, for the settings whose help says it (the route's
#: docstring has the whole rule)
UNSET = {"learn_kernel": "learned where the items have features and the model leaves the length-scales "
                         "to the median heuristic, and (gppl natgrad) each step takes every label or "
                         "(crowdgppl natgrad) the items are sparse: in the fit up to 2e5 labels, above "
                         "that before it, by GPPL on 1e4 of the labels pooled over users "
                         "(--no-learn-kernel: the median heuristic)",
         "tol": "1e-4, or 3e-4 while the kernel learns"}


@functools.lru_cache(maxsize=1)
def route_flags() -> dict:
    """{setting: RouteFlag} over every route of the zoo, read from the routes' source (no torch)."""
    found: dict = {}
    for e in zoo.ZOO:
        for method in e.routes:
            where = method if e.is_generic(method) else f"{e.name} {method}"
            for name, (default, ann) in route_signature_static(e, method).items():
                t = _setting_type(default, ann)
                if name in NOT_FLAGS or t is None:
                    continue
                types, defaults = found.setdefault(name, (set(), {}))
                types.add(t)
                routes = defaults.setdefault(default, [])
                if where not in routes:
                    routes.append(where)
    out = {}
    for name, (types, defaults) in found.items():
        t = types.pop() if len(types) == 1 else float if types <= {int, float} else str
        out[name] = RouteFlag(name, "--" + name.replace("_", "-"), t,
                              tuple((d, tuple(r)) for d, r in defaults.items()))
    return out
