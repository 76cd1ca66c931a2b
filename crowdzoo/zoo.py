"""The zoo's one table: every model, the data it takes, its routes, its posterior and its example.

``crowdzoo.fit``, ``crowdzoo.load``, ``crowdzoo``'s model names, the CLI (``crowdzoo fit``,
``crowdzoo models``), the docs' route table and API pages and the tests' round trips read
:data:`ZOO`; nothing else names a model. Adding a model is its package plus one :class:`Entry`:
here for a model of crowdzoo, or ``crowdzoo.register(Entry(...))`` in a module of one's own
(docs/guides/add-a-model.md).

Entries name their classes and functions by import path ("module:name"), so reading the table
imports nothing heavy (the CLI answers ``--help`` without torch). Routes are either a model's own
(``crowdzoo.models.<name>.<route>:fit_<route>``) or one of the generic engines, which run any
model that offers ``setup(data, seed)`` and ``program(setup, data, subsample_size)`` and whose
posterior class offers ``from_draws``: :data:`SVI`, :data:`NUTS`, :data:`MAP`.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from .errors import DataError

SVI = "crowdzoo.inference.svi:fit_svi"
NUTS = "crowdzoo.inference.nuts:fit_nuts"
MAP = "crowdzoo.inference.map:fit_map"
GENERIC = (SVI, NUTS, MAP)

#: what each data kind needs: a PairwiseData, with a user per label for "crowd pairs"
DATA_KINDS = {"pairs": "PairwiseData (users, if any, are pooled)",
              "crowd pairs": "PairwiseData with a user per label (users=...)",
              "worker pairs": "PairwiseData; a user per label, when given, is the worker who gave it",
              "links": "LinkData: observations of every item, workers' same/different labels on pairs"}


def takes_users(e) -> bool:
    """Whether the model reads the user of each label (required for "crowd pairs")."""
    return e.data in ("crowd pairs", "worker pairs")


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class Example(NamedTuple):
    """A model's tiny example: a small ``model`` and ``data`` it fits in about a second with
    ``settings[route]`` (the keyword arguments of ``crowdzoo.fit`` for that route; the generic
    engines' routes may be left out, their quick settings are the tests'). ``choices``: for a model
    whose table entry lists routes that take choices (``Entry.choices``), a small
    :class:`~crowdzoo.data.ChoiceData` those routes fit with the same settings; None otherwise."""

    model: Any
    data: Any
    settings: dict = {}
    choices: Any = None


#: how ``Entry.honours`` names a route that honours a model setting: ``"svi"`` (always),
#: ``"natgrad if learn_kernel"`` (only when the fit passes ``learn_kernel=True``), ``"natgrad if
#: learn_kernel != False"`` (unless the fit passes ``learn_kernel=False``; unset, the route's default
#: decides). A setting is in use when its value is neither None, False nor the model class's default.
HONOURS = ('"route"', '"route if flag"', '"route if flag != False"')


def _honour_spec(spec, where: str = "honours") -> tuple:
    """(route, flag or None, whether the flag must be true rather than merely not False)."""
    route, _, cond = str(spec).partition(" if ")
    flag, _, rest = cond.partition(" != ")
    bad_flag = cond and not flag.isidentifier()
    if not route or any(c.isspace() for c in route) or bad_flag or rest not in ("", "False"):
        raise DataError(f"{where}: expected one of {', '.join(HONOURS)}, got {spec!r}")
    return route, (flag or None), not rest


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One model of the zoo, written with keywords.

    ``name``: as the CLI and saved files spell it. ``model``: its class. ``data``: a key of
    :data:`DATA_KINDS`. ``routes``: method → fit function (the first is the default).
    ``posterior``: its posterior class. ``example``: a function ``(seed=0) -> Example`` that makes a
    tiny model and data set, from which the tests fit, save, load and predict every route.
    ``guide``: the default guide factory for :data:`SVI`. ``n_draws``: the draws an svi fit keeps.
    ``ties``: the routes that model a tie as a third outcome (labels y = 0.5 of
    ``PairwiseData.from_frame(..., ties="model")``; :mod:`crowdzoo.gp.ordinal`); the others refuse
    such data. ``choices``: the routes that take a :class:`~crowdzoo.data.ChoiceData` (best-of-k and
    best–worst choices; :mod:`crowdzoo.gp.choice`); the others refuse it. ``weights``: the routes that
    honour label weights (``PairwiseData.weights``: a label of weight w counts as w copies of it;
    :meth:`~crowdzoo.PairwiseData.from_counts`, ``ties="half"``); the others refuse weighted data.
    ``honours``: model setting → the routes that honour it (:data:`HONOURS`); ``fit`` refuses a model
    with that setting in use on any other route, so no route ignores a setting silently. ``paper`` and
    ``summary``: for ``crowdzoo models`` and the docs. Classes and functions are named by import path
    (``"package.module:name"``).
    """

    name: str
    model: str
    data: str
    routes: dict
    posterior: str
    example: str
    guide: str | None = None
    n_draws: int = 300
    ties: tuple = ()
    choices: tuple = ()
    weights: tuple = ()
    honours: dict = field(default_factory=dict)
    paper: str = ""
    summary: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            raise DataError(f"name: a model's name is a word without spaces, got {self.name!r}")
        if self.data not in DATA_KINDS:
            raise DataError(f"data: {self.name}'s data kind must be one of {list(DATA_KINDS)}, "
                            f"got {self.data!r}")
        if not isinstance(self.routes, dict) or not self.routes:
            raise DataError(f"routes: {self.name} needs at least one route "
                            f"{{method: 'module:fit_function'}}, got {self.routes!r}")
        for what in ("ties", "choices", "weights"):
            odd = [m for m in getattr(self, what) if m not in self.routes]
            if odd:
                raise DataError(f"{what}: {self.name} has no route {odd[0]!r} to take {what} with; its "
                                f"routes are {list(self.routes)}")
        for setting, specs in self.honours.items():
            for spec in specs:
                route = _honour_spec(spec, f"honours[{setting!r}]")[0]
                if route not in self.routes:
                    raise DataError(f"honours: {self.name} has no route {route!r} to honour {setting} with; "
                                    f"its routes are {list(self.routes)}")
        named = {"model": self.model, "posterior": self.posterior, "example": self.example,
                 "guide": self.guide, **{f"routes[{m!r}]": p for m, p in self.routes.items()}}
        for what, path in named.items():
            if path is None and what == "guide":
                continue
            module, _, attr = path.partition(":") if isinstance(path, str) else ("", "", "")
            if not module or not attr:
                raise DataError(f"{what}: {self.name} names it by import path 'package.module:name', "
                                f"got {path!r}")

    @property
    def default(self) -> str:
        return next(iter(self.routes))

    def model_class(self):
        return _load(self.model)

    def posterior_class(self):
        return _load(self.posterior)

    def default_guide(self):
        return None if self.guide is None else _load(self.guide)

    def make_example(self, seed: int = 0) -> Example:
        """The model's tiny :class:`Example` (its model, data and quick settings per route)."""
        return _load(self.example)(seed=seed)

    def route(self, method: str):
        """The fit function of ``method``, or a DataError naming the routes this model has."""
        if method not in self.routes:
            raise DataError(f"method: {self.name} has no route {method!r}; its routes are "
                            f"{list(self.routes)} (default {self.default!r})")
        return _load(self.routes[method])

    def is_generic(self, method: str) -> bool:
        return self.routes[method] in GENERIC

    def paths(self) -> tuple:
        """Every import path the entry names."""
        return (self.model, self.posterior, *self.routes.values(),
                *(() if self.guide is None else (self.guide,)), self.example)


