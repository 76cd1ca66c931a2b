"""Data-parallel natural-gradient SVI on torch.distributed (gloo, loopback only).

Two ranks launched by ``torchrun`` each hold half of the labels and sum their step statistics with an
all-reduce; the posterior equals a single-process fit on the same mini-batches to within 1e-8, for
both likelihoods (the exact one on weighted labels, each rank holding its labels' weights, with the
order effect, whose q(δ) sums its statistics over the ranks too). A rank
that fails ends the other with a clear DistributedError, not a hang."""
from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import crowdzoo as cz

pytest.importorskip("torch.distributed")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

FIT = dict(n_inducing=12)
SETTINGS = dict(method="natgrad", batch_size=150, max_iter=30, tol=0.0, progress_bar=False)

WORKER = textwrap.dedent('''
    import dataclasses, os, sys, torch, warnings
    import numpy as np
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    import crowdzoo as cz
    lik, out, fail_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rank = int(os.environ["RANK"])

    def callback(i, state):
        if rank == 1 and i == fail_at:
            raise SystemExit("rank 1 stops on purpose")

    data, _ = cz.simulate_gppl(n_items=40, n_pairs=600, n_features=2, seed=0)
    if lik == "exact":  # weighted labels: 1, 2, 3, 1, ...
        data = dataclasses.replace(data, weights=np.resize([1.0, 2.0, 3.0], data.n_pairs))
    model = cz.GPPL(n_inducing=12, order_effect=lik == "exact")
    post = cz.fit(model, data, method="natgrad", likelihood=lik, distributed=True,
                  batch_size=150, max_iter=30, tol=0.0, progress_bar=False, callback=callback)
    torch.save({"means": post.means, "covs": post.covs, "s": post.s, "ranks": post.settings["ranks"],
                "r_means": post.r_means, "r_vars": post.r_vars, "order_means": post.order_means,
                "order_vars": post.order_vars}, f"{out}.{rank}.pt")
''')


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    return path


@pytest.mark.parametrize("likelihood", ["linearised", "exact"])
def test_two_ranks_give_the_single_process_posterior(tmp_path, worker, likelihood):
    out = tmp_path / likelihood
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
           "127.0.0.1", "--master-port", str(_port()), str(worker), likelihood, str(out), "-1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    data, _ = cz.simulate_gppl(n_items=40, n_pairs=600, n_features=2, seed=0)
    if likelihood == "exact":
        data = dataclasses.replace(data, weights=np.resize([1.0, 2.0, 3.0], data.n_pairs))
    model = cz.GPPL(**FIT, order_effect=likelihood == "exact")
    single = cz.fit(model, data, likelihood=likelihood, **SETTINGS)
    assert single.settings["ranks"] == 1
    for rank in (0, 1):
        got = torch.load(f"{out}.{rank}.pt")
        assert got["ranks"] == 2
        gap = float((got["means"] - single.means).abs().max())
        print(f"{likelihood} rank {rank}: max |Δ mean| {gap:.2e}")
        torch.testing.assert_close(got["means"], single.means, rtol=0, atol=1e-8)
        torch.testing.assert_close(got["covs"], single.covs, rtol=0, atol=1e-8)
        torch.testing.assert_close(got["s"], single.s, rtol=0, atol=1e-8)
        # the item residual, swept over every rank's labels at the end of the mini-batches
        torch.testing.assert_close(got["r_means"], single.r_means, rtol=0, atol=1e-8)
        torch.testing.assert_close(got["r_vars"], single.r_vars, rtol=0, atol=1e-8)
        if likelihood == "exact":  # the order effect's q(δ), its statistics summed over the ranks
            torch.testing.assert_close(got["order_means"], single.order_means, rtol=0, atol=1e-8)
            torch.testing.assert_close(got["order_vars"], single.order_vars, rtol=0, atol=1e-8)


