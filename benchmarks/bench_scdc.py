"""SCDC / BayesSCDC speed benchmark (Table 1 of Luo et al., NeurIPS 2018, times per epoch).

1. Time per epoch, with the paper's defaults (K = 50, d = 8, hidden (500, 500), batch 128), with and
   without annotations, on scikit-learn's digits (``cz.digits_links``: 1,797 × 64, 1,000 annotations)
   and at MNIST size (with 57,330 annotations from 48 workers: real MNIST's 60,000 training images and
   the SCDC crowd file when ``--data-dir`` has them, else a synthetic stand-in of ``--mnist-items``
   × 784, 70,000 by default: all of MNIST), for SCDC and BayesSCDC (each its default route); on CPU
   and on the GPU when torch sees one (``--devices``; ``--devices cuda`` writes a section of its own,
   so that GPU figures from another machine sit beside the CPU ones).
   One ``cz.fit`` of the full data per setting, in a fresh subprocess: a global optimizer-step hook
   reads the clock at the end of two training steps and abandons the fit at the second, so that
   setting up, encoding the items at the end and building the posterior are not counted. Digits:
   the second and third epochs, whole. MNIST size: an epoch is ⌈N / 128⌉ steps (minutes on a CPU), so
   ``--steps`` steps (default 30) are timed after 3 and the epoch time is extrapolated as seconds
   per step × steps per epoch; when that comes out under ``--whole-under`` seconds (e.g. on a GPU) the second
   epoch is timed whole as well.
2. Memory per step against the number of annotations A = 10³ … 10⁶ (synthetic, 1,024 items × 784,
   48 workers) at a fixed annotation batch, for each model: one one-epoch ``cz.fit`` per setting in a
   fresh subprocess, with glibc's mmap threshold pinned at 128 KiB (so that freed tensors go back to
   the system and resident memory follows live memory). A global optimizer-step hook opens a window
   of 5 training steps after 3; the step peak is the peak in it above the memory at its start, the
   fit peak the whole fit's above the memory before it: VmHWM (reset through /proc/self/clear_refs)
   minus VmRSS, or torch's peak allocated bytes on a GPU.

Run with ``make bench`` (replaces this script's section of docs/benchmarks.md); ``--quick`` is a
smoke run (small networks, a few steps of each setting, A = 10³ and 10⁴ on 256 items).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness import machine, proc_mib, replace_section  # noqa: E402

HEAD = "<!-- bench_scdc.py: this section is rewritten by it -->"
HEAD_GPU = "<!-- bench_scdc.py --devices cuda: this section is rewritten by it -->"
BATCH = 128  # items per step (the paper's)
THREADS = 2  # torch threads in every measurement (--threads)
MNIST_N, MNIST_D, MNIST_W = 70_000, 784, 48  # the synthetic stand-in: all of MNIST (--mnist-items)
MNIST_BLOCKS, MNIST_BLOCK = 91, 36  # the crowd file: 91 tasks, each all C(36, 2) = 630 pairs of 36 images
MEM_ANN_BATCH = math.ceil(57_330 / math.ceil(60_000 / BATCH))  # on MNIST's training images: 123
# Table 1 of the paper: seconds per epoch on MNIST (their GPU, TensorFlow)
PAPER = {("SCDC", True): 201.7, ("SCDC", False): 177.3, ("BayesSCDC", True): 16.4, ("BayesSCDC", False): 11.2}


# ------------------------------------------------------------------------------------------------ data
def _two_coin(rng, cls, i, j, alpha=0.9, beta=0.9):
    return (rng.random(i.size) < np.where(cls[i] == cls[j], alpha, 1.0 - beta)).astype(np.int64)


def _mnist_like(seed=0, n=MNIST_N):
    """``n`` × 784 observations uniform in [0, 1], 10 random classes, and annotations shaped like the
    SCDC crowd file: 91 tasks of 36 distinct images, each labelled on all 630 pairs by one of 48
    workers (every worker has at least one task), two-coin α = β = 0.9: 57,330 annotations."""

    rng = np.random.default_rng(seed)
    O = rng.random((n, MNIST_D))
    cls = rng.integers(0, 10, n)
    return crowd_file_links(rng, O, cls)


def crowd_file_links(rng, O, cls, blocks: int = MNIST_BLOCKS, n_workers: int = MNIST_W):
    """LinkData of observations ``O`` (labels ``cls``) with annotations laid out as the SCDC crowd
    file's: ``blocks`` tasks of 36 distinct items, each labelled on all 630 pairs by one of
    ``n_workers`` two-coin workers (α = β = 0.9; every worker has at least one task)."""
    import crowdzoo as cz

    imgs = rng.choice(cls.size, blocks * MNIST_BLOCK, replace=False).reshape(blocks, MNIST_BLOCK)
    a, b = np.triu_indices(MNIST_BLOCK, 1)
    i, j = imgs[:, a].ravel(), imgs[:, b].ravel()
    extra = rng.integers(0, n_workers, blocks - n_workers)
    tasks = rng.permutation(np.concatenate([np.arange(n_workers), extra]))
    w = np.repeat(tasks, a.size)
    return cz.LinkData.from_arrays(i, j, _two_coin(rng, cls, i, j), O, workers=w,
                                   worker_ids=np.arange(n_workers), labels=cls)


def _random_links(n_items, n_ann, n_features=MNIST_D, n_workers=MNIST_W, seed=0):
    """``n_items`` uniform observations, ``n_ann`` uniformly random pairs from ``n_workers`` two-coin
    workers (α = β = 0.9, 10 random classes)."""
    import crowdzoo as cz

    rng = np.random.default_rng(seed)
    O = rng.random((n_items, n_features))
    cls = rng.integers(0, 10, n_items)
    i = rng.integers(0, n_items, n_ann)
    j = (i + 1 + rng.integers(0, n_items - 1, n_ann)) % n_items
    w = rng.integers(0, n_workers, n_ann)
    return cz.LinkData.from_arrays(i, j, _two_coin(rng, cls, i, j), O, workers=w,
                                   worker_ids=np.arange(n_workers), labels=cls)


def _dataset(name, data_dir, mnist_items=MNIST_N):
    """(LinkData, description) for "digits" or "mnist" (real when ``data_dir`` has it)."""
    import crowdzoo as cz

    if name == "digits":
        return cz.digits_links(seed=0)[0], "digits (`cz.digits_links`)"
    why = "no --data-dir given"
    if data_dir:
        from crowdzoo.data.mnist import mnist_links
        from crowdzoo.errors import DataError

        try:
            return mnist_links(data_dir), "MNIST + the SCDC crowd file"
        except (DataError, OSError) as e:
            why = str(e).splitlines()[0][:160]
    return _mnist_like(n=mnist_items), f"synthetic, {mnist_items:,} × 784 ({why})"


# ------------------------------------------------------------------------------------------------ fits
def _model(name, arch=None):
    """The model with the paper's defaults (K = 50, d = 8, hidden (500, 500)) unless ``arch`` overrides
    them (``--quick``: small networks)."""
    import crowdzoo as cz

    return getattr(cz, name).paper_mnist(**(arch or {}))


def _settings(model, want):
    """The subset of ``want`` that the model's default route accepts, and one initialisation (``n_init``):
    what is timed is one fit."""
    from crowdzoo.zoo import entry_for, route_settings

    e = entry_for(model)
    accepted = route_settings(e.route(e.default))
    return {k: v for k, v in {"n_init": 1, **want}.items() if k in accepted}


class _Enough(Exception):
    """Raised from the step hook once the timed window has closed: the rest of the fit is not needed."""


def _step_clock(model, data, kw, start, stop, n_epochs, device):
    """Seconds from the end of the ``start``-th to the end of the ``stop``-th training step of
    ``cz.fit(model, data, n_epochs=n_epochs, **kw)``, counted by a global optimizer-step hook (each
    route takes one Adam step per training step); the fit is abandoned there."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    import crowdzoo as cz

    rec = {"n": 0}

    def hook(opt, args, kwargs):
        rec["n"] += 1
        if rec["n"] in (start, stop):
            if device != "cpu":
                torch.cuda.synchronize()
            rec[rec["n"]] = time.perf_counter()
            if rec["n"] == stop:
                raise _Enough

    handle = register_optimizer_step_post_hook(hook)
    try:
        cz.fit(model, data, n_epochs=n_epochs, **kw)
    except _Enough:
        pass
    finally:
        handle.remove()
    if stop not in rec:
        raise RuntimeError(f"the fit took {rec['n']} optimizer steps, fewer than {stop}")
    return rec[stop] - rec[start]


