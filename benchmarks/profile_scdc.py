"""Where an SCDC / BayesSCDC training step spends its time, on the CPU and on a GPU.

On an H200, an MNIST-size epoch of BayesSCDC took longer than one of SCDC (bench_scdc.py's GPU
section), where the paper's GPU found BayesSCDC about 12 times faster. This script looks inside the
steps: for each model and device it runs ``cz.fit`` with the paper's defaults on the synthetic
70,000 × 784 MNIST stand-in (bench_scdc.py's, with its 57,330 annotations), and a global
optimizer-step hook (each route takes one Adam step per training step)

1. times ``--steps`` steps after ``--warm`` without the profiler (wall seconds per step), then
2. runs ``torch.profiler`` over the next ``--steps`` steps and counts, per step: the operators the
   Python side dispatched (aten ops), the kernels launched on the GPU, and the GPU's busy time (the
   kernels' own time). Where the GPU's busy time is a small share of the wall time, the step is bound
   by launching many small operations, not by arithmetic.

Writes a Markdown section (``--out``, replaced between its markers) with the per-step figures and
each model's top operators by self time. ``python benchmarks/profile_scdc.py --devices cpu,cuda
--out docs/scdc-profile.md`` (cuda needs a GPU; never part of the tests).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_scdc import BATCH, _dataset, _Enough, _model, _settings  # noqa: E402
from harness import machine, replace_section  # noqa: E402

HEAD = "<!-- profile_scdc.py: this section is rewritten by it -->"
LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def _dev_time(e):
    """An averaged event's own device (GPU) time in µs, under either of torch's names for it."""
    return float(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0)) or 0.0)


def profile(model_name, device, warm, steps, threads, mnist_items):
    """One fit: wall seconds per step over ``steps`` steps after ``warm``, then the profiler's counts
    over the next ``steps``."""
    import warnings

    import torch
    from torch.autograd import DeviceType
    from torch.optim.optimizer import register_optimizer_step_post_hook

    import crowdzoo as cz

    torch.set_num_threads(threads)
    warnings.simplefilter("ignore")
    data, source = _dataset("mnist", None, mnist_items)
    epoch_steps = -(-data.n_items // BATCH)
    ann_batch = -(-data.n_annotations // epoch_steps)
    model = _model(model_name, None)
    kw = _settings(model, dict(batch_size=BATCH, annotation_batch=ann_batch, device=device,
                               progress_bar=False))
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device != "cpu"
                                                    else [])
    prof = torch.profiler.profile(activities=acts)
    t1, t2, t3 = warm, warm + steps, warm + 2 * steps
    rec = {"n": 0}

    def sync():
        if device != "cpu":
            torch.cuda.synchronize()

    def hook(opt, args, kwargs):
        rec["n"] += 1
        n = rec["n"]
        if n in (t1, t2):
            sync()
            rec[n] = time.perf_counter()
        if n == t2:
            prof.start()
        if n == t3:
            sync()
            prof.stop()
            raise _Enough

    handle = register_optimizer_step_post_hook(hook)
    try:
        cz.fit(model, data, n_epochs=-(-t3 // epoch_steps), **kw)
    except _Enough:
        pass
    finally:
        handle.remove()
    evs = prof.key_averages()
    aten = [e for e in evs if e.key.startswith("aten::")]
    kernels = [e for e in evs if e.device_type == DeviceType.CUDA]
    top_cpu = sorted(aten, key=lambda e: -e.self_cpu_time_total)[:6]
    top_gpu = sorted(kernels, key=lambda e: -_dev_time(e))[:4]
    return {
        "model": model_name, "device": device, "source": source, "threads": threads,
        "wall_s_per_step": (rec[t2] - rec[t1]) / steps, "steps": steps, "warm": warm,
        "aten_ops_per_step": sum(e.count for e in aten) / steps,
        "launches_per_step": sum(e.count for e in evs if e.key in LAUNCH) / steps,
        "syncs_per_step": sum(e.count for e in evs if e.key == "aten::_local_scalar_dense") / steps,
        "gpu_busy_s_per_step": sum(_dev_time(e) for e in kernels) / 1e6 / steps,
        "top_cpu": [(e.key, e.count / steps, e.self_cpu_time_total / 1e6 / steps) for e in top_cpu],
        "top_gpu": [(e.key[:60], e.count / steps, _dev_time(e) / 1e6 / steps) for e in top_gpu],
    }


def _sub(**kw):
    """``profile(**kw)`` in a fresh interpreter (each row starts from a cold process, as bench_scdc's)."""
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); from profile_scdc import profile; "
            f"print('ROW ' + json.dumps(profile(**{kw!r})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:])
    return {**kw, "error": (r.stderr.strip().splitlines() or ["no output"])[-1][:200].replace("|", "/")}


