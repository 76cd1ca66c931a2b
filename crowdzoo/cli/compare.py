"""``crowdzoo compare``: run a comparison of the zoo (or one's own), locally or on a Dask cluster."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import DataError


def _comparison(name: str):
    """The comparison ``crowdzoo compare NAME`` runs: a registry name, or one's own by import path
    ``module:attribute`` (importable, or a module file in the working folder): a
    :class:`~crowdzoo.comparisons.Comparison`, or an object with ``run_one(seed, quick=...)`` → tidy
    DataFrame and ``summarise(df)`` → Markdown."""
    from ..comparisons import as_comparison

    if ":" in name and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module file beside the user, as `python -m` would find it
    return name, as_comparison(name)


#: the options of ``crowdzoo compare sbc`` alone, and of ``crowdzoo compare guides`` alone
SBC_OPTIONS = {"route": "--route", "sims": "--sims", "draws": "--draws"}
GUIDE_OPTIONS = {"guides": "--guides"}


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


def _guides(args):
    """``crowdzoo compare guides MODEL --guides PATH,PATH``: :func:`crowdzoo.comparisons.guides.sweep`
    of the guides named by import path (``default``: the model's own), and the words of the command."""
    from ..comparisons.guides import sweep

    if not args.guides:
        raise DataError("--guides: name the guides to compare by import path, comma-separated (e.g. "
                        "--guides pyro.infer.autoguide:AutoNormal,default)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # guides in a module file beside the user
    paths = [p.strip() for p in args.guides.split(",") if p.strip()]
    model = args.model or "gppl"
    words = f"guides {model} --guides {','.join(paths)} --repeats {args.repeats}"
    return sweep(paths, model=model), words


def cmd_compare(args) -> int:
    from ..comparisons import Result, run

    own = {"sbc": SBC_OPTIONS, "guides": GUIDE_OPTIONS}
    for name, options in own.items():
        given = [flag for key, flag in options.items() if getattr(args, key, None) is not None]
        if given and args.name != name:
            raise DataError(f"{given[0]}: an option of `crowdzoo compare {name}` alone, not of {args.name!r}")
    if args.model is not None and args.name not in own:
        raise DataError(f"MODEL: `crowdzoo compare {args.name}` takes no model (only sbc and guides do), got "
                        f"{args.model!r}")
    if args.name == "sbc":
        what, repeats, words = _sbc(args)
        comparison = what
    elif args.name == "guides":
        what, words = _guides(args)
        comparison, repeats = what, args.repeats
    else:
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
        cmd = f"crowdzoo compare {words} --jobs {args.jobs}"
        cmd += " --quick" if args.quick else ""
        cmd += f" --data-dir {args.data_dir}" if args.data_dir else ""
        figure = getattr(comparison, "figure", None)
        if figure is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            figure(df, out.with_suffix(".png"))
            table += f"\n\n![{args.name}]({out.with_suffix('.png').name})\n"
        Result(df, table).write(out, made_by=f"{cmd} --out {args.out}")
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
