"""``crowdzoo compare``: run a comparison of the zoo (or one's own), locally or on a Dask cluster."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import DataError


def _comparison(name: str):
    """The comparison ``crowdzoo compare NAME`` runs: a registry name, or one's own as
    ``module:object`` (importable, or a module file in the working folder) with ``run_one(seed,
    quick=...)`` → tidy DataFrame and ``summarise(df)`` → Markdown."""
    import importlib

    from ..comparisons import REGISTRY

    if name in REGISTRY:
        return name, REGISTRY[name]
    if ":" not in name:
        raise DataError(f"compare: unknown comparison {name!r}; choose one of {sorted(REGISTRY)}, or name "
                        "your own as module:object (an object with run_one(seed, quick=...) and "
                        "summarise(df))")
    module, _, attr = name.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module file beside the user, as `python -m` would find it
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise DataError(f"compare: cannot load {name!r}: {err}") from None
    missing = [m for m in ("run_one", "summarise") if not callable(getattr(obj, m, None))]
    if missing:
        raise DataError(f"compare: {name!r} has no {' or '.join(missing)}; a comparison needs run_one(seed, "
                        "quick=...) returning a tidy DataFrame and summarise(df) returning Markdown")
    return obj, obj


#: the options of ``crowdzoo compare sbc`` alone
SBC_OPTIONS = {"model": "MODEL", "route": "--route", "sims": "--sims", "draws": "--draws"}


def _sbc(args):
    """``crowdzoo compare sbc MODEL --route R --sims S --draws L``: the check of
    :mod:`crowdzoo.comparisons.sbc` (its simulations are the repeats), and the words of the command."""
    from ..comparisons.sbc import Check

    if args.repeats != 1:
        raise DataError("--repeats: sbc repeats simulations; give their number as --sims")
    check = Check(model=args.model or "gppl", route=args.route,
                  draws=99 if args.draws is None else args.draws)
    sims = args.sims if args.sims is not None else (10 if args.quick else 100)
    if sims < 1:
        raise DataError(f"--sims: SBC needs at least one simulation, got {sims}")
    words = f"sbc {check.model} --route {check.route} --sims {sims} --draws {check.draws}"
    return check, sims, words


def cmd_compare(args) -> int:
    from ..comparisons import run

    if args.name == "sbc":
        what, repeats, words = _sbc(args)
        comparison = what
    else:
        given = [flag for key, flag in SBC_OPTIONS.items() if getattr(args, key, None) is not None]
        if given:
            raise DataError(f"{given[0]}: an option of `crowdzoo compare sbc` alone, not of {args.name!r}")
        what, comparison = _comparison(args.name)
        repeats, words = args.repeats, f"{args.name} --repeats {args.repeats}"
    client = _dask_client(args.executor) if args.executor else None
    try:
        df, table = run(what, repeats=repeats, jobs=args.jobs, quick=args.quick, executor=client,
                        data_dir=args.data_dir)
    finally:
        if client is not None:
            client.close()
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out.with_suffix(".csv"), index=False)
        from ..comparisons.markdown import latex_tables

        if tex := latex_tables(table):  # the tables for a paper
            out.with_suffix(".tex").write_text(tex)
        cmd = f"crowdzoo compare {words} --jobs {args.jobs}"
        cmd += " --quick" if args.quick else ""
        cmd += f" --data-dir {args.data_dir}" if args.data_dir else ""
        fig = ""
        figure = getattr(comparison, "figure", None)
        if figure is not None:
            figure(df, out.with_suffix(".png"))
            fig = f"\n![{args.name}]({out.with_suffix('.png').name})\n"
        out.write_text(f"Made by `{cmd} --out {args.out}`.\n\n{table}\n{fig}")
    return 0


def _dask_client(address: str):
    """A ``dask.distributed.Client`` of the scheduler at ``address``, or a DataError naming --executor:
    Dask is not installed, the address is not one, or no scheduler answers there within Dask's connect
    timeout (``distributed.comm.timeouts.connect``, 30 s unless configured)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise DataError('--executor: running on a Dask cluster needs dask.distributed: pip install '
                        '"crowdzoo[dask]" (or leave --executor out to use local processes, --jobs)') from None
    try:
        return Client(address)
    except ValueError as err:
        raise DataError(f"--executor: {address!r} is not a Dask scheduler address ({err}); give one like "
                        "tcp://HOST:8786") from None
    except OSError as err:  # Dask's connect timeout is a TimeoutError, an OSError
        raise DataError(f"--executor: no Dask scheduler answered at {address} ({err}); start one with "
                        "`dask scheduler` and give the address it prints, or leave --executor out to use "
                        "local processes") from None
