"""BayesSCDC's data-parallel natural-gradient SVI on torch.distributed (gloo, loopback only).

Every rank holds a shard of the annotations (cut from the whole data, or read alone from a file) and
draws the same steps; each step's sampled annotations are completed by one all-reduce of their records,
its uniform rows are split in contiguous parts and its annotations by connected component, so each
rank's message passing is the single process's restricted to its components. One all-reduce per step
sums the networks' gradients, J and the statistics of Eq. 17 (Luo et al. 2018). Two ranks launched by
``torchrun`` end with the globals, the networks and the clusters of one process on the same steps
(float32 networks: relative 1e-4), and the split itself is checked in-process: disjoint items, every
annotation once, and partial statistics and gradients that sum to the whole step's (each rank's alone
does not)."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

import crowdzoo as cz
from crowdzoo.inference.distributed import replicated
from crowdzoo.models.scdc.bayes import expected, worker_stats
from crowdzoo.models.scdc.natgrad import (
    annotation_degree,
    component_ranks,
    init_conjugate,
    mixture_stats,
    records,
    split_step,
    step_objective,
)
from crowdzoo.models.scdc.svi import link_tensors

pytest.importorskip("torch.distributed")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

F64 = torch.float64
DATA = dict(n_arms=3, n_per_arm=40, n_annotated=60, n_workers=4, window=20, seed=1)
MODEL = dict(n_clusters=5, latent_dim=2, hidden=(16, 16))
#: k-means restart after 1 warm-up epoch, then 3 epochs of both steps; VaDE pretraining; and steps of
#: 600 annotations (one component: rank 0 gets no annotation) whose epochs (pretraining's too) end
#: with a single uniform row (120 = 119 + 1: rank 0 then holds no row at all); the first two take each
#: epoch's messages from the whole graph (the default), the last samples a step's annotations
FITS = {"kmeans": dict(n_epochs=4, warmup=1, pretrain=0, batch_size=30, seed=0, n_init=1),
        "pretrain": dict(n_epochs=2, pretrain=2, batch_size=30, seed=0, n_init=1),
        "edges": dict(n_epochs=2, pretrain=1, batch_size=119, annotation_batch=600, seed=1, n_init=1,
                      mixture_step="links")}

#: the workers' Gibbs sampler at the end of every fit, shortened alike in the ranks and the single
#: process (most of a fit's time here at its default 500 sweeps; the chain is the same either way)
SHORT_CHAIN = (60, 20)

WORKER = textwrap.dedent('''
    import os, sys, torch, warnings
    torch.set_num_threads(1)
    import crowdzoo as cz
    from crowdzoo.errors import DataError
    from crowdzoo.models.scdc import natgrad
    natgrad.GIBBS_SWEEPS, natgrad.GIBBS_BURN = SHORT_CHAIN
    out, data_kw, model_kw, fits = sys.argv[1], *(eval(a) for a in sys.argv[2:5])
    rank = int(os.environ["RANK"])
    data, _ = cz.simulate_links(**data_kw)
    got = {}
    for name, kw in fits.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post = cz.fit(cz.BayesSCDC(**model_kw), data, distributed=True, progress_bar=False, **kw)
        got[name] = {"conj": post.conjugate, "net": post.net_state, "phi": post.cluster_probs,
                     "trace": torch.as_tensor(post.trace["elbo"]), "ranks": post.settings["ranks"],
                     "warnings": [str(w.message)[:80] for w in caught]}
    # Ctrl-C during step 7 on every rank (rank 0 writes step 6 to the checkpoint), then resumed by all
    def stop(i, state):
        if i == 7:
            raise KeyboardInterrupt
    try:
        cz.fit(cz.BayesSCDC(**model_kw), data, distributed=True, progress_bar=False, checkpoint=f"{out}.ckpt",
               callback=stop, **fits["kmeans"])
    except KeyboardInterrupt:
        pass
    torch.distributed.barrier()
    post = cz.fit(cz.BayesSCDC(**model_kw), data, distributed=True, progress_bar=False, resume=f"{out}.ckpt",
                  **fits["kmeans"])
    got["resumed"] = {"conj": post.conjugate, "net": post.net_state, "phi": post.cluster_probs}
    # the annotations as this rank's shard: cut from the data in memory, and read alone from the file
    for name, part in (("shard", data.shard()), ("read_shard", cz.LinkData.read_shard(sys.argv[5], data.O))):
        post = cz.fit(cz.BayesSCDC(**model_kw), part, distributed=True, progress_bar=False, **fits["kmeans"])
        got[name] = {"conj": post.conjugate, "net": post.net_state, "phi": post.cluster_probs,
                     "held": part.n_annotations, "range": part.annotation_range,
                     "workers": post.workers()["annotations"].tolist(), "repr": repr(post)}
    try:  # rank 1 with another seed: both ranks refuse, naming the mismatch
        cz.fit(cz.BayesSCDC(**model_kw), data, distributed=True, progress_bar=False, n_epochs=2, seed=rank,
               n_init=1)
        got["mismatch"] = "fitted"
    except DataError as err:
        got["mismatch"] = str(err)
    torch.save(got, f"{out}.{rank}.pt")
''').replace("SHORT_CHAIN", repr(SHORT_CHAIN))


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def test_two_ranks_give_the_single_process_fit(tmp_path, monkeypatch):
    """2 gloo ranks vs one process, same data and seed: the conjugate globals, the network parameters
    and the bound's trace agree to relative 1e-4 (float32 networks; the gradient's float32 sums run
    over different row sets), the clusters are identical, every rank returns the same posterior, only
    rank 0 warns, a fit interrupted by Ctrl-C (rank 0 writes the checkpoint) resumes on every rank to
    the uninterrupted fit bit for bit, and ranks given different settings both refuse with a
    DataError."""
    # This can fail: each rank's share of a step's statistics and gradients is far from the whole
    # step's (test_rank_shares_sum_to_the_whole_step_and_differ_from_it), so ranks that skipped the
    # all-reduce would take other steps than one process (and than each other) from the first step on.
    from crowdzoo.models.scdc import natgrad

    monkeypatch.setattr(natgrad, "GIBBS_SWEEPS", SHORT_CHAIN[0])
    monkeypatch.setattr(natgrad, "GIBBS_BURN", SHORT_CHAIN[1])
    script, out, csv = tmp_path / "worker.py", tmp_path / "out", tmp_path / "links.csv"
    script.write_text(WORKER)
    data, _ = cz.simulate_links(**DATA)
    data.to_frame().to_csv(csv, index=False)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
           "127.0.0.1", "--master-port", str(_port()), str(script), str(out), repr(DATA), repr(MODEL),
           repr(FITS), str(csv)]
    t0 = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(f"torchrun, 2 ranks: {time.time() - t0:.1f} s")
    assert run.returncode == 0, run.stderr[-3000:]
    got = [torch.load(f"{out}.{r}.pt") for r in (0, 1)]
    for name, kw in FITS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unconverged after so few epochs
            single = cz.fit(cz.BayesSCDC(**MODEL), data, progress_bar=False, **kw)
        assert single.settings["ranks"] == 1
        for r, g in enumerate(got):
            two = g[name]
            assert two["ranks"] == 2
            conj = max(_rel(two["conj"][k], single.conjugate[k]) for k in single.conjugate)
            net = max(_rel(two["net"][k], single.net_state[k]) for k in single.net_state)
            trace = _rel(two["trace"], torch.as_tensor(single.trace["elbo"]))
            phi = float((two["phi"] - single.cluster_probs).abs().max())
            print(f"{name} rank {r}: relative |Δ| globals {conj:.1e}, networks {net:.1e}, bound {trace:.1e}; "
                  f"max |Δ φ| {phi:.1e}")
            assert conj < 1e-4 and net < 1e-4 and trace < 1e-4
            assert torch.equal(two["phi"].argmax(-1), single.cluster_probs.argmax(-1))
            for k in single.conjugate:  # the ranks agree with each other exactly
                assert torch.equal(two["conj"][k], got[0][name]["conj"][k])
            for k in single.net_state:
                assert torch.equal(two["net"][k], got[0][name]["net"][k])
    # each rank held half the annotations, in or out of memory, and took the very steps of the whole
    A = data.n_annotations
    single = cz.fit(cz.BayesSCDC(**MODEL), data, progress_bar=False, **FITS["kmeans"])
    for name in ("shard", "read_shard"):
        assert [g[name]["range"] for g in got] == [(0, A // 2, A), (A // 2, A, A)]
        assert [g[name]["held"] for g in got] == [A // 2, A - A // 2]
        for g in got:
            for k in single.conjugate:
                assert torch.equal(g[name]["conj"][k], g["kmeans"]["conj"][k])
            assert torch.equal(g[name]["phi"], g["kmeans"]["phi"])
            assert g[name]["workers"] == single.workers()["annotations"].tolist()  # counted over the ranks
            assert f"annotations={A}," in g[name]["repr"]
    warned = [[w for name in FITS for w in g[name]["warnings"]] for g in got]
    assert warned[0] and warned[1] == []  # unconverged after so few epochs: rank 0 alone says so
    for g in got:  # interrupted, checkpointed by rank 0 and resumed by every rank: the uninterrupted fit
        assert all(torch.equal(g["resumed"]["conj"][k], g["kmeans"]["conj"][k]) for k in g["kmeans"]["conj"])
        assert all(torch.equal(g["resumed"]["net"][k], g["kmeans"]["net"][k]) for k in g["kmeans"]["net"])
        assert torch.equal(g["resumed"]["phi"], g["kmeans"]["phi"])
    for g in got:
        assert "distributed: rank 1 has other" in g["mismatch"] and "same data and settings" in g["mismatch"]


def _random_step(seed, N=200, A=120, b=60, n=40):
    """LinkTensors with item k's features (k, …) and annotation a by worker a (so that a batch's rows
    and annotations name themselves), and one step's uniform items and annotation draws."""
    g = torch.Generator().manual_seed(seed)
    i = torch.randint(N, (A,), generator=g)
    j = (i + 1 + torch.randint(N - 1, (A,), generator=g)) % N
    O = torch.cat([torch.arange(N, dtype=torch.float32)[:, None], torch.rand(N, 3, generator=g)], 1)
    same = (torch.rand(A, generator=g) < 0.5).numpy().astype(float)
    t = link_tensors(cz.LinkData.from_arrays(i.numpy(), j.numpy(), same, O.numpy(), workers=np.arange(A)))
    return t, torch.randperm(N, generator=g)[:n], torch.randint(A, (b,), generator=g)


