"""What every method's process does around its fit (imported by the child scripts of both venvs).

``main(METHODS)`` reads ``METHOD PROBLEM.npz RESULT.json [--threads T] [--config JSON]``, sets the
thread count, loads the problem and calls ``METHODS[METHOD](problem, config)``, which imports what
it needs and builds its inputs (not timed) and returns ``fit``. The peak-memory mark is reset
(/proc/self/clear_refs) and ``fit()`` is called: only that call is timed (*fit s*), and *fit peak*
is the resident peak it reached above the resident memory before it; *peak_self_mib* is the
process's own resident peak over its life (VmHWM before the reset and at the end). ``fit()``
returns a function that predicts: held-out probabilities P(at ≻ bt) (or, on a problem with ties,
(n, 3) probabilities of at ≻ bt, a tie and bt ≻ at), one score per item and a dict of notes, which go
to RESULT.json with the timings. An exception is written there too, classified:
``oom`` (MemoryError, or an allocator's "can't allocate memory"), ``unavailable`` (an option the
installed version does not take: TypeError "unexpected keyword argument", or crowdzoo's DataError
"not a setting of") or ``error``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings


def _status_mib(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def classify(exc):
    msg = f"{type(exc).__name__}: {exc}".strip()
    low = msg.lower()
    if isinstance(exc, MemoryError) or "can't allocate memory" in low or "out of memory" in low:
        return "oom", msg
    if (isinstance(exc, TypeError) and "unexpected keyword argument" in low) or "not a setting of" in low:
        return "unavailable", msg
    return "error", msg


def main(methods, argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("method", choices=sorted(methods))
    ap.add_argument("problem")
    ap.add_argument("result")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", default="{}", help="JSON object passed to the method")
    args = ap.parse_args(argv)
    torch = sys.modules.get("torch")  # only where the method's script imports it (not for choix)
    if torch is not None:
        torch.set_num_threads(args.threads)
    from problems import load

    out = {"method": args.method}
    try:
        prob = load(args.problem)
        fit = methods[args.method](prob, json.loads(args.config))
        out["peak_self_mib"] = _status_mib("VmHWM")  # imports and data, before the reset
        _reset_peak()
        rss0 = _status_mib("VmRSS")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            predict = fit()
            out["fit_s"] = time.perf_counter() - t0
        out["fit_peak_mib"] = _status_mib("VmHWM") - rss0
        out["rss_before_fit_mib"] = rss0
        p, scores, notes = predict()
        import numpy as np

        # p: P(at ≻ bt) per held-out pair, or (n, 3) probabilities of (at ≻ bt, tie, bt ≻ at)
        out.update(p=np.asarray(p, dtype=float).tolist(), scores=[float(v) for v in scores], notes=notes)
        out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
                                  for w in caught})
    except Exception as exc:  # every failure is a result to report
        out["status"], out["error"] = classify(exc)
        out["traceback"] = traceback.format_exc()[-3000:]
    out["peak_self_mib"] = max(out.get("peak_self_mib", 0.0), _status_mib("VmHWM"))
    with open(args.result, "w") as fh:
        json.dump(out, fh)
    sys.exit(0)


def threads_env(threads):
    """The environment a child runs in: every BLAS / OpenMP pool at ``threads``."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[k] = str(threads)
    return env
