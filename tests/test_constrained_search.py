"""Beam search with target prefixes and hard lexical constraints, on the fake
second-order Markov steps of test_beam_search.py: brute-force expectations
in numpy, the XLA-compiled search against the uncompiled one."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from t2t_revival.decode.beam_search import beam_search
from t2t_revival.decode.lexical_constraints import pack_constraints, pack_prefixes
from tests.test_beam_search import (EOS, make_cache, make_step, np_log_prob, np_penalty,
                                    strip)


def contains(seq, phrase) -> bool:
    n = len(phrase)
    return any(list(seq[i:i + n]) == list(phrase) for i in range(len(seq) - n + 1))


def search(tables, table_ids, beam, alpha, max_len, phrases=None, prefixes=None,
           width=4, jit=False, early_stop="exact", static_batch=True):
    """beam_search with each sentence's phrases and prefix (None: not given)."""
    step = make_step(tables, max_len)
    constraints = None if phrases is None else pack_constraints(phrases, width)
    prefix = None if prefixes is None else pack_prefixes(prefixes)

    def run(cache):
        batch = len(table_ids) if static_batch else tf.shape(cache["meta"]["table"])[0]
        return beam_search(step, cache, batch, beam, alpha, max_len, early_stop=early_stop,
                           constraints=constraints, prefix=prefix)

    if jit:  # else eagerly: fast on these toy tables
        run = tf.function(run, jit_compile=True, autograph=False)
    seqs, scores = run(make_cache(table_ids, max_len))
    return seqs.numpy(), scores.numpy()


def brute_force(table, max_len, alpha, phrases, prefix):
    """Every sequence ending in EOS within max_len that starts with `prefix`
    and contains every phrase, best penalized score first."""
    others = [t for t in range(table.shape[-1]) if t != EOS]
    scored = []
    for n in range(max_len):
        for body in itertools.product(others, repeat=n):
            seq = list(body) + [EOS]
            if seq[:len(prefix)] == list(prefix) and all(contains(seq, p) for p in phrases):
                scored.append((np_log_prob(table, seq) / np_penalty(len(seq), alpha), seq))
    scored.sort(key=lambda s: -s[0])
    return scored


def test_a_wide_beam_returns_every_hypothesis_meeting_the_constraints_best_first():
    # V = 4 (3 tokens that are not EOS), max_len 4: at most 27 live prefixes
    # and 108 extensions; with beam 54 the search keeps every candidate, so
    # its finished hypotheses must be exactly those that brute force finds
    # (prefix forced, every phrase in them), best first.
    rng = np.random.default_rng(3)
    tables = rng.normal(0.0, 2.0, size=(3, 4, 4, 4))
    max_len, beam, alpha = 4, 54, 0.6
    cases = [(0, [[3]], []), (1, [[2, 3]], []), (2, [[3], [2]], []), (0, [], [2]),
             (1, [[3, 3]], [3]), (2, [[2]], [3, 2])]
    table_ids = [t for t, _, _ in cases]
    seqs, scores = search(tables, table_ids, beam, alpha, max_len,
                          phrases=[p for _, p, _ in cases], prefixes=[q for _, _, q in cases])
    compiled = search(tables, table_ids, beam, alpha, max_len, jit=True,
                      phrases=[p for _, p, _ in cases], prefixes=[q for _, _, q in cases])
    np.testing.assert_array_equal(compiled[0], seqs)
    np.testing.assert_allclose(compiled[1], scores, atol=1e-5)
    for b, (t, phrases, prefix) in enumerate(cases):
        expected = brute_force(tables[t], max_len, alpha, phrases, prefix)
        assert 2 <= len(expected) < beam
        got = [strip(s) for s in seqs[b][:len(expected)]]
        assert got == [s for _, s in expected], (b, phrases, prefix)
        np.testing.assert_allclose(scores[b][:len(expected)], [s for s, _ in expected],
                                   atol=1e-4)
        # The rest are cut at max_len (nothing else ended in EOS), or empty
        # slots (NEG_INF: the prefixes leave fewer hypotheses than beams).
        assert all(EOS not in s or score < -1e6
                   for s, score in zip(seqs[b][len(expected):], scores[b][len(expected):]))


