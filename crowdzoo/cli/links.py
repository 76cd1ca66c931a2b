"""The command line of the links models (SCDC, BayesSCDC): clusters of items from their features and
the crowd's must-link / cannot-link labels on pairs of them.

    crowdzoo fit scdc --links LINKS.csv --items ITEMS.csv --components 10 --out DIR
    crowdzoo fit bayesscdc --links LINKS.csv --items ITEMS.csv --a-col i --b-col j --same-col same_cluster \
        --worker-col annotator --id-col item --features x1,x2 --sep ';' --out DIR
    crowdzoo predict DIR --items NEW.csv -o NEW_CLUSTERS.csv

``--links`` has one row per label: two item ids (``--a-col``, ``--b-col``), the worker who gave it
(``--worker-col``) and whether the two are in the same cluster (``--same-col``: 1/0, true/false or
yes/no, any case). ``--items`` holds every item's features, annotated or not. A fit writes, into
``--out``: posterior.pt (first, as soon as the fit ends), clusters.csv (each item's most probable
cluster and its probability), workers.csv (each worker's two-coin reliabilities), metrics.json and
run.json (the options, which ``crowdzoo predict`` reuses). A links file with a header but no rows is
refused: clustering without a crowd is done from Python (``LinkData.without_annotations``).

Their options are in :mod:`crowdzoo.cli.parser`, their prediction of new items' clusters in
:mod:`crowdzoo.cli.predict`. Nothing here imports torch until a fit runs, so ``crowdzoo fit --help``
stays quick.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import zoo
from ..errors import DataError
from .flags import LINK_MODEL_OPTIONS, route_signature_static
from .messages import cli_message, route_message
from .plan import plan_fit
from .reading import ITEMS, WEIGHT_OPTIONS, _names, _need_columns, _read_csv, _table_features
from .runs import _check_out, _prepare_out, _remove_empty, _resume_file

#: options of a links fit that belong to preference pairs: {dest: flag}
PAIRS_ONLY = {"pairs": "--pairs", "tie_col": "--tie-col", "ties": "--ties", "users": "--users",
              "user_col": "--user-col", "user_id_col": "--user-id-col", "test_fraction": "--test-fraction",
              "choices": "--choices", "choice_col": "--choice-col", "item_col": "--item-col",
              "chosen_col": "--chosen-col", "worst_col": "--worst-col", **WEIGHT_OPTIONS}


#: options that belong to links models: {dest: flag}
LINKS_ONLY = {"links": "--links", "worker_col": "--worker-col", "same_col": "--same-col",
              "latent_dim": "--latent-dim", "hidden": "--hidden", "standardise": "--standardise"}


def is_links(model: str) -> bool:
    return zoo.entry(model).data == "links"


def links_models() -> list:
    return [e.name for e in zoo.ZOO if e.data == "links"]


def need_pairs(args) -> None:
    """A pairs model's fit: --pairs is given and no links option is."""
    for dest, flag in LINKS_ONLY.items():
        if getattr(args, dest, None) is not None:
            raise DataError(f"{flag}: {args.model} fits preference pairs (--pairs), so it takes no {flag}; "
                            f"{flag} is for the links models ({', '.join(links_models())})")
    if getattr(args, "pairs", None) is None:
        raise DataError(f"--pairs: {args.model} fits preference pairs: give --pairs PAIRS.csv (--links is "
                        f"for the links models, {', '.join(links_models())})")


def _refuse_distributed(args, e) -> None:
    """--distributed for a model whose Python route takes it: say how to launch that fit (a model
    without such a route is refused by the route check, naming the settings it takes)."""
    parallel = any("distributed" in route_signature_static(e, m) for m in e.routes)
    if getattr(args, "route_distributed", None) and parallel:
        raise DataError(f"--distributed: {args.model} from the command line runs in one process; to spread a "
                        f"fit over ranks, fit from Python: crowdzoo.fit(crowdzoo.{e.model.split(':')[1]}(), "
                        "crowdzoo.LinkData.read_shard('links.csv', O), distributed=True) in a script "
                        "launched by `torchrun --nproc-per-node R script.py` (each rank reads only its share "
                        "of the annotations; each step's compute is split)")


