"""What the benchmark scripts share: memory read from /proc, the machine line of docs/benchmarks.md,
and rewriting one script's section of that file while the other scripts' sections stay.

The scripts import this module by its bare name (each puts ``benchmarks/`` on ``sys.path``); it imports
no script, so no script imports another for these helpers.
"""
from __future__ import annotations

import os
import platform


def proc_mib(key):
    """A memory line of /proc/self/status (``VmRSS``, ``VmHWM``) in MiB; NaN where there is none."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0  # MiB
    return float("nan")


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine():
    cpu = cpu_name()
    import torch

    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}"


def replace_section(path, head, text):
    """Replace the section that starts at ``head`` (up to the next ``<!-- bench_`` marker) or
    append it; the other scripts' sections stay."""
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if head in old:
        before, rest = old.split(head, 1)
        nxt = rest.find("<!-- bench_")
        after = rest[nxt:] if nxt >= 0 else ""
    else:
        before, after = old, ""
    with open(path, "w") as fh:
        fh.write(before.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n" + ("\n" + after if after else ""))
