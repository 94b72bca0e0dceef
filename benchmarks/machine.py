"""What a benchmark ran on: the one description every script's JSON carries.

The development VM is restored on whichever host serves the session, and the
hosts differ: on 2026-11-22 TensorFlow's float32 matmul peak was 0.33-0.36
TFLOP/s, on the evening of 2026-11-23 0.08-0.13, with AVX2 and no AVX-512,
and nothing in the load average to show it (RESULTS.md). So each figure says
which CPU it came from, and the time-boxed recipe also records a quick matmul
peak: a speed or a BLEU-in-two-hours from one host is not comparable with
another's without it.
"""

from __future__ import annotations

import os
import platform
import time


def cpu(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name and its widest AVX level, e.g. 'AMD EPYC, avx2'."""
    name, flags = "", set()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass  # not Linux: the name platform knows, no AVX level
    name = name or platform.processor() or "unknown CPU"
    level = next((f for f in ("avx512f", "avx2", "avx") if f in flags), None)
    return f"{name}, {level}" if level else name


def describe(**versions: str) -> str:
    """'x86_64 2 cores, AMD EPYC, avx2, tensorflow 2.21.0' (versions as given)."""
    parts = [f"{platform.machine()} {os.cpu_count()} cores", cpu()]
    parts += [f"{library} {version}" for library, version in versions.items()]
    return ", ".join(parts)


def matmul_tflops(n: int = 1024, repeats: int = 5) -> float:
    """numpy's float32 n^3 matmul, best of `repeats`, in TFLOP/s (under a second):
    how fast this host multiplies, to set beside a time-boxed result."""
    import numpy as np

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    a @ a  # warm-up: the BLAS threads start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    # 4 significant figures: a small matmul on a slow or loaded host is well
    # under 0.001 TFLOP/s, which 3 decimals rounded to 0.0.
    return float(f"{2.0 * n ** 3 / best / 1e12:.4g}")
