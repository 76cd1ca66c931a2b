"""Comparisons on a Dask cluster: a real ``LocalCluster`` of 2 worker processes on localhost
runs the repeats, through ``run(executor=...)`` and through ``crowdzoo compare --executor tcp://...``,
and the table is the local process pool's to the last digit; a worker killed mid-run is retried by Dask
and the table is still complete; the CLI's errors when Dask is missing or no scheduler answers.

The tidy frames are compared to 1e-9 and the tables character for character: Dask starts its worker
processes with ``OPENBLAS_NUM_THREADS=1`` (``distributed.nanny.pre-spawn-environ``) while the local pool's
forked processes inherit a BLAS started with one thread a core, and some sums then come out in another
order (about 1e-9 apart on ``ukpconvarg-consensus``; equal to the bit on ``sushi-a-small`` here).

The slow test runs the commands of docs/guides/scale.md ("A comparison on a Dask cluster") as written:
``dask scheduler``, ``dask worker``, ``crowdzoo compare ... --executor``."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

import dask  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

from crowdzoo.cli import main  # noqa: E402
from crowdzoo.comparisons import run  # noqa: E402
from crowdzoo.data.sushi import write_sushi_fixture  # noqa: E402

# a cheap comparison of the registry whose table has no timings: ≈1 s a repeat on a small synthetic
# Sushi set (crowdzoo.data.sushi.write_sushi_fixture)
NAME = "sushi-a-small"
# the guide's command (docs/guides/scale.md): ≈8 s a repeat, data shipped with the zoo
GUIDE_NAME = "ukpconvarg-consensus"


class Tiny:
    """A comparison of one's own (``run(Tiny, ...)``): a moment of torch arithmetic a repeat. With a
    ``data_dir``, the first attempt at seed 1 (no marker file there yet) kills its worker process, and
    seed 2 raises if the folder holds a file ``raise``."""

    needs_data_dir = True

    @staticmethod
    def run_one(seed, quick=False, data_dir=None):
        return _tiny_run_one(seed, quick=quick, data_dir=data_dir)

    @staticmethod
    def summarise(df):
        return "\n".join(f"| {s} | {v:.6f} |" for s, v in zip(df["seed"], df["value"]))


def _tiny_run_one(seed, quick=False, data_dir=None):
    import torch

    if data_dir is not None and seed == 1:
        marker = Path(data_dir) / "seed1-first-attempt"
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            time.sleep(0.5)  # mid-run
            os._exit(1)  # the worker process dies with the task on it
    if data_dir is not None and seed == 2 and (Path(data_dir) / "raise").exists():
        with open(Path(data_dir) / "raise", "a") as f:
            f.write("attempt\n")
        raise RuntimeError("seed 2 fails")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(200, 200, generator=g, dtype=torch.float64)
    return pd.DataFrame({"seed": [seed], "value": [float(torch.linalg.eigvalsh(x @ x.T).max())]})


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


def test_compare_executor_address_prints_the_local_table(cluster, tmp_path, capsys):
    """``crowdzoo compare NAME --executor tcp://...`` on the cluster: the table printed is the local
    process pool's (``run(NAME, jobs=2)``), character for character, and so is the tidy CSV's every
    row, to 1e-9 (see the module's note on BLAS threads)."""
    data_dir = write_sushi_fixture(tmp_path / "sushi", n_users=60, seed=3)
    ref_df, ref_table = run(NAME, repeats=2, jobs=2, quick=True, data_dir=data_dir)
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    out = tmp_path / "cmp.md"
    code = main(["compare", NAME, "--quick", "--repeats", "2", "--data-dir", str(data_dir), "--executor",
                 cluster.scheduler_address, "--out", str(out)])
    assert code == 0
    assert capsys.readouterr().out.strip() == ref_table.strip()
    ref_df.to_csv(tmp_path / "local.csv", index=False)
    df = pd.read_csv(out.with_suffix(".csv"))
    pd.testing.assert_frame_equal(df, pd.read_csv(tmp_path / "local.csv"), rtol=1e-9, atol=0)
    assert df["seed"].unique().tolist() == [0, 1]


def test_executor_client_or_get_executor_is_the_local_pools(cluster):
    """``run(..., executor=client)`` and ``executor=client.get_executor()`` (one's own comparison, each
    repeat its own future): the tidy frame, seeds in order, and the table of the local pool."""
    ref_df, ref_table = run(Tiny, repeats=4, jobs=2)
    with Client(cluster) as client:
        for executor in (client, client.get_executor()):
            df, table = run(Tiny, repeats=4, executor=executor)
            pd.testing.assert_frame_equal(df, ref_df, check_exact=True)
            assert table == ref_table and df["seed"].tolist() == [0, 1, 2, 3]


def test_a_worker_killed_mid_run_is_retried(cluster, tmp_path):
    """A repeat kills its worker process mid-run (its first attempt); Dask reruns it on a live worker and
    the table is complete and the local pool's."""
    ref_df, ref_table = run(Tiny, repeats=4, jobs=2)
    with Client(cluster) as client:
        pids = set(client.run(os.getpid).values())
        df, table = run(Tiny, repeats=4, executor=client, data_dir=tmp_path)
        marker = tmp_path / "seed1-first-attempt"
        assert marker.is_file() and int(marker.read_text()) in pids  # the first attempt ran on a worker
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the dead worker
        assert int(marker.read_text()) not in set(client.run(os.getpid).values())  # ... which died
    pd.testing.assert_frame_equal(df, ref_df, check_exact=True)
    assert table == ref_table and df["seed"].tolist() == [0, 1, 2, 3]


def test_an_error_in_a_repeat_is_raised_not_retried(cluster, tmp_path):
    """An exception in a repeat (not a dead worker) stops the run with that exception, tried once."""
    (tmp_path / "raise").touch()
    (tmp_path / "seed1-first-attempt").touch()  # no worker killed here
    with Client(cluster) as client, pytest.raises(RuntimeError, match="seed 2 fails"):
        run(Tiny, repeats=4, executor=client, data_dir=tmp_path)
    assert (tmp_path / "raise").read_text() == "attempt\n"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_scheduler_at_the_address_is_a_clear_error(capsys):
    address = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.perf_counter()
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["compare", NAME, "--executor", address])
    assert code == 2 and time.perf_counter() - t0 < 30  # Dask's connect timeout, not a hang
    err = capsys.readouterr().err
    assert "--executor" in err and address in err and "dask scheduler" in err
    assert main(["compare", NAME, "--executor", "nonsense://x"]) == 2
    assert "not a Dask scheduler address" in capsys.readouterr().err


