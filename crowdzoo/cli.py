"""The ``crowdzoo`` command line: ``fit``, ``demo``, ``compare``.

    crowdzoo models                       the zoo's models, their data and routes (from crowdzoo.zoo)
    crowdzoo fit gppl --pairs PAIRS.csv --items ITEMS.csv --method natgrad --out DIR
    crowdzoo fit crowdgppl --pairs PAIRS.csv --items ITEMS.csv [--users USERS.csv] --out DIR
    crowdzoo demo --out runs/demo
    crowdzoo compare gppl-routes --repeats 3 --jobs 2 --out docs/gppl-routes.md
    crowdzoo report RUN_DIR -o report.html [--reference NUTS_RUN_DIR]

Bad input ends with one ``crowdzoo: error: ...`` line and exit status 2; a numerical failure
with its advice and status 3.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import zoo
from .errors import DataError, NumericalError

MODELS = tuple(e.name for e in zoo.ZOO)
METHODS = tuple(sorted({m for e in zoo.ZOO for m in e.routes}))
#: CLI option → the model setting it fills (only models with that setting receive it)
MODEL_OPTIONS = {"n_inducing": "n_inducing", "kernel": "kernel", "components": "n_components",
                 "n_inducing_users": "n_inducing_users"}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="crowdzoo", description="Bayesian models of pairwise crowd labels")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the zoo's models, the data each takes and its routes")
    fit = sub.add_parser("fit", help="fit a model to CSV files")
    fit.add_argument("model", choices=MODELS)
    fit.add_argument("--pairs", required=True, help="CSV with one row per label (a, b, y)")
    fit.add_argument("--items", required=True, help="CSV of item features with an id column")
    fit.add_argument("--users", default=None, help="crowdgppl: CSV of user features with an id column")
    fit.add_argument("--user-col", default="user", help="crowdgppl: the user-id column of --pairs")
    fit.add_argument("--components", type=int, default=20, help="crowdgppl: C latent components")
    fit.add_argument("--n-inducing-users", type=int, default=25, help="crowdgppl: M_u inducing users")
    _fit_options(fit)
    demo = sub.add_parser("demo", help="simulate data, fit GPPL, evaluate and write a report")
    demo.add_argument("--quick", action="store_true", help="a small problem (seconds)")
    _fit_options(demo, out_default="runs/demo")
    cmp_ = sub.add_parser("compare", help="run a comparison of the zoo (tables beside the papers')")
    cmp_.add_argument("name")
    cmp_.add_argument("--repeats", type=int, default=1)
    cmp_.add_argument("--jobs", type=int, default=1)
    cmp_.add_argument("--quick", action="store_true", help="smaller settings (each comparison says which)")
    cmp_.add_argument("--executor", default=None,
                      help="a Dask scheduler address (e.g. tcp://host:8786); default: local processes")
    cmp_.add_argument("--data-dir", default=None,
                      help="sushi-*: folder with Kamishima's Sushi files (not shipped: not redistributable)")
    cmp_.add_argument("--out", default=None, help="markdown file (the tidy CSV goes beside it)")
    rep = sub.add_parser("report", help="posterior diagnostic report of a run (HTML or Markdown)")
    rep.add_argument("run_dir", help="a folder written by `crowdzoo fit` or `crowdzoo demo`")
    rep.add_argument("-o", "--out", default=None, help="report.html (default) or report.md; "
                     "default RUN_DIR/diagnostics.html")
    rep.add_argument("--reference", default=None,
                     help="a NUTS run of the same data (its folder): adds the agreement check")
    rep.add_argument("--draws", type=int, default=500, help="draws of an approximate posterior")
    return ap


def _fit_options(p, out_default=None):
    p.add_argument("--method", default=None, choices=METHODS,
                   help="the route (default: the model's first in `crowdzoo models`)")
    p.add_argument("--out", required=out_default is None, default=out_default)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-inducing", type=int, default=None, help="M inducing items (default: exact)")
    p.add_argument("--kernel", default=None, choices=("matern32", "se"),
                   help="the item kernel (default: the model's; matern32 for gppl and crowdgppl)")
    p.add_argument("--likelihood", default=None, choices=("linearised", "exact"),
                   help="natgrad only: the paper's linearisation or the exact expected probit")
    p.add_argument("--id-col", default="id")
    p.add_argument("--a-col", default="a")
    p.add_argument("--b-col", default="b")
    p.add_argument("--y-col", default="y")
    p.add_argument("--test-fraction", type=float, default=None, help="hold out this share of pairs")
    p.add_argument("--no-progress", action="store_true")


def _read_csv(path: str, what: str) -> pd.DataFrame:
    if not Path(path).is_file():
        raise DataError(f"--{what}: file not found: {path}")
    return pd.read_csv(path)


def load_csvs(pairs_path, items_path, args):
    """PairwiseData from the two CSVs (item ids in the id column)."""
    from .data import PairwiseData

    items = _read_csv(items_path, "items")
    if args.id_col not in items.columns:
        raise DataError(f"--items: column {args.id_col!r} not found (columns: {list(items.columns)}); "
                        "set --id-col")
    items = items.set_index(args.id_col)
    pairs = _read_csv(pairs_path, "pairs")
    if zoo.entry(getattr(args, "model", "gppl")).data != "crowd pairs":
        return PairwiseData.from_frame(pairs, items, a=args.a_col, b=args.b_col, y=args.y_col)
    users = None
    if args.users:
        users = _read_csv(args.users, "users")
        if args.id_col not in users.columns:
            raise DataError(f"--users: column {args.id_col!r} not found (columns: {list(users.columns)})")
        users = users.set_index(args.id_col)
    return PairwiseData.from_frame(pairs, items, a=args.a_col, b=args.b_col, y=args.y_col,
                                   user=args.user_col, users=users)


def run_fit(data, args, out: Path, f_true=None) -> dict:
    """Fit, predict and write utilities.csv, predictions.csv, metrics.json, posterior.pt."""
    import crowdzoo as cz

    from .metrics import accuracy, cross_entropy, kendall_tau

    out.mkdir(parents=True, exist_ok=True)
    train, test = (cz.split_pairs(data, args.test_fraction, seed=args.seed)
                   if args.test_fraction else (data, None))
    e = zoo.entry(getattr(args, "model", "gppl"))
    args.method = args.method or e.default
    e.route(args.method)  # a DataError naming the model's routes if it has not this one
    accepted = zoo.route_settings(e.route(args.method))
    settings = {"progress_bar": not args.no_progress} if "progress_bar" in accepted else {}
    if args.likelihood:
        if "likelihood" not in accepted:
            raise DataError(f"--likelihood: the {args.method!r} route of {e.name} has no likelihood "
                            "setting (it is natgrad's)")
        settings["likelihood"] = args.likelihood
    if args.method == "natgrad" and getattr(args, "quick", False):
        settings["max_iter"] = 200
    crowd = e.data == "crowd pairs"
    cls = e.model_class()
    fields = {f.name for f in dataclasses.fields(cls)}
    kw = {field: getattr(args, opt) for opt, field in MODEL_OPTIONS.items()
          if field in fields and hasattr(args, opt)
          and (getattr(args, opt) is not None or opt == "n_inducing")}
    model = cls(**kw)
    t0 = time.perf_counter()
    post = cz.fit(model, train, method=args.method, seed=args.seed, **settings)
    seconds = time.perf_counter() - t0
    mean = None
    try:
        mean, var = post.utilities()
    except (NotImplementedError, DataError):  # collabGP has no utility per item
        pass
    if mean is not None:
        table = pd.DataFrame({"item": mean.index, "mean": mean.values, "variance": var.values})
        table.sort_values("mean", ascending=False).to_csv(out / "utilities.csv", index=False)
    preds, metrics = [], {"method": args.method, "seconds": seconds, "n_pairs": train.n_pairs}
    for split, part in (("train", train), ("test", test)):
        if part is None:
            continue
        frame = part.to_frame()
        users = {"users": frame["user"].to_numpy()} if crowd else {}
        frame["p"] = post.predict_proba(frame["a"].to_numpy(), frame["b"].to_numpy(), **users)
        frame["split"] = split
        preds.append(frame)
        metrics[f"{split}_accuracy"] = accuracy(frame["y"], frame["p"])
        metrics[f"{split}_cee"] = cross_entropy(frame["y"], frame["p"])
    pd.concat(preds).to_csv(out / "predictions.csv", index=False)
    if f_true is not None and mean is not None:
        metrics["kendall_tau_vs_truth"] = kendall_tau(f_true, mean.values)
    for k in ("iterations", "converged"):
        if k in post.settings:
            metrics[k] = post.settings[k]
    post.save(out / "posterior.pt")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (out / "run.json").write_text(json.dumps({k: v for k, v in vars(args).items()}, indent=2))
    return metrics


def cmd_fit(args) -> int:
    data = load_csvs(args.pairs, args.items, args)
    metrics = run_fit(data, args, Path(args.out))
    print(json.dumps(metrics, indent=2))
    print(f"wrote {args.out}/utilities.csv, predictions.csv, metrics.json, posterior.pt")
    return 0


def cmd_demo(args) -> int:
    import crowdzoo as cz

    out = Path(args.out)
    n_items, n_pairs = (40, 400) if args.quick else (100, 2000)
    data, f_true = cz.simulate_gppl(n_items=n_items, n_pairs=n_pairs, n_features=2, seed=args.seed)
    (out / "data").mkdir(parents=True, exist_ok=True)
    data.to_frame().to_csv(out / "data" / "pairs.csv", index=False)
    data.items_frame().rename_axis("id").to_csv(out / "data" / "items.csv")
    args.test_fraction = args.test_fraction or 0.2
    data = load_csvs(out / "data" / "pairs.csv", out / "data" / "items.csv", args)
    metrics = run_fit(data, args, out, f_true=f_true)
    top = pd.read_csv(out / "utilities.csv").head(10)
    quick = " --quick" if args.quick else ""
    report = [
        "# crowdzoo demo: GPPL on a simulated preference problem", "",
        f"Reproduce: `crowdzoo demo --out {args.out} --method {args.method} --seed {args.seed}{quick}`",
        "", f"- data: {n_items} items with 2-D features, {n_pairs} pairwise labels drawn from GPPL "
        f"(`crowdzoo.simulate_gppl`, seed {args.seed}); 20 % of the pairs held out",
        f"- model: GPPL, Matérn 3/2 kernel, median-heuristic length-scales; route `{args.method}`", "",
        "| metric | value |", "|---|---:|",
        *[f"| {k} | {v:.3f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()],
        "", "Top items by posterior mean utility:", "", _markdown(top), "",
        "Files: `utilities.csv`, `predictions.csv`, `metrics.json`, `posterior.pt` "
        "(`crowdzoo.load`), `data/`.",
    ]
    report += ["", "Posterior diagnostics (r̂/ESS or optimisation trace, PPC, calibration, PSIS-LOO): "
               f"`diagnostics.html`, remade by `crowdzoo report {args.out} -o {args.out}/diagnostics.html`."]
    (out / "report.md").write_text("\n".join(report) + "\n")
    diag = write_report(out, out / "diagnostics.html")
    print(f"demo: held-out accuracy {metrics['test_accuracy']:.3f}, CEE {metrics['test_cee']:.3f}, "
          f"Kendall tau vs truth {metrics['kendall_tau_vs_truth']:.3f}")
    print(f"demo: report written to {out / 'report.md'}; diagnostics ({diag.verdict}) to "
          f"{out / 'diagnostics.html'}")
    return 0


def _markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(f"{v:.3f}" if isinstance(v, float | np.floating) else str(v)
                              for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, *rows])


def cmd_compare(args) -> int:
    from .comparisons import REGISTRY, run

    if args.name not in REGISTRY:
        raise DataError(f"compare: unknown comparison {args.name!r}; choose one of {sorted(REGISTRY)}")
    executor = None
    if args.executor:
        try:
            from dask.distributed import Client
        except ImportError:
            raise DataError("--executor: a Dask scheduler address needs dask.distributed "
                            "(pip install 'dask[distributed]'); leave it out to use local processes"
                            ) from None
        executor = Client(args.executor).get_executor()
    df, table = run(args.name, repeats=args.repeats, jobs=args.jobs, quick=args.quick, executor=executor,
                    data_dir=args.data_dir)
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out.with_suffix(".csv"), index=False)
        cmd = f"crowdzoo compare {args.name} --repeats {args.repeats} --jobs {args.jobs}"
        cmd += " --quick" if args.quick else ""
        cmd += f" --data-dir {args.data_dir}" if args.data_dir else ""
        fig = ""
        figure = getattr(REGISTRY[args.name], "figure", None)
        if figure is not None:
            figure(df, out.with_suffix(".png"))
            fig = f"\n![{args.name}]({out.with_suffix('.png').name})\n"
        out.write_text(f"Made by `{cmd} --out {args.out}`.\n\n{table}\n{fig}")
    return 0


def _load_run(run_dir: Path, what: str):
    import crowdzoo as cz

    if not (run_dir / "posterior.pt").is_file():
        raise DataError(f"{what}: {run_dir} has no posterior.pt (write one with `crowdzoo fit ... --out "
                        f"{run_dir}`)")
    return cz.load(run_dir / "posterior.pt")


def write_report(run_dir: Path, out: Path, reference: Path | None = None, draws: int = 500):
    """The diagnostic report of a run folder: its posterior, its held-out predictions (the
    ``split == "test"`` rows of predictions.csv) and its run.json settings."""
    from .diagnostics.report import report

    post = _load_run(run_dir, "run_dir")
    held_out = None
    pred = run_dir / "predictions.csv"
    if pred.is_file():
        frame = pd.read_csv(pred)
        test = frame[frame["split"] == "test"] if "split" in frame else frame.iloc[:0]
        if len(test):
            held_out = (test["p"].to_numpy(float), test["y"].to_numpy(float))
    settings = {"run": str(run_dir)}
    if (run_dir / "run.json").is_file():
        run = json.loads((run_dir / "run.json").read_text())
        settings.update({f"cli.{k}": v for k, v in run.items() if v is not None and k != "func"})
    ref = _load_run(reference, "--reference") if reference else None
    return report(post, out, held_out=held_out, reference=ref, settings=settings, n_draws=draws)


def cmd_report(args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a folder: {run_dir}")
    out = Path(args.out) if args.out else run_dir / "diagnostics.html"
    rep = write_report(run_dir, out, Path(args.reference) if args.reference else None, args.draws)
    for c in rep.checks:
        print(f"{c.verdict:>5}  {c.name}: {c.value}")
    print(f"report: {rep.verdict} — written to {out}")
    return 0


def cmd_models(args) -> int:
    print(zoo.route_table(markdown=False))
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    handler = {"fit": cmd_fit, "demo": cmd_demo, "compare": cmd_compare, "report": cmd_report,
               "models": cmd_models}[args.command]
    try:
        return handler(args)
    except DataError as err:
        print(f"crowdzoo: error: {err}", file=sys.stderr)
        return 2
    except NumericalError as err:
        print(f"crowdzoo: numerical failure: {err}", file=sys.stderr)
        return 3


def entry() -> None:
    sys.exit(main())