def _quiet():
    import warnings

    import torch

    torch.set_num_threads(int(os.environ.get("BENCH_SCDC_THREADS", "2")))
    warnings.simplefilter("ignore")  # short fits warn that they have not converged


def _error(e):
    text = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}: {text}".replace("|", "/")  # it goes into a markdown table


def epoch_time(dataset, model_name, annotations, device, steps, data_dir=None, whole_under=30.0,
               digits_whole=True, arch=None, warm=3, mnist_items=MNIST_N):
    """Seconds per step and per epoch of ``cz.fit`` on the full data (module docstring, 1): ``steps``
    steps after ``warm``, extrapolated to an epoch, or (digits, unless ``digits_whole`` is False) two
    whole epochs after the first."""
    _quiet()
    data, source = _dataset(dataset, data_dir, mnist_items)
    if not annotations:
        data = data.without_annotations()
    N, D, A = data.n_items, data.O.shape[1], data.n_annotations
    epoch_steps = math.ceil(N / BATCH)
    ann_batch = math.ceil(A / epoch_steps) if A else 0  # the route's default
    row = {"dataset": dataset, "source": source, "N": N, "D": int(D), "A": A, "model": model_name,
           "device": device, "annotations": annotations, "epoch_steps": epoch_steps}
    try:
        model = _model(model_name, arch)
        kw = _settings(model, dict(batch_size=BATCH, annotation_batch=ann_batch, device=device,
                                   progress_bar=False))
        if device != "cpu" and "device" not in kw:
            return {**row, "error": f"{model_name}'s route takes no device setting"}
        row["ann_batch"] = kw.get("annotation_batch", "route default")
        whole = dataset == "digits" and digits_whole
        start, stop = (epoch_steps, 3 * epoch_steps) if whole else (warm, warm + steps)
        sec = _step_clock(model, data, kw, start, stop, math.ceil(stop / epoch_steps), device)
        row.update(warm_steps=start, steps_timed=stop - start, s_per_step=sec / (stop - start),
                   extrapolated=not whole, whole_epoch_s=None)
        row["s_per_epoch"] = sec / 2 if whole else row["s_per_step"] * epoch_steps
        if not whole and row["s_per_epoch"] <= whole_under:  # cheap enough: time a whole epoch, the second
            row["whole_epoch_s"] = _step_clock(model, data, kw, epoch_steps, 2 * epoch_steps, 2, device)
    except Exception as e:  # a failing setting (e.g. a device the route mishandles) is reported, not fatal
        row["error"] = _error(e)
    return row