def test_a_failed_rank_ends_the_others_with_a_clear_error(tmp_path, worker):
    """Rank 1 stops at iteration 5; rank 0 (no torchrun agent to kill it) must end by itself with a
    DistributedError naming the timeout setting, well before the test's own limit."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_port()), "WORLD_SIZE": "2",
           "CROWDZOO_DISTRIBUTED_TIMEOUT": "10"}
    out = tmp_path / "fail"
    procs = [subprocess.Popen([sys.executable, str(worker), "exact", str(out), "5"],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    t0 = time.time()
    errs = [p.communicate(timeout=120)[1] for p in procs]
    print(f"both ranks ended after {time.time() - t0:.1f} s; rank 0 said: {errs[0].strip().splitlines()[-1]}")
    assert procs[1].returncode != 0 and "on purpose" in errs[1]
    assert procs[0].returncode != 0
    assert "DistributedError" in errs[0] and "CROWDZOO_DISTRIBUTED_TIMEOUT" in errs[0]
    assert not list(tmp_path.glob("fail.*.pt"))


def test_distributed_without_a_launch_says_how_to_launch(monkeypatch):
    from crowdzoo.errors import DistributedError

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    data, _ = cz.simulate_gppl(n_items=10, n_pairs=40, seed=0)
    with pytest.raises(DistributedError, match="torchrun"):
        cz.fit(cz.GPPL(), data, method="natgrad", distributed=True)


def test_cli_fit_distributed_writes_once_and_matches_one_process(tmp_path):
    """`torchrun --nproc-per-node 2 crowdzoo fit gppl ... --distributed` (the guide's command): rank 0
    writes the run once; its utilities equal a one-process `crowdzoo fit` of the same CSV files."""
    import pandas as pd

    data, _ = cz.simulate_gppl(n_items=30, n_pairs=400, n_features=2, seed=0)
    data.to_frame().to_csv(tmp_path / "pairs.csv", index=False)
    items = pd.DataFrame(data.item_features, index=pd.Index(data.item_ids, name="item"))
    items.to_csv(tmp_path / "items.csv")
    exe = os.path.join(os.path.dirname(sys.executable), "crowdzoo")
    args = ["fit", "gppl", "--pairs", "pairs.csv", "--items", "items.csv", "--id-col", "item",
            "--method", "natgrad", "--n-inducing", "10"]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-addr", "127.0.0.1", "--master-port", str(_port()), exe, *args,
                          "--distributed", "--out", "two"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("wrote ") == 1
    one = subprocess.run([exe, *args, "--out", "one"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    u2 = pd.read_csv(tmp_path / "two" / "utilities.csv").sort_values("item")
    u1 = pd.read_csv(tmp_path / "one" / "utilities.csv").sort_values("item")
    assert (u2["item"].to_numpy() == u1["item"].to_numpy()).all()
    assert abs(u2["mean"].to_numpy() - u1["mean"].to_numpy()).max() < 1e-8
    import json

    metrics = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert metrics["n_pairs"] == 400 and metrics["train_scored_on"].endswith("labels 0..199")
    bad = subprocess.run([exe, *args, "--distributed", "--test-fraction", "0.2", "--out", "x"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "--test-fraction" in bad.stderr and "Traceback" not in bad.stderr


CROWD_WORKER = textwrap.dedent('''
    import dataclasses, os, sys, torch, warnings
    import numpy as np
    import pandas as pd
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    import crowdzoo as cz
    folder = sys.argv[1]
    rank = int(os.environ["RANK"])
    items = pd.read_csv(f"{folder}/items.csv", index_col="item")
    shard = cz.PairwiseData.read_shard(f"{folder}/crowd.csv", items=items, a="winner", b="loser", y=None,
                                       user="rater", chunksize=97)
    out = {"range": shard.label_range, "n_items": shard.n_items, "n_users": shard.n_users}
    with warnings.catch_warnings(record=True) as caught:  # stopped unconverged: a ConvergenceWarning
        warnings.simplefilter("always")
        cz.fit(cz.CrowdGPPL(n_inducing=10, n_components=3), shard, method="natgrad", distributed=True,
               max_iter=3, progress_bar=False)
    out["warnings"] = [str(w.message)[:60] for w in caught]
    for lik in ("linearised", "exact"):
        post = cz.fit(cz.CrowdGPPL(n_inducing=10, n_components=3), shard, method="natgrad", likelihood=lik,
                      distributed=True, batch_size=120, max_iter=12, tol=0.0, progress_bar=False)
        out[lik] = {"v_m": post.v_m, "w_m": post.w_m, "t_m": post.t_m, "s_v": post.s_v,
                    "ranks": post.settings["ranks"]}
    data, _ = cz.simulate_gppl(n_items=40, n_pairs=600, n_features=2, seed=0)
    post = cz.fit(cz.GPPL(n_inducing=12, kernel="se"), data, method="natgrad", learn_kernel=True,
                  distributed=True, batch_size=150, max_iter=20, tol=0.0, progress_bar=False)
    out["gppl_learn"] = {"means": post.means, "ell": torch.tensor(post.settings["learned_lengthscale"])}
    torch.save(out, f"{folder}/out.{rank}.pt")
''')


def _crowd_files(folder):
    """A crowd as a user keeps it: string ids for items and raters, a winner/loser CSV, an items table."""
    import pandas as pd

    data, _ = cz.simulate_crowd(n_items=25, n_users=9, n_pairs=700, n_components=2, n_user_features=0,
                                seed=3)
    item_ids = [f"film-{k:02d}" for k in range(data.n_items)]
    user_ids = [f"rater {k}" for k in range(data.n_users)]
    win = data.y == 1
    frame = pd.DataFrame({"rater": [user_ids[u] for u in data.users],
                          "winner": [item_ids[i] for i in np.where(win, data.a, data.b)],
                          "loser": [item_ids[i] for i in np.where(win, data.b, data.a)]})
    frame.to_csv(folder / "crowd.csv", index=False)
    items = pd.DataFrame(data.item_features, index=pd.Index(item_ids, name="item"), columns=["x0", "x1"])
    items.to_csv(folder / "items.csv")
    return cz.PairwiseData.from_frame(frame, items, a="winner", b="loser", y=None, user="rater")


def test_crowdgppl_two_ranks_reading_their_shards_give_the_single_process_posterior(tmp_path):
    """crowdGPPL (both likelihoods) fitted by 2 gloo ranks, each having read only its half of a
    winner/loser CSV with string ids (read_shard, in chunks), equals one process on the whole file to
    1e-8; and GPPL with its kernel learned (the length-scales' gradient summed over ranks) too."""
    whole = _crowd_files(tmp_path)
    script = tmp_path / "crowd_worker.py"
    script.write_text(CROWD_WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
           "127.0.0.1", "--master-port", str(_port()), str(script), str(tmp_path)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    got = [torch.load(tmp_path / f"out.{r}.pt") for r in (0, 1)]
    P = whole.n_pairs
    assert got[0]["range"] == (0, 350, P) and got[1]["range"] == (350, P, P)
    # a fit stopped at max_iter unconverged: rank 0 says so, rank 1 stays quiet
    assert any("max_iter" in w for w in got[0]["warnings"]) and got[1]["warnings"] == []
    assert all(g["n_items"] == whole.n_items and g["n_users"] == whole.n_users for g in got)
    for lik in ("linearised", "exact"):
        single = cz.fit(cz.CrowdGPPL(n_inducing=10, n_components=3), whole, method="natgrad", likelihood=lik,
                        batch_size=120, max_iter=12, tol=0.0, progress_bar=False)
        for r, g in enumerate(got):
            two = g[lik]
            assert two["ranks"] == 2
            gap = max(float((two[k] - getattr(single, k)).abs().max()) for k in ("v_m", "w_m", "t_m", "s_v"))
            print(f"crowdGPPL {lik} rank {r}: max |Δ| {gap:.2e}")
            for k in ("v_m", "w_m", "t_m", "s_v"):
                torch.testing.assert_close(two[k], getattr(single, k), rtol=0, atol=1e-8)
    data, _ = cz.simulate_gppl(n_items=40, n_pairs=600, n_features=2, seed=0)
    single = cz.fit(cz.GPPL(n_inducing=12, kernel="se"), data, method="natgrad", learn_kernel=True,
                    batch_size=150, max_iter=20, tol=0.0, progress_bar=False)
    ell = torch.tensor(single.settings["learned_lengthscale"])
    assert (ell - torch.tensor(single.settings["start_lengthscale"])).abs().max() > 1e-3  # it learned
    for g in got:
        print(f"GPPL learn_kernel: ℓ {g['gppl_learn']['ell'].tolist()} vs one process {ell.tolist()}")
        torch.testing.assert_close(g["gppl_learn"]["ell"], ell, rtol=0, atol=1e-8)
        torch.testing.assert_close(g["gppl_learn"]["means"], single.means, rtol=0, atol=1e-8)


def test_read_shard_outside_a_launch(tmp_path):
    """One process may read the whole file as a shard of one (it equals from_frame's data); a shard
    of several ranks needs the launch; a shard fitted without distributed=True is refused; bad rows are
    named by the file's row."""
    import pandas as pd

    from crowdzoo.errors import DataError

    whole = _crowd_files(tmp_path)
    items = pd.read_csv(tmp_path / "items.csv", index_col="item")
    one = cz.PairwiseData.read_shard(tmp_path / "crowd.csv", items=items, a="winner", b="loser", y=None,
                                     user="rater", rank=0, world=1, chunksize=64)
    assert one.label_range == (0, whole.n_pairs, whole.n_pairs)
    for k in ("a", "b", "y", "users"):
        assert (getattr(one, k) == getattr(whole, k)).all()
    assert list(one.user_ids) == list(whole.user_ids) and one.user_features is None
    half = dataclasses.replace(one.subset(np.arange(300)), label_range=(0, 300, whole.n_pairs))
    with pytest.raises(DataError, match="one rank's shard"):
        cz.fit(cz.CrowdGPPL(n_inducing=10, n_components=2), half, method="natgrad", max_iter=2)
    with pytest.raises(DataError, match="process group"):
        cz.PairwiseData.read_shard(tmp_path / "crowd.csv", items=items, a="winner", b="loser", y=None,
                                   user="rater", rank=1, world=2)
    frame = pd.read_csv(tmp_path / "crowd.csv")
    frame.loc[500, "loser"] = frame.loc[500, "winner"]
    frame.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match=r"index 500\).*compared with itself"):
        cz.PairwiseData.read_shard(tmp_path / "bad.csv", items=items, a="winner", b="loser", y=None,
                                   user="rater", rank=0, world=1, chunksize=64)
    assert (pd.read_csv(tmp_path / "bad.csv").loc[500, "loser"] == frame.loc[500, "loser"])


EXIT_WORKER = textwrap.dedent('''
    import torch
    from crowdzoo.inference.distributed import Shard, rank_and_world
    rank, world = rank_and_world()
    p = torch.nn.Parameter(torch.zeros(3))  # a torch optimizer imports torch._dynamo: a slower exit
    opt = torch.optim.Adam([p])
    p.sum().backward()
    opt.step()
    sh = Shard(rank, world, 0, 10, 10, 0)
    for _ in range(50):
        sh.sum(torch.ones(2000, 4, dtype=torch.float64))
''')


@pytest.mark.slow
def test_two_rank_launches_exit_cleanly(tmp_path):
    """Ranks that end normally leave together (the group closed on every rank before any process
    drops its sockets): 12 launches, every one with exit status 0. Without the exit barrier gloo
    aborted a rank ("terminate called without an active exception") in 11–14 of 40 such launches."""
    script = tmp_path / "exit.py"
    script.write_text(EXIT_WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for k in range(12):
        run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                              "--master-addr", "127.0.0.1", "--master-port", str(_port()), str(script)],
                             capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0, (k, run.stderr[-2000:])
        assert "terminate called" not in run.stderr
