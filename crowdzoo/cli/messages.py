"""Messages in the command line's words.

A :class:`~crowdzoo.errors.DataError` of the data API carries the argument at fault (``arg``), the
row, the offending ids and the problem in words that name no Python argument. The command line says
where each argument lives for the command at hand — a table ``{argument: place}``, e.g. ``{"y":
"--pairs, column 'label' (--y-col)"}`` — and what its own options offer against a fault of it, and
builds its message from those fields (:func:`cli_message`); it never rewrites the Python message.
Warnings of a command come as one ``crowdzoo: warning:`` line each; Ctrl-C as one line naming the
checkpoint and the command that continues the fit.

A fit's errors and warnings that advise on its settings name them by placeholders
(:class:`~crowdzoo.errors.Advises`); the command line fills those with its flags (:func:`cli_setting`),
so that no message is searched for setting names.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from .. import zoo
from ..errors import Advises, DataError, _show, python_setting
from .flags import ALL, LINK_MODEL_OPTIONS, MODEL_OPTIONS, route_flags, route_signature_static

#: where the tables of a pairs fit live, for the arguments that name them
TABLES = {"items": "--items", "item_features": "--items", "item_ids": "--items", "users": "--users",
          "user_features": "--users", "user_ids": "--users"}
#: what ``fit`` offers against a fault of an argument ("ARG ids": ids of the argument's column that its
#: table lacks)
FIT_ADVICE = {
    "ties": "pass --ties drop to leave ties out, --ties half to count each as half a win each way, or "
            "--ties model to model them as a third outcome",
    "a ids": "give every item of --pairs a row in --items, or leave --items out (the items are then the "
             "ids seen in --pairs)",
    "b ids": "give every item of --pairs a row in --items, or leave --items out (the items are then the "
             "ids seen in --pairs)",
    "user ids": "give every user of --pairs a row in --users",
}
#: what ``predict`` offers against a user the run was not fitted on
UNSEEN_USER = ("check the ids, or pass --unknown-users consensus (the population's preference for those "
               "rows), --unknown-users prior (a new user's prior predictive, where the model has one), "
               "--unknown-users drop (leave those rows out) or --consensus (every row)")
UNSEEN_ITEM = "the run can predict only the items it was fitted on"


def cli_message(err: DataError, places: dict, advice: dict | None = None, default: str = "") -> str:
    """``err`` in the command line's words, from its fields: ``places[err.arg]`` (where the argument
    lives for this command: a flag, or a file's column and the flag that names it), the row and the
    problem, then what the command's options offer against it, if anything: ``advice["ARG ids"]`` for an
    error naming ids (a value of the column that its table lacks), else ``advice[err.arg]``. An argument
    the table lacks is placed at ``default`` (the command's input file)."""
    place = places.get(err.arg, default)
    problem = err.problem if err.problem is not None else str(err)
    head = ", ".join(p for p in (place, None if err.row is None else f"row {err.row}") if p)
    advice = advice or {}
    tip = advice.get(f"{err.arg} ids") if err.ids else None
    tip = tip or advice.get(err.arg)
    return (f"{head}: " if head else "") + problem + (f"; {tip}" if tip else "")


def pairs_places(flag: str, cols: dict) -> dict:
    """Where the arguments of :meth:`~crowdzoo.PairwiseData.from_frame` (or of a prediction) live when
    the labels come from the file ``flag``: ``cols`` is {argument: (the user's column, the option that
    names it)} for the columns given."""
    places = {"df": flag, "ties": flag, "rows": flag, "a, b, y": flag, **TABLES}
    places.update({arg: f"{flag}, column {col!r} ({option})" for arg, (col, option) in cols.items()})
    if "a" in cols and "b" in cols:
        (a, fa), (b, fb) = cols["a"], cols["b"]
        places["a, b"] = f"{flag}, columns {a!r} ({fa}) and {b!r} ({fb})"
    return places


def unseen_message(err: DataError, cols: dict, flag: str = "--pairs", remedy: str | None = None) -> str:
    """A prediction's DataError in the command line's words: its flags and the user's columns, from the
    fields the error carries. A user or item the run was not fitted on (an error naming its ``ids``)
    is named with every such id and ``remedy`` (default: predict's options); ``flag``: the file's flag."""
    def shown(ids):
        return ", ".join(_show(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")

    col = cols.get(err.arg)
    if err.ids and col and err.arg in ("users", "a", "b"):
        what = "user" if err.arg == "users" else "item"
        n = len(err.ids)
        head = (f"{flag}, column {col[0]!r} ({col[1]}): row {err.row}: {what} {_show(err.ids[0])} was not "
                f"in the fit's data ({n} {what}(s) not seen: {shown(err.ids)})")
        return f"{head}; {remedy or (UNSEEN_USER if what == 'user' else UNSEEN_ITEM)}"
    advice = {"new_users": "pass --unknown-users drop to leave their rows out, or check the ids"}
    return cli_message(err, {**pairs_places(flag, cols), "new_users": "--unknown-users"}, advice, flag)


#: the API arguments a data warning may be about, and the flag each is in the command line
WARNING_PLACES = {"items": "--items", "item_features": "--items", "users": "--users",
                  "user_features": "--users", "df": "--pairs"}


def setting_flag(name: str) -> str | None:
    """The command line's flag of a fit setting: a route setting's generated flag, a model setting's
    option (``n_inducing`` → ``--n-inducing``, a links model's ``n_clusters`` → ``--components``), or
    ``--resume``, ``--method``, ``--seed``; None for a setting the command line does not offer."""
    if name in route_flags():
        return route_flags()[name].flag
    options = {**MODEL_OPTIONS, **LINK_MODEL_OPTIONS, "resume": "resume", "method": "method", "seed": "seed"}
    opt = next((o for o, n in options.items() if n == name), None)
    return None if opt is None else "--" + opt.replace("_", "-")


def cli_setting(name: str, value: str | None = None) -> str:
    """A setting named in a message (its placeholder, :func:`crowdzoo.errors.render`) as the command
    line writes it: ``--max-iter``, ``--max-iter 400``, ``--no-learn-kernel`` for ``learn_kernel=False``,
    ``--n-inducing all`` for ``n_inducing=None``, ``--likelihood exact`` for ``likelihood='exact'``. A
    setting without a flag keeps the Python API's words."""
    flag = setting_flag(name)
    if flag is None:
        return python_setting(name, value)
    if value is None:
        return flag
    v = value.strip("'\"")
    spec = route_flags().get(name)
    if spec is not None and spec.type is bool and v in ("True", "False"):
        return flag if v == "True" else "--no-" + flag[2:]
    if name in ("n_inducing", "n_inducing_users") and v == "None":
        v = ALL
    return f"{flag} {v}"


def warning_text(message) -> str:
    """A warning in the command line's words, from its fields: the settings it advises on
    (:class:`~crowdzoo.errors.Advises`) as flags, and the argument a data warning is about (``arg``,
    which its message begins with) as the flag of its file (:data:`WARNING_PLACES`)."""
    text = message.render(cli_setting) if isinstance(message, Advises) else str(message)
    arg = getattr(message, "arg", None)
    if arg in WARNING_PLACES and text.startswith(f"{arg}: "):
        text = WARNING_PLACES[arg] + text[len(arg):]
    return " ".join(text.split())


def route_message(err) -> str:
    """A fit's DataError (or NumericalError) in the command line's words, from its fields: the settings
    it names by placeholders as flags (:func:`cli_setting`), and its argument, where that is a setting
    with a flag (``err.arg``, e.g. ``batch_size``), as the flag that leads the message."""
    arg = getattr(err, "arg", None)
    flag = setting_flag(arg) if arg else None
    if flag is not None and err.problem_template is not None:
        return f"{flag}: {err.render_problem(cli_setting)}"
    return err.render(cli_setting)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning of a CLI command as one line on stderr."""
    print(f"crowdzoo: warning: {warning_text(message)}", file=sys.stderr)


def _launch() -> list:
    """The words that started this process: ``crowdzoo``, or torchrun's launch of it as far as
    torchrun's environment tells (processes per node and nodes; a launch on several machines must
    repeat its own rendezvous options)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or "LOCAL_WORLD_SIZE" not in os.environ:
        return ["crowdzoo"]
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ.get("WORLD_SIZE", "1"))
    nodes = ["--nnodes", str(world // local)] if world > local else []
    script = sys.argv[0] if os.path.basename(sys.argv[0]) == "crowdzoo" else "crowdzoo"
    return ["torchrun", *nodes, "--nproc-per-node", str(local), script]


def _interrupted(args, argv: list, err: BaseException) -> str:
    """The one line for Ctrl-C: where the fit got to, its checkpoint, the command that continues it.
    Under torchrun only rank 0 keeps the checkpoint, so only rank 0 speaks of it."""
    it = getattr(err, "iteration", None)
    at = f" after iteration {it}" if it is not None else ""
    rank = int(os.environ.get("RANK", "0"))
    if rank:
        return f"crowdzoo: rank {rank} interrupted{at}; rank 0 says what was kept"
    ckpt = getattr(args, "checkpoint_path", None)
    if ckpt and Path(ckpt).is_file():
        rest, skip = [], False
        for a in argv:
            if skip or a == "--resume" or a.startswith("--resume="):
                skip = a == "--resume"
                continue
            rest.append(a)
        cmd = shlex.join([*_launch(), *rest, "--resume", ckpt])
        return f"crowdzoo: interrupted{at}; the fit so far is in {ckpt}; continue it with: {cmd}"
    if args.command in ("fit", "demo") and getattr(args, "method", None):
        e = zoo.entry(getattr(args, "model", "gppl"))
        if args.method in e.routes and "checkpoint" not in route_signature_static(e, args.method):
            return (f"crowdzoo: interrupted{at}; the {args.method!r} route keeps no checkpoint, so nothing "
                    "was kept")
        return f"crowdzoo: interrupted{at}, before a checkpoint was written; nothing was kept"
    return f"crowdzoo: interrupted{at}"