def table(rows):
    L = ["| model | device | wall s / step | aten ops / step | kernels launched / step | GPU busy s / step "
         "| GPU busy share | reads to Python / step |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            L.append(f"| {r['model_name']} | {r['device']} | failed: {r['error']} | | | | | |")
            continue
        gpu = r["device"] != "cpu"
        busy = f"{r['gpu_busy_s_per_step']:.4f}" if gpu else "—"
        share = f"{r['gpu_busy_s_per_step'] / r['wall_s_per_step']:.0%}" if gpu else "—"
        launches = f"{r['launches_per_step']:,.0f}" if gpu else "—"
        L.append(f"| {r['model']} | {r['device']} | {r['wall_s_per_step']:.4f} "
                 f"| {r['aten_ops_per_step']:,.0f} | {launches} | {busy} | {share} "
                 f"| {r['syncs_per_step']:.0f} |")
    L += ["", "Top operators by own CPU time per step (count per step, seconds per step):", ""]
    for r in rows:
        if "error" in r:
            continue
        ops = "; ".join(f"`{k}` ×{c:.0f} {s:.4f} s" for k, c, s in r["top_cpu"])
        L.append(f"- {r['model']} on {r['device']}: {ops}")
        if r["top_gpu"]:
            ks = "; ".join(f"`{k}` ×{c:.0f} {s:.4f} s" for k, c, s in r["top_gpu"])
            L.append(f"  - top GPU kernels by own time: {ks}")
    return L


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="cpu", help="cpu, cuda or cpu,cuda")
    ap.add_argument("--models", default="SCDC,BayesSCDC")
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mnist-items", type=int, default=70_000)
    ap.add_argument("--out", default=None, help="Markdown file whose section this replaces (else stdout)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = [_sub(model_name=m, device=d, warm=a.warm, steps=a.steps, threads=a.threads,
                 mnist_items=a.mnist_items) for d in a.devices.split(",") for m in a.models.split(",")]
    import torch

    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    src = next((r["source"] for r in rows if "source" in r), "")
    L = [HEAD, "", "## SCDC and BayesSCDC: inside a training step", "",
         f"Machine: {machine()}, {a.threads} torch threads{gpu}. Made by `python benchmarks/profile_scdc.py "
         f"--devices {a.devices} --out docs/scdc-profile.md` in {time.perf_counter() - t0:.0f} s.", "",
         f"The paper's defaults (K = 50, d = 8, hidden (500, 500), 128 items a step) on {src}, each model's "
         f"default route. *wall s / step*: {a.steps} steps after {a.warm}, without the profiler; the other "
         f"columns: `torch.profiler` over the next {a.steps} steps. *GPU busy*: the kernels' own time; "
         "*reads to Python*: tensor values read back to the host (`aten::_local_scalar_dense`: `.item()`, "
         "`float()`, `bool()` of a tensor), each of which waits for the GPU to finish.", ""]
    L += table(rows)
    text = "\n".join(L) + "\n"
    if a.out:
        replace_section(a.out, HEAD, text)
    print(text)


if __name__ == "__main__":
    main()
