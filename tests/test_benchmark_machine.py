"""benchmarks/harness.py: the CPU line every benchmark's JSON carries."""

import os

import pytest

from benchmarks import harness as machine


@pytest.mark.parametrize("flags, level", [("fpu avx avx2 avx512f avx512bw", "avx512f"),
                                          ("fpu sse avx avx2 fma", "avx2"),
                                          ("fpu sse avx", "avx")])
def test_cpu_names_the_model_and_the_widest_avx(tmp_path, flags, level):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: {flags}\n\n"
                    f"processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    assert machine.cpu(str(info)) == f"Some CPU 9000, {level}"


def test_cpu_without_avx_or_cpuinfo_is_the_name_alone(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Old CPU\nflags\t\t: fpu sse sse2\n")
    assert machine.cpu(str(info)) == "Old CPU"
    assert machine.cpu(str(tmp_path / "missing")) != ""


def test_describe_and_matmul_peak():
    text = machine.describe(tensorflow="2.21.0")
    assert text.startswith(f"{os.uname().machine} {os.cpu_count()} cores, ")
    assert text.endswith(", tensorflow 2.21.0")
    assert 0 < machine.matmul_tflops(n=128, repeats=2) < 1000
