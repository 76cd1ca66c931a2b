"""The command line's parser: its commands, their options and help texts. The route settings'
flags come from :mod:`crowdzoo.cli.flags`, read from the routes' source, so ``--help`` answers without
importing torch.
"""
from __future__ import annotations

import argparse

from .. import zoo
from .choices import CHOICE_COLUMNS, api_defaults, takers
from .flags import ALL, MODEL_OPTIONS, SWITCHES, has_setting, model_defaults_static, route_flags
from .links import links_models
from .reading import ITEMS, ONE_HOT_HELP, USERS
from .suggest import add_parser as add_suggest

zoo.load_plugins()  # models that installed packages declare (entry-point group crowdzoo.models)
MODELS = tuple(e.name for e in zoo.ZOO)
METHODS = tuple(sorted({m for e in zoo.ZOO for m in e.routes}))
#: the tables ``fit --outputs`` may choose
OUTPUTS = ("utilities", "personal", "predictions")
SAME_HELP = "1, true or yes: the two items are in the same cluster; 0, false or no: in different clusters"


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where it is unset (None): those say theirs in words."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or not action.help:
            return action.help
        return super()._get_help_string(action)

    def _fill_text(self, text, width, indent):  # keep the line breaks of a text (each line wrapped)
        import textwrap

        return "\n".join(textwrap.fill(line, width, initial_indent=indent,
                                        subsequent_indent=indent + " " * (len(line) - len(line.lstrip()) + 2))
                          for line in text.splitlines())


Y_HELP = ("y is 1 if a is preferred to b and 0 if b is preferred to a (0.5: a tie, see --ties); a file "
          "that lists the preferred item first (winner, loser) needs no y: pass --winner-first")


