"""Run folders: ``--out`` checked before anything is fitted, an earlier run's files removed only with
``--overwrite``, ``predict -o`` likewise; a run's settings (run.json) and posterior read back.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from ..errors import DataError

#: the files a run folder holds; ``--overwrite`` removes them before the new run writes its own
RUN_FILES = ("posterior.pt", "metrics.json", "run.json", "utilities.csv", "utilities_personal.csv",
             "predictions.csv", "checkpoint.pt", "checkpoint.pt.tmp", "diagnostics.html", "diagnostics.md",
             "report.html", "report.md", "clusters.csv", "workers.csv")


def check_out_file(args) -> None:
    """predict's ``-o``: a file in an existing folder, replaced only with --overwrite."""
    if not args.out:
        return
    out = Path(args.out)
    if out.is_dir():
        raise DataError(f"--out: {args.out} is a folder; name the CSV file to write")
    if out.exists() and not args.overwrite:
        raise DataError(f"--out: {args.out} exists; name a new file, or pass --overwrite to replace it")
    if not out.absolute().parent.is_dir():
        raise DataError(f"--out: the folder of {args.out} does not exist")
    _check_out(out.absolute().parent, overwrite=True)


def write_result(result: pd.DataFrame, out, sep: str, what: str, command: str = "predict") -> None:
    """A command's table to the file ``out`` (saying ``what`` — with ``{n}`` for its rows — on
    stderr) or to standard output."""
    if out:
        result.to_csv(out, sep=sep, index=False)
        print(f"{command}: {what.format(n=len(result))} written to {out}", file=sys.stderr)
    else:
        result.to_csv(sys.stdout, sep=sep, index=False)


def _resume_file(args, out: Path):
    """The resolved --resume path when it lies in ``out`` (kept by the out-folder checks)."""
    resume = getattr(args, "resume", None)
    if resume and Path(resume).resolve().parent == out.resolve():
        return Path(resume).resolve()
    return None


def _check_out(out: Path, overwrite: bool, keep=None) -> None:
    """``--out`` before anything is fitted: a folder (or a new one) that can be written, holding no
    earlier run unless ``overwrite``. Creates nothing."""
    if out.exists() and not out.is_dir():
        raise DataError(f"--out: {out} is a file, not a folder; name a folder for the run")
    if out.is_dir():
        found = [f for f in RUN_FILES if (out / f).exists() and (out / f).resolve() != keep]
        if found and not overwrite:
            if found == ["checkpoint.pt"]:
                raise DataError(f"--out: {out} holds the checkpoint of an interrupted fit; continue it with "
                                f"--resume {out / 'checkpoint.pt'}, or pass --overwrite to start again")
            raise DataError(f"--out: {out} already holds a run ({', '.join(found)}); name a new folder, or "
                            "pass --overwrite to replace it")
        others = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES)
        if others and not overwrite:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise DataError(f"--out: {out} is a folder that is not a run (it holds {shown}); name a new "
                            "folder for the run, or pass --overwrite to write the run's files beside those")
        base = out
    else:
        base = out.absolute().parent
        while not base.exists():
            base = base.parent
        if not base.is_dir():
            raise DataError(f"--out: cannot make the folder {out}: {base} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=base, prefix=".crowdzoo-")
    except OSError as err:
        raise DataError(f"--out: cannot write in {base} ({err.strerror or err}); choose a folder you can "
                        "write to") from None
    os.close(fd)
    os.unlink(probe)


def _prepare_out(out: Path, keep=None) -> list:
    """Make ``out`` (returns the folders made, for :func:`_remove_empty`) and remove an earlier
    run's files from it (``--overwrite`` was checked by :func:`_check_out`), except ``keep``."""
    made = []
    p = out.absolute()
    while not p.exists():
        made.append(p)
        p = p.parent
    out.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        f = out / name
        if f.is_file() and f.resolve() != keep:
            f.unlink()
    return made


def _remove_empty(made: list) -> None:
    for p in made:  # deepest first
        try:
            p.rmdir()
        except OSError:
            return


def _load_run(run_dir: Path, what: str):
    import crowdzoo as cz

    if not (run_dir / "posterior.pt").is_file():
        raise DataError(f"{what}: {run_dir} has no posterior.pt (write one with `crowdzoo fit ... --out "
                        f"{run_dir}`)")
    return cz.load(run_dir / "posterior.pt")


def _run_settings(run_dir: Path) -> dict:
    """The settings a run was fitted with (its run.json; {} for a folder without one)."""
    f = run_dir / "run.json"
    return json.loads(f.read_text()) if f.is_file() else {}