@pytest.mark.parametrize("world", [2, 3])
def test_components_split_the_annotations_once_and_share_no_item(world):
    """On random steps: each rank's annotations are whole components (their endpoints are no other
    rank's rows), every drawn annotation lands on exactly one rank (as a multiset), the uniform rows
    are split contiguously, and the annotation counts are balanced up to the largest component."""
    for seed in range(5):
        t, items, ann = _random_step(seed)
        parts = [split_step(t.O, items, records(t, ann), t.i.shape[0], r, world, "cpu") for r in range(world)]
        ends = [set(p.batch.O[p.batch.n_uniform:, 0].long().tolist()) for p in parts]
        for r in range(world):
            for s in range(r + 1, world):
                assert not ends[r] & ends[s]
        got = torch.sort(torch.cat([p.batch.w for p in parts])).values
        assert torch.equal(got, torch.sort(ann).values)
        for p in parts:  # the relabelled endpoints are the annotations' own items
            B = p.batch
            assert torch.equal(B.O[B.li, 0].long(), t.i[B.w]) and torch.equal(B.O[B.lj, 0].long(), t.j[B.w])
            assert (B.li >= B.n_uniform).all() and B.ann_scale == t.i.shape[0] / ann.shape[0]
        uniform = torch.cat([p.batch.O[:p.batch.n_uniform, 0].long() for p in parts])
        assert torch.equal(uniform, items) and all(p.n_rows == parts[0].n_rows for p in parts)
        nodes, inv = torch.unique(torch.cat([t.i[ann], t.j[ann]]), return_inverse=True)
        b = ann.shape[0]
        rank = component_ranks(inv[:b], inv[b:], nodes.shape[0], world)
        assert torch.equal(rank[inv[:b]], rank[inv[b:]])
        counts = torch.bincount(rank[inv[:b]], minlength=world)
        a, c = inv[:b].numpy(), inv[b:].numpy()
        _, label = connected_components(coo_matrix((np.ones(b), (a, c)), shape=(len(nodes),) * 2))
        largest = np.bincount(label[a]).max()
        assert counts.max() - b / world <= largest / 2 + 1, (counts, largest)


