"""Sampling (temperature, top-k, top-p) as a pure function over a step callback.

A sibling of `beam_search.py` with the same contract: it calls

    step(ids, cache, index) -> (logits, cache)

and knows nothing of the model. Used for back-translation, where sampled
sources give a better synthetic corpus than beam outputs (Edunov et al. 2018,
"Understanding Back-Translation at Scale").

Each step draws the next token from the model's distribution after three
filters, in this order (as fairseq and Hugging Face apply them):

1. temperature: logits / temperature (< 1 sharper, > 1 flatter);
2. top-k: only the `top_k` most likely tokens stay (0 = all);
3. top-p (nucleus, Holtzman et al. 2019): only the smallest set of the most
   likely tokens whose probability mass reaches `top_p` stays (1.0 = all).
   Tokens tied with the least likely kept one stay too.

The draw is seeded: the random numbers come from a
`keras.random.SeedGenerator` (stateless draws from its state, which advances
one step per decoding step), so a generator created with the same seed gives
the same samples for the same inputs. With `top_k=1` only the most likely
token survives, so sampling is greedy search.

Written with `keras.ops` only, like `beam_search`; every loop variable has a
fixed shape. Checked on the TensorFlow backend (eager and inside
`tf.function`), where the decoder runs it. Not under `jax.jit`: advancing a
SeedGenerator's state inside a jitted loop needs Keras's StatelessScope
threading, which is not done here.
"""

from __future__ import annotations

import keras
from keras import ops

from t2t_revival.decode.beam_search import (NEG_INF, StepFn, length_penalty,
                                           token_by_token_search)
from t2t_revival.layers.sentence_cache import map_cache
from t2t_revival.special_ids import EOS_ID


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """The sampling distribution's logits: tempered, then top-k, then top-p.

    Args:
        logits: float [N, V].
        temperature: > 0.
        top_k: keep the k most likely tokens; 0 keeps all.
        top_p: keep the smallest most-likely set whose mass reaches top_p, in
            (0, 1]; 1.0 keeps all.

    Returns:
        float32 [N, V]: the tempered logits, NEG_INF where a token is dropped.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0. Received: temperature={temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]. Received: top_p={top_p}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0. Received: top_k={top_k}")
    logits = ops.cast(logits, "float32")                                   # [N, V]
    if temperature != 1.0:   # x / 1.0 is x: no pass over [N, V] for nothing
        logits = logits / temperature
    vocab_size = logits.shape[-1]
    if 0 < top_k < vocab_size:
        kth = ops.top_k(logits, top_k)[0][:, -1:]                           # [N, 1]
        logits = ops.where(logits < kth, NEG_INF, logits)
    if top_p < 1.0:
        sorted_logits = ops.top_k(logits, vocab_size)[0]                     # [N, V] best first
        probs = ops.softmax(sorted_logits, axis=-1)
        mass_before = ops.cumsum(probs, axis=-1) - probs                     # [N, V]
        # Token i of the sorted list is kept while the mass of the tokens before
        # it is below top_p: the smallest prefix whose mass reaches top_p.
        kept = mass_before < top_p                                           # [N, V]
        threshold = ops.min(ops.where(kept, sorted_logits, -NEG_INF), axis=-1,
                            keepdims=True)                                   # [N, 1]
        logits = ops.where(logits < threshold, NEG_INF, logits)
    return logits


def sample_search(step: StepFn, cache, batch_size, max_decode_length: int,
                  seed_generator: keras.random.SeedGenerator, temperature: float = 1.0,
                  top_k: int = 0, top_p: float = 1.0, samples_per_input: int = 1,
                  alpha: float = 0.0, eos_id: int = EOS_ID, return_beams: bool = True,
                  penalty: str = "gnmt"):
    """Draw `samples_per_input` outputs per input, token by token.

    Args:
        step: `step(ids [B*n] int32, cache, index) -> (logits [B*n, V], cache)`.
        cache: nested dict of tensors, every leaf [B, ...]; tiled here to
            [B*n, ...] (n = samples_per_input), each copy sampled independently,
            except the per-sentence part (`t2t_revival.layers.sentence_cache`).
        batch_size: B (a Python int, or a scalar tensor).
        max_decode_length: the number of positions decoded at most.
        seed_generator: where the random numbers come from (advanced here).
        temperature, top_k, top_p: the filters (see `filter_logits`).
        samples_per_input: n, samples per input (the n-best list of sampling).
        alpha: length penalty exponent of the scores (as beam search's).
        eos_id: the end-of-sentence id.
        return_beams: True returns every sample; False only the best-scoring.
        penalty: the length penalty's kind (`beam_search.length_penalty`).

    Returns:
        (sequences, scores): with return_beams, sequences int32
        [B, n, max_decode_length] (tokens up to and including EOS, then PAD;
        cut at max_decode_length without EOS) and scores float32 [B, n], best
        first; without, [B, max_decode_length] and [B] of the best sample.
        A score is the MODEL's log-probability of the sequence (temperature
        1, no filter: what beam search and `score_targets` report), divided
        by length_penalty(length, alpha), length counting EOS.
    """
    if samples_per_input < 1:
        raise ValueError(f"samples_per_input must be positive. Received: samples_per_input={samples_per_input}")
    n = samples_per_input
    length = max_decode_length
    rows = batch_size * n
    cache = map_cache(cache, lambda x: ops.repeat(x, n, axis=0), lambda x: x)  # [B*n, ...]

    def draw(logits, log_probs):
        sampling_logits = filter_logits(logits, temperature, top_k, top_p)
        return keras.random.categorical(sampling_logits, 1, dtype="int32",
                                        seed=seed_generator)[:, 0]           # [B*n]

    seqs, log_probs = token_by_token_search(step, cache, rows, length, draw, eos_id)
    ended = ops.any(ops.equal(seqs, eos_id), axis=1)                          # [B*n]
    lengths = ops.where(ended, ops.argmax(ops.equal(seqs, eos_id), axis=1) + 1, length)
    scores = ops.reshape(log_probs / length_penalty(lengths, alpha, penalty), (-1, n))  # [B, n]
    seqs = ops.reshape(seqs, (-1, n, length))                                 # [B, n, L]
    scores, order = ops.top_k(scores, n)                                      # best first
    order = ops.cast(order, "int32")
    seqs = ops.take_along_axis(seqs, order[:, :, None], axis=1)
    if return_beams:
        return seqs, scores
    return seqs[:, 0], scores[:, 0]