def make_parser() -> argparse.ArgumentParser:
    fmt = {"formatter_class": _HelpFormatter}
    ap = argparse.ArgumentParser(prog="crowdzoo", description="Bayesian models of pairwise crowd labels",
                                 **fmt)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the zoo's models, the data each takes and its routes", **fmt)
    fit = sub.add_parser("fit", help="fit a model to CSV files", description=(
        "Fit a model to pairwise labels in CSV files and write utilities, predictions, metrics and the "
        f"posterior to --out. --pairs has one row per label: item ids a and b, and {Y_HELP}. The links "
        "models (scdc, bayesscdc) read --links and --items instead: see their heading below."),
        epilog=model_defaults_help(), **fmt)
    fit.add_argument("model", choices=MODELS)
    fit.add_argument("--pairs", default=None,
                     help="preference models (all but the links models): CSV with one row per label: "
                          "columns --a-col, --b-col, --y-col (and a user column for crowd models)")
    _choice_options(fit)
    fit.add_argument("--items", default=None,
                     help="CSV of item features with an id column (--id-col); without it the items are the "
                          "ids seen in --pairs (or --choices), with no features (independent utilities)")
    fit.add_argument("--users", default=None,
                     help="crowd models: CSV of user features with an id column (--user-id-col)")
    fit.add_argument("--user-col", default=None,
                     help="crowd models: the user-id column of --pairs (default: user)")
    fit.add_argument("--user-id-col", default=None,
                     help="the user-id column of --users (default: --id-col's)")
    _table_flags(fit, USERS)
    fit.add_argument("--components", type=int, default=None,
                     help="models with latent components (crowdgppl): C (default: the model's)")
    fit.add_argument("--n-inducing-users", type=_inducing, default=None, metavar="M|all|auto",
                     help="crowdgppl: M_u inducing users, 'all' (every user) or 'auto' (default: the "
                          "model's)")
    fit.add_argument("--item-residual", type=_residual, default=None, metavar="auto|on|off|learned",
                     help="gppl, crowdgppl, dpm: an item-level residual beside the GP, each item's own "
                          "utility (default: the model's; 'auto': gppl and crowdgppl where the GP is sparse, "
                          "dpm where every item is inducing over item features; 'learned', dpm only: "
                          "where 'auto' has it, with its variance at the pooled EP evidence's maximum)")
    fit.add_argument("--order-effect", action="store_true", default=None,
                     help=f"{', '.join(order_models())}: learn an advantage of the item in --a-col, the one "
                          "listed first (the home side of a match, the item shown first), reported in "
                          "metrics.json (order_effect_mean, order_effect_sd) and by `crowdzoo report`; "
                          "predictions are for the pairs as given. --pairs must give each pair in the order "
                          "it was played or shown, with its label (not --winner-first)")
    _csv_options(fit)
    add_fit_options(fit)
    _fit_options(fit)
    demo = sub.add_parser("demo", help="simulate data, fit GPPL, evaluate and write a report", **fmt)
    demo.add_argument("--quick", action="store_true", help="a small problem (seconds)")
    _fit_options(demo, out_default="runs/demo")
    pred = sub.add_parser("predict", help="P(a ≻ b) for new pairs from a fitted run", description=(
        "Predict P(a ≻ b) for each row of a CSV of pairs from a run folder written by `crowdzoo fit` "
        "(its posterior.pt), reading the columns the run used (its run.json): crowd models predict each "
        "row's user's preference. For a run of a links model (scdc, bayesscdc), --items gives new items "
        "instead, and each one's most probable cluster is written."), **fmt)
    pred.add_argument("run_dir", help="a folder written by `crowdzoo fit` or `crowdzoo demo`")
    pred.add_argument("--pairs", default=None,
                      help="CSV of pairs with the run's --a-col and --b-col (and --user-col) columns; a "
                           "label column is not needed")
    pred.add_argument("--choices", default=None,
                      help="CSV of choice sets laid out as the run's --choices (its --choice-col and "
                           "--item-col columns; the chosen column is not needed): writes each row's p = "
                           "P(its item is chosen as best from its set), by the model's choice likelihood, "
                           "for any run of a model with one utility per item")
    pred.add_argument("--items", default=None,
                      help="a run of a links model (scdc, bayesscdc): CSV of new items with the run's id and "
                           "feature columns; writes each item's most probable cluster and its probability")
    pred.add_argument("-o", "--out", default=None,
                      help="CSV to write: the rows of --pairs with a column p = P(a ≻ b) (default: standard "
                           "output)")
    pred.add_argument("--overwrite", action="store_true", help="replace the file --out if it exists")
    pred.add_argument("--sep", default=None,
                      help="the separator of --pairs and of --out (default: the run's)")
    pred.add_argument("--consensus", action="store_true",
                      help="crowd models: the consensus preference instead of each row's user's")
    pred.add_argument("--unknown-users", "--new-users", dest="unknown_users", default="error",
                      choices=("error", "consensus", "prior", "drop"),
                      help="crowd models, rows whose user the run was not fitted on: refuse the file "
                           "(error), predict the population's preference (consensus), the model's prior "
                           "predictive of a new user (prior: DPM, crowdGPPL), or leave the rows out (drop)")
    add_suggest(sub, fmt)
    cmp_ = sub.add_parser("compare", help="run a comparison of the zoo (tables beside the papers')", **fmt)
    cmp_.add_argument("name", help="a comparison of the zoo; guides (a guide sweep, --guides); or one's own "
                      "by import path module:attribute (a crowdzoo.comparisons.Comparison, or an object with "
                      "run_one(seed, quick=...) → tidy DataFrame and summarise(df) → Markdown; a module file "
                      "in the working folder is found)")
    cmp_.add_argument("model", nargs="?", default=None,
                      help="sbc: the model to calibrate (gppl, crowdgppl, bradley-terry, collabgp, dpm, "
                           "bayesscdc); guides: the model whose svi route the guides fit (a model with svi "
                           "and nuts routes); default gppl")
    cmp_.add_argument("--repeats", type=int, default=1)
    cmp_.add_argument("--jobs", type=int, default=1)
    cmp_.add_argument("--quick", action="store_true", help="smaller settings (each comparison says which)")
    cmp_.add_argument("--executor", default=None,
                      help="a Dask scheduler address (e.g. tcp://host:8786): every repeat runs on that "
                           'cluster (needs pip install "crowdzoo[dask]"; --jobs is then unused); default: '
                           "local processes")
    cmp_.add_argument("--data-dir", default=None,
                      help="sushi-*, dpm-sushi-a: folder with Kamishima's Sushi files; scdc-mnist: MNIST's "
                           "training idx files and crowd_annotations_mnist.npy (neither is shipped)")
    cmp_.add_argument("--out", default=None, help="markdown file (the tidy CSV goes beside it)")
    cmp_.add_argument("--guides", default=None,
                      help="guides only: the guides to compare against NUTS, by import path, comma-separated "
                           "(e.g. pyro.infer.autoguide:AutoNormal,mypkg.guides:my_guide,default; default: "
                           "the model's own guide)")
    cmp_.add_argument("--route", default=None,
                      help="sbc only: the route to calibrate (default: the model's default route)")
    cmp_.add_argument("--sims", type=int, default=None,
                      help="sbc only: simulations S (default 100, 10 with --quick)")
    cmp_.add_argument("--draws", type=int, default=None,
                      help="sbc only: posterior draws L ranked against each prior draw (default 99)")
    rep = sub.add_parser("report", help="posterior diagnostic report of a run (HTML or Markdown)", **fmt)
    rep.add_argument("run_dir", help="a folder written by `crowdzoo fit` or `crowdzoo demo`")
    rep.add_argument("-o", "--out", default=None, help="report.html (default) or report.md; "
                     "default RUN_DIR/diagnostics.html")
    rep.add_argument("--reference", default=None,
                     help="a NUTS run of the same data (its folder): adds the agreement check")
    rep.add_argument("--draws", type=int, default=500, help="draws of an approximate posterior")
    rep.add_argument("--test", default=None, metavar="PAIRS.csv",
                     help="held-out labels for the held-out calibration check: a CSV laid out as the run's "
                          "--pairs (its separator and columns, from run.json); ties are left out (default: "
                          "the split == test rows of the run's predictions.csv, from --test-fraction)")
    return ap


