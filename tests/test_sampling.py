"""Sampling (temperature, top-k, top-p) over fake step functions.

The fake models are the Markov tables of test_beam_search (the history in
the cache), and a one-step model whose first-token distribution is known,
so the draws can be counted against it.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_revival.decode.beam_search import greedy_search
from t2t_revival.decode.sampling import filter_logits, sample_search
from test_beam_search import EOS, make_cache, make_step, np_log_prob, np_penalty, strip


def run_sampling(tables, table_ids, max_len, seed, compiled=True, **kw):
    step = make_step(tables, max_len)
    generator = keras.random.SeedGenerator(seed)

    def search(cache):
        return sample_search(step, cache, len(table_ids), max_len, generator, **kw)

    if compiled:
        search = tf.function(search, autograph=False)
    seqs, scores = search(make_cache(table_ids, max_len))
    return seqs.numpy(), scores.numpy()


@pytest.mark.parametrize("compiled", [True, False])
def test_top_k_one_is_greedy(compiled):
    rng = np.random.default_rng(2)
    tables = rng.normal(0.0, 1.5, size=(3, 6, 6, 6))
    max_len, table_ids = 10, [0, 1, 2]
    step = make_step(tables, max_len)
    g_seqs, g_log_probs = tf.function(
        lambda c: greedy_search(step, c, len(table_ids), max_len))(
        make_cache(table_ids, max_len))
    for seed in (1, 2):
        seqs, scores = run_sampling(tables, table_ids, max_len, seed, compiled=compiled,
                                    top_k=1, temperature=1.7, return_beams=False)
        np.testing.assert_array_equal(seqs, g_seqs.numpy())
        np.testing.assert_allclose(scores, g_log_probs.numpy(), atol=1e-5)  # alpha 0


def test_a_fixed_seed_repeats_and_another_seed_differs():
    rng = np.random.default_rng(5)
    tables = rng.normal(0.0, 1.0, size=(2, 8, 8, 8))
    max_len, table_ids = 12, [0, 1, 0, 1, 0, 1, 0, 1]
    first = run_sampling(tables, table_ids, max_len, seed=7, samples_per_input=3)
    again = run_sampling(tables, table_ids, max_len, seed=7, samples_per_input=3)
    other = run_sampling(tables, table_ids, max_len, seed=8, samples_per_input=3)
    eager = run_sampling(tables, table_ids, max_len, seed=7, samples_per_input=3, compiled=False)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    np.testing.assert_array_equal(first[0], eager[0])
    assert not np.array_equal(first[0], other[0])
    # Samples of one input differ from each other (not one draw repeated).
    assert len({tuple(s) for s in first[0].reshape(-1, max_len)}) > 12


def test_samples_are_scored_sorted_and_well_formed():
    rng = np.random.default_rng(6)
    tables = rng.normal(0.0, 1.0, size=(2, 6, 6, 6))
    max_len, alpha, table_ids = 8, 0.6, [0, 1]
    seqs, scores = run_sampling(tables, table_ids, max_len, seed=3, samples_per_input=5,
                                alpha=alpha, temperature=1.3)
    assert seqs.shape == (2, 5, max_len) and scores.shape == (2, 5)
    for b, t in enumerate(table_ids):
        assert np.all(np.diff(scores[b]) <= 1e-6)                      # best first
        for seq, score in zip(seqs[b], scores[b]):
            seq = strip(seq)
            assert seq.count(EOS) <= 1
            assert score == pytest.approx(
                np_log_prob(tables[t], seq) / np_penalty(len(seq), alpha), abs=1e-4)
    best, best_scores = run_sampling(tables, table_ids, max_len, seed=3, samples_per_input=5,
                                     alpha=alpha, temperature=1.3, return_beams=False)
    np.testing.assert_array_equal(best, seqs[:, 0])
    np.testing.assert_allclose(best_scores, scores[:, 0])


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = np.array([[0.05, 0.5, 0.15, 0.3]])              # sorted: 0.5, 0.3, 0.15, 0.05
    logits = tf.constant(np.log(probs), tf.float32)
    for top_p, kept in [(0.45, {1}), (0.55, {1, 3}), (0.79, {1, 3}), (0.81, {1, 3, 2}),
                        (0.96, {0, 1, 2, 3}), (1.0, {0, 1, 2, 3})]:
        out = filter_logits(logits, top_p=top_p).numpy()[0]
        assert {i for i in range(4) if out[i] > -1e6} == kept, top_p
    out = filter_logits(logits, top_k=2).numpy()[0]
    assert {i for i in range(4) if out[i] > -1e6} == {1, 3}
    np.testing.assert_allclose(filter_logits(logits, temperature=2.0).numpy(),
                               np.log(probs) / 2.0, rtol=1e-6)
    for bad in (dict(temperature=0.0), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1)):
        with pytest.raises(ValueError):
            filter_logits(logits, **bad)


def _one_step_model(first_probs):
    """A step whose first token follows `first_probs` and whose second is EOS."""
    vocab = len(first_probs)
    then_eos = np.full(vocab, 1e-6)
    then_eos[EOS] = 1.0
    table = tf.constant(np.log(np.stack([first_probs, then_eos / then_eos.sum()])),
                        tf.float32)

    def step(ids, cache, index):
        return tf.tile(table[index][None], [tf.shape(ids)[0], 1]), cache

    return step


def _first_token_counts(first_probs, draws, seed=11, **kw):
    step = _one_step_model(first_probs)
    generator = keras.random.SeedGenerator(seed)
    seqs, _ = tf.function(lambda c: sample_search(step, c, 1, 3, generator,
                                                  samples_per_input=draws, **kw),
                          autograph=False)({"x": tf.zeros([1, 1])})
    return np.bincount(seqs.numpy()[0, :, 0], minlength=len(first_probs)) / draws


def test_draws_follow_the_filtered_distribution_on_a_toy_step():
    first = np.array([0.0001, 0.0001, 0.4, 0.25, 0.2, 0.1, 0.0498])
    first /= first.sum()
    draws = 4000
    freq = _first_token_counts(first, draws)
    np.testing.assert_allclose(freq, first, atol=0.03)
    # top_p = 0.8: the nucleus is {2, 3, 4} (0.4 + 0.25 + 0.2 = 0.85 >= 0.8;
    # 0.65 is not), renormalized.
    freq = _first_token_counts(first, draws, top_p=0.8)
    nucleus = np.zeros_like(first)
    nucleus[[2, 3, 4]] = first[[2, 3, 4]] / first[[2, 3, 4]].sum()
    assert set(np.nonzero(freq)[0]) == {2, 3, 4}
    np.testing.assert_allclose(freq, nucleus, atol=0.03)
    # top_k = 2 keeps {2, 3}; a low temperature makes the top token dominate.
    freq = _first_token_counts(first, draws, top_k=2)
    assert set(np.nonzero(freq)[0]) == {2, 3}
    np.testing.assert_allclose(freq[[2, 3]], [0.4 / 0.65, 0.25 / 0.65], atol=0.03)
    assert _first_token_counts(first, draws, temperature=0.1)[2] > 0.97
