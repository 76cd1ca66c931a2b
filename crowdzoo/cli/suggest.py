"""``crowdzoo suggest``: the next queries to ask, from a run folder (``Posterior.suggest`` through
:func:`crowdzoo.active.suggest_run`), written in the run's own column names."""
from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .runs import _run_settings, check_out_file, write_result


def cmd_suggest(args) -> int:
    from ..active import suggest_run

    run_dir = Path(args.run_dir)
    if args.n < 1:
        raise DataError(f"--n: the number of queries to suggest must be at least 1, got {args.n}")
    check_out_file(args)
    users = None if args.users is None else [u for u in args.users.split(",") if u]
    if args.candidates is not None and not Path(args.candidates).is_file():
        raise DataError(f"--candidates: no such file: {args.candidates}")
    result = suggest_run(run_dir, args.n, users=users, candidates=args.candidates, strategy=args.strategy,
                         seed=args.seed)
    sep = args.sep or _run_settings(run_dir).get("sep") or ","
    write_result(result, args.out, sep, "{n} suggested queries", command="suggest")
    return 0


def add_parser(sub, fmt) -> None:
    sug = sub.add_parser("suggest", help="the next pairs to ask, by BALD (or entropy, random, Thompson)",
                         description=(
        "Suggest the next queries from a run folder written by `crowdzoo fit`: the n most informative "
        "pairs (and, for crowd models, which user to ask) by the chosen strategy, chosen greedily with "
        "the posterior updated by each chosen query's expected label, so that a batch does not repeat "
        "itself. Written in the run's own column names with a score column."), **fmt)
    sug.add_argument("run_dir", help="a folder written by `crowdzoo fit`")
    sug.add_argument("--n", type=int, default=10, help="how many queries")
    sug.add_argument("--users", default=None, metavar="U1,U2,...",
                     help="crowd models: ask only these users (ids as in the run's user column)")
    sug.add_argument("--candidates", default=None, metavar="C.csv",
                     help="CSV of allowed queries with the run's item columns (and user column): choose "
                          "among these rows only (default: every pair of the training items, for every user)")
    sug.add_argument("--strategy", default="bald", choices=("bald", "entropy", "random", "thompson"),
                     help="bald: mutual information between the label and the utilities; "
                          "entropy: the label's predictive entropy; random; thompson: one posterior draw")
    sug.add_argument("--seed", type=int, default=0)
    sug.add_argument("-o", "--out", default=None, help="CSV to write (default: standard output)")
    sug.add_argument("--overwrite", action="store_true", help="replace the file --out if it exists")
    sug.add_argument("--sep", default=None, help="the separator of --out (default: the run's)")