def _choice_options(fit) -> None:
    """``fit --choices`` and the options that name its columns (defaults: the Python API's,
    ``ChoiceData.from_frame``'s)."""
    d = api_defaults()
    fit.add_argument("--choices", default=None,
                     help="instead of --pairs, choices among k items (best-of-k, best–worst): CSV with one "
                          "row per (choice, item offered): columns --choice-col (which choice the row "
                          "belongs to), --item-col (the item offered), --chosen-col (1 on the item chosen as "
                          "best, 0 on the others) and optionally --worst-col (1 on the item rejected as "
                          "worst); sets may differ in size. Models and routes with a choice likelihood: "
                          f"{takers()} (default: the first of each); predictions.csv then has each row's "
                          "P(chosen)")
    for arg, (_, flag) in CHOICE_COLUMNS.items():
        shown = f"default: {d[arg]}" if d[arg] else "default: none, a best-only survey"
        fit.add_argument(flag, default=None, help=f"the {arg} column of --choices ({shown})")


def _inducing(value: str):
    """``--n-inducing``'s value: a positive whole number, "all" or "auto"."""
    if value in (ALL, "auto"):
        return value
    m = int(value) if value.isdigit() else 0
    if m < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, 'all' or 'auto', got {value!r}")
    return m


def _shown(default) -> str:
    """A model default as the flag's value: None is "all", True and False "on" and "off"."""
    if default is None:
        return ALL
    if isinstance(default, bool):
        return "on" if default else "off"
    return str(default)


def _residual(value: str):
    """``--item-residual``'s value: "auto", "on" (True), "off" (False) or "learned" (the DPM's)."""
    table = {"auto": "auto", "on": True, "off": False, "learned": "learned"}
    if value not in table:
        raise argparse.ArgumentTypeError(f"expected 'auto', 'on', 'off' or 'learned', got {value!r}")
    return table[value]


def order_models() -> list:
    """The models with an order effect (``order_effect``), from their source."""
    return [e.name for e in zoo.ZOO if e.data != "links" and has_setting(e, "order_effect")]