_M = "crowdzoo.models"

#: the table; :func:`register` adds a model of one's own (appending an Entry works too)
ZOO: list[Entry] = [
    Entry(name="gppl", model=f"{_M}.gppl.model:GPPL", data="pairs",
          routes={"natgrad": f"{_M}.gppl.natgrad:fit_natgrad", "ep": f"{_M}.gppl.ep:fit_ep", "svi": SVI,
                  "nuts": NUTS},
          posterior=f"{_M}.gppl.posterior:GPPLPosterior", example=f"{_M}.gppl.examples:tiny", n_draws=1000,
          ties=("natgrad", "ep", "svi", "nuts"), choices=("svi", "nuts", "natgrad"),
          weights=("natgrad", "ep", "svi", "nuts"),
          honours={"item_residual": ("natgrad", "svi", "nuts"),
                   "lengthscale_prior": ("svi", "nuts", "natgrad if learn_kernel != False",
                                         "ep if learn_kernel"),
                   "order_effect": ("natgrad", "ep", "svi", "nuts")},
          paper="Chu & Ghahramani 2005; Simpson & Gurevych 2020 §3.1",
          summary="GP preference learning for one user (or a pooled crowd)"),
    Entry(name="crowdgppl", model=f"{_M}.crowdgppl.model:CrowdGPPL", data="crowd pairs",
          routes={"natgrad": f"{_M}.crowdgppl.routes:fit_natgrad", "svi": SVI, "nuts": NUTS},
          posterior=f"{_M}.crowdgppl.posterior:CrowdGPPLPosterior", example=f"{_M}.crowdgppl.examples:tiny",
          guide=f"{_M}.crowdgppl.guide:default_guide", paper="Simpson & Gurevych 2020 §3.2",
          ties=("natgrad", "svi", "nuts"), choices=("svi", "nuts", "natgrad"),
          weights=("natgrad", "svi", "nuts"),
          honours={**{p: ("svi", "nuts", "natgrad if learn_kernel")
                      for p in ("lengthscale_prior", "user_lengthscale_prior")},
                   "order_effect": ("natgrad", "svi", "nuts")},
          summary="consensus and personal preferences: GP matrix factorisation"),
    Entry(name="collabgp", model=f"{_M}.collabgp.model:CollabGP", data="crowd pairs",
          routes={"ep": f"{_M}.collabgp.ep_vb:fit_ep", "svi": SVI, "nuts": NUTS},
          posterior=f"{_M}.collabgp.posterior:CollabGPPosterior", example=f"{_M}.collabgp.examples:tiny",
          guide=f"{_M}.collabgp.guide:default_guide", paper="Houlsby et al. 2012",
          weights=("ep", "svi", "nuts"),
          honours={"lengthscale_prior": ("svi", "nuts"), "user_lengthscale_prior": ("svi", "nuts")},
          summary="collaborative GP preference learning over item pairs (EP + VB)"),
    Entry(name="bradley-terry", model=f"{_M}.bradley_terry.model:BradleyTerry", data="pairs",
          routes={"map": MAP, "svi": SVI, "nuts": NUTS},
          posterior=f"{_M}.bradley_terry.posterior:BradleyTerryPosterior",
          example=f"{_M}.bradley_terry.examples:tiny", n_draws=1000, ties=("map", "svi", "nuts"),
          choices=("map", "svi", "nuts"), weights=("map", "svi", "nuts"),
          honours={"order_effect": ("map", "svi", "nuts")},
          paper="Bradley & Terry 1952; Thurstone 1927",
          summary="independent utilities without features (logit or probit link); the worked "
                  "example of docs/guides/add-a-model.md"),
    Entry(name="gppl-per-user", model=f"{_M}.baselines.gppl_per_user:GPPLPerUser", data="crowd pairs",
          routes={"natgrad": f"{_M}.baselines.gppl_per_user:fit_natgrad"},
          posterior=f"{_M}.baselines.gppl_per_user:PerUserPosterior",
          example=f"{_M}.baselines.examples:gppl_per_user", weights=("natgrad",),
          honours={"order_effect": ()},  # a GPPL's setting that GPPL per user has not
          paper="Simpson & Gurevych 2020 §5", summary="an independent GPPL per user (baseline)"),
    Entry(name="crowdbt-gp", model=f"{_M}.baselines.crowdbt_gp:CrowdBTGP", data="worker pairs",
          routes={"map": f"{_M}.baselines.crowdbt_gp:fit_map"},
          posterior=f"{_M}.baselines.crowdbt_gp:CrowdBTGPPosterior",
          example=f"{_M}.baselines.examples:crowdbt_gp", weights=("map",),
          paper="Chen et al. 2013; Simpson & Gurevych 2020 Table 3",
          summary="crowdBT scores regressed on features by a sparse GP (baseline)"),
    Entry(name="dpm", model=f"{_M}.dpm.model:DPMCommunities", data="crowd pairs",
          routes={"gibbs": f"{_M}.dpm.gibbs:fit_gibbs", "svi": SVI, "nuts": NUTS},
          posterior=f"{_M}.dpm.posterior:DPMPosterior", example=f"{_M}.dpm.examples:tiny",
          guide=f"{_M}.dpm.guide:default_guide", paper="Abbasnejad, Sanner, Bonilla & Poupart 2013",
          honours={"lengthscale_prior": ("svi", "nuts")}, ties=("gibbs", "svi", "nuts"),
          weights=("gibbs", "svi", "nuts"),
          summary="communities of users (Dirichlet-process mixture), a GP utility per community"),
    Entry(name="scdc", model=f"{_M}.scdc.model:SCDC", data="links", routes={"svi": f"{_M}.scdc.svi:fit_svi"},
          posterior=f"{_M}.scdc.posterior:SCDCPosterior", example=f"{_M}.scdc.examples:scdc",
          paper="Luo, Tian, Shi, Zhu & Zhang 2018 §2",
          summary="clusters of items from observations and noisy crowd links (deep generative "
                  "model, two-coin workers)"),
    Entry(name="bayesscdc", model=f"{_M}.scdc.bayes:BayesSCDC", data="links",
          routes={"natgrad": f"{_M}.scdc.natgrad:fit_natgrad"},
          posterior=f"{_M}.scdc.posterior:SCDCPosterior", example=f"{_M}.scdc.examples:bayesscdc",
          paper="Luo, Tian, Shi, Zhu & Zhang 2018 §3",
          summary="SCDC with conjugate priors: structured VI, message passing with the crowd's links, "
                  "clusters switched off, Beta workers"),
]