def _check_options(args, e) -> None:
    """The options of a links fit: --links and --items given, no option of preference pairs."""
    for dest, flag in PAIRS_ONLY.items():
        if getattr(args, dest, None):
            what = ("give its labels as --links" if dest in ("pairs", "choices") else
                    "its labels come from --links" if dest != "test_fraction" else
                    "a links fit holds no labels out: drop it")
            raise DataError(f"{flag}: {args.model} clusters items from links, so it takes no {flag}; {what} "
                            f"(--pairs and its options are for the preference models)")
    if getattr(args, "winner_first", False) or getattr(args, "y_col", "y") != "y":
        flag = "--winner-first" if args.winner_first else "--y-col"
        raise DataError(f"{flag}: {args.model} reads same/different labels from --same-col, not preference "
                        "labels; drop it")
    if args.links is None:
        raise DataError(f"--links: {args.model} clusters items from links: give --links LINKS.csv (columns "
                        "--a-col, --b-col, --worker-col, --same-col) and --items ITEMS.csv")
    if args.items is None:
        raise DataError(f"--items: {args.model} clusters items by their features: give --items ITEMS.csv "
                        "with an id column (--id-col) and a row per item, annotated or not")


def _columns(args) -> dict:
    """The columns of --links: {role: (column, flag)}; worker is None for labels of one worker."""
    worker = "worker" if args.worker_col is None else args.worker_col
    return {"a": (args.a_col, "--a-col"), "b": (args.b_col, "--b-col"),
            "worker": (worker, "--worker-col") if worker else None,
            "same": (args.same_col or "same", "--same-col")}


def _plan(args) -> dict:
    """cli's plan of the route and its settings, with the links models' own model options."""
    hidden = {opt: getattr(args, opt) for opt in LINK_MODEL_OPTIONS}
    for opt in hidden:
        setattr(args, opt, None)  # cli's plan knows only the pairs models' options
    try:
        plan = plan_fit(args)
    finally:
        for opt, value in hidden.items():
            setattr(args, opt, value)
    for opt, name in LINK_MODEL_OPTIONS.items():
        if hidden[opt] is not None:
            plan["model_kw"][name] = hidden[opt]
    try:
        plan["model"] = plan["entry"].model_class()(**plan["model_kw"])
    except DataError as err:  # a model setting out of its range: named by its option
        raise DataError(route_message(err), arg=err.arg) from None
    return plan


def _places(cols: dict, id_col: str) -> dict:
    """Where the arguments of :meth:`~crowdzoo.LinkData.from_frame` live on the command line."""
    places = {"df": "--links", "O": "--items", "item_ids": f"--items, column {id_col!r} (--id-col)"}
    for arg, role in (("i", "a"), ("j", "b"), ("same", "same"), ("worker", "worker")):
        if cols[role]:
            places[arg] = f"--links, column {cols[role][0]!r} ({cols[role][1]})"
    (a, fa), (b, fb) = cols["a"], cols["b"]
    places["i, j"] = f"--links, columns {a!r} ({fa}) and {b!r} ({fb})"
    return places


def load_links(args):
    """LinkData from --links and --items: the item ids in --id-col, features by --features/--one-hot.
    The user's files are only read."""
    from ..data import LinkData

    sep = args.sep
    cols = _columns(args)
    links = _read_csv(args.links, "--links", sep)
    _need_columns(links, args.links, "--links", {c: f for c, f in (v for v in cols.values() if v)})
    if len(links) == 0:
        raise DataError(f"--links: {args.links} has a header but no rows (no links); give the crowd's "
                        "labels, one row per same/different judgement")
    raw = _read_csv(args.items, "--items", sep)
    id_col = args.id_col or "id"
    _need_columns(raw, args.items, "--items", {id_col: "--id-col"})
    features = _table_features(raw.set_index(id_col), args.items, ITEMS, args.features, args.one_hot)
    item_columns = _item_columns(args, [str(c) for c in raw.columns if c != id_col])
    if features.shape[1] == 0:
        raise DataError(f"--items: {args.items} has no feature column besides the id column {id_col!r}; the "
                        "links models cluster items by their features")
    worker = cols["worker"][0] if cols["worker"] else None
    try:  # --same-col's 1/0, true/false or yes/no are LinkData's own reading
        data = LinkData.from_frame(links, features, i=cols["a"][0], j=cols["b"][0], same=cols["same"][0],
                                   worker=worker)
    except DataError as err:
        raise DataError(cli_message(err, _places(cols, id_col), default="--links"), arg="--links",
                        row=err.row, ids=err.ids) from None
    return data, features, item_columns


def _item_columns(args, columns: list) -> list:
    """The columns of --items a fit reads (before one-hot encoding), for predict to read the same."""
    if args.features is None:
        return columns
    chosen = _names(args.features)
    return chosen + [c for c in _names(args.one_hot or "") if c not in chosen]


