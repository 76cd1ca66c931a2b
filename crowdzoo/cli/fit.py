"""``crowdzoo fit``: a links model's fit goes to :mod:`crowdzoo.cli.links`, a fit of choices among k
items (``--choices``) reads them with :mod:`crowdzoo.cli.choices`; a preference model's is
planned (:mod:`crowdzoo.cli.plan`: every option given must apply), its CSVs read, fitted, and its run
folder written: posterior.pt first, then the tables of :mod:`crowdzoo.cli.outputs`, metrics.json and
run.json."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from .. import zoo
from ..errors import DataError
from .choices import check_fit_options, check_no_choice_options, read_choices, write_predictions
from .links import LINKS_ONLY, is_links, need_pairs
from .links import cmd_fit as fit_links
from .messages import cli_message, route_message
from .outputs import _write_predictions, write_utilities
from .parser import OUTPUTS
from .plan import plan_fit
from .reading import _names, _read_csv, load_csvs
from .runs import _check_out, _prepare_out, _remove_empty, _resume_file


def _lead_rank(plan) -> bool:
    """False on ranks other than 0 of a ``--distributed`` fit (they write nothing)."""
    return not plan["settings"].get("distributed") or int(os.environ.get("RANK", "0")) == 0


def _outputs(args) -> set:
    """The tables ``--outputs`` asks for; an unknown name, or held-out pairs with no predictions to
    score them, is refused."""
    names = _names(getattr(args, "outputs", None) or ",".join(OUTPUTS))
    bad = [n for n in names if n not in OUTPUTS]
    if bad:
        raise DataError(f"--outputs: unknown table {bad[0]!r}; choose among {', '.join(OUTPUTS)}")
    if getattr(args, "test_fraction", None) and "predictions" not in names:
        raise DataError("--outputs: --test-fraction holds pairs out to score them in predictions.csv; add "
                        "predictions to --outputs, or leave out --test-fraction")
    return set(names)


def _fit(model, train, args, out: Path, plan: dict):
    """Fit on rank 0 (or alone): make --out, keep a checkpoint where the route writes one (Ctrl-C then
    names it), and write posterior.pt first, so that whatever happens while scoring, the fit is kept.
    Returns (posterior, seconds)."""
    import crowdzoo as cz

    settings = dict(plan["settings"])
    made = _prepare_out(out, keep=_resume_file(args, out))
    ckpt = out / "checkpoint.pt"
    if "checkpoint" in plan["static"]:
        settings["checkpoint"] = str(ckpt)
        args.checkpoint_path = str(ckpt)  # for the message of an interrupted fit (main)
    t0 = time.perf_counter()
    try:
        post = cz.fit(model, train, method=args.method, seed=args.seed, **settings)
    except DataError as err:
        _remove_empty(made)
        raise DataError(route_message(err), arg=err.arg) from None
    except BaseException:
        _remove_empty(made)
        raise
    seconds = time.perf_counter() - t0
    post.save(out / "posterior.pt")
    if ckpt.is_file() and not settings.get("checkpoint_every"):
        ckpt.unlink()  # the fit finished: posterior.pt holds it (and its loop state)
    return post, seconds


def _say_fitted(e, args, post, seconds: float, out: Path, n_labels: int, what: str = "labels") -> None:
    """One line on stderr as soon as the fit ends, before the (maybe long) scoring."""
    its = (f" ({post.settings['iterations']} iterations, "
           f"{'converged' if post.settings.get('converged') else 'not converged'})"
           if "iterations" in post.settings else "")
    print(f"crowdzoo: fitted {e.name} by {args.method or 'its default route'} in {seconds:.1f} s{its}; wrote "
          f"{out / 'posterior.pt'}; scoring the {n_labels:,} training {what}", file=sys.stderr, flush=True)


def _write_run(out: Path, args, metrics: dict, crowd: bool) -> None:
    """metrics.json, and run.json: the options, which ``predict`` and ``report`` read back."""
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    run = {k: v for k, v in vars(args).items() if k not in ("func", "checkpoint_path")}
    if crowd:
        run["user_col"] = getattr(args, "user_col", None) or "user"
    (out / "run.json").write_text(json.dumps(run, indent=2))


def run_fit(data, args, out: Path, f_true=None, plan: dict | None = None, pairs=None) -> dict:
    """Fit, predict and write utilities.csv (and utilities_personal.csv for crowd models),
    predictions.csv, metrics.json, run.json, posterior.pt (on rank 0 only, for ``--distributed``).
    ``pairs``: the frame ``data`` was read from (None for a shard: rank 0 reads its rows again)."""
    import crowdzoo as cz

    from ..metrics import kendall_tau

    plan = plan or plan_fit(args)
    e = plan["entry"]
    outputs = _outputs(args)
    try:
        train, test = (cz.split_pairs(data, args.test_fraction, seed=args.seed)
                       if args.test_fraction else (data, None))
    except DataError as err:
        raise DataError(cli_message(err, {"test_fraction": "--test-fraction"}, default="--test-fraction"),
                        arg="--test-fraction") from None
    crowd = e.data == "crowd pairs"
    model = e.model_class()(**plan["model_kw"])
    if not _lead_rank(plan):
        cz.fit(model, train, method=args.method, seed=args.seed, **plan["settings"])
        return {}
    post, seconds = _fit(model, train, args, out, plan)
    _say_fitted(e, args, post, seconds, out, train.n_pairs)
    mean, written = write_utilities(out, post, train, outputs, crowd, args.seed, f_true is not None)
    metrics = {"method": args.method, "seconds": seconds, "n_pairs": train.n_pairs}
    if train.label_range is not None:  # a --distributed fit: rank 0 holds (and scores) its shard alone
        lo, hi, metrics["n_pairs"] = train.label_range
        metrics["train_scored_on"] = f"rank 0's shard of --pairs: labels {lo}..{hi - 1}"
        pairs = _read_csv(args.pairs, "--pairs", args.sep, nrows=int(train.source_rows.max()) + 1)
    if "predictions" in outputs:
        metrics.update(_write_predictions(out / "predictions.csv", pairs, data, test, post, args, crowd))
        written.append("predictions.csv")
    if f_true is not None and mean is not None:
        metrics["kendall_tau_vs_truth"] = kendall_tau(f_true, mean.values)
    metrics.update({k: post.settings[k] for k in ("iterations", "converged") if k in post.settings})
    metrics.update(order_metrics(post))
    _write_run(out, args, metrics, crowd)
    args.written = written + ["metrics.json", "run.json", "posterior.pt"]
    return metrics


def order_metrics(post) -> dict:
    """The order effect δ of a fit with ``--order-effect`` (the first item's advantage): its posterior
    mean, sd and P(δ > 0); nothing for a fit without it."""
    if getattr(post, "order_means", None) is None:
        return {}
    oe = post.order_effect()
    return {"order_effect_mean": oe["mean"], "order_effect_sd": oe["sd"],
            "order_effect_p_positive": oe["p_positive"]}


def fit_choices(args) -> int:
    """``crowdzoo fit MODEL --choices FILE.csv``: choices among k items (:mod:`crowdzoo.cli.choices`),
    for a model and route whose likelihood takes them; writes posterior.pt first, then utilities.csv,
    predictions.csv (each row of --choices with its P(chosen)), metrics.json and run.json."""
    e = zoo.entry(args.model)
    for dest, flag in LINKS_ONLY.items():
        if getattr(args, dest, None) is not None:
            raise DataError(f"{flag}: not with --choices; {flag} is for the links models", arg=flag)
    check_fit_options(args, e)
    out = Path(args.out)
    plan = plan_fit(args)
    outputs = _outputs(args)
    _check_out(out, args.overwrite, keep=_resume_file(args, out))
    frame, data = read_choices(args.choices, args)
    crowd = e.data == "crowd pairs"
    model = e.model_class()(**plan["model_kw"])
    post, seconds = _fit(model, data, args, out, plan)
    _say_fitted(e, args, post, seconds, out, data.n_rows, "choices")
    _, written = write_utilities(out, post, data, outputs, crowd, args.seed, False)
    metrics = {"method": args.method, "seconds": seconds, "n_choices": data.n_rows, "n_rows": len(frame)}
    if "predictions" in outputs:
        metrics.update(write_predictions(out / "predictions.csv", frame, data, post, args))
        written.append("predictions.csv")
    metrics.update({k: post.settings[k] for k in ("iterations", "converged") if k in post.settings})
    _write_run(out, args, metrics, crowd)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {', '.join(str(out / f) for f in written + ['metrics.json', 'run.json', 'posterior.pt'])}")
    return 0


def cmd_fit(args) -> int:
    if is_links(args.model):
        return fit_links(args)
    if getattr(args, "choices", None) is not None:
        return fit_choices(args)
    check_no_choice_options(args)
    need_pairs(args)
    out = Path(args.out)
    plan = plan_fit(args)
    sharded = bool(plan["settings"].get("distributed"))
    if sharded and args.test_fraction:
        raise DataError("--test-fraction: not with --distributed (each rank reads only its shard of "
                        "--pairs); hold out pairs in a file of their own and score them with "
                        "`crowdzoo predict`", arg="--test-fraction")
    if not _lead_rank(plan):  # a follower rank of a torchrun launch: it fits its shard, rank 0 writes
        _, data = load_csvs(args.pairs, args.items, args, shard=True)
        run_fit(data, args, out, plan=plan)
        return 0
    _check_out(out, args.overwrite, keep=_resume_file(args, out))
    pairs, data = load_csvs(args.pairs, args.items, args, shard=sharded)
    metrics = run_fit(data, args, out, plan=plan, pairs=pairs)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {', '.join(str(out / f) for f in args.written)}")
    return 0
