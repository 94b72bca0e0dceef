"""`compile_notice`: the trainer's sign of life around a first call that compiles."""

import re

import pytest

from t2t_revival.train.compile_notice import compile_notice


def test_it_says_what_compiles_before_and_how_long_it_took_after():
    lines = []
    with compile_notice(lines.append, "the training step", xla=True,
                        included="its first update"):
        assert lines == ["compiling the training step for XLA..."]   # before the wait
    assert re.fullmatch(r"compiled the training step in \d+\.\d s \(its first update "
                        r"included\)", lines[1]), lines


def test_without_xla_it_says_tracing_and_an_error_gets_no_done_line():
    lines = []
    with pytest.raises(ValueError), compile_notice(lines.append, "the dev loss", xla=False):
        raise ValueError("out of memory")
    assert lines == ["tracing the dev loss..."]