def model_defaults_help() -> str:
    """The model settings the CLI's options fill, with each model's default (those of ``Model()`` in
    Python, which a fit without the option uses), read from the models' source."""
    lines = ["model defaults (the Python API's; an option given replaces its setting):"]
    for e in zoo.ZOO:
        if e.data == "links":
            continue
        d = model_defaults_static(e)
        shown = [f"--{opt.replace('_', '-')} " + _shown(d[name])
                 for opt, name in MODEL_OPTIONS.items() if name in d and opt not in SWITCHES]
        lines.append(f"  {e.name}: {', '.join(shown) or 'none of these options'}")
    return "\n".join(lines)


def _table_flags(p, t) -> None:
    """The flags that choose a feature table's columns (``--features``/``--one-hot`` for --items,
    ``--user-features``/``--user-one-hot`` for --users)."""
    p.add_argument(t.features, default=None, metavar="COL,...",
                   help=f"the feature columns of {t.flag} to use (default: all but the {t.what}-id column)")
    p.add_argument(t.one_hot, default=None, metavar="COL,...",
                   help=f"categorical columns of {t.flag} to one-hot encode as features (a column of yes/no "
                        "or true/false is read as 1/0 without it; any other string column is refused)"
                        + ONE_HOT_HELP)


def _csv_options(p):
    """How the CSV files are laid out (``fit``; ``demo`` uses the defaults)."""
    p.add_argument("--sep", default=",", help="the field separator of the CSV files (e.g. ';')")
    p.add_argument("--id-col", default=None, help="the item-id column of --items (default: id)")
    _table_flags(p, ITEMS)
    p.add_argument("--a-col", default="a", help="the column of --pairs holding the first item's id")
    p.add_argument("--b-col", default="b", help="the column of --pairs holding the second item's id")
    p.add_argument("--y-col", default="y", help=f"the label column of --pairs: {Y_HELP} (or --y-col '')")
    p.add_argument("--winner-first", action="store_true",
                   help="--a-col always holds the preferred item and --pairs has no label column "
                        "(same as --y-col '')")
    p.add_argument("--tie-col", default=None,
                   help="a column of --pairs that is true (1) where the label is a tie")
    p.add_argument("--ties", default=None, choices=("drop", "half", "model"),
                   help="ties (y = 0.5, or --tie-col true): drop them, count each as half a preference "
                        "each way, or model them as a third outcome (models: "
                        + ", ".join(e.name for e in zoo.ZOO if e.ties)
                        + "; predictions.csv then has p_tie) (default: a tie is an error)")
    p.add_argument("--weight-col", default=None,
                   help="a column of --pairs holding each row's weight (a number > 0): the row counts as "
                        "that many labels")
    p.add_argument("--wins-col", default=None,
                   help="counts per pair: a column of --pairs holding how often --a-col's item was "
                        "preferred; with --losses-col (and --ties-col) each row is a pair with its counts, "
                        "read as weighted labels (no --y-col); predictions.csv keeps one row per row "
                        "(default column: wins, once a counts flag is given)")
    p.add_argument("--losses-col", default=None,
                   help="counts per pair: the column holding how often --b-col's item was preferred (default "
                        "column: losses, once a counts flag is given)")
    p.add_argument("--ties-col", default=None,
                   help="counts per pair: the column holding how often the two tied, read by --ties (drop, "
                        "half or model); --tie-col is the yes/no column of one label per row")