def register(e: Entry) -> Entry:
    """Add a model of one's own to the table: ``crowdzoo.register(Entry(name=..., model="mypkg.model:MyModel",
    ...))`` in any importable module. ``crowdzoo.fit``, ``load``, ``report`` and the tests' round trips
    then take it like a model of crowdzoo; ``load`` resolves the classes a file names in the packages
    of registered models only, so import the module that registers a model before loading its fits.
    A DataError if the name or the model class is in the table already. Returns the entry."""
    if not isinstance(e, Entry):
        raise DataError(f"entry: register takes a crowdzoo.zoo.Entry, got {type(e).__name__}")
    for other in ZOO:
        if other.name == e.name:
            raise DataError(f"name: the zoo has a model called {e.name!r} already ({other.model})")
        if other.model == e.model:
            raise DataError(f"model: {e.model} is in the zoo already, as {other.name!r}")
    ZOO.append(e)  # fit and load trust its packages when they run (register stays free of torch)
    return e


#: the entry-point group through which an installed package declares models of its own: each entry
#: names a module that calls :func:`register` when imported, e.g. in its pyproject.toml
#: ``[project.entry-points."crowdzoo.models"] my-model = "mypkg"``
ENTRY_POINTS = "crowdzoo.models"
_plugins_loaded = False


