"""The decode-length rule and the sort-and-batch loop (t2t_revival/decode/decode_length.py)."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from t2t_revival.decode.decode_length import (LENGTH_QUANTUM, batch_bucket, check_input_length,
                                       cut_line, cut_lines_report, cut_to_max_length,
                                       decode_in_length_order,
                                       length_sorted_batches, longest_decode_length,
                                       max_decode_length, padded_length, position_limit)
from t2t_revival.errors import UserError


def test_the_quantum_is_16_and_lengths_round_up_to_it():
    assert LENGTH_QUANTUM == 16
    got = {n: padded_length(n, 512) for n in (1, 15, 16, 17, 32, 33, 495, 496, 497, 512)}
    assert got == {1: 16, 15: 16, 16: 16, 17: 32, 32: 32, 33: 48, 495: 496, 496: 496,
                   497: 512, 512: 512}


def test_padding_never_passes_max_length_unless_the_input_does():
    # max_length 24 is no multiple of 16: 17..24 pad to 24, not 32.
    assert [padded_length(n, 24) for n in range(1, 25)] == [16] * 16 + [24] * 8
    assert padded_length(25, 24) == 25 and padded_length(30, 24) == 30


def test_batch_buckets_are_powers_of_two_up_to_the_batch_size():
    assert [batch_bucket(n, 32) for n in (1, 2, 3, 5, 8, 9, 17, 32)] == \
        [1, 2, 4, 8, 8, 16, 32, 32]
    assert [batch_bucket(n, 20) for n in (3, 9, 17, 20)] == [4, 16, 20, 20]
    assert [batch_bucket(n) for n in (1, 3, 33, 100)] == [1, 4, 64, 128]
    assert batch_bucket(40, 32) == 40                     # never fewer rows than inputs
    assert [int(batch_bucket(tf.constant(n))) for n in (1, 3, 8, 9, 100)] == \
        [1, 4, 8, 16, 128]


def test_token_batches_fill_a_budget_of_padded_tokens():
    lengths = [5, 0, 20, 17, 3, 40, 16]
    # Shortest first; each batch costs inputs x padded length of its longest.
    batches = list(length_sorted_batches(lengths, 2, batch_tokens=64, max_length=64))
    assert batches == [[4, 0, 6], [3, 2], [5]]            # 3x16, 2x32, 1x48
    for batch in batches[:-1]:
        longest = max(lengths[i] for i in batch)
        assert len(batch) * padded_length(longest, 64) <= 64
    # An input longer than the budget is a batch of its own.
    assert list(length_sorted_batches([30, 2], 8, batch_tokens=16, max_length=64)) == \
        [[1], [0]]
    outputs = decode_in_length_order(lengths, 2, lambda chunk: [str(lengths[i]) for i in chunk],
                                     batch_tokens=64, max_length=64)
    assert outputs == ["5", "", "20", "17", "3", "40", "16"]


def test_a_long_line_is_cut_with_eos_last_and_reported():
    assert cut_line([5, 6, 7, 1], 4, 1) == [5, 6, 7, 1]
    assert cut_line([5, 6, 7, 8, 9, 1], 4, 1) == [5, 6, 7, 1]
    assert cut_lines_report(3, 1000, 128).startswith(
        "3 of 1000 input lines were longer than 128 tokens (the model's max_length) "
        "and were cut to 128 tokens")
    assert cut_lines_report(1, 1, 16).startswith(
        "1 of 1 input line was longer than 16 tokens (the model's max_length) and was cut")


def test_the_learned_positions_cap():
    assert position_limit("learned", 40) == 40
    assert position_limit("sinusoid", 40) is None
    assert max_decode_length(16, 50) == 66
    assert max_decode_length(16, 50, position_limit("sinusoid", 40)) == 66
    assert max_decode_length(16, 50, position_limit("learned", 40)) == 40
    assert max_decode_length(16, 10, position_limit("learned", 40)) == 26


def test_longest_decode_length_is_the_longest_any_batch_gets():
    for max_length in (12, 16, 64):
        for encoding in ("sinusoid", "learned"):
            limit = position_limit(encoding, max_length)
            every = [max_decode_length(padded_length(n, max_length), 12, limit)
                     for n in range(1, max_length + 1)]
            assert longest_decode_length(max_length, 12, encoding) == max(every)
    assert longest_decode_length(64, 12, "sinusoid") == 76
    assert longest_decode_length(12, 300, "sinusoid") == 312
    assert longest_decode_length(64, 12, "learned") == 64


def test_ints_and_tensors_agree():
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)
    def graph(length):
        padded = padded_length(length, 20)
        return (padded, max_decode_length(padded, 7),
                max_decode_length(padded, 7, position_limit("learned", 20)))

    for n in range(0, 41):
        want = padded_length(n, 20)
        assert isinstance(want, int)
        got = [int(t) for t in graph(tf.constant(n))]
        assert got == [want, max_decode_length(want, 7), min(want + 7, 20)], n
        assert int(padded_length(tf.constant(n), 20)) == want       # eager tensors too


def test_too_long_input_is_refused_with_one_line():
    check_input_length(3, 12, 12, "fits")                          # no error at the limit
    with pytest.raises(UserError) as e:
        check_input_length(3, 13, 12, "a" * 100)
    message = str(e.value)
    assert message.startswith("input line 3 has 13 tokens, more than the model's "
                              "max_length of 12; split the line, or decode with "
                              "--decode_hparams=long_inputs=cut to cut it.")
    assert message.endswith(f"Received: line 3={'a' * 60!r}...")
    assert "\n" not in message


def test_cut_to_max_length_keeps_eos_last():
    eos, pad = 1, 0
    ids = tf.constant([[5, 6, 7, 8, 9, eos, pad],
                       [5, 6, eos, pad, pad, pad, pad],
                       [eos, pad, pad, pad, pad, pad, pad]], tf.int32)
    cut, length = cut_to_max_length(ids, 4, pad, eos)
    assert int(length) == 4
    np.testing.assert_array_equal(cut, [[5, 6, 7, eos], [5, 6, eos, pad], [eos, pad, pad, pad]])
    # A batch within max_length is cut to its longest row only.
    cut, length = cut_to_max_length(ids[1:], 4, pad, eos)
    assert int(length) == 3
    np.testing.assert_array_equal(cut, [[5, 6, eos], [eos, pad, pad]])


def test_length_sorted_batches_skip_empty_and_keep_ties_in_order():
    lengths = [5, 0, 2, 5, 1, 0, 2, 9]
    assert list(length_sorted_batches(lengths, 3)) == [[4, 2, 6], [0, 3, 7]]
    assert list(length_sorted_batches(lengths, 100)) == [[4, 2, 6, 0, 3, 7]]
    assert list(length_sorted_batches([0, 0], 2)) == []


def test_decode_in_length_order_puts_results_back_in_input_order():
    words = ["ccc", "", "a", "bb", "dddd", ""]
    batches, calls = [], []

    def decode_batch(chunk):
        batches.append(chunk)
        return [words[i].upper() for i in chunk]

    outputs = decode_in_length_order([len(w) for w in words], 2, decode_batch,
                                     lambda done, total: calls.append((done, total)))
    assert outputs == ["CCC", "", "A", "BB", "DDDD", ""]
    assert batches == [[2, 3], [0, 4]]
    assert calls == [(4, 6), (6, 6)]          # the two empty lines count as done
    with pytest.raises(ValueError, match="returned 1 outputs for 2 inputs"):
        decode_in_length_order([1, 1], 2, lambda chunk: ["x"])


def test_parallel_batches_run_at_once_and_report_in_length_order():
    """With parallel_batches=2, two batches are inside decode_batch at the same
    time (a barrier of 2 would time out otherwise); the outputs and the
    progress calls are those of one batch at a time."""
    import threading

    words = ["ccc", "", "a", "bb", "dddd", "ee", "f", ""]
    lengths = [len(w) for w in words]
    barrier = threading.Barrier(2, timeout=30)

    def decode_batch(chunk):
        if chunk == [2, 6] or chunk == [3, 5]:   # the first two batches meet
            barrier.wait()
        return [words[i].upper() for i in chunk]

    calls = []
    outputs = decode_in_length_order(lengths, 2, decode_batch,
                                     lambda done, total: calls.append(done),
                                     parallel_batches=2)
    assert outputs == [w.upper() for w in words]
    sequential = []
    decode_in_length_order(lengths, 2, lambda chunk: [words[i] for i in chunk],
                           lambda done, total: sequential.append(done))
    assert calls == sequential == [4, 6, 8]


def test_a_failing_parallel_batch_raises_and_drops_the_batches_not_started():
    import threading

    started, lock = [], threading.Lock()

    def decode_batch(chunk):
        with lock:
            started.append(chunk)
        if chunk == [0]:
            raise RuntimeError("batch 0 failed")
        return ["x"] * len(chunk)

    with pytest.raises(RuntimeError, match="batch 0 failed"):
        decode_in_length_order([1] * 50, 1, decode_batch, parallel_batches=2)
    assert len(started) < 50


def test_the_ctranslate2_translator_imports_no_tensorflow():
    code = ("import sys, t2t_revival.decode.ctranslate2_translator; "
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