def _fit_options(p, out_default=None):
    p.add_argument("--method", default=None, choices=METHODS,
                   help="the route (default: the model's first in `crowdzoo models`)")
    p.add_argument("--out", required=out_default is None, default=out_default,
                   help="the run folder to write: a new one, or an earlier run's with --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run in --out (its files are removed before the new run writes its own)")
    p.add_argument("--seed", type=int, default=0,
                   help="the random seed (fits with one seed are bit-identical)")
    p.add_argument("--n-inducing", type=_inducing, default=None, metavar="M|all|auto",
                   help="M inducing items for models that have them, 'all' (every item: exact) or 'auto' "
                        "(every item up to 500, then 500) (default: the model's, as in the Python API; "
                        "listed below)")
    p.add_argument("--kernel", default=None, choices=("matern32", "se"),
                   help="the item kernel (default: the model's; matern32 for gppl and crowdgppl)")
    p.add_argument("--test-fraction", type=float, default=None, help="hold out this share of pairs")
    p.add_argument("--outputs", default=",".join(OUTPUTS), metavar="NAME,...",
                   help="the tables to write beside posterior.pt, metrics.json and run.json: utilities "
                        "(utilities.csv), personal (utilities_personal.csv, crowd models), predictions "
                        "(predictions.csv and the training scores, which at 10⁶ labels take longer than "
                        "a short fit); e.g. --outputs utilities for the fit alone")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal, no progress "
                   "lines (one every 30 s) when stderr is a file")
    p.add_argument("--resume", default=None, metavar="CHECKPOINT",
                   help="continue a fit stopped by Ctrl-C from the checkpoint it wrote (OUT/checkpoint.pt; "
                        "routes with checkpoints only)")
    group = p.add_argument_group(
        "route settings", "generated from the routes' signatures; each route takes some of them (see "
        "`crowdzoo models` for the routes) and a flag the chosen route does not take is refused")
    taken = set(p._option_string_actions)
    for spec in route_flags().values():
        if spec.flag in taken:
            continue
        if spec.type is bool:
            group.add_argument(spec.flag, dest=spec.dest, action=argparse.BooleanOptionalAction, default=None,
                               help=spec.help())
        else:
            group.add_argument(spec.flag, dest=spec.dest, type=spec.type, default=None, help=spec.help(),
                               metavar=spec.type.__name__.upper())


def _widths(value: str) -> tuple:
    """``--hidden``'s value: positive whole numbers separated by commas."""
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected layer widths such as 64,64, got {value!r}")
    return tuple(int(p) for p in parts)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return int(value)


def _auto_yes_no(value: str):
    """auto → None (the model decides), yes → True, no → False."""
    choices = {"auto": None, "yes": True, "no": False}
    if value.lower() not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, yes or no, got {value!r}")
    return choices[value.lower()]


def add_fit_options(fit) -> None:
    """The links group of ``crowdzoo fit``'s options."""
    defaults = "; ".join(
        f"{e.name}: --components {d['n_clusters']}, --latent-dim {d['latent_dim'] or 'from the data'}, "
        f"--hidden {','.join(map(str, d['hidden'])) if d['hidden'] else 'from the data'}"
        for e in zoo.ZOO if e.data == "links" for d in [model_defaults_static(e)])
    g = fit.add_argument_group(
        f"links models ({', '.join(links_models())})",
        "clusters of items from their features (--items, required, read with --id-col, --features, "
        "--one-hot and --sep as above) and the crowd's same/different labels on pairs of them (--links, "
        "whose item columns are --a-col and --b-col); --components is K, the number of clusters. "
        f"Writes clusters.csv, workers.csv, metrics.json, run.json and posterior.pt. Defaults: {defaults}")
    g.add_argument("--links", default=None,
                   help="CSV with one row per label: columns --a-col, --b-col (item ids of --items), "
                        f"--worker-col and --same-col ({SAME_HELP}); a header with no rows is refused")
    g.add_argument("--worker-col", default=None,
                   help="the worker-id column of --links (default: worker; '' for labels of one worker)")
    g.add_argument("--same-col", default=None, help="the label column of --links (default: same)")
    g.add_argument("--latent-dim", type=_positive, default=None, metavar="D",
                   help="the dimension of the latent points (default: the model's)")
    g.add_argument("--hidden", type=_widths, default=None, metavar="W,...",
                   help="the hidden layers' widths of the networks, e.g. 64,64 (default: the model's)")
    g.add_argument("--standardise", type=_auto_yes_no, default=None, metavar="auto|yes|no",
                   help="whether the networks read each --features column standardised by its mean and "
                        "sd (Gaussian features; images in [0, 1] are read as they are): auto (the default) "
                        "where some column is far from unit scale (a mean beyond ±10, an sd outside "
                        "[0.1, 10]), yes always, no never")