# ---------------------------------------------------------------------------------------------- memory
def _reset_peak(device):
    import torch

    if device == "cpu":
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return proc_mib("VmRSS")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated() / 2**20


def _peak(device, base):
    import torch

    if device == "cpu":
        return proc_mib("VmHWM") - base
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20 - base


def _labels_mib(data):
    return (data.i.nbytes + data.j.nbytes + data.worker.nbytes + data.same.nbytes) / 2**20


def memory(n_ann, model_name, device, n_items, warm=3, steps=5, seed=0, arch=None):
    """Peak memory of ``steps`` training steps (after ``warm``) inside one ``cz.fit``, and of the whole
    fit (module docstring, 2). The steps are counted by a global optimizer-step hook
    (``torch.optim.optimizer.register_optimizer_step_post_hook``; each route takes one Adam step per
    training step), so the window is the route's own steps, whatever the route does in them."""
    _quiet()
    from torch.optim.optimizer import register_optimizer_step_post_hook

    import crowdzoo as cz

    data = _random_links(n_items, n_ann, seed=seed)
    row = {"A": n_ann, "N": n_items, "device": device, "model": model_name, "labels_mib": _labels_mib(data)}
    seen = {"n": 0, "peaks": []}

    def hook(opt, args, kwargs):
        seen["n"] += 1
        if seen["n"] == warm:  # the window opens: the peak so far is the setup's and the warm-up's
            seen["peaks"].append(_peak(device, seen["base"]))
            seen["window"] = _reset_peak(device)
        elif seen["n"] == warm + steps:  # the window closes
            row["step_peak_mib"] = _peak(device, seen["window"])
            seen["peaks"].append(row["step_peak_mib"] + seen["window"] - seen["base"])
            _reset_peak(device)

    try:
        model = _model(model_name, arch)
        kw = _settings(model, dict(batch_size=BATCH, annotation_batch=MEM_ANN_BATCH, device=device,
                                   progress_bar=False))
        if device != "cpu" and "device" not in kw:
            return {**row, "error": f"{model_name}'s route takes no device setting"}
        row["ann_batch"] = kw.get("annotation_batch", "route default")
        epochs = math.ceil((warm + steps) / math.ceil(n_items / BATCH))
        handle = register_optimizer_step_post_hook(hook)
        try:
            seen["base"] = _reset_peak(device)
            cz.fit(model, data, n_epochs=epochs, seed=seed, **kw)
            seen["peaks"].append(_peak(device, seen["base"]))  # after the window: the last steps, encoding
        finally:
            handle.remove()
        if "step_peak_mib" not in row:
            return {**row, "error": f"the fit took {seen['n']} optimizer steps, fewer than {warm + steps}"}
        row.update(fit_peak_mib=max(seen["peaks"]), epochs=epochs)
    except Exception as e:
        row["error"] = _error(e)
    return row