def test_a_constraint_the_model_dislikes_is_in_every_output_of_a_small_beam():
    # Token 4 is e^-8 less likely than any other everywhere: an unconstrained
    # beam of 2 never takes it. Constrained, every finished hypothesis holds
    # the phrase (4 2), and the prefix; each score is the model's.
    rng = np.random.default_rng(4)
    tables = rng.normal(0.0, 1.0, size=(2, 6, 6, 6))
    tables[..., 4] -= 8.0
    max_len, alpha = 9, 0.6
    table_ids = [0, 1, 1, 0, 1, 0, 0, 1, 1]
    phrases = [[[4, 2]], [[4, 2]], [[4], [5, 3]], [], [[4, 2], [3]], [[2, 2, 2]],
               [[4, 4]], [[3]], [[4, 2]]]
    prefixes = [[], [5], [], [], [2, 2], [], [4], [], [3, 3, 3]]
    plain, _ = search(tables, table_ids, 2, alpha, max_len)
    assert not any(4 in strip(s) for s in plain[:, 0])
    for early_stop in ("exact", "best_finished"):
        seqs, scores = search(tables, table_ids, 2, alpha, max_len, phrases=phrases,
                              prefixes=prefixes, early_stop=early_stop)
        for b, t in enumerate(table_ids):
            assert EOS in seqs[b, 0]   # the best ended; the other beam may be cut
            for seq, score in zip(seqs[b], scores[b]):
                seq = strip(seq)
                assert seq[:len(prefixes[b])] == prefixes[b]
                if seq[-1] == EOS:
                    assert all(contains(seq, p) for p in phrases[b]), (b, seq, phrases[b])
                assert score == pytest.approx(
                    np_log_prob(tables[t], seq) / np_penalty(len(seq), alpha), abs=1e-4)
        # A sentence without phrases or prefix decodes as without constraints.
        np.testing.assert_array_equal(seqs[3], plain[3])


def test_sentences_without_constraints_decode_as_the_plain_search():
    rng = np.random.default_rng(6)
    tables = rng.normal(0.0, 2.0, size=(3, 6, 6, 6))
    max_len, table_ids = 7, [0, 1, 2, 1]
    want, want_scores = search(tables, table_ids, 3, 0.6, max_len)
    for phrases, prefixes, static_batch in (([[]] * 4, [[]] * 4, True), ([[]] * 4, None, False),
                                            (None, [[]] * 4, True)):
        seqs, scores = search(tables, table_ids, 3, 0.6, max_len, phrases=phrases,
                              prefixes=prefixes, static_batch=static_batch)
        np.testing.assert_array_equal(seqs, want)
        np.testing.assert_allclose(scores, want_scores, atol=1e-5)


def test_beam_one_with_a_prefix_and_a_constraint():
    """Beam 1 (greedy without them) runs the guided search with one beam."""
    rng = np.random.default_rng(7)
    tables = rng.normal(0.0, 1.0, size=(1, 6, 6, 6))
    seqs, _ = search(tables, [0, 0], 1, 0.6, 8, phrases=[[[4, 5]], []], prefixes=[[3], [2, 2]])
    assert seqs.shape == (2, 1, 8)
    first, second = strip(seqs[0, 0]), strip(seqs[1, 0])
    assert first[0] == 3 and contains(first, [4, 5]) and first[-1] == EOS
    assert second[:2] == [2, 2]


def test_packing_refuses_what_does_not_fit():
    ids, starts = pack_constraints([[[5, 6], [7]], []], 4)
    np.testing.assert_array_equal(ids, [[5, 6, 7, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(starts, [[1, 0, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(pack_prefixes([[4, 5], []]), [[4, 5], [0, 0]])
    for phrases in ([[[5, 6, 7], [8, 9]]], [[[]]], [[[0]]]):
        with pytest.raises(ValueError):
            pack_constraints(phrases, 4)
