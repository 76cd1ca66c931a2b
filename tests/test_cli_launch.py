"""Ctrl-C under torchrun: the resume command repeats the launch, and only rank 0 speaks of the
checkpoint (the other ranks keep none)."""
from __future__ import annotations

import argparse

from crowdzoo.cli import _interrupted

ARGV = ["fit", "gppl", "--pairs", "p.csv", "--out", "runs/x", "--distributed"]


def _args(ckpt):
    return argparse.Namespace(command="fit", model="gppl", method="natgrad", checkpoint_path=str(ckpt))


def test_rank0_resume_repeats_the_torchrun_launch(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoint.pt"
    ckpt.write_bytes(b"x")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    msg = _interrupted(_args(ckpt), ARGV, KeyboardInterrupt("after iteration 7"))
    assert "after iteration 7" in msg
    assert msg.endswith(f"torchrun --nproc-per-node 2 crowdzoo {' '.join(ARGV)} --resume {ckpt}")
    monkeypatch.setenv("WORLD_SIZE", "6")  # three machines of two processes
    msg = _interrupted(_args(ckpt), ARGV, KeyboardInterrupt())
    assert "torchrun --nnodes 3 --nproc-per-node 2 crowdzoo fit" in msg


def test_other_ranks_defer_to_rank0(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    msg = _interrupted(_args(tmp_path / "none.pt"), ARGV, KeyboardInterrupt())
    assert msg == "crowdzoo: rank 1 interrupted; rank 0 says what was kept"


def test_without_torchrun_the_command_is_crowdzoo(tmp_path, monkeypatch):
    for k in ("TORCHELASTIC_RUN_ID", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(k, raising=False)
    ckpt = tmp_path / "checkpoint.pt"
    ckpt.write_bytes(b"x")
    msg = _interrupted(_args(ckpt), ARGV + ["--resume", "old.pt"], KeyboardInterrupt())
    assert msg.endswith(f"continue it with: crowdzoo {' '.join(ARGV)} --resume {ckpt}")


def test_progress_lines_when_stderr_is_a_file(capsys):
    """Where stderr is not a terminal a fit prints a line every so often instead of a bar."""
    from crowdzoo.inference.common import LogLines, progress

    assert isinstance(progress(10, "natgrad", "log"), LogLines)
    bar = LogLines(10, "natgrad", every=0.0)
    with bar:
        bar.set_postfix(elbo=-12.3456, step=3)
        bar.update()
    assert capsys.readouterr().err.startswith("crowdzoo: natgrad: 1 / 10, elbo=-12.35, step=3, ")
