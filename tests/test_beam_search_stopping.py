"""Beam search's stopping: the staged loop that drops stopped batch elements,
and the `early_stop` rules, on the fake second-order Markov steps of
test_beam_search.py (brute-force expectations in numpy)."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_revival.decode.beam_search import beam_search
from t2t_revival.settings.decode_hparams import DecodeHParams, DecodeHParamsError, parse_decode_hparams
from t2t_revival.settings.hparams import HParams
from tests.test_beam_search import (EOS, brute_force_finished, make_cache, make_step,
                                    strip)


def search(tables, table_ids, beam, alpha, max_len, return_beams, static_batch,
           early_stop="exact", jit=False, rows=None):
    """beam_search with the batch size as a Python int (the staged loop) or as
    a tensor (one loop over the whole batch); eagerly (fast on these toy
    tables), or compiled whole by XLA with `jit`. `rows` (a list) collects
    the rows each step computes."""
    inner = make_step(tables, max_len)

    def step(ids, cache, index):
        if rows is not None:
            rows.append(int(ids.shape[0]))
        return inner(ids, cache, index)

    def run(cache):
        batch = len(table_ids) if static_batch else tf.shape(cache["meta"]["table"])[0]
        return beam_search(step, cache, batch, beam, alpha, max_len,
                           return_beams=return_beams, early_stop=early_stop)

    if jit:
        run = tf.function(run, jit_compile=True, autograph=False)
    seqs, scores = run(make_cache(table_ids, max_len))
    return seqs.numpy(), scores.numpy()


@pytest.mark.parametrize("return_beams", [True, False])
@pytest.mark.parametrize("early_stop", ["exact", "best_finished"])
def test_staged_loop_equals_one_loop_over_the_whole_batch(return_beams, early_stop):
    # 9 elements (not a power of two) over 4 tables that stop after very
    # different numbers of steps: stages of 9 and 4 rows.
    rng = np.random.default_rng(11)
    tables = rng.normal(0.0, 2.0, size=(4, 6, 6, 6))
    tables[1, :, :, EOS] += 4.0   # stops at once
    tables[2, :, :, EOS] -= 3.0   # runs long
    table_ids = [2, 1, 0, 3, 1, 2, 0, 1, 3]
    max_len = 12
    one = search(tables, table_ids, 3, 0.6, max_len, return_beams, False, early_stop)
    rows = []
    staged = [search(tables, table_ids, 3, 0.6, max_len, return_beams, True, early_stop,
                     rows=rows)]
    assert rows[0] == 9 * 3 and rows[-1] == 4 * 3, rows   # the loop did shrink
    if return_beams and early_stop == "exact":  # and once compiled (slower)
        staged.append(search(tables, table_ids, 3, 0.6, max_len, return_beams, True,
                             early_stop, jit=True))
    for got in staged:
        np.testing.assert_array_equal(got[0], one[0])
        np.testing.assert_allclose(got[1], one[1], atol=1e-5)


def test_a_result_does_not_depend_on_the_batch_it_is_decoded_in():
    rng = np.random.default_rng(12)
    tables = rng.normal(0.0, 2.0, size=(3, 5, 5, 5))
    tables[0, :, :, EOS] -= 3.0
    table_ids, max_len = [0, 1, 2, 1, 1, 2, 0, 1], 10     # stages of 8 and 4
    for early_stop in ("exact", "best_finished"):
        seqs, scores = search(tables, table_ids, 2, 1.0, max_len, False, True, early_stop)
        for b, t in enumerate(table_ids[:3]):
            alone = search(tables, [t], 2, 1.0, max_len, False, True, early_stop)
            np.testing.assert_array_equal(seqs[b], alone[0][0])
            assert scores[b] == pytest.approx(alone[1][0], abs=1e-5)


def counted_search(table, beam, alpha, max_len, early_stop):
    """(steps taken, best sequence, its score), eagerly, one batch element."""
    inner = make_step(table, max_len)
    calls = []

    def step(ids, cache, index):
        calls.append(int(index))
        return inner(ids, cache, index)

    seqs, scores = beam_search(step, make_cache([0], max_len), 1, beam, alpha, max_len,
                               return_beams=False, early_stop=early_stop)
    return len(calls), strip(seqs.numpy()[0]), float(scores.numpy()[0])


def test_best_finished_stops_earlier_with_the_same_result():
    # After two tokens EOS is very likely: the best is 3 tokens long. The
    # exact bound (penalty of max_len 30) keeps the search going until the
    # live log-probs fall far below; best_finished stops right after.
    probs = np.full((4, 4), 0.3)
    probs[0] = [0.02, 0.02, 0.48, 0.48]       # at the start: 2 or 3
    probs[2:, EOS] = 0.1
    probs[2, 2:] = [0.45, 0.45]
    probs[3, 2:] = [0.45, 0.45]
    table = np.log(probs / probs.sum(-1, keepdims=True))
    # Second order: after (prev, cur) with prev != PAD, EOS is near certain.
    tables = np.broadcast_to(table[None], (4, 4, 4)).copy()
    tables[2:, 2:, EOS] = np.log(0.97)
    tables[2:, 2:, 2:] = np.log(0.015)
    tables = tables[None]
    max_len, alpha = 30, 0.6
    best_score, best = brute_force_finished(tables[0], 6, alpha)[0]
    exact = counted_search(tables, 2, alpha, max_len, "exact")
    fast = counted_search(tables, 2, alpha, max_len, "best_finished")
    assert exact[1] == fast[1] == best and len(best) == 3
    assert exact[2] == pytest.approx(best_score, abs=1e-5)
    assert fast[2] == pytest.approx(best_score, abs=1e-5)
    assert fast[0] < exact[0], (fast[0], exact[0])
    assert fast[0] <= 4


def test_best_finished_can_miss_what_the_exact_rule_finds():
    # test_beam_search's case: [EOS] finishes at once, and with alpha = 3 the
    # long a...a EOS wins only through its length penalty, after a dip: the
    # second token is unlikely, the rest nearly certain. best_finished stops
    # in the dip; the exact rule does not.
    probs = np.array([[0.05, 0.5, 0.45],       # start / PAD: EOS 0.5, a 0.45
                      [0.34, 0.33, 0.33],
                      [0.05, 0.05, 0.9]])      # after a: a 0.9, EOS 0.05
    tables = np.broadcast_to(np.log(probs)[None], (3, 3, 3)).copy()
    tables[0, 2] = np.log([0.02, 0.88, 0.10])  # after PAD, a: a only 0.10
    tables = tables[None]
    max_len, alpha = 10, 3.0
    best_score, best = brute_force_finished(tables[0], max_len, alpha)[0]
    assert len(best) > 5
    exact = counted_search(tables, 2, alpha, max_len, "exact")
    fast = counted_search(tables, 2, alpha, max_len, "best_finished")
    assert exact[1] == best and exact[2] == pytest.approx(best_score, abs=1e-5)
    assert len(fast[1]) <= 2 and fast[2] < best_score
    assert fast[0] < exact[0]


def test_with_alpha_zero_the_rules_are_the_same():
    rng = np.random.default_rng(13)
    tables = rng.normal(0.0, 2.0, size=(3, 5, 5, 5))
    a = search(tables, [0, 1, 2], 3, 0.0, 8, True, True, "exact")
    b = search(tables, [0, 1, 2], 3, 0.0, 8, True, True, "best_finished")
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], atol=1e-6)


def test_early_stop_decode_hparam():
    assert DecodeHParams.from_hparams(HParams()).early_stop == "exact"
    dhp = DecodeHParams.from_hparams(HParams(), parse_decode_hparams("early_stop=best_finished"))
    assert dhp.early_stop == "best_finished"
    with pytest.raises(DecodeHParamsError,
                       match=r"'early_stop' must be one of exact, best_finished.*"
                             r"early_stop='soon'"):
        DecodeHParams.from_hparams(HParams(), parse_decode_hparams("early_stop=soon"))
    step = make_step(np.zeros((1, 3, 3, 3)), 4)
    with pytest.raises(ValueError, match="early_stop must be one of"):
        beam_search(step, make_cache([0], 4), 1, 2, 0.6, 4, early_stop="soon")


def test_on_step_sees_every_step_with_its_stages_rows():
    """`on_step` (benchmarks/decode_steps.py counts steps with it) is called
    before each step with the state of the step's stage: the index it feeds
    and the searching flags of that stage's rows (9, then 4); watching the
    search changes none of its results."""
    rng = np.random.default_rng(11)
    tables = rng.normal(0.0, 2.0, size=(4, 6, 6, 6))
    tables[1, :, :, EOS] += 4.0   # stops at once
    tables[2, :, :, EOS] -= 3.0   # runs long
    table_ids, max_len = [2, 1, 0, 3, 1, 2, 0, 1, 3], 12
    inner = make_step(tables, max_len)
    stepped, seen = [], []

    def step(ids, cache, index):
        stepped.append((int(index), int(ids.shape[0]) // 3))
        return inner(ids, cache, index)

    def on_step(state):
        searching = state["searching"].numpy()
        seen.append((int(state["index"]), searching.shape[0], int(searching.sum())))

    seqs, scores = beam_search(step, make_cache(table_ids, max_len), len(table_ids), 3, 0.6,
                               max_len, on_step=on_step)
    assert [(index, rows) for index, rows, _ in seen] == stepped
    assert {rows for _, rows, _ in seen} == {9, 4}
    # A stage of 9 rows steps while more than 4 search; the last, while any does.
    assert seen[0] == (0, 9, 9)
    assert all(searching > 4 if rows == 9 else searching >= 1 for _, rows, searching in seen)
    want_seqs, want_scores = search(tables, table_ids, 3, 0.6, max_len, True, True)
    np.testing.assert_array_equal(seqs.numpy(), want_seqs)
    np.testing.assert_allclose(scores.numpy(), want_scores, atol=1e-5)
