"""Beam search and greedy search on fake step functions over toy alphabets.

The fake models are Markov tables. The exact tests use a second-order table
whose "previous token" is read from a KV-cache-like history in the cache, so
they also prove that the cache is tiled and reordered by parent beam: a
search that forgot to reorder it would score sequences with the wrong
history. Expected results are computed independently in numpy by brute-force
enumeration of every sequence.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_revival.decode.beam_search import beam_search, greedy_search, length_penalty
from t2t_revival.settings.decode_hparams import DecodeHParams, DecodeHParamsError, parse_decode_hparams
from t2t_revival.decode.sampling import sample_search
from t2t_revival.settings.hparams import HParams
from t2t_revival.layers.sentence_cache import PER_SENTENCE

EOS = 1


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


# ---------------------------------------------------------------------------
# A second-order Markov model whose history lives in the cache.
# tables[t, prev, cur] are the logits of the next token, for batch element
# using table t, after tokens `prev` then `cur` (prev = 0 before the start).
# ---------------------------------------------------------------------------


def make_step(tables, max_len):
    n_tables, vocab = tables.shape[0], tables.shape[-1]
    flat = tf.constant(tables.reshape(n_tables * vocab * vocab, vocab), tf.float32)

    def step(ids, cache, index):
        hist = cache["hist"]                                   # [N, L] tokens fed so far
        positions = ops.arange(max_len, dtype="int32")
        hist = ops.where(positions[None, :] == index, ids[:, None], hist)
        prev = ops.sum(ops.where(positions[None, :] == index - 1, hist, 0), axis=1)
        table = cache["meta"]["table"]                         # [N]
        logits = ops.take(flat, (table * vocab + prev) * vocab + ids, axis=0)
        return logits, {"hist": hist, "meta": {"table": table}}

    return step


def make_cache(table_ids, max_len):
    b = len(table_ids)
    return {"hist": tf.zeros((b, max_len), tf.int32),
            "meta": {"table": tf.constant(table_ids, tf.int32)}}


def np_log_prob(table, seq):
    """Teacher-forced log-prob of `seq` (tokens up to and including EOS)."""
    fed = [0] + list(seq[:-1])
    total = 0.0
    for i, target in enumerate(seq):
        prev = fed[i - 1] if i > 0 else 0
        total += np_log_softmax(table[prev, fed[i]])[target]
    return total


def strip(seq):
    """The tokens of a returned sequence up to the first EOS (inclusive)."""
    seq = list(seq)
    return seq[:seq.index(EOS) + 1] if EOS in seq else seq


def brute_force_finished(table, max_len, alpha):
    """Every sequence ending in EOS within max_len, best penalized score first."""
    vocab = table.shape[-1]
    others = [t for t in range(vocab) if t != EOS]
    scored = []
    for n in range(max_len):
        for prefix in itertools.product(others, repeat=n):
            seq = list(prefix) + [EOS]
            scored.append((np_log_prob(table, seq) / np_penalty(len(seq), alpha), seq))
    scored.sort(key=lambda s: -s[0])
    return scored


def run_beam(tables, table_ids, beam, alpha, max_len, return_beams=True, compiled=True):
    step = make_step(tables, max_len)

    def search(cache):
        return beam_search(step, cache, len(table_ids), beam, alpha, max_len,
                           return_beams=return_beams)

    if compiled:
        search = tf.function(search)
    seqs, scores = search(make_cache(table_ids, max_len))
    return seqs.numpy(), scores.numpy()


def test_length_penalty_is_gnmt():
    assert float(length_penalty(1, 0.6)) == pytest.approx(1.0)
    assert float(length_penalty(7, 0.6)) == pytest.approx(2.0 ** 0.6)
    assert float(length_penalty(30, 0.0)) == pytest.approx(1.0)


def test_beam_finds_the_best_sequence_that_greedy_misses():
    # First-order table (prev ignored), V = {PAD, EOS, a=2, b=3}; rows are the
    # current token (PAD = start), columns the next.
    # Start: a 0.5, b 0.45. After a: EOS 0.4, a/b 0.25. After b: EOS 0.9.
    # Greedy: a EOS = 0.2; best: b EOS = 0.405.
    probs = np.array([[0.025, 0.025, 0.5, 0.45],
                      [0.25, 0.25, 0.25, 0.25],
                      [0.1, 0.4, 0.25, 0.25],
                      [0.04, 0.9, 0.03, 0.03]])
    table = np.broadcast_to(np.log(probs)[None], (4, 4, 4))[None].copy()  # [1, prev, cur, V]
    max_len = 5
    best_score, best = brute_force_finished(table[0], max_len, 0.6)[0]
    assert best == [3, EOS]

    greedy_step = make_step(table, max_len)
    g_seqs, _ = tf.function(lambda c: greedy_search(greedy_step, c, 1, max_len))(
        make_cache([0], max_len))
    assert strip(g_seqs.numpy()[0]) == [2, EOS]

    seqs, scores = run_beam(table, [0], beam=2, alpha=0.6, max_len=max_len,
                            return_beams=False)
    assert seqs.shape == (1, max_len) and scores.shape == (1,)
    assert list(seqs[0]) == [3, EOS, 0, 0, 0]
    assert scores[0] == pytest.approx(best_score, abs=1e-5)


def brute_force_cut(table, max_len):
    """Every max_len sequence without EOS, best log-prob first."""
    others = [t for t in range(table.shape[-1]) if t != EOS]
    scored = [(np_log_prob(table, list(seq)), list(seq))
              for seq in itertools.product(others, repeat=max_len)]
    scored.sort(key=lambda s: -s[0])
    return scored


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_equals_exhaustive_n_best_per_batch_element(alpha):
    # V = 5 (4 non-EOS tokens), max_len 3: at most 16 live prefixes and 80
    # extensions of them, so with beam 40 (2 * 40 >= 80 candidates kept) the
    # search is exhaustive: it must return all 21 sequences that end in EOS,
    # best first, then the best 19 cut at max_len without EOS.
    rng = np.random.default_rng(1)  # a seed where the 3 tables' bests differ
    tables = rng.normal(0.0, 2.0, size=(3, 5, 5, 5))
    max_len, beam = 3, 40
    table_ids = [0, 1, 2, 1]
    seqs, scores = run_beam(tables, table_ids, beam, alpha, max_len)
    assert seqs.shape == (4, beam, max_len) and scores.shape == (4, beam)
    tops = set()
    for b, t in enumerate(table_ids):
        finished = brute_force_finished(tables[t], max_len, alpha)
        assert len(finished) == 21
        cut = [(lp / np_penalty(max_len, alpha), seq)
               for lp, seq in brute_force_cut(tables[t], max_len)[:beam - 21]]
        expected = finished + cut
        got = [strip(s) for s in seqs[b]]
        assert got == [s for _, s in expected]
        np.testing.assert_allclose(scores[b], [s for s, _ in expected], atol=1e-4)
        tops.add(tuple(got[0]))
    assert len(tops) == 3  # the three tables have different best sequences
    np.testing.assert_array_equal(seqs[1], seqs[3])


def test_small_beam_is_valid_and_sorted():
    rng = np.random.default_rng(1)
    tables = rng.normal(0.0, 1.5, size=(2, 7, 7, 7))
    max_len, alpha = 8, 0.6
    seqs, scores = run_beam(tables, [0, 1], beam=3, alpha=alpha, max_len=max_len)
    for b in range(2):
        assert np.all(np.diff(scores[b]) <= 1e-6)            # best first
        for seq, score in zip(seqs[b], scores[b]):
            seq = list(seq)
            assert seq.count(EOS) <= 1
            if EOS in seq:                                   # PAD after EOS
                assert all(t == 0 for t in seq[seq.index(EOS) + 1:])
                length = seq.index(EOS) + 1
            else:
                length = max_len
            assert score == pytest.approx(
                np_log_prob(tables[b], seq[:length]) / np_penalty(length, alpha), abs=1e-4)


def test_beam_one_equals_greedy():
    rng = np.random.default_rng(2)
    tables = rng.normal(0.0, 1.5, size=(3, 6, 6, 6))
    max_len = 10
    table_ids = [0, 1, 2]
    seqs, scores = run_beam(tables, table_ids, beam=1, alpha=0.0, max_len=max_len,
                            return_beams=False)
    step = make_step(tables, max_len)
    g_seqs, g_log_probs = tf.function(
        lambda c: greedy_search(step, c, len(table_ids), max_len))(
        make_cache(table_ids, max_len))
    np.testing.assert_array_equal(seqs, g_seqs.numpy())
    np.testing.assert_allclose(scores, g_log_probs.numpy(), atol=1e-5)  # alpha 0
    _, penalized = run_beam(tables, table_ids, beam=1, alpha=0.6, max_len=max_len)
    lengths = [len(strip(s)) for s in seqs]
    np.testing.assert_allclose(penalized[:, 0], scores / np_penalty(np.array(lengths), 0.6),
                               atol=1e-5)
    for b, t in enumerate(table_ids):
        got = strip(g_seqs.numpy()[b])
        assert g_log_probs.numpy()[b] == pytest.approx(np_log_prob(tables[t], got), abs=1e-4)


def test_finished_hypotheses_are_not_extended_and_search_stops_early():
    # EOS is by far the most likely first token: after one step the finished
    # set beats anything the live set can reach, so the search stops long
    # before max_len (counted with a Python counter in eager mode).
    probs = np.full((4, 4), 0.01)
    probs[:, 1] = 0.97
    table = np.broadcast_to(np.log(probs)[None], (4, 4, 4))[None].copy()
    max_len = 40
    inner = make_step(table, max_len)
    calls = []

    def step(ids, cache, index):
        calls.append(int(index))
        return inner(ids, cache, index)

    seqs, scores = beam_search(step, make_cache([0, 0], max_len), 2, 2, 0.6, max_len)
    assert len(calls) < 5, calls
    assert list(seqs.numpy()[0, 0]) == [EOS] + [0] * (max_len - 1)
    # Second best: one non-EOS token then EOS; never anything after the EOS.
    assert strip(seqs.numpy()[0, 1])[-1] == EOS and len(strip(seqs.numpy()[0, 1])) == 2
    assert np.count_nonzero(seqs.numpy()[:, :, 2:]) == 0


def test_search_does_not_stop_while_a_longer_hypothesis_can_still_win():
    # [EOS] (log-prob -0.69) finishes at once, but with alpha = 3 the long
    # a...a EOS wins after its length penalty: stopping at the first step
    # (a bound that ignored the max-length penalty) would return [EOS].
    probs = np.array([[0.05, 0.5, 0.45],       # start / PAD: EOS 0.5, a 0.45
                      [0.34, 0.33, 0.33],
                      [0.05, 0.05, 0.9]])      # after a: a 0.9, EOS 0.05
    table = np.broadcast_to(np.log(probs)[None], (3, 3, 3))[None].copy()
    max_len, alpha = 10, 3.0
    best_score, best = brute_force_finished(table[0], max_len, alpha)[0]
    assert len(best) > 5
    seqs, scores = run_beam(table, [0], beam=2, alpha=alpha, max_len=max_len,
                            return_beams=False)
    assert strip(seqs[0]) == best
    assert scores[0] == pytest.approx(best_score, abs=1e-5)


def test_without_eos_the_cut_live_hypotheses_are_returned():
    rng = np.random.default_rng(3)
    tables = rng.normal(0.0, 1.0, size=(1, 5, 5, 5))
    tables[..., EOS] = -1e9                                  # EOS never chosen
    max_len, alpha = 4, 0.6
    seqs, scores = run_beam(tables, [0], beam=2, alpha=alpha, max_len=max_len)
    for seq, score in zip(seqs[0], scores[0]):
        assert EOS not in seq
        assert score == pytest.approx(
            np_log_prob(tables[0], list(seq)) / np_penalty(max_len, alpha), abs=1e-4)


def test_runs_in_tf_function_with_a_dynamic_batch():
    rng = np.random.default_rng(4)
    tables = rng.normal(0.0, 2.0, size=(2, 5, 5, 5))
    max_len = 6
    step = make_step(tables, max_len)

    @tf.function(input_signature=[{"hist": tf.TensorSpec([None, max_len], tf.int32),
                                   "meta": {"table": tf.TensorSpec([None], tf.int32)}}])
    def search(cache):
        batch = tf.shape(cache["meta"]["table"])[0]
        return beam_search(step, cache, batch, 3, 0.6, max_len, return_beams=False)

    seqs, scores = search(make_cache([1, 0, 1], max_len))
    eager_seqs, eager_scores = run_beam(tables, [1, 0, 1], 3, 0.6, max_len,
                                        return_beams=False, compiled=False)
    np.testing.assert_array_equal(seqs.numpy(), eager_seqs)
    np.testing.assert_allclose(scores.numpy(), eager_scores, atol=1e-5)


def test_compiles_whole_with_xla_and_finds_the_same_beams():
    rng = np.random.default_rng(5)
    tables = rng.normal(0.0, 2.0, size=(2, 6, 6, 6))
    max_len = 7
    step = make_step(tables, max_len)

    @tf.function(jit_compile=True, autograph=False)
    def search(cache):
        return beam_search(step, cache, 3, 3, 0.6, max_len, return_beams=True)

    seqs, scores = search(make_cache([1, 0, 1], max_len))
    eager_seqs, eager_scores = run_beam(tables, [1, 0, 1], 3, 0.6, max_len, compiled=False)
    np.testing.assert_array_equal(seqs.numpy(), eager_seqs)
    np.testing.assert_allclose(scores.numpy(), eager_scores, atol=1e-5)


def make_sentence_step(tables, max_len, seen):
    """`make_step`'s model with its table in the cache's per-sentence part:
    one entry per sentence, which the step spreads over the sentence's rows
    (sentence-major). Records the (rows, sentences) it is traced with."""
    tiled_step = make_step(tables, max_len)

    def step(ids, cache, index):
        table = cache[PER_SENTENCE]["table"]                   # [B]
        rows, sentences = ids.shape[0], table.shape[0]
        seen.add((rows, sentences))
        logits, new = tiled_step(
            ids, {"hist": cache["hist"],
                  "meta": {"table": ops.repeat(table, rows // sentences, axis=0)}}, index)
        return logits, {"hist": new["hist"], PER_SENTENCE: cache[PER_SENTENCE]}

    return step


@pytest.mark.parametrize("search", ["beam", "sample"])
def test_the_per_sentence_cache_is_neither_tiled_nor_reordered(search):
    """Leaves under PER_SENTENCE reach the step one per sentence, in every
    stage of beam search (9 sentences, then the 4 still searching) and in
    sampling, and the results equal those of the same leaves tiled per row."""
    rng = np.random.default_rng(9)
    tables = rng.normal(0.0, 2.0, size=(3, 6, 6, 6))
    max_len, table_ids = 8, [0, 1, 2, 1, 0, 2, 2, 1, 0]
    # Table 0's first row makes EOS likely at once: those sentences stop first.
    tables[0, 0, 0, EOS] += 4.0
    seen = set()
    per_row = make_cache(table_ids, max_len)
    per_sentence = {"hist": per_row["hist"], PER_SENTENCE: {"table": per_row["meta"]["table"]}}

    def run(step, cache):
        if search == "beam":
            fn = lambda c: beam_search(step, c, len(table_ids), 3, 0.6, max_len)  # noqa: E731
        else:
            generator = keras.random.SeedGenerator(3)   # the same draws in both
            fn = lambda c: sample_search(step, c, len(table_ids), max_len,  # noqa: E731
                                         generator, samples_per_input=3)
        return tf.function(fn, jit_compile=True, autograph=False)(cache)

    seqs, scores = run(make_sentence_step(tables, max_len, seen), per_sentence)
    want_seqs, want_scores = run(make_step(tables, max_len), per_row)
    np.testing.assert_array_equal(seqs.numpy(), want_seqs.numpy())
    np.testing.assert_allclose(scores.numpy(), want_scores.numpy(), atol=1e-5)
    if search == "beam":
        assert seen == {(27, 9), (12, 4)}   # the first stage, then the second
    else:
        assert seen == {(27, 9)}


def test_decode_hparams_defaults_overrides_and_errors():
    dhp = DecodeHParams.from_hparams(HParams())
    assert (dhp.beam_size, dhp.alpha, dhp.extra_length, dhp.batch_size,
            dhp.return_beams) == (4, 0.6, 50, 32, False)
    parsing = HParams(beam_size=21, alpha=0.3, extra_length=300)
    dhp = DecodeHParams.from_hparams(parsing, parse_decode_hparams("batch_size=8, return_beams=true,alpha=1"))
    assert (dhp.beam_size, dhp.alpha, dhp.extra_length, dhp.batch_size,
            dhp.return_beams) == (21, 1.0, 300, 8, True)
    assert isinstance(dhp.alpha, float)
    assert dhp.max_decode_length(20) == 320
    for text, pattern in [
        ("beam_sise=2", r"Unknown decode hparam 'beam_sise'. Did you mean 'beam_size'"),
        ("beam_size=two", r"'beam_size' expects int.*Received: beam_size=two"),
        ("return_beams=maybe", r"'return_beams' expects bool"),
        ("beam_size=0", r"'beam_size' must be in \[1, inf\)"),
        ("alpha=-1", r"'alpha' must be in \[0, inf\)"),
        ("batch_tokens=-5", r"'batch_tokens' must be in \[0, inf\)"),
        ("long_inputs=drop", r"'long_inputs' must be one of cut, refuse.*long_inputs='drop'"),
        ("xla=maybe", r"'xla' must be one of auto, true, false"),
        ("beam_size", r"--decode_hparams entries are key=value"),
        ("alpha=1,alpha=2", r"set twice in --decode_hparams"),
    ]:
        with pytest.raises(DecodeHParamsError, match=pattern):
            DecodeHParams.from_hparams(HParams(), parse_decode_hparams(text))


@pytest.mark.parametrize("compiled", [False, True])
def test_chunked_top_k_equals_top_k_ties_included(compiled):
    """The beam's top_k over [batch, k * vocab] goes through the best chunks
    (`chunked_top_k`): the same values and indices as ops.top_k, ties to the lower
    index, also where whole chunks tie and where most values are NEG_INF."""
    import importlib
    search_module = importlib.import_module("t2t_revival.decode.beam_search")
    top_k = search_module.chunked_top_k
    if compiled:
        top_k = tf.function(top_k, jit_compile=True, autograph=False, reduce_retracing=False)
    rng = np.random.default_rng(0)
    n = 32 * search_module.TOP_K_CHUNK
    cases = {
        "normal": rng.normal(size=(6, n)),
        # Few distinct values: ties everywhere, within and across chunks.
        "ties": rng.integers(0, 5, size=(6, n)).astype(float),
        # Dead beams: NEG_INF plus a log-prob, many equal after rounding.
        "dead": np.where(rng.random((6, n)) < 0.9, search_module.NEG_INF, 0.0)
                + rng.integers(-3, 0, size=(6, n)),
    }
    # The best values all in one chunk, and chunk maxima that tie.
    crowded = np.full((2, n), -5.0)
    crowded[0, 300:310] = np.arange(10.0)
    crowded[1, ::search_module.TOP_K_CHUNK] = 1.0
    cases["crowded"] = crowded
    # A later chunk with the highest value and a tie with an earlier chunk's best.
    crossed = np.full((1, n), -5.0)
    crossed[0, 5 * search_module.TOP_K_CHUNK + 7] = 10.0
    crossed[0, 5 * search_module.TOP_K_CHUNK + 9] = 3.0
    crossed[0, 2 * search_module.TOP_K_CHUNK + 1] = 3.0
    cases["crossed"] = crossed
    # A length that is not a multiple of the chunk (padded with -inf).
    cases["ragged"] = rng.normal(size=(3, n - 37))
    cases["ragged ties"] = rng.integers(0, 3, size=(3, n - 37)).astype(float)
    for name, x in cases.items():
        x = tf.constant(x, tf.float32)
        for k in (1, 2, 8):
            values, indices = top_k(x, k)
            expected_values, expected_indices = tf.math.top_k(x, k)
            np.testing.assert_array_equal(values.numpy(), expected_values.numpy(), err_msg=name)
            np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy(),
                                          err_msg=name)


@pytest.mark.parametrize("compiled", [False, True])
def test_best_extensions_equal_top_k_over_every_candidate(compiled):
    """Each step's 2k best extensions come from each hypothesis's 2k best
    tokens (`best_extensions`): the same log-probs, parents and tokens as
    top_k over all [batch, k * vocab] candidates (hypothesis log-prob +
    log_softmax), ties to the lower beam, then the lower token; also with
    dead beams (NEG_INF), beams that tie with each other, and a vocabulary
    smaller than 2k."""
    import importlib
    search_module = importlib.import_module("t2t_revival.decode.beam_search")
    best = search_module.best_extensions
    if compiled:
        best = tf.function(best, jit_compile=True, autograph=False, reduce_retracing=False)
    rng = np.random.default_rng(3)
    k = 4
    neg_inf = search_module.NEG_INF
    cases = []
    for vocab in (64 * search_module.TOP_K_CHUNK, 300, 5):
        logits = rng.normal(size=(3 * k, vocab))
        tied = rng.integers(0, 4, size=(3 * k, vocab)).astype(float)
        tied[k:2 * k] = tied[k]          # sentence 1: its beams' logits all equal
        live = rng.normal(-3.0, 1.0, size=(3, k))
        live[1] = -2.0                   # ... and their log-probs too: beams tie
        live[2, 1:] = neg_inf            # sentence 2: only beam 0 alive (a first step)
        cases += [(f"normal V={vocab}", live, logits), (f"ties V={vocab}", live, tied)]
    for name, live, logits in cases:
        live = tf.constant(live, tf.float32)
        logits = tf.constant(logits, tf.float32)
        vocab = logits.shape[-1]
        log_probs, parents, tokens = best(live, logits, 2 * k)
        flat = tf.reshape(live[:, :, None] + tf.reshape(tf.nn.log_softmax(logits), (-1, k, vocab)),
                          (-1, k * vocab))
        expected, indices = tf.math.top_k(flat, 2 * k)
        # Extensions of dead hypotheses (NEG_INF + a log-prob) are never
        # chosen, and tie after rounding: their order is not the contract.
        alive = expected.numpy() > search_module.DEAD
        assert alive.sum() == 2 * k * 2 + (vocab if vocab < 2 * k else 2 * k), name
        np.testing.assert_array_equal(log_probs.numpy() > search_module.DEAD, alive, name)
        np.testing.assert_array_equal(parents.numpy()[alive], (indices.numpy() // vocab)[alive],
                                      err_msg=name)
        np.testing.assert_array_equal(tokens.numpy()[alive], (indices.numpy() % vocab)[alive],
                                      err_msg=name)
        np.testing.assert_allclose(log_probs.numpy()[alive], expected.numpy()[alive], rtol=1e-6,
                                   err_msg=name)


def _history_toy(batch):
    """A step whose logits depend on the last two tokens fed, read back from a
    history buffer in the cache (so a buffer too short loses tokens and
    changes the beams), and a `resize_cache` of that buffer (as
    MultiHeadAttention's: a Python int or a tensor length) that records the
    lengths it is asked for. Returns (step, resize_cache, lengths)."""
    rng = np.random.default_rng(7)
    vocab = 6
    tables = rng.normal(0.0, 1.0, size=(batch, vocab, vocab, vocab))
    tables[..., EOS] -= 4.0   # long outputs: the search goes past positions 16 and 32
    flat = tf.constant(tables.reshape(batch * vocab * vocab, vocab), tf.float32)

    def step(ids, cache, index):
        hist = cache["hist"]                                   # [N, buffer] tokens fed so far
        positions = ops.arange(ops.shape(hist)[1], dtype="int32")
        hist = ops.where(positions[None, :] == index, ids[:, None], hist)
        prev = ops.sum(ops.where(positions[None, :] == index - 1, hist, 0), axis=1)
        table = cache["table"]
        logits = ops.take(flat, (table * vocab + prev) * vocab + ids, axis=0)
        return logits, {"hist": hist, "table": table}

    lengths = []

    def resize_cache(cache, length):
        lengths.append(length)
        hist = cache["hist"][:, :length]
        hist = ops.pad(hist, ((0, 0), (0, length - ops.shape(hist)[1])))
        return {"hist": hist, "table": cache["table"]}

    return step, resize_cache, lengths


@pytest.mark.parametrize("batch", [2, 8])  # one loop; stages of halving batch
def test_short_buffers_lengthened_as_the_search_goes_give_the_same_beams(batch):
    """With `resize_cache` the first loop runs on 16, then 32 positions, then
    max_decode_length: a step whose history buffer were too short would lose
    tokens and score other sequences, so the beams equal those of the search
    on full buffers (eagerly and under XLA)."""
    max_len = 40
    step, resize_cache, lengths = _history_toy(batch)
    cache = {"hist": tf.zeros((batch, max_len), tf.int32),
             "table": tf.range(batch, dtype=tf.int32)}
    for compiled in (False, True):
        def search(cache, resize):
            return beam_search(step, cache, batch, 3, 0.6, max_len, return_beams=True,
                               resize_cache=resize_cache if resize else None)
        if compiled:
            search = tf.function(search, jit_compile=True, autograph=False,
                                 reduce_retracing=False)
        lengths.clear()
        seqs, scores = search(cache, True)
        assert lengths == [16, 32, 40], lengths
        full_seqs, full_scores = search(cache, False)
        np.testing.assert_array_equal(seqs.numpy(), full_seqs.numpy())
        np.testing.assert_array_equal(scores.numpy(), full_scores.numpy())
        assert (seqs.numpy() > 0).sum(axis=-1).max() > 32   # a beam went past 32


@pytest.mark.parametrize("batch", [2, 8])  # one loop; stages of halving batch
def test_short_buffers_with_a_length_known_only_when_the_graph_runs(batch):
    """A SavedModel traces its search for any input length: max_decode_length
    is a tensor, and the buffers go 16, 32, then to it (the last a tensor).
    The beams equal those of the search on full buffers, in a graph and
    under XLA, and a length below 16 (the first buffer cut to it) too."""
    step, resize_cache, lengths = _history_toy(batch)
    for compiled in (False, True):
        @tf.function(input_signature=[tf.TensorSpec([batch, None], tf.int32)],
                     jit_compile=compiled, autograph=False)
        def search(hist):
            # (`table` computed from the input, as a model's cache is: XLA
            # fails to compile a loop after the resize to a tensor length
            # when a leaf the step passes through is a graph constant.)
            table = tf.range(batch, dtype=tf.int32) + 0 * hist[:, 0]
            cache = {"hist": hist, "table": table}
            length = tf.shape(hist)[1]                         # max_decode_length
            short = beam_search(step, cache, batch, 3, 0.6, length, resize_cache=resize_cache)
            full = beam_search(step, cache, batch, 3, 0.6, length)
            return short + full

        lengths.clear()
        search.get_concrete_function()                         # one trace for every length
        assert lengths[:2] == [16, 32] and tf.is_tensor(lengths[2]) and len(lengths) == 3
        for max_len in (40, 12):
            seqs, scores, full_seqs, full_scores = search(tf.zeros((batch, max_len), tf.int32))
            np.testing.assert_array_equal(seqs.numpy(), full_seqs.numpy())
            np.testing.assert_array_equal(scores.numpy(), full_scores.numpy())
            assert seqs.shape[-1] == max_len
            assert (seqs.numpy() > 0).sum(axis=-1).max() > min(32, max_len - 1)