# ---------------------------------------------------------------------------------------------- driver
def _sub(fn, env=None, **kw):
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import bench_scdc as b; print(json.dumps(b.{fn}(**{kw!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "BENCH_SCDC_THREADS": str(THREADS), **(env or {})})
    if out.returncode:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1][:200].replace("|", "/")
        row = {**kw, "error": f"subprocess exited {out.returncode}: {tail}"}
    else:
        row = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {fn}: {row}", file=sys.stderr, flush=True)
    return row


def _num(x, fmt):
    return "—" if x is None else format(x, fmt)


def _time_rows(rows):
    L = ["| data | N × D | A | model | device | annotation batch | s / step | s / epoch | epoch time is | "
         "paper (s / epoch) |", "|---|---|---:|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        shape = f"{r['N']:,} × {r['D']}" if "N" in r else "—"  # a crashed subprocess's row has only its kw
        model = r.get("model", r.get("model_name"))
        head = (f"| {r['dataset']} | {shape} | {_num(r.get('A'), ',')} | {model} | {r['device']} | "
                f"{r.get('ann_batch', '—')} |")
        if "error" in r:
            L.append(f"{head} — | — | failed: {r['error']} | — |")
            continue
        paper = PAPER.get((r["model"], r["annotations"])) if r["dataset"] == "mnist" else None
        steps = f"{r['steps_timed']} steps timed after {r['warm_steps']}"
        if not r["extrapolated"]:
            how, sec = f"measured: 2 whole epochs after the first ({steps})", r["s_per_epoch"]
        elif r["whole_epoch_s"] is not None:
            how = (f"measured: the second epoch, whole ({steps} extrapolated to "
                   f"{r['s_per_epoch']:.1f})")
            sec = r["whole_epoch_s"]
        else:
            how, sec = f"**extrapolated**: {r['epoch_steps']} × s / step ({steps})", r["s_per_epoch"]
        L.append(f"{head} {r['s_per_step']:.3f} | {sec:.1f} | {how} | {_num(paper, '.1f')} |")
    return L


def _memory_rows(mem, models, devices, sizes):
    cols = " | ".join(f"{m} step peak (MiB) | {m} fit peak (MiB)" for m in models)
    L = [f"| device | A | labels (MiB) | {cols} |", "|---|---:|---:|" + "---:|---:|" * len(models)]
    for dev in devices:
        for A in sizes:
            rs = [mem[(m, dev, A)] for m in models]
            cells = [f"failed: {r['error']} | —" if "error" in r
                     else f"{r['step_peak_mib']:.1f} | {r['fit_peak_mib']:.1f}" for r in rs]
            labels = next((f"{r['labels_mib']:.2f}" for r in rs if "labels_mib" in r), "—")
            L.append(f"| {dev} | {A:,} | {labels} | " + " | ".join(cells) + " |")
    return L


def main(argv=None):
    import torch

    import crowdzoo as cz

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks.md", help="markdown file to write the section to")
    ap.add_argument("--quick", action="store_true", help="a smoke run: a few steps of each setting")
    ap.add_argument("--data-dir", default=None, help="folder with MNIST's training idx files and "
                    "crowd_annotations_mnist.npy (else synthetic data of MNIST's shape)")
    ap.add_argument("--steps", type=int, default=30, help="steps timed at MNIST size (default 30)")
    ap.add_argument("--whole-under", type=float, default=30.0, help="also time one whole MNIST-size "
                    "epoch when the steps extrapolate to under this many seconds (default 30)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2, as elsewhere)")
    ap.add_argument("--mnist-items", type=int, default=MNIST_N, help="items of the synthetic MNIST stand-in "
                    "(default 70,000: all of MNIST; the paper trains on the 60,000 training images)")
    ap.add_argument("--devices", default="auto", help="cpu, cuda or cpu,cuda (default: cpu, and cuda when "
                    "torch sees a GPU); cuda alone writes a section of its own beside the CPU one")
    args = ap.parse_args(argv)
    global THREADS
    THREADS = args.threads
    t_start = time.perf_counter()
    devices = (["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if args.devices == "auto"
               else args.devices.split(","))
    if "cuda" in devices and not torch.cuda.is_available():
        ap.error("--devices: torch sees no GPU here")
    head = HEAD_GPU if devices == ["cuda"] else HEAD
    models = ["SCDC"] + (["BayesSCDC"] if hasattr(cz, "BayesSCDC") else [])
    skipped = None if "BayesSCDC" in models else (
        "BayesSCDC: skipped (this crowdzoo has no `BayesSCDC` yet; rerun the script once it lands).")
    if skipped:
        print(skipped, file=sys.stderr)
    steps = 3 if args.quick else args.steps
    whole = 0.0 if args.quick else args.whole_under
    arch = {"n_clusters": 10, "hidden": (32, 32)} if args.quick else None  # a smoke run checks the plumbing
    times = [_sub("epoch_time", dataset=ds, model_name=m, annotations=ann, device=dev, steps=steps,
                  data_dir=args.data_dir, whole_under=whole, digits_whole=not args.quick, arch=arch,
                  mnist_items=args.mnist_items)
             for dev in devices for ds in ("digits", "mnist") for m in models for ann in (True, False)]
    n_mem = 256 if args.quick else 1024
    sizes = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5, 10**6]
    pin = {"MALLOC_MMAP_THRESHOLD_": "131072"}  # freed tensors go back to the system: RSS tracks live memory
    warm, window = (2, 2) if args.quick else (3, 5)
    mem = {(m, dev, A): _sub("memory", env=pin, n_ann=A, model_name=m, device=dev, n_items=n_mem, warm=warm,
                             steps=window, arch=arch) for dev in devices for A in sizes for m in models}

    mnist = next((r for r in times if r["dataset"] == "mnist"), {})
    gpu = f", GPU {torch.cuda.get_device_name(0)}" if "cuda" in devices else ", no GPU"
    cmd = "python benchmarks/bench_scdc.py" + (" --devices cuda" if head == HEAD_GPU else "")
    title = " on a GPU" if head == HEAD_GPU else ""
    L = [head, "", f"Machine: {machine()}, {THREADS} torch threads{gpu}. Reproduce with "
         f"`{cmd} --out docs/benchmarks.md` (" + ("on a machine with a GPU; not part of `make bench`; "
                                                 if head == HEAD_GPU else "part of `make bench`; ")
         + "replaces this section; `--data-dir DIR` uses real MNIST and the SCDC crowd file from DIR).", "",
         f"## SCDC and BayesSCDC{title}: time per epoch", "",
         "The paper's defaults: K = 50, d = 8, hidden layers (500, 500) in every network, 128 items per "
         "step, and the route's default annotation batch on the full data (⌈A / steps per epoch⌉); "
         "`cz.fit(model, data, n_epochs=…, progress_bar=False)` with each model's default route, with "
         "and without annotations. *digits*: scikit-learn's 1,797 × 64 digits with 5 simulated MCVC "
         f"workers (`cz.digits_links()`). *mnist*: {mnist.get('source', 'MNIST size')}; "
         "the synthetic stand-in has observations uniform in [0, 1] and annotations shaped like the "
         "SCDC crowd file (91 tasks of 36 images, all 630 pairs each, 48 two-coin workers with "
         "α = β = 0.9: 57,330 annotations). One `cz.fit` of the full data per row, in a fresh process; "
         "a global optimizer-step hook (`torch.optim.optimizer.register_optimizer_step_post_hook`: each "
         "route takes one Adam step per training step) reads the clock at the end of two training "
         "steps and abandons the fit at the second, so setting up, encoding every item at the end and "
         "building the posterior are not counted, and nothing of the route is reimplemented here. "
         "Digits (15 steps an epoch): the second and third epochs, whole. MNIST size: an epoch is "
         f"⌈N / 128⌉ steps ({mnist.get('epoch_steps', '—')} here), minutes on a CPU, so {steps} steps "
         "are timed after 3 and the epoch time is seconds per step × steps per epoch (**extrapolated**; "
         "this leaves out the route's "
         "once-per-epoch work, such as permuting the items and, under BayesSCDC's default "
         "`mixture_step=\"graph\"`, the pass over every item and annotation that begins each epoch). "
         "Where that "
         f"comes to under {args.whole_under:g} s (e.g. on a GPU) the second epoch is timed whole as "
         "well and reported instead. The "
         "paper's column is its Table 1 (MNIST, 200 epochs, their GPU and TensorFlow; with "
         "annotations SCDC 201.7 s and BayesSCDC 16.4 s, without 177.3 s and 11.2 s); their hardware "
         "is not ours, so compare the ratio of the two models more than the seconds.", ""]
    if args.quick:
        L += ["**`--quick` smoke run: K = 10 and hidden (32, 32), a few steps; these numbers measure "
              "nothing.**", ""]
    if skipped:
        L += [skipped, ""]
    L += ["With annotations:", ""] + _time_rows([r for r in times if r["annotations"]])
    L += ["", "Without annotations (the same items, no crowd):", ""]
    L += _time_rows([r for r in times if not r["annotations"]])
    L += ["", f"## SCDC and BayesSCDC{title}: memory per step against the number of annotations", "",
          f"Synthetic: {n_mem:,} items × 784 values in [0, 1], A uniformly random pairs from 48 two-coin "
          f"workers; the paper's networks, 128 items and {MEM_ANN_BATCH} annotations per step (MNIST's "
          "annotation batch) whatever A is. *labels*: what the LinkData holds for the annotations (i, j, "
          "worker, same: 32 bytes each). Each row and model is one `cz.fit` in a fresh process; a global "
          "optimizer-step hook (`torch.optim.optimizer.register_optimizer_step_post_hook`: each route "
          f"takes one Adam step per training step) opens a window after {warm} training steps and closes "
          f"it {window} steps later. *step peak*: the peak in that window above the memory at its start "
          "(data, networks, optimiser state and the route's copies of the data already held): what a "
          "training step needs. *fit peak*: the peak of the whole fit "
          f"({n_mem // BATCH} steps an epoch, then every item encoded) above the memory before it, so it "
          "includes the route's float32 copies of the observations and labels and the final encoding "
          "(for BayesSCDC, messages passed on the whole annotation graph). On CPU: resident memory "
          "(VmHWM after a reset through /proc/self/clear_refs, minus VmRSS), with glibc's mmap threshold "
          "pinned at 128 KiB so that freed tensors return to the system and memory a step reuses is "
          "still counted (this slows the steps, so no times here); on a GPU: torch's peak allocated "
          f"bytes. A step holds {MEM_ANN_BATCH} annotations whatever A is (BayesSCDC's default "
          "`mixture_step=\"graph\"` holds none: its steps read the messages that each epoch's pass over "
          "the annotations, in chunks of 65,536, leaves in an N × K table, a pass the fit peak includes), "
          "so its peak should stay flat down the column while *labels* grows tenfold a row.", ""]
    L += _memory_rows(mem, models, devices, sizes)
    own = sorted({m for (m, _, _), r in mem.items() if r.get("ann_batch") == "route default"})
    if own:
        L += ["", f"{', '.join(own)}: the route takes no `annotation_batch`, so its fits used the route's "
              "own annotation batch, which may grow with A."]
    L += ["", f"Full run: {time.perf_counter() - t_start:.0f} s{' (--quick)' if args.quick else ''}."]
    text = "\n".join(L) + "\n"
    replace_section(args.out, head, text)  # this script's section only; the others stay
    print(text)


if __name__ == "__main__":
    main()