def test_executor_without_dask_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # `import dask.distributed` fails
    assert main(["compare", NAME, "--executor", "tcp://127.0.0.1:8786"]) == 2
    assert 'pip install "crowdzoo[dask]"' in capsys.readouterr().err


def test_something_else_as_executor_is_refused():
    with pytest.raises(TypeError, match="concurrent.futures.Executor or a dask.distributed.Client"):
        run(Tiny, repeats=1, executor=object())


@pytest.mark.slow
def test_the_guides_commands_on_localhost(tmp_path):
    """docs/guides/scale.md's commands, as a user types them: a scheduler, 2 worker processes, and
    ``crowdzoo compare`` on them, against ``crowdzoo compare --jobs 2``."""
    bindir = Path(sys.executable).parent
    dask_cli, crowdzoo_cli = shutil.which("dask", path=bindir), shutil.which("crowdzoo", path=bindir)
    if dask_cli is None or crowdzoo_cli is None:
        pytest.skip("the dask and crowdzoo commands are not installed beside this Python")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([dask_cli, "worker", address, "--nworkers", "2", "--nthreads", "1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        compare = [crowdzoo_cli, "compare", GUIDE_NAME, "--quick", "--repeats", "2"]
        on_dask = subprocess.run([*compare, "--executor", address], capture_output=True, text=True,
                                 timeout=600)
        assert on_dask.returncode == 0, on_dask.stderr
        local = subprocess.run([*compare, "--jobs", "2"], capture_output=True, text=True, timeout=600)
        assert local.returncode == 0, local.stderr
        assert on_dask.stdout == local.stdout and "|" in on_dask.stdout
        with Client(address) as client:  # the guide's Python form
            _, table = run(GUIDE_NAME, repeats=2, quick=True, executor=client.get_executor())
        assert table.strip() == local.stdout.strip()
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