def cluster_table(probs: np.ndarray, ids, id_name: str) -> pd.DataFrame:
    """One row per item: its id, its most probable cluster and that cluster's probability."""
    k = probs.argmax(1)
    return pd.DataFrame({id_name: np.asarray(ids), "cluster": k, "probability": probs[np.arange(len(k)), k]})


def worker_table(post) -> pd.DataFrame:
    """One row per worker: α (sensitivity: P(same | same cluster)) and β (specificity), with their
    central 90 % intervals where the posterior has them (BayesSCDC's Beta posteriors; SCDC's α and β
    are point estimates), the weight logit α + logit β and the number of labels."""
    wk = post.workers(level=0.9).reset_index()
    order = ["worker", "alpha", "alpha_lo", "alpha_hi", "beta", "beta_lo", "beta_hi", "weight", "annotations"]
    return wk[[c for c in order if c in wk.columns]]


def cmd_fit(args) -> int:
    """``crowdzoo fit scdc|bayesscdc``: check the options and --out, read the CSVs, fit, write the run."""
    e = zoo.entry(args.model)
    _refuse_distributed(args, e)
    _check_options(args, e)
    out = Path(args.out)
    plan = _plan(args)
    _check_out(out, args.overwrite, keep=_resume_file(args, out))
    data, features, item_columns = load_links(args)
    metrics = run_fit(data, features, item_columns, args, out, plan)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {', '.join(str(out / f) for f in args.written)}")
    return 0


def _settled(trace) -> bool:
    """The routes' rule (they warn otherwise): the bound rose by at most 1 % over the last tenth of
    the epochs (:func:`~crowdzoo.models.scdc.svi.epoch_rise`)."""
    from ..models.scdc.svi import epoch_rise

    rise = epoch_rise(trace)
    return rise is not None and rise <= 1.0


def run_fit(data, features: pd.DataFrame, item_columns: list, args, out: Path, plan: dict) -> dict:
    """Fit and write posterior.pt (first), clusters.csv, workers.csv, metrics.json and run.json."""
    import crowdzoo as cz

    e, settings = plan["entry"], dict(plan["settings"])
    made = _prepare_out(out, keep=_resume_file(args, out))
    ckpt = out / "checkpoint.pt"
    if "checkpoint" in plan["static"]:  # Ctrl-C keeps the fit so far; --resume continues it
        settings["checkpoint"] = str(ckpt)
        args.checkpoint_path = str(ckpt)  # for the message of an interrupted fit (cli.main)
    t0 = time.perf_counter()
    try:
        post = cz.fit(plan["model"], data, method=args.method, seed=args.seed, **settings)
    except DataError as err:
        _remove_empty(made)
        raise DataError(route_message(err), arg=err.arg) from None
    except BaseException:
        _remove_empty(made)
        raise
    seconds = time.perf_counter() - t0
    post.save(out / "posterior.pt")  # first: whatever happens while writing the tables, the fit is kept
    if ckpt.is_file() and not settings.get("checkpoint_every"):
        ckpt.unlink()  # the fit finished: posterior.pt holds it (and its loop state)
    print(f"crowdzoo: fitted {e.name} by {args.method} in {seconds:.1f} s; wrote {out / 'posterior.pt'}",
          file=sys.stderr, flush=True)
    probs = post.cluster_probs.double().numpy()
    cluster_table(probs, data.item_ids, "item").to_csv(out / "clusters.csv", index=False)
    worker_table(post).to_csv(out / "workers.csv", index=False)
    trace = np.asarray(post.trace["elbo"], dtype=np.float64)
    metrics = {"method": args.method, "seconds": seconds, "n_links": int(data.n_annotations),
               "n_items": int(data.n_items), "n_workers": int(data.n_workers),
               "n_features": int(data.n_features), "n_clusters": int(probs.shape[1]),
               "clusters_used": int(len(post.clusters_in_use())),
               "final_elbo_per_item": float(trace[-1]), "epochs": int(len(trace)),
               "converged": _settled(trace)}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    run = {k: v for k, v in vars(args).items() if k not in ("func", "checkpoint_path", "written")}
    cols = _columns(args)
    run.update(id_col=args.id_col or "id", worker_col=cols["worker"][0] if cols["worker"] else "",
               same_col=cols["same"][0], item_columns=item_columns,
               feature_columns=[str(c) for c in features.columns])
    (out / "run.json").write_text(json.dumps(run, indent=2))
    args.written = ["posterior.pt", "clusters.csv", "workers.csv", "metrics.json", "run.json"]
    return metrics
