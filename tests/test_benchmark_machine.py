"""benchmarks/harness.py: the machine line every benchmark's JSON carries, and
the quick matmul peak."""

import os

import pytest

from benchmarks import harness


@pytest.mark.parametrize("flags, level", [("fpu avx avx2 avx512f avx512bw", "avx512f"),
                                          ("fpu sse avx avx2 fma", "avx2"),
                                          ("fpu sse avx", "avx")])
def test_cpu_names_the_model_and_the_widest_avx(tmp_path, flags, level):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: {flags}\n\n"
                    f"processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    assert harness.cpu(str(info)) == f"Some CPU 9000, {level}"


def test_cpu_without_avx_or_cpuinfo_is_the_name_alone(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Old CPU\nflags\t\t: fpu sse sse2\n")
    assert harness.cpu(str(info)) == "Old CPU"
    assert harness.cpu(str(tmp_path / "missing")) != ""


def test_describe_and_matmul_peak():
    # The whole line: the cores, then the CPU (what tells hosts apart), then
    # the versions given, in order.
    assert harness.describe(tensorflow="2.21.0", keras="3.15.1") == (
        f"{os.uname().machine} {os.cpu_count()} cores, {harness.cpu()}, "
        "tensorflow 2.21.0, keras 3.15.1")
    # 2 n^3 FLOPs over the best of the repeats: on a clock where the three
    # 128^3 products take 4, 2 and 3 ms, 2 * 128^3 / 2 ms = 0.002097 TFLOP/s
    # (4 significant figures).
    ticks = iter([0.0, 0.004, 1.0, 1.002, 2.0, 2.003])
    assert harness.matmul_tflops(n=128, repeats=3, clock=lambda: next(ticks)) == 0.002097
    assert next(ticks, None) is None   # every repeat timed, no more
    assert 0 < harness.matmul_tflops(n=128, repeats=2) < 1000   # and on the real clock

