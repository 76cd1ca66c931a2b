"""The plan of a fit: the model, the route and the settings the command line's options fill. Every
option given must apply to the chosen model and route; one that does not is refused, naming its flag
(the pairs fit of :mod:`crowdzoo.cli.fit` and the links fit of :mod:`crowdzoo.cli.links` both plan
with :func:`plan_fit`).
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

from .. import zoo
from ..errors import DataError
from .flags import ALL, MODEL_OPTIONS, _setting_type, has_setting, route_flags, route_signature_static
from .reading import has_counts

#: options that describe --users (only crowd models take them) and --items
USER_OPTIONS = ("users", "user_col", "user_id_col", "user_features", "user_one_hot")
ITEM_OPTIONS = ("id_col", "features", "one_hot")


def _flag(opt: str) -> str:
    return "--" + opt.replace("_", "-")


def _route(args):
    """(entry, the route's settings read from its source, "<model>'s '<route>' route"); the default
    route where --method is not given."""
    e = zoo.entry(getattr(args, "model", "gppl"))
    args.method = args.method or e.default
    if args.method not in e.routes:
        raise DataError(f"--method: {e.name} has no route {args.method!r}; its routes are {list(e.routes)} "
                        f"(default {e.default!r})", arg="--method")
    return e, route_signature_static(e, args.method), f"{e.name}'s {args.method!r} route"


def _route_settings(args, static: dict, where: str) -> dict:
    """The route settings given as flags; a flag the route does not take, or a fraction for a whole
    number, is refused."""
    flags = route_flags()
    settings = {}
    for name, spec in flags.items():
        value = getattr(args, spec.dest, None)
        if value is None:
            continue
        if name not in static:
            takes = sorted(flags[n].flag for n in static if n in flags)
            raise DataError(f"{spec.flag}: not a setting of {where}; it takes {', '.join(takes) or 'none'}",
                            arg=spec.flag)
        if _setting_type(*static[name]) is int and isinstance(value, float):
            if not value.is_integer():
                raise DataError(f"{spec.flag}: {where} takes a whole number, got {value}", arg=spec.flag)
            value = int(value)
        settings[name] = value
    return settings


def _resume(args, static: dict, where: str) -> dict:
    """{"resume": the checkpoint} for --resume, where the route keeps checkpoints and the file exists."""
    if not getattr(args, "resume", None):
        return {}
    if "resume" not in static:
        can = [f"{x.name} {m}" for x in zoo.ZOO for m in x.routes if "resume" in route_signature_static(x, m)]
        raise DataError(f"--resume: {where} keeps no checkpoint to resume from; the routes that do: "
                        f"{', '.join(can)}", arg="--resume")
    if not Path(args.resume).is_file():
        raise DataError(f"--resume: no checkpoint file {args.resume} (an interrupted fit writes "
                        "OUT/checkpoint.pt)", arg="--resume")
    return {"resume": str(args.resume)}


def _progress(args, static: dict) -> dict:
    """The route's progress_bar: off with --no-progress, log lines when stderr is not a terminal."""
    if "progress_bar" not in static:
        return {}
    if args.no_progress:
        return {"progress_bar": False}
    return {} if sys.stderr.isatty() else {"progress_bar": "log"}  # a file: a line every 30 s, not a bar


def _check_tables(args, e) -> None:
    """Options of --users only for crowd models and with --users; of --items only with --items; a
    winner-first file names no label column."""
    if not zoo.takes_users(e):
        crowd_models = [x.name for x in zoo.ZOO if zoo.takes_users(x)]
        for opt in (o for o in USER_OPTIONS if getattr(args, o, None) is not None):
            raise DataError(f"{_flag(opt)}: {e.name} pools every user's labels into one preference, so it "
                            f"takes no users; to model users fit one of {crowd_models}", arg=_flag(opt))
    for opt in USER_OPTIONS[2:]:
        if getattr(args, opt, None) is not None and not getattr(args, "users", None):
            raise DataError(f"{_flag(opt)}: applies to --users, which was not given", arg=_flag(opt))
    for opt in ITEM_OPTIONS:
        if getattr(args, "items", "") is None and getattr(args, opt, None) is not None:
            raise DataError(f"{_flag(opt)}: applies to --items, which was not given", arg=_flag(opt))
    if getattr(args, "order_effect", None) and (getattr(args, "winner_first", False)
                                                 or getattr(args, "y_col", "y") == ""):
        raise DataError("--order-effect: a winner-first file lists each pair's winner first, so its order is "
                        "its outcome and a first item's advantage cannot be learned; give each pair in the "
                        "order it was played or shown (home and away, shown first and second) with a label "
                        "column (--y-col), or drop --order-effect", arg="--order-effect")
    if getattr(args, "winner_first", False) and args.y_col not in ("y", ""):
        raise DataError(f"--winner-first: says --pairs has no label column, but --y-col names one "
                        f"({args.y_col!r}); give one or the other", arg="--winner-first")
    if has_counts(args):  # a file of counts: its columns of wins, losses and ties are its labels
        for flag, given, why in (
                ("--y-col", getattr(args, "y_col", "y") not in ("y", ""), "a row of counts has no label "
                 "column"),
                ("--winner-first", getattr(args, "winner_first", False), "a row of counts has no winner"),
                ("--tie-col", getattr(args, "tie_col", None), "a row's ties are counted in --ties-col"),
                ("--weight-col", getattr(args, "weight_col", None),
                 "the counts are the rows' weights; give a weight per row or counts, not both")):
            if given:
                raise DataError(f"{flag}: not with --wins-col, --losses-col or --ties-col (counts per pair): "
                                f"{why}", arg=flag)


def _model_settings(args, e) -> dict:
    """The model settings the options fill (those not given keep the model's own defaults, as
    ``crowdzoo.fit(Model(), data)`` has them); an option the model has no setting for is refused, naming
    the models that have it."""
    cls = e.model_class()
    fields = {p for p in inspect.signature(cls).parameters}  # what the constructor takes by name
    model_kw = {}
    for opt, name in MODEL_OPTIONS.items():
        value = getattr(args, opt, None)
        if value is None:
            continue
        if name not in fields or e.honours.get(name, True) == ():
            have = [x.name for x in zoo.ZOO if x.data != "links" and has_setting(x, name)]
            raise DataError(f"{_flag(opt)}: {e.name} ({cls.__name__}) has no setting {name}; the models that "
                            f"have it: {', '.join(have) or 'none'}", arg=_flag(opt))
        model_kw[name] = None if value == ALL else value
    return model_kw


def plan_fit(args) -> dict:
    """The model, route and settings a fit will use: {"entry", "settings" (the route's), "model_kw"
    (the model's), "static" (the route's signature)}. Every option the user gave must apply to the
    chosen model and route: one that does not is refused (a DataError naming the flag)."""
    e, static, where = _route(args)
    settings = {**_route_settings(args, static, where), **_resume(args, static, where),
                **_progress(args, static)}
    if getattr(args, "quick", False) and args.method == "natgrad" and "max_iter" not in settings:
        settings["max_iter"] = 200
    _check_tables(args, e)
    return {"entry": e, "settings": settings, "model_kw": _model_settings(args, e), "static": static}
