"""The ``crowdzoo`` command line: ``models``, ``fit``, ``predict``, ``suggest``, ``report``, ``demo``,
``compare``.

    crowdzoo models                       the zoo's models, their data and routes (from crowdzoo.zoo)
    crowdzoo fit gppl --pairs PAIRS.csv --items ITEMS.csv --method natgrad --out DIR
    crowdzoo fit crowdgppl --pairs PAIRS.csv --items ITEMS.csv [--users USERS.csv] --out DIR
    crowdzoo fit gppl --pairs PAIRS.csv --method natgrad --max-iter 200 --tol 1e-3 --out DIR
    crowdzoo fit gppl ... --resume DIR/checkpoint.pt       continue a fit stopped by Ctrl-C
    crowdzoo predict RUN_DIR --pairs NEW.csv -o NEW_P.csv    P(a ≻ b) for new pairs
    crowdzoo fit bradley-terry --choices CHOICES.csv --out DIR   choices among k items (crowdzoo.cli.choices)
    crowdzoo predict RUN_DIR --choices SETS.csv -o SETS_P.csv    P(chosen) of each member of new sets
    crowdzoo fit scdc --links LINKS.csv --items ITEMS.csv --out DIR   links models: crowdzoo.cli.links
    crowdzoo predict RUN_DIR --items NEW.csv -o NEW_Z.csv    clusters of new items (a links run)
    crowdzoo suggest RUN_DIR --n 20 [--users u1,u2] [--candidates C.csv] -o next.csv   pairs to ask next
    crowdzoo demo --out runs/demo
    crowdzoo compare gppl-routes --repeats 3 --jobs 2 --out docs/gppl-routes.md
    crowdzoo report RUN_DIR -o report.html [--reference NUTS_RUN_DIR]

Bad input ends with one ``crowdzoo: error: ...`` line naming the flag and exit status 2; a numerical
failure with its advice and status 3; Ctrl-C with one line naming the checkpoint and the command that
continues the fit, status 130. Warnings of a fit come as ``crowdzoo: warning: ...`` lines.

The package, one module per job: :mod:`~crowdzoo.cli.parser` (commands and options),
:mod:`~crowdzoo.cli.flags` (the route settings' flags, read from the routes' source files, so that
``--help`` answers without importing torch; a given flag the chosen route does not take is refused),
:mod:`~crowdzoo.cli.reading` (CSV files, feature tables, one-hot), :mod:`~crowdzoo.cli.messages`
(errors and warnings in the command line's words), :mod:`~crowdzoo.cli.runs` (run folders),
:mod:`~crowdzoo.cli.outputs` (a fit's tables), :mod:`~crowdzoo.cli.choices` (``--choices``: choices
among k items), and a module per command: :mod:`~crowdzoo.cli.fit`,
:mod:`~crowdzoo.cli.links` (fits of the links models), :mod:`~crowdzoo.cli.predict`,
:mod:`~crowdzoo.cli.suggest`, :mod:`~crowdzoo.cli.report`, :mod:`~crowdzoo.cli.demo`,
:mod:`~crowdzoo.cli.compare`.
"""
from __future__ import annotations

import sys
import warnings

from .. import zoo
from ..errors import DataError, NumericalError
from .compare import cmd_compare
from .demo import cmd_demo
from .fit import cmd_fit
from .flags import route_flags
from .messages import _interrupted, _show_warning, cli_setting
from .parser import METHODS, MODELS
from .parser import make_parser as _parser
from .plan import plan_fit as _plan
from .predict import cmd_predict
from .report import cmd_report
from .suggest import cmd_suggest

__all__ = ["main", "entry", "MODELS", "METHODS", "route_flags", "_parser", "_plan", "_interrupted"]


def cmd_models(args) -> int:
    print(zoo.route_table(markdown=False))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = _parser().parse_args(argv)
    handler = {"fit": cmd_fit, "demo": cmd_demo, "compare": cmd_compare, "report": cmd_report,
               "models": cmd_models, "predict": cmd_predict, "suggest": cmd_suggest}[args.command]
    with warnings.catch_warnings():
        warnings.simplefilter("default", UserWarning)  # each once per command, as a line on stderr
        warnings.showwarning = _show_warning
        try:
            return handler(args)
        except DataError as err:
            print(f"crowdzoo: error: {err.render(cli_setting)}", file=sys.stderr)
            return 2
        except NumericalError as err:
            print(f"crowdzoo: numerical failure: {err.render(cli_setting)}", file=sys.stderr)
            return 3
        except KeyboardInterrupt as err:
            print(_interrupted(args, argv, err), file=sys.stderr)
            return 130


def entry() -> None:
    sys.exit(main())
