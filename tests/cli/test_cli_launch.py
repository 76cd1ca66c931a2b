"""The command line as a long job meets it: Ctrl-C under torchrun (the resume command repeats the
launch, and only rank 0 speaks of the checkpoint), progress lines when stderr is a file, and
``--outputs`` to write the fit without the tables that cost more than it at scale."""
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
    stopped = KeyboardInterrupt("gppl natgrad: interrupted after iteration 7")
    stopped.iteration = 7  # as inference.natgrad.run raises it
    msg = _interrupted(_args(ckpt), ARGV, stopped)
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


def test_outputs_chooses_the_tables(tmp_path, capsys):
    import json

    import crowdzoo as cz
    from crowdzoo.cli import main

    data, _ = cz.simulate_crowd(n_items=8, n_users=3, n_pairs=90, seed=0)
    frame = data.to_frame()
    frame.to_csv(tmp_path / "p.csv", index=False)
    base = ["fit", "crowdgppl", "--pairs", str(tmp_path / "p.csv"), "--components", "2", "--max-iter", "5",
            "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a"), "--outputs", "utilities"]) == 0
    files = {p.name for p in (tmp_path / "a").iterdir()}
    assert files == {"utilities.csv", "posterior.pt", "metrics.json", "run.json"}
    assert "train_accuracy" not in json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert main([*base, "--out", str(tmp_path / "b"), "--outputs", "personal,predictions"]) == 0
    assert {"utilities_personal.csv", "predictions.csv"} <= {p.name for p in (tmp_path / "b").iterdir()}
    assert not (tmp_path / "b" / "utilities.csv").exists()
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "c"), "--outputs", "utilities,scores"]) == 2
    assert "--outputs: unknown table 'scores'; choose among utilities, personal, predictions" in \
        capsys.readouterr().err
    held_out = ["--outputs", "utilities", "--test-fraction", "0.2"]
    assert main([*base, "--out", str(tmp_path / "d"), *held_out]) == 2
    assert "add predictions to --outputs" in capsys.readouterr().err