@pytest.mark.parametrize("mixture_step", ["links", "uniform"])
def test_rank_shares_sum_to_the_whole_step_and_differ_from_it(mixture_step):
    """One step computed whole and as two ranks' shares (in one process, the all-reduce replaced by a
    sum): the shares' J, Eq. 17 statistics and network gradients sum to the whole step's to 1e-10
    (float64) / 1e-5 (float32 gradients), while each share alone is far from it — so a 2-rank fit that
    skipped the all-reduce of the statistics or of the gradients would not match one process. With the
    links step the endpoints' rows, weighted, enter the statistics."""
    data, _ = cz.simulate_links(**DATA)
    t = link_tensors(data)
    model = cz.BayesSCDC(**MODEL)
    nets = model.networks(model.setup(data))
    W = data.n_workers
    q = init_conjugate(model, W, torch.Generator().manual_seed(0), "cpu")
    g = torch.Generator().manual_seed(3)
    items, ann = torch.randperm(data.n_items, generator=g)[:30], torch.randint(data.n_annotations, (40,),
                                                                                generator=g)

    degree = annotation_degree(t, data.n_items) if mixture_step == "links" else None

    def share(rank, world):
        part = split_step(t.O, items, records(t, ann), t.i.shape[0], rank, world, "cpu", degree)
        eps = torch.randn((part.n_rows, 2), generator=torch.Generator().manual_seed(7), dtype=F64)
        J, loc, s = step_objective(part.batch, nets, expected(q), model.sweeps, eps[part.uniform])
        nets.zero_grad()
        (-J / data.n_items).float().backward()
        B = part.batch
        loc = loc._replace(**{k: v.detach() for k, v in loc._asdict().items()})
        stats = [*mixture_stats(loc, part), *worker_stats(s.detach(), B.w, B.L, W, B.ann_scale)]
        grads = torch.cat([p.grad.reshape(-1) for p in nets.parameters() if p.grad is not None])
        return torch.cat([J.detach().reshape(1), *(v.detach().reshape(-1) for v in stats)]), grads

    whole, g_whole = share(0, 1)
    (s0, g0), (s1, g1) = share(0, 2), share(1, 2)
    print(f"statistics: |Σ shares − whole| {float((s0 + s1 - whole).abs().max()):.1e}, |share 0 − whole| "
          f"{float((s0 - whole).abs().max()):.1e}; gradients: {float((g0 + g1 - g_whole).abs().max()):.1e}, "
          f"{float((g0 - g_whole).abs().max()):.1e}")
    torch.testing.assert_close(s0 + s1, whole, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(g0 + g1, g_whole, rtol=1e-5, atol=1e-6)
    for part_s, part_g in ((s0, g0), (s1, g1)):
        assert (part_s - whole).abs().max() > 1e-2 * whole.abs().max()
        assert (part_g - g_whole).abs().max() > 1e-2 * g_whole.abs().max()


def test_records_complete_a_step_from_the_ranks_shards():
    """Each rank fills the sampled annotations it holds and zeros elsewhere; the all-reduce (here: a sum
    in one process) gives every rank the whole step's records, repeats and all."""
    data, _ = cz.simulate_links(**DATA)
    t = link_tensors(data)
    ann = torch.randint(data.n_annotations, (50,), generator=torch.Generator().manual_seed(0))
    whole = records(t, ann)
    world = 3
    shards = [data.shard(r, world) for r in range(world)]
    assert sum(s.n_annotations for s in shards) == data.n_annotations
    tables = []

    class Collect:  # a stand-in for the process group: keeps each rank's table, returns it unchanged
        def __init__(self, rank):
            self.rank, self.world = rank, world

        def sum(self, table):
            tables.append(table.clone())
            return table

    for r, part in enumerate(shards):
        records(link_tensors(part, shard_ok=True), ann, part.annotation_range[0], Collect(r))
    total = sum(tables)
    assert all((tb != 0).any(-1).sum() < ann.shape[0] for tb in tables)  # no rank held the whole step
    torch.testing.assert_close(total[:, 0].long(), whole.i, rtol=0, atol=0)
    torch.testing.assert_close(total[:, 1].long(), whole.j, rtol=0, atol=0)
    torch.testing.assert_close(total[:, 2].long(), whole.w, rtol=0, atol=0)
    torch.testing.assert_close(total[:, 3].to(whole.L.dtype), whole.L, rtol=0, atol=0)


def test_read_links_shard_reads_its_rows_alone(tmp_path):
    """read_shard's shards are the file's rows in order (with the whole file's worker numbering), equal
    to from_frame on those rows; world = 1 reads the whole file; a bad row is named by its file row."""
    import pandas as pd

    data, _ = cz.simulate_links(**DATA)
    csv = tmp_path / "links.csv"
    df = data.to_frame()
    df.to_csv(csv, index=False)
    A = len(df)
    whole = cz.LinkData.read_shard(csv, data.O, rank=0, world=1)
    assert whole.annotation_range == (0, A, A) and not whole.is_shard
    for k in ("i", "j", "worker", "same"):
        assert np.array_equal(getattr(whole, k), getattr(data, k))
    parts = [cz.LinkData.read_shard(csv, data.O, rank=r, world=3, chunksize=17) for r in range(3)]
    assert [p.annotation_range for p in parts] == [(A * r // 3, A * (r + 1) // 3, A) for r in range(3)]
    for r, p in enumerate(parts):
        assert p.is_shard and np.array_equal(p.worker_ids, data.worker_ids)
        rows = np.arange(A * r // 3, A * (r + 1) // 3)
        for k in ("i", "j", "worker", "same"):
            assert np.array_equal(getattr(p, k), getattr(data, k)[rows])
    bad = df.copy()
    bad.loc[A - 1, "same"] = 7
    bad.to_csv(csv, index=False)
    with pytest.raises(cz.DataError, match=rf"rank 2's data rows .*{A - 1}"):
        cz.LinkData.read_shard(csv, data.O, rank=2, world=3)
    pd.testing.assert_frame_equal(pd.read_csv(csv), bad)  # the file is left as it was written


def test_a_shard_outside_a_launch_is_refused():
    """A shard is not the data: a fit without distributed=True (natgrad or svi) refuses it, naming the
    launch; cutting a shard twice is refused too."""
    data, _ = cz.simulate_links(**DATA)
    part = data.shard(1, 2)
    assert "shard: annotations" in repr(part)
    for model, kw in ((cz.BayesSCDC(**MODEL), {}), (cz.SCDC(**MODEL), {})):
        with pytest.raises(cz.DataError, match="distributed=True inside the torchrun launch"):
            cz.fit(model, part, n_epochs=1, progress_bar=False, **kw)
    with pytest.raises(cz.DataError, match="already a shard"):
        part.shard(0, 2)


def test_one_process_shard_is_the_whole_fit():
    """Without ``distributed`` the route is one rank of one (settings record it)."""
    sh = replicated(10, False)
    assert (sh.rank, sh.world, sh.lead) == (0, 1, True)
    data, _ = cz.simulate_links(**DATA)
    post = cz.fit(cz.BayesSCDC(**MODEL), data, n_epochs=1, init="random", batch_size=60, progress_bar=False,
                  n_init=1)
    assert post.settings["ranks"] == 1 and post.settings["distributed"] is False


def test_cli_refuses_links_with_the_python_launch(tmp_path, capsys):
    """`crowdzoo fit bayesscdc ... --distributed`: the command line fits links in one process, so it says
    how to fit from Python under torchrun (distributed=True, the whole data on every rank)."""
    from crowdzoo.cli import main

    (tmp_path / "p.csv").write_text("a,b,y\n0,1,1\n")
    argv = ["fit", "bayesscdc", "--pairs", str(tmp_path / "p.csv"), "--out", str(tmp_path / "run")]
    try:
        rc = main([*argv, "--distributed"])
    except SystemExit as stop:
        rc = stop.code
    err = capsys.readouterr().err
    assert rc not in (0, None) and "crowdzoo.BayesSCDC()" in err and "distributed=True" in err
    assert "torchrun" in err and "Traceback" not in err and not (tmp_path / "run").exists()