def load_plugins() -> None:
    """Import, once per process, every module that an installed package names in the entry-point
    group :data:`ENTRY_POINTS`, so that the models it registers are in the table (the command line,
    ``entry`` and ``load`` call this before they read the table). A module that fails to import is a
    DataError naming the entry and its package."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        try:
            ep.load()
        except Exception as err:  # a broken plugin is named, not a traceback from deep inside it
            dist = getattr(ep, "dist", None)
            raise DataError(f"{ENTRY_POINTS}: the entry {ep.name!r} = {ep.value!r} of the installed package "
                            f"{getattr(dist, 'name', '?')!r} failed to import ({type(err).__name__}: {err}); "
                            "fix or uninstall that package") from err


def outside_packages() -> set:
    """The packages, outside crowdzoo, of the classes and functions the table names: for a module
    ``a.b.c`` its package ``a.b``, for a top-level module itself."""
    out = set()
    for e in ZOO:
        for path in e.paths():
            module = path.partition(":")[0]
            if module.split(".")[0] != "crowdzoo":
                out.add(module.rpartition(".")[0] or module)
    return out


def _trust_registered() -> None:
    """Let ``load`` (and a route resuming from a checkpoint) resolve classes in the registered models'
    packages outside crowdzoo."""
    load_plugins()
    packages = outside_packages()
    if packages:
        from .core import io

        io.trust(packages)


def entry(name: str) -> Entry:
    """The entry called ``name``."""
    load_plugins()  # once per process: the installed packages' models are in the table too
    for e in ZOO:
        if e.name == name:
            return e
    raise DataError(f"model: unknown model {name!r}; the zoo has {[e.name for e in ZOO]}")


def entry_for(model) -> Entry:
    """The entry of a model instance (its class or the nearest base class in the table)."""
    paths = {e.model: e for e in ZOO}
    for cls in type(model).__mro__:
        e = paths.get(f"{cls.__module__}:{cls.__qualname__}")
        if e is not None:
            return e
    raise DataError(f"model: {type(model).__name__} is not a model of the zoo; build one of "
                    f"{[e.model.split(':')[1] for e in ZOO]}, or add yours with "
                    "crowdzoo.register(Entry(...))")


def _check_choices(e: Entry, data, method: str | None) -> None:
    """Refuse choice data on a model or route without a choice likelihood, naming those that have one."""
    if method in e.choices:
        if e.data == "crowd pairs" and data.users is None:
            raise DataError(f"users: {e.name} needs a user per choice (ChoiceData(..., users=...)); for one "
                            "user's choices fit gppl", arg="users", problem="no user per choice")
        return
    which = [f"{x.name} ({', '.join(x.choices)})" for x in ZOO if x.choices]
    use = (f"fit it with {{method={e.choices[0]!r}}} (its routes with choices: {list(e.choices)})"
           if e.choices else f"fit a model with a choice likelihood: {'; '.join(which)}")
    raise DataError(f"data: {e.name}'s {method!r} route has no likelihood of choices among k items: {use}, "
                    "or break the choices into pairs (data.rank_breaking())", arg="data",
                    problem=f"choices, which {e.name}'s {method!r} route cannot model",
                    settings=("method",))


def _check_data(e: Entry, data, method: str | None = None) -> None:
    from .data import ChoiceData, LinkData, PairwiseData

    if isinstance(data, ChoiceData):
        _check_choices(e, data, method)
        return

    if e.data == "links":
        if not isinstance(data, LinkData):
            raise DataError(f"data: {e.name} clusters items from links: expected a crowdzoo.LinkData, got "
                            f"{type(data).__name__} (build one with LinkData.from_arrays or .from_frame)")
        return

    if not isinstance(data, PairwiseData):
        raise DataError(f"data: expected a crowdzoo.PairwiseData, got {type(data).__name__} "
                        "(build one with PairwiseData.from_arrays or .from_frame)")
    if e.data == "crowd pairs" and data.users is None:
        raise DataError(f"users: {e.name} needs a user per label (PairwiseData(..., users=...)); "
                        "for one user's labels fit gppl")
    if method is not None and method not in e.ties and data.has_ties:
        r = int((data.y == 0.5).argmax())
        which = [x.name for x in ZOO if x.ties]
        use = (f"fit it with {{method={e.ties[0]!r}}} (its routes with ties: {list(e.ties)})"
               if e.ties else f"fit a model with a tie likelihood ({', '.join(which)})")
        raise DataError(f"y: row {r}: a tie (y = 0.5), and {e.name}'s {method!r} route has no tie "
                        f"likelihood: {use}, or build the data with ties='half' or 'drop'", arg="y", row=r,
                        problem=f"a tie, which {e.name}'s {method!r} route cannot model",
                        settings=("method",))
    if method is not None and method not in e.weights and data.weights is not None:
        r = int((data.weights != 1.0).argmax())
        which = [x.name for x in ZOO if x.weights]
        use = (f"fit it with {{method={e.weights[0]!r}}} (its routes with label weights: {list(e.weights)})"
               if e.weights else f"fit a model whose routes take them ({', '.join(which)})")
        raise DataError(f"weights: row {r}: a label of weight {data.weights[r]:g}, and {e.name}'s {method!r} "
                        f"route does not take label weights: {use}, or give each label as a row of its own",
                        arg="weights", row=r,
                        problem=f"a weighted label, which {e.name}'s {method!r} route cannot take",
                        settings=("method",))


def _in_use(model, name: str) -> bool:
    """Whether the model's setting ``name`` is set: neither None, False nor its class's default."""
    value = getattr(model, name, None)
    if value is None or value is False:
        return False
    default = next((f.default for f in fields(model) if f.name == name), None)
    return not (type(value) is type(default) and isinstance(value, (str, int, float)) and value == default)


def _honour_text(spec) -> str:
    route, flag, strict = _honour_spec(spec)
    if flag is None:
        return repr(route)
    return f"{route!r} with {{{flag}=True}}" if strict else f"{route!r} unless {{{flag}=False}}"


def _check_honoured(e: Entry, model, method: str, settings: dict, accepted: dict) -> None:
    """Refuse a model setting in use that ``method`` would ignore, by ``e.honours``: a DataError naming
    the setting and the routes (and their settings) that honour it."""
    for name, specs in e.honours.items():
        if not _in_use(model, name):
            continue
        ok = False
        for spec in specs:
            route, flag, strict = _honour_spec(spec)
            if route != method:
                continue
            value = settings.get(flag, accepted.get(flag)) if flag else True
            ok = ok or (bool(value) if strict else value is not False)
        if ok:
            continue
        flags = sorted({f for f in (_honour_spec(x)[1] for x in specs) if f})
        routes = ", ".join(_honour_text(x) for x in specs)
        use = next((r for r, f, _ in map(_honour_spec, specs) if f is None), None)
        raise DataError(f"{name}: {e.name}'s {method!r} route would ignore it"
                        + "".join(f" with {{{f}={settings[f]!r}}}" for f in flags if f in settings)
                        + f"; the routes that honour it: {routes} (drop {name}"
                        + (f", or fit with {{method={use!r}}}" if use else "") + ")",
                        arg=name, problem=f"a setting {e.name}'s {method!r} route would ignore",
                        settings=("method", *flags))


def route_settings(fn) -> dict:
    """The settings a route accepts (its keyword arguments after model, data and seed), with defaults."""
    out = {}
    for p in list(inspect.signature(fn).parameters.values())[2:]:
        if p.name in ("seed", "entry") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out[p.name] = p.default
    return out


def fit(model, data, method: str | None = None, seed: int = 0, check_confidence: bool = True, **settings):
    """Fit ``model`` to ``data`` by ``method`` (default: the model's first route in :data:`ZOO`; for a
    :class:`~crowdzoo.data.ChoiceData`, its first route in the entry's ``choices``) and return its
    posterior.

    ``crowdzoo models`` lists every model's routes. ``settings`` go to the route (see its
    ``fit_<route>`` function, e.g. :func:`crowdzoo.models.gppl.natgrad.fit_natgrad`); an unknown
    setting is a DataError that lists the accepted ones. ``seed`` makes the fit reproducible bit for
    bit, without touching the caller's random state.

    ``check_confidence``: check pairwise fits for predictions far more confident than the data
    support (:mod:`crowdzoo.diagnostics.confidence`: a refit without a tenth of the labels, only when
    a fifth of the training labels are predicted beyond .99), warn
    (:class:`~crowdzoo.errors.OverconfidenceWarning`) and keep the result in
    ``posterior.settings["confidence"]``.
    """
    e = entry_for(model)
    _trust_registered()
    if method is None:  # choices default to the model's first route that takes them
        method = e.choices[0] if hasattr(data, "sets") and e.choices else e.default
    fn = e.route(method)
    _check_data(e, data, method)
    accepted = route_settings(fn)
    unknown = [k for k in settings if k not in accepted]
    if unknown:
        raise DataError(f"{unknown[0]}: not a setting of {e.name}'s {method!r} route; it accepts "
                        f"{sorted(accepted)}")
    _check_honoured(e, model, method, settings, accepted)
    post = _route_fit(e, method, fn, model, data, seed, settings)
    pairwise = e.data != "links" and not hasattr(data, "sets")  # the check refits pairs, not choices
    if check_confidence and pairwise and not settings.get("distributed"):
        from .diagnostics.confidence import check

        quiet = {k: v for k, v in settings.items() if k not in ("checkpoint", "resume", "callback")}
        if "progress_bar" in accepted:
            quiet["progress_bar"] = False
        result = check(post, data, method, lambda part: _route_fit(e, method, fn, model, part, seed, quiet),
                       users=takes_users(e) and data.users is not None, seed=seed)
        if result is not None:
            post.settings["confidence"] = result
    return post


def _route_fit(e: Entry, method: str, fn, model, data, seed: int, settings: dict):
    """The route's posterior, stamped with the model's name in the table (``posterior.name``)."""
    if e.is_generic(method):
        post = fn(model, data, seed=seed, entry=e, **settings)
    else:
        post = fn(model, data, seed=seed, **settings)
    post.model_name = e.name
    return post


def load(path):
    """Load any posterior written by ``posterior.save(path)``; predictions are identical. The classes
    the file names are resolved in crowdzoo and in the packages of the models registered in
    :data:`ZOO`."""
    from .core.io import load as _load_posterior

    _trust_registered()
    return _load_posterior(path)


def route_table(markdown: bool = True) -> str:
    """The table of models and routes (``crowdzoo models``; the docs embed its Markdown)."""
    rows = [(e.name, e.model.split(":")[1], e.data, ", ".join(
        f"**{m}**" if m == e.default else m for m in e.routes), e.summary) for e in ZOO]
    if not markdown:
        w = [max(len(r[i].replace("**", "")) for r in rows) for i in range(3)]
        return "\n".join(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3].replace('**', '')}"
                         f" (default {r[3].split('**')[1]})" for r in rows)
    head = "| model | class | data | routes (default in bold) | what it is |\n|---|---|---|---|---|\n"
    return head + "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"
