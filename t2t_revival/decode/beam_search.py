"""Beam search and greedy search as pure functions over a step callback.

Both know nothing of the model. They call

    step(ids, cache, index) -> (logits, cache)
        ids:    int32 [batch * beam]   the token at position `index`
                                       (0 = PAD, the start symbol, at index 0)
        cache:  nested dict of tensors, every leaf [batch * beam, ...],
                except those under a `PER_SENTENCE` key: [batch, ...]
        index:  int32 scalar           the position being fed
        logits: float [batch * beam, vocab]  distribution for position `index`

(greedy search calls it with beam = 1). Rows are sentence-major: rows
b * beam ... b * beam + beam - 1 are sentence b's. A cache leaf the step
returns as it got it (the same tensor object) is treated as constant and
never reordered; the per-sentence part (`t2t_revival.layers.sentence_cache`) is
never tiled either.
Written with `keras.ops` only, so it runs on the TensorFlow backend eagerly,
inside `tf.function` (and so in a SavedModel) and compiled whole by XLA
(`jit_compile=True`, when the batch, the input length and
`max_decode_length` are static), and on the JAX backend under `jit`. Every
loop variable has a fixed shape: sequences are preallocated to
`max_decode_length` and written with a one-hot position mask, never resized.
(With beam search's `resize_cache`, the first positions run in loops of
their own on shorter cache buffers, each loop with fixed shapes.)

The search follows tensor2tensor's `beam_search.py` and flax
`examples/wmt/decode.py`: `beam` live hypotheses (never ending in EOS) and
`beam` finished ones (ended by EOS, scored log_prob / length_penalty) are
kept apart; each step proposes the top 2 * beam extensions of the live set,
so that even if every one of the best `beam` ends in EOS, `beam` live ones
remain.
"""

from __future__ import annotations

from typing import Any, Callable

import keras
from keras import ops

from t2t_revival.decode.lexical_constraints import (advance, all_met, allocate_banks,
                                                    phrase_tables)
from t2t_revival.settings.decode_choices import EARLY_STOP_RULES, LENGTH_PENALTIES
from t2t_revival.layers.sentence_cache import map_cache, map_caches
from t2t_revival.special_ids import EOS_ID, PAD_ID

# A finite "minus infinity": log-probs of dead hypotheses. Finite so that
# arithmetic on it (adding log-probs, dividing by a penalty) never makes NaN.
NEG_INF = -1.0e7
# A candidate whose log-prob is below this descends from a dead hypothesis.
DEAD = NEG_INF / 2

StepFn = Callable[[Any, Any, Any], tuple[Any, Any]]

OnStep = Callable[[dict], None]
"""`beam_search`'s observer: `on_step(state)` before each step. The state's
fields include (R: the rows of the stage the step runs, B at first, fewer
once stopped batch elements are dropped; see `beam_search`):

    index:      int32 scalar   the position the step feeds
    searching:  bool [R]       the batch elements whose result may still change
"""

OnChoice = Callable[[dict], None]
"""`beam_search`'s observer of its choices: `on_choice(choice)` after each
step's choice, with (R rows as in `OnStep`; N candidates, k = beam size):

    index:           int32 scalar      the position the step chose a token for
    log_probs:       float32 [R, N]    each candidate's log-prob (<= DEAD: none)
    parents:         int32 [R, N]      the live slot (0..k-1) it extends
    tokens:          int32 [R, N]      its token
    live_pick:       int32 [R, k]      the candidates that form the new live set
    live_log_probs:  float32 [R, k]    their log-probs (<= DEAD: an empty slot)
    finished_pick:   int32 [R, k]      the new finished set: < k the old set's
                                       slot, >= k candidate (pick - k)
    finished_scores: float32 [R, k]    its scores (<= DEAD: an empty slot)

The candidates are the 2k best extensions (with constraints, also each
hypothesis's best token and its constraint tokens, repeats marked dead).
Greedy search (beam 1) reports its chosen token as the one candidate; a row
that has ended reports a dead one. Called where the step is traced, as
`on_step`: eagerly, once per step with the values (what
`t2t_revival.insights` draws).
"""


def length_penalty(length, alpha: float, kind: str = "gnmt"):
    """GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14),
    or with `kind="power"` length ** alpha (Hugging Face transformers' and
    CTranslate2's: their `length_penalty` is this alpha).

    Finished hypotheses score log_prob / length_penalty(length, alpha), where
    `length` counts the generated tokens including EOS (tensor2tensor's
    convention; transformers' too, which does not count the decoder's start
    token). alpha = 0 turns the penalty off. Both grow with the length for
    alpha >= 0 (the early stop's bound relies on it). `LENGTH_PENALTIES` names
    the kinds.
    """
    length = ops.cast(length, "float32")
    if kind == "power":
        return ops.power(length, alpha)
    return ops.power((5.0 + length) / 6.0, alpha)


def _tile_beams(x, beam_size: int):
    """[batch, ...] -> [batch * beam, ...], each row repeated `beam_size` times."""
    return ops.repeat(x, beam_size, axis=0)


def _gather_beams(x, indices):
    """x [batch, k, ...], indices int32 [batch, n] -> [batch, n, ...]."""
    indices = ops.reshape(indices, ops.shape(indices) + (1,) * (len(x.shape) - 2))
    return ops.take_along_axis(x, indices, axis=1)


def _write_position(seqs, tokens, index, max_decode_length: int):
    """seqs [batch, k, max_len] with `tokens` [batch, k] written at `index`."""
    at_index = ops.equal(ops.arange(max_decode_length, dtype="int32"), index)  # [L]
    return ops.where(at_index[None, None, :], tokens[:, :, None], seqs)


# `chunked_top_k` splits each row into chunks of this many values.
TOP_K_CHUNK = 128


def chunked_top_k(x, k: int):
    """`ops.top_k(x, k)` of x [rows, n]: the same values and indices, ties to
    the lower index as there, found in the k chunks of `TOP_K_CHUNK` whose
    maxima are highest (by maximum, then lower chunk), which hold all k best.

    A row whose length is not a multiple of 128 is padded with -inf (rows
    of `x` hold finite values: log-probs, NEG_INF at the lowest).

    XLA's CPU TopK goes through every element one after the other: over the
    beam's [batch, k * vocab] candidates that was 1.9 ms of a 22 ms batch-32
    step (beam search now runs it over each hypothesis's [vocab] logits,
    `best_extensions`). Chunk maxima are a vectorized reduction, and TopK
    then runs over [rows, n / 128] and [rows, k * 128].

    Why the k best lie in those chunks: an element e among the k best lies in
    a chunk c whose maximum is >= e. Every chunk ranked above c has a maximum
    above e, or equal to e and lying before c (so before e): either way an
    element ranked above e. If c were not among the k chunks kept, k elements
    would rank above e.
    """
    n = x.shape[-1]
    if n is None or n // TOP_K_CHUNK < 4 * k:
        return ops.top_k(x, k)
    if n % TOP_K_CHUNK:  # -inf after the last element: never among the k best
        x = ops.pad(x, ((0, 0), (0, TOP_K_CHUNK - n % TOP_K_CHUNK)),
                    constant_values=-float("inf"))
    chunks = x.shape[-1] // TOP_K_CHUNK
    blocks = ops.reshape(x, (-1, chunks, TOP_K_CHUNK))                        # [R, C, 128]
    _, best_chunks = ops.top_k(ops.max(blocks, axis=-1), k)                   # [R, k]
    # In index order, so that top_k over the candidates breaks ties as over x.
    best_chunks = ops.sort(ops.cast(best_chunks, "int32"), axis=-1)
    candidates = ops.take_along_axis(blocks, best_chunks[:, :, None], axis=1)  # [R, k, 128]
    values, where = ops.top_k(ops.reshape(candidates, (-1, k * TOP_K_CHUNK)), k)
    where = ops.cast(where, "int32")
    chunk = ops.take_along_axis(best_chunks, where // TOP_K_CHUNK, axis=1)
    return values, chunk * TOP_K_CHUNK + where % TOP_K_CHUNK


def best_extensions(live_log_probs, logits, n: int, normalized: bool = False):
    """The n best one-token extensions of each sentence's live hypotheses.

    Args:
        live_log_probs: float32 [B, k], the hypotheses' log-probs.
        logits: [B * k, V], the step's logits for them (sentence-major rows).
        n: how many (2k in beam search), at most k * V.
        normalized: `logits` are log-probs already (a guided search's, some
            set to NEG_INF): taken as they are, not log-softmaxed.
    Returns:
        (log_probs float32 [B, n], parents int32 [B, n], tokens int32 [B, n]):
        what `ops.top_k` over the [B, k * V] candidates (a hypothesis's
        log-prob + the log-softmax of its logits) gives, ties to the lower
        beam, then the lower token; `parents` is the beam (in 0..k-1).
        (Two tokens of one hypothesis whose log-probs differ by less than
        the sum's rounding tie only in the sum: here the higher log-prob
        comes first, there the lower token. So do a dead hypothesis's
        extensions, NEG_INF + a log-prob, which are never chosen.)

    Without writing those candidates: the n best lie among each hypothesis's
    n best tokens (a candidate with n others above it in its own row has them
    above it overall), so each row's n best logits are found first (chunked,
    `chunked_top_k`), their log-softmax computed by its formula (x - max - log(sum(
    exp(x - max))), as `ops.log_softmax` does), and top_k taken over the
    k * n, in row order: it breaks ties as top_k over the k * V would.
    """
    k = live_log_probs.shape[-1]
    logits = ops.cast(logits, "float32")
    per_row = min(n, logits.shape[-1])
    top_logits, row_tokens = chunked_top_k(logits, per_row)                    # [B*k, m]
    if normalized:
        row_log_probs = top_logits
    else:
        row_log_probs = _row_log_softmax(logits, top_logits)
    candidates = live_log_probs[:, :, None] + ops.reshape(row_log_probs, (-1, k, per_row))
    log_probs, picks = ops.top_k(ops.reshape(candidates, (-1, k * per_row)), n)  # [B, n]
    picks = ops.cast(picks, "int32")
    tokens = ops.take_along_axis(
        ops.reshape(ops.cast(row_tokens, "int32"), (-1, k * per_row)), picks, axis=1)
    return log_probs, picks // per_row, tokens


def _row_log_softmax(logits, top_logits):
    """The log-softmax over each row of logits [R, V] of its top_logits [R, m]."""
    with keras.name_scope("log_softmax"):  # a part of benchmarks/decode_profile.py
        row_max = ops.max(logits, axis=-1, keepdims=True)                     # [B*k, 1]
        log_norm = ops.log(ops.sum(ops.exp(logits - row_max), axis=-1, keepdims=True))
        return (top_logits - row_max) - log_norm                              # [B*k, m]


def beam_search(step: StepFn, cache, batch_size, beam_size: int, alpha: float,
                max_decode_length: int, eos_id: int = EOS_ID,
                return_beams: bool = True, early_stop: str = "exact",
                resize_cache: Callable[[Any, int], Any] | None = None,
                on_step: OnStep | None = None, prefix=None, constraints=None,
                on_choice: OnChoice | None = None, penalty: str = "gnmt"):
    """Beam search with the GNMT length penalty and early stopping.

    Args:
        step: `step(ids [B*beam] int32, cache, index) -> (logits [B*beam, V], cache)`.
        cache: nested dict of tensors, every leaf [B, ...] (batch first, static
            shape). They are tiled to [B*beam, ...] here and reordered by
            parent beam after every step, except the leaves the step returns
            unchanged (the very tensor it was given): those stay as tiled.
            Leaves under a `PER_SENTENCE` key (`t2t_revival.layers.sentence_cache`)
            stay [B, ...]: the step gets them so, for all of a sentence's
            beams.
        batch_size: B (a Python int, or a scalar tensor for a dynamic batch).
        beam_size: beam width (Python int); 1 runs `greedy_search` (as
            tensor2tensor does) and scores its result with the penalty.
        alpha: length penalty exponent, >= 0 (0.6 in the paper).
        penalty: the length penalty's kind, "gnmt" or "power" (`length_penalty`).
        max_decode_length: the number of positions decoded at most (the
            caller passes input length + extra_length). Hypotheses that reach
            it without EOS are cut there.
        eos_id: the end-of-sentence id (1).
        return_beams: True returns every beam; False only the best.
        early_stop: "exact" or "best_finished" (below).
        resize_cache: optional `resize_cache(cache, n) -> cache` whose
            position buffers (e.g. self-attention keys and values) have `n`
            positions, the first ones of `cache`'s (`Transformer.resize_cache`).
            With it the search starts on buffers of `_BUFFER_LENGTHS[0]`
            positions and lengthens them when the step index reaches their
            end, up to max_decode_length (below; a max_decode_length tensor,
            as in a SavedModel, is passed on as one).
        on_step: optional `on_step(state)`, called before each step with the
            search's state (`OnStep`), to watch the search (e.g. count its
            steps: benchmarks/decode_steps.py). Called where the step is
            traced: eagerly once per step, under tf.function or XLA once per
            trace of the loop body; not with beam_size 1 (greedy search).
            None adds nothing to the search.
        on_choice: optional `on_choice(choice)` after each step's choice
            (`OnChoice`): the candidates and which of them the live and
            finished sets took; called as `on_step` is (with beam_size 1 too).
        prefix: None, or int32 [B, P]: each sentence's forced first tokens,
            PAD (0) after them (`lexical_constraints.pack_prefixes`; P <
            max_decode_length). Every hypothesis takes them; their log-probs
            count in its score as the model gives them.
        constraints: None, or (ids int32 [B, C], starts bool [B, C]): each
            sentence's phrases that every finished hypothesis must contain
            (`lexical_constraints.pack_constraints`; PAD rows: none). A
            hypothesis may end only once all its sentence's phrases have
            appeared, and the beam is shared among hypotheses by how many
            constraint tokens they have met (`_guided_search`'s docstring).
        (With either, the search is `_guided_search`; without, neither
        changes a thing of it.)

    Returns:
        (sequences, scores): with return_beams, sequences int32
        [B, beam, max_decode_length] best first, without the start symbol,
        EOS included and PAD (0) after it, and scores float32 [B, beam]
        = log_prob / length_penalty(length). Without return_beams, sequences
        [B, max_decode_length] and scores [B] of the best beam.

    If fewer than `beam` hypotheses ended in EOS within max_decode_length,
    the remaining slots hold the live hypotheses cut at max_decode_length,
    after all finished ones, scored with the penalty of max_decode_length. So
    a batch element where nothing finished returns its cut live set
    (tensor2tensor and flax do the same fallback, leaving those scores
    unpenalized). A slot with no hypothesis at all (tiny vocabularies only)
    has score NEG_INF.

    Early stopping (t2t / flax): a live hypothesis's log-prob can only fall,
    and for alpha >= 0 its penalty is largest at max_decode_length, so no live
    hypothesis can ever score more than best_live_log_prob /
    length_penalty(max_decode_length). The loop stops once, for every batch
    element, that bound is below the worst of the `beam` finished scores
    (with return_beams: the whole n-best list is then final) or below the
    best finished score (without: the top hypothesis is then final), or when
    no live hypothesis is left. `early_stop="best_finished"` evaluates that
    penalty at the live hypotheses' current length instead of
    max_decode_length: a batch element stops once its best (worst, with
    return_beams) finished score beats every live hypothesis scored as if it
    ended now. That is not exact (a live hypothesis whose next tokens are
    nearly certain can still overtake through the growing penalty), but it
    stops where the answer is, in practice, already found (see
    `EARLY_STOP_RULES`). With alpha = 0 the two rules are the same.

    A batch element that has stopped no longer needs computing: when the batch
    size is a Python int, the loop runs in stages of halving size (B rows,
    then B/2, B/4, ..., down to 4): a stage ends once at most half its batch elements
    are still searching, and those are gathered (state and cache) into the
    next, smaller stage. So a batch costs about what its elements need, not
    B times its slowest one; each element's search, hence every result, is
    the same as in one loop over the whole batch.

    With `resize_cache`, that first loop (all B rows, from position 0) runs
    on buffers of 16 positions while the index is below 16, then 32, and so
    on (`_BUFFER_LENGTHS`), and on max_decode_length from there: a step reads
    and a reorder copies the positions it may use, not all of them (at batch
    32, steps are most of the time, and most of them come before position
    32). The later, smaller stages run on the full buffers. Masked positions
    add nothing to the attention, so the results are the same.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be positive. Received: beam_size={beam_size}")
    if alpha < 0:
        raise ValueError("alpha must be >= 0 (the early-stop bound assumes the "
                         f"penalty grows with length). Received: alpha={alpha}")
    if penalty not in LENGTH_PENALTIES:
        raise ValueError(f"penalty must be one of {', '.join(LENGTH_PENALTIES)}. "
                         f"Received: penalty={penalty!r}")
    if early_stop not in EARLY_STOP_RULES:
        raise ValueError(f"early_stop must be one of {', '.join(EARLY_STOP_RULES)}. "
                         f"Received: early_stop={early_stop!r}")
    guided = prefix is not None or constraints is not None
    if beam_size == 1 and not guided:
        # tensor2tensor decodes beam 1 greedily. (The two-set search below
        # with one beam would differ: it keeps the best EOS hypothesis met
        # along the way while the live beam goes on.)
        seqs, log_probs = greedy_search(step, cache, batch_size, max_decode_length, eos_id,
                                        on_choice=on_choice)
        ended = ops.any(ops.equal(seqs, eos_id), axis=1)
        lengths = ops.where(ended, ops.argmax(ops.equal(seqs, eos_id), axis=1) + 1,
                            max_decode_length)
        scores = log_probs / length_penalty(lengths, alpha, penalty)
        if return_beams:
            return seqs[:, None, :], scores[:, None]
        return seqs, scores
    k = beam_size
    length = max_decode_length
    max_penalty = length_penalty(length, alpha, penalty)

    if resize_cache is None:
        buffer_lengths = []
    elif isinstance(length, int):
        buffer_lengths = [n for n in _BUFFER_LENGTHS if n < length]
    else:  # known when the graph runs: a loop past it runs no step
        buffer_lengths = list(_BUFFER_LENGTHS)
    if buffer_lengths:
        cache = resize_cache(cache, buffer_lengths[0])
    cache = map_cache(cache, lambda x: _tile_beams(x, k), lambda x: x)
    # Only beam 0 is alive at the start (all beams are the same empty prefix).
    first = ops.concatenate([ops.zeros((1,)), ops.full((k - 1,), NEG_INF)], axis=0)
    state = {
        "index": ops.convert_to_tensor(0, dtype="int32"),
        "live_ids": ops.zeros((batch_size, k), dtype="int32"),           # [B, k] last token
        "live_log_probs": ops.tile(first[None, :], (batch_size, 1)),     # [B, k] best first
        "live_seqs": ops.zeros((batch_size, k, length), dtype="int32"),  # [B, k, L]
        "finished_scores": ops.full((batch_size, k), NEG_INF),            # [B, k] best first
        "finished_seqs": ops.zeros((batch_size, k, length), dtype="int32"),
        "searching": ops.ones((batch_size,), dtype="bool"),               # [B]
        "cache": cache,                                                  # leaves [B*k, ...]
    }

    def can_change(state):
        """bool [B]: the batch elements whose result a later step may change."""
        best_live = state["live_log_probs"][:, 0]                               # [B]
        if early_stop == "exact":
            limit_penalty = max_penalty
        else:  # best_finished: as if EOS came next, certainly
            limit_penalty = length_penalty(state["index"] + 1, alpha, penalty)
        # Highest score any live hypothesis could reach (see the docstring).
        bound = ops.where(best_live > DEAD, best_live / limit_penalty, -float("inf"))
        if return_beams:
            finished = ops.min(state["finished_scores"], axis=1)              # [B]
        else:
            finished = state["finished_scores"][:, 0]                         # [B]
        return ops.logical_not(ops.greater(finished, bound))

    def body(state):
        if on_step is not None:
            on_step(state)
        index = state["index"]
        logits, new_cache = step(ops.reshape(state["live_ids"], (-1,)), state["cache"], index)
        # The 2k best extensions: enough that k of them do not end in EOS.
        top_log_probs, parents, tokens = best_extensions(
            state["live_log_probs"], logits, 2 * k)                           # [B, 2k] each
        top_seqs = _gather_beams(state["live_seqs"], parents)                 # [B, 2k, L]
        top_seqs = _write_position(top_seqs, tokens, index, length)
        # New live set: the k best extensions that do not end in EOS.
        is_eos, alive, live_log_probs, live_pick = _best_live(top_log_probs, tokens, eos_id, k)
        live_seqs = _gather_beams(top_seqs, live_pick)                        # [B, k, L]
        live_ids = ops.take_along_axis(tokens, live_pick, axis=1)             # [B, k]
        live_parents = ops.take_along_axis(parents, live_pick, axis=1)        # [B, k]

        new_cache = _reorder_cache(new_cache, state["cache"], live_parents, k)

        # New finished set: the k best of the old finished and the new EOS ones.
        new_scores = top_log_probs / length_penalty(index + 1, alpha, penalty)
        new_scores = ops.where(ops.logical_and(is_eos, alive), new_scores, NEG_INF)
        finished_scores, finished_seqs, finished_pick = _merge_finished(
            state, new_scores, top_seqs, k)
        if on_choice is not None:
            on_choice({"index": index, "log_probs": top_log_probs, "parents": parents,
                       "tokens": tokens, "live_pick": live_pick,
                       "live_log_probs": live_log_probs, "finished_pick": finished_pick,
                       "finished_scores": finished_scores})

        new_state = {
            "index": index + 1,
            "live_ids": live_ids,
            "live_log_probs": live_log_probs,
            "live_seqs": live_seqs,
            "finished_scores": finished_scores,
            "finished_seqs": finished_seqs,
            "cache": new_cache,
        }
        return settle(state, new_state)

    def settle(state, new_state):
        """new_state with `searching`; the stopped elements' results kept."""
        # A batch element that had stopped keeps its result (it may share a
        # loop with others that search on): so each element's result is the
        # same whatever batch it is decoded in. Under the exact rule no later
        # step can change what is returned, nor make it searching again (the
        # best live log-prob only falls, the finished scores only rise), so
        # those selects are left out (they cost at batch 1).
        searching = state["searching"]                                        # [B]
        if early_stop != "exact":
            for name in result_fields:
                value = new_state[name]
                keep = ops.reshape(searching, (-1,) + (1,) * (len(value.shape) - 1))
                new_state[name] = ops.where(keep, value, state[name])
            searching = ops.logical_and(searching, can_change(new_state))
        else:
            searching = can_change(new_state)
        new_state["searching"] = searching
        return new_state

    result_fields = _RESULT_FIELDS
    if guided:
        state, body = _guided_search(state, step, k, length, alpha, eos_id, prefix,
                                     constraints, settle, on_step, on_choice, penalty)
        if constraints is not None:
            result_fields += ("live_active", "live_met")
    grow = (buffer_lengths, resize_cache) if buffer_lengths else None
    state = _staged_loop(state, body, batch_size, k, length, grow, result_fields)
    if constraints is not None:   # the cut live ones that met every constraint first
        state = _met_first(state, constraints)

    # Slots of the finished set that no EOS hypothesis filled (the loop ran to
    # max_decode_length) take the live hypotheses cut there, best first, after
    # every finished one. If nothing finished, all slots are the cut live set
    # (tensor2tensor's and flax's fallback).
    filled = state["finished_scores"] > DEAD                                  # [B, k]
    num_filled = ops.sum(ops.cast(filled, "int32"), axis=1, keepdims=True)     # [B, 1]
    live_pick = ops.clip(ops.arange(k, dtype="int32")[None, :] - num_filled, 0, k - 1)
    cut_seqs = _gather_beams(state["live_seqs"], live_pick)                   # [B, k, L]
    cut_log_probs = ops.take_along_axis(state["live_log_probs"], live_pick, axis=1)
    cut_scores = ops.where(cut_log_probs > DEAD, cut_log_probs / max_penalty, NEG_INF)
    sequences = ops.where(filled[:, :, None], state["finished_seqs"], cut_seqs)
    scores = ops.where(filled, state["finished_scores"], cut_scores)
    if return_beams:
        return sequences, scores
    return sequences[:, 0], scores[:, 0]


def _guided_search(state, step: StepFn, k: int, length: int, alpha: float, eos_id: int,
                   prefix, constraints, settle, on_step, on_choice, penalty):
    """(state, body) of a beam search with a prefix and/or constraints.

    The step's log-probs are computed in full (log-softmax over [B*k, V]);
    a token the search may not take gets NEG_INF there: while index < a
    sentence's prefix length, every token but the prefix's; with
    constraints, EOS after a hypothesis that has not met them all. The
    scores of the tokens taken are the model's.

    With constraints, the candidates are (Post & Vilar 2018): the 2k best
    extensions, each hypothesis's best token, and each hypothesis extended by
    every constraint token (k * C), repeats dropped; the k live ones are
    chosen by `allocate_banks` (banks: constraint tokens met, `advance`);
    the finished set takes their EOS ones. Without constraints (a prefix
    only), the live and finished sets are chosen from the 2k best as in the
    plain search.
    """
    if prefix is not None:
        state["prefix"] = ops.convert_to_tensor(prefix, dtype="int32")          # [B, P]
        prefix_width = ops.shape(state["prefix"])[1]   # a tensor where not static
    if constraints is not None:
        ids, starts = constraints
        state["constraint_ids"] = ops.convert_to_tensor(ids, dtype="int32")     # [B, C]
        state["constraint_starts"] = ops.convert_to_tensor(starts, dtype="bool")
        width = state["constraint_ids"].shape[1]
        shape = (ops.shape(state["live_ids"])[0], k, width)
        state["live_active"] = ops.zeros(shape, dtype="bool")                     # [B, k, C]
        state["live_met"] = ops.zeros(shape, dtype="bool")                        # [B, k, C]

    def body(state):
        if on_step is not None:
            on_step(state)
        index = state["index"]
        logits, new_cache = step(ops.reshape(state["live_ids"], (-1,)), state["cache"], index)
        vocab = logits.shape[-1]
        log_probs = ops.reshape(ops.log_softmax(ops.cast(logits, "float32"), axis=-1),
                                (-1, k, vocab))                                  # [B, k, V]
        token_ids = ops.arange(vocab, dtype="int32")
        if prefix is not None:
            forced = ops.take(state["prefix"], ops.minimum(index, prefix_width - 1), axis=1)
            forcing = ops.logical_and(ops.less(index, prefix_width),
                                      ops.not_equal(forced, PAD_ID))              # [B]
            allowed = ops.logical_or(ops.logical_not(forcing)[:, None],
                                     ops.equal(token_ids[None, :], forced[:, None]))
            log_probs = ops.where(allowed[:, None, :], log_probs, NEG_INF)
        live_log_probs = state["live_log_probs"]                                 # [B, k]
        if constraints is not None:
            tables = phrase_tables(state["constraint_ids"], state["constraint_starts"])
            unmet = ops.logical_not(all_met(tables, state["live_met"]))          # [B, k]
            log_probs = ops.where(ops.logical_and(unmet[:, :, None],
                                                  ops.equal(token_ids, eos_id)[None, None, :]),
                                  NEG_INF, log_probs)
        top_log_probs, parents, tokens = best_extensions(
            live_log_probs, ops.reshape(log_probs, (-1, vocab)), 2 * k, normalized=True)
        new_state = {}
        if constraints is None:
            is_eos, alive, new_log_probs, live_pick = _best_live(top_log_probs, tokens,
                                                                 eos_id, k)
            eos_scores = ops.where(ops.logical_and(is_eos, alive), top_log_probs, NEG_INF)
            eos_parents = parents                                              # [B, 2k]
            eos_pick, log_probs_n = None, top_log_probs
        else:
            width = tables["ids"].shape[1]
            beams = ops.arange(k, dtype="int32")
            row_best = ops.cast(ops.argmax(log_probs, axis=-1), "int32")        # [B, k]
            has_constraints = ops.any(tables["valid"], axis=1)[:, None]          # [B, 1]
            row_log_probs = ops.where(has_constraints,
                                      live_log_probs + ops.max(log_probs, axis=-1), NEG_INF)
            wanted = ops.repeat(tables["ids"][:, None, :], k, axis=1)           # [B, k, C]
            wanted_log_probs = ops.where(
                tables["valid"][:, None, :],
                live_log_probs[:, :, None] + ops.take_along_axis(log_probs, wanted, axis=2),
                NEG_INF)
            log_probs_n = ops.concatenate(
                [top_log_probs, row_log_probs, ops.reshape(wanted_log_probs, (-1, k * width))],
                axis=1)                                                          # [B, N]
            parents = ops.concatenate(
                [parents, ops.zeros_like(row_best) + beams[None, :],
                 ops.reshape(ops.zeros_like(wanted) + beams[None, :, None], (-1, k * width))],
                axis=1)
            tokens = ops.concatenate([tokens, row_best, ops.reshape(wanted, (-1, k * width))],
                                     axis=1)
            n = tokens.shape[1]
            keys = parents * vocab + tokens
            earlier = ops.less(ops.arange(n)[None, :], ops.arange(n)[:, None])  # [i, j]: j < i
            repeated = ops.any(ops.logical_and(ops.equal(keys[:, :, None], keys[:, None, :]),
                                               earlier[None]), axis=2)           # [B, N]
            active, met, banks, _ = advance(
                tables, _gather_beams(state["live_active"], parents),
                _gather_beams(state["live_met"], parents), tokens)               # [B, N, C]
            is_eos = ops.equal(tokens, eos_id)
            fresh = ops.logical_and(log_probs_n > DEAD, ops.logical_not(repeated))
            usable = ops.logical_and(fresh, ops.logical_not(is_eos))
            live_pick = allocate_banks(log_probs_n, banks, usable, k)           # [B, k]
            new_log_probs = ops.where(ops.take_along_axis(usable, live_pick, axis=1),
                                      ops.take_along_axis(log_probs_n, live_pick, axis=1),
                                      NEG_INF)
            new_state["live_active"] = _gather_beams(active, live_pick)
            new_state["live_met"] = _gather_beams(met, live_pick)
            eos_scores, eos_pick = ops.top_k(
                ops.where(ops.logical_and(fresh, is_eos), log_probs_n, NEG_INF), k)
            eos_pick = ops.cast(eos_pick, "int32")
            eos_parents = ops.take_along_axis(parents, ops.cast(eos_pick, "int32"), axis=1)
        live_ids = ops.take_along_axis(tokens, live_pick, axis=1)                # [B, k]
        live_parents = ops.take_along_axis(parents, live_pick, axis=1)           # [B, k]
        live_seqs = _write_position(_gather_beams(state["live_seqs"], live_parents),
                                    live_ids, index, length)                     # [B, k, L]
        eos_seqs = _write_position(_gather_beams(state["live_seqs"], eos_parents),
                                   ops.full_like(eos_parents, eos_id), index, length)
        new_scores = ops.where(eos_scores > DEAD,
                               eos_scores / length_penalty(index + 1, alpha, penalty), NEG_INF)
        finished_scores, finished_seqs, finished_pick = _merge_finished(
            state, new_scores, eos_seqs, k)
        if on_choice is not None:
            if eos_pick is not None:   # a new one's slot among the EOS picks -> its candidate
                log_probs_n = ops.where(fresh, log_probs_n, NEG_INF)   # repeats: dead
                finished_pick = ops.where(
                    finished_pick >= k, ops.take_along_axis(
                        eos_pick, ops.maximum(finished_pick - k, 0), axis=1) + k,
                    finished_pick)
            on_choice({"index": index, "log_probs": log_probs_n, "parents": parents,
                       "tokens": tokens, "live_pick": live_pick,
                       "live_log_probs": new_log_probs, "finished_pick": finished_pick,
                       "finished_scores": finished_scores})
        new_state.update({
            "index": index + 1,
            "live_ids": live_ids,
            "live_log_probs": new_log_probs,
            "live_seqs": live_seqs,
            "finished_scores": finished_scores,
            "finished_seqs": finished_seqs,
            "cache": _reorder_cache(new_cache, state["cache"], live_parents, k),
        })
        for name in ("prefix", "constraint_ids", "constraint_starts"):
            if name in state:
                new_state[name] = state[name]
        return settle(state, new_state)

    return state, body


def _met_first(state, constraints):
    """state with its live hypotheses reordered: those that met every
    constraint first, each group best log-prob first (the fallback of a
    search cut at max_decode_length takes them in that order)."""
    ids, starts = constraints
    tables = phrase_tables(ops.convert_to_tensor(ids, dtype="int32"),
                           ops.convert_to_tensor(starts, dtype="bool"))
    met = all_met(tables, state["live_met"])                                    # [B, k]
    log_probs = state["live_log_probs"]
    _, order = ops.top_k(ops.where(met, log_probs, log_probs + NEG_INF / 10), log_probs.shape[1])
    order = ops.cast(order, "int32")
    return {**state, "live_log_probs": ops.take_along_axis(log_probs, order, axis=1),
            "live_seqs": _gather_beams(state["live_seqs"], order)}


# The fields of the beam search state that hold its result (the rest, the
# last tokens and the cache, only feed the next step).
_RESULT_FIELDS = ("live_log_probs", "live_seqs", "finished_scores", "finished_seqs")

# The staged loop's smallest stage, in batch elements. Below it a step costs
# about the same whatever the rows (per-op overhead, not arithmetic), while
# every stage is one more copy of the step in the compiled program (compile
# time): 32 runs as 32, 16, 8, 4.
_SMALLEST_STAGE = 4


# The self-attention buffer lengths that the first loop of a beam search with
# `resize_cache` runs on, before max_decode_length (those below it).
_BUFFER_LENGTHS = (16, 32)


def _best_live(top_log_probs, tokens, eos_id: int, k: int):
    """The k best of the candidates (log-probs and tokens [B, n]) that do not
    end in EOS: (is_eos bool [B, n], alive bool [B, n], their log-probs
    float32 [B, k] best first, their picks int32 [B, k])."""
    is_eos = ops.equal(tokens, eos_id)
    alive = top_log_probs > DEAD
    live_candidates = ops.where(ops.logical_or(is_eos, ops.logical_not(alive)),
                                NEG_INF, top_log_probs)
    live_log_probs, live_pick = ops.top_k(live_candidates, k)                 # [B, k]
    return is_eos, alive, live_log_probs, ops.cast(live_pick, "int32")


def _reorder_cache(new_cache, old_cache, live_parents, k: int):
    """The cache of the new live beams: new beam j continues old beam
    live_parents[:, j] ([B, k]). A leaf the step handed back unchanged (the
    same tensor as in `old_cache`) is the same in every beam of a sentence
    (it was tiled from [B, ...] and never written), so it is not gathered;
    nor is the per-sentence part."""
    offsets = ops.arange(ops.shape(live_parents)[0], dtype="int32")[:, None] * k
    flat_parents = ops.reshape(live_parents + offsets, (-1,))                 # [B*k]
    return map_caches(
        new_cache, old_cache,
        lambda new, old: new if new is old else ops.take(new, flat_parents, axis=0),
        lambda new, old: new)


def _merge_finished(state, new_scores, new_seqs, k: int):
    """The k best of the finished set and new EOS-ended hypotheses (scores
    [B, n], NEG_INF where none; seqs [B, n, L]): (scores [B, k], seqs [B, k, L],
    picks int32 [B, k]: < k the old set's slot, >= k new one pick - k)."""
    all_scores = ops.concatenate([state["finished_scores"], new_scores], axis=1)  # [B, k+n]
    all_seqs = ops.concatenate([state["finished_seqs"], new_seqs], axis=1)        # [B, k+n, L]
    finished_scores, finished_pick = ops.top_k(all_scores, k)                     # [B, k]
    finished_pick = ops.cast(finished_pick, "int32")
    return finished_scores, _gather_beams(all_seqs, finished_pick), finished_pick


def _staged_loop(state, body, batch_size, k: int, length: int, grow=None,
                 result_fields=_RESULT_FIELDS):
    """Run `body` until no batch element is `state["searching"]` (or `length` steps),
    in stages of halving batch size when `batch_size` is a Python int.

    `grow`: None, or `(buffer_lengths, resize_cache)`: the cache's buffers
    hold `buffer_lengths[0]` positions, and the first loop lengthens them to
    each next length, then to `length`, as the index reaches their end.

    A stage of R rows runs while more than R // 2 of its elements search; then
    its result fields are written back to the whole batch's, and the elements
    still searching (first, in batch order, then stopped ones to fill up) are
    gathered into a stage of R // 2 rows: every state field [R, ...], cache
    leaf [R * k, ...] and per-sentence cache leaf [R, ...]. The last stage (R // 2 < `_SMALLEST_STAGE`) runs to
    the end. A dynamic batch size runs one loop.

    Returns the final state, its result fields for the whole batch.
    """
    def not_at_end(state):
        return ops.less(state["index"], length)

    def first_loop(cond, state):
        """The loop from position 0: on short buffers first, with `grow`."""
        if grow is not None:
            buffer_lengths, resize_cache = grow
            for n, longer in zip(buffer_lengths, buffer_lengths[1:] + [length]):
                state = ops.while_loop(
                    lambda s, n=n: ops.logical_and(ops.less(s["index"], n), cond(s)),
                    body, state)
                state = {**state, "cache": resize_cache(state["cache"], longer)}
        return ops.while_loop(cond, body, state)

    if not isinstance(batch_size, int) or batch_size // 2 < _SMALLEST_STAGE:
        return first_loop(
            lambda s: ops.logical_and(not_at_end(s), ops.any(s["searching"])), state)

    rows = batch_size
    origin = ops.arange(rows, dtype="int32")                                  # [R] batch row
    while True:
        half = rows // 2 if rows // 2 >= _SMALLEST_STAGE else 0  # 0: the last stage

        def cond(s, half=half):
            count = ops.sum(ops.cast(s["searching"], "int32"))
            return ops.logical_and(not_at_end(s), ops.greater(count, half))

        state = (first_loop(cond, state) if rows == batch_size
                 else ops.while_loop(cond, body, state))
        # Write this stage's rows back (stage 0: every row, in order).
        if rows == batch_size:
            result = {name: state[name] for name in result_fields}
        else:
            result = {name: ops.scatter_update(result[name], origin[:, None], state[name])
                      for name in result_fields}
        if not half:
            break
        # The `half` rows to keep (distinct, as top_k's indices are): every
        # one still searching, then stopped ones to fill the stage.
        _, keep = ops.top_k(ops.cast(state["searching"], "int32"), half)    # [R/2]
        keep = ops.cast(keep, "int32")
        keep_rows = ops.reshape(keep[:, None] * k + ops.arange(k, dtype="int32")[None, :],
                                (-1,))                                        # [R/2 * k]
        state = {name: (value if name == "index" else
                        map_cache(value, lambda x: ops.take(x, keep_rows, axis=0),
                                  lambda x: ops.take(x, keep, axis=0)) if name == "cache" else
                        ops.take(value, keep, axis=0))
                 for name, value in state.items()}
        origin = ops.take(origin, keep, axis=0)
        rows = half
    return {**state, **result}


def greedy_search(step: StepFn, cache, batch_size, max_decode_length: int,
                  eos_id: int = EOS_ID, on_choice: OnChoice | None = None):
    """Greedy (argmax) decoding with the same step contract (beam = 1).

    Args:
        step: `step(ids [B] int32, cache, index) -> (logits [B, V], cache)`.
        cache: nested dict of tensors, every leaf [B, ...].
        batch_size: B (a Python int, or a scalar tensor).
        max_decode_length: the number of positions decoded at most.
        eos_id: the end-of-sentence id (1).
        on_choice: optional observer of each step's choice (`OnChoice`, k = 1).

    Returns:
        (sequences int32 [B, max_decode_length], log_probs float32 [B]):
        tokens up to and including EOS, then PAD; log_probs is the sum of the
        chosen tokens' log-probabilities (no length penalty: it does not
        change an argmax). Stops as soon as every sequence has ended.
    """
    return token_by_token_search(
        step, cache, batch_size, max_decode_length,
        lambda logits, log_probs: ops.cast(ops.argmax(log_probs, axis=-1), "int32"), eos_id,
        on_choice)


def token_by_token_search(step: StepFn, cache, rows, max_decode_length: int, choose,
                          eos_id: int = EOS_ID, on_choice: OnChoice | None = None):
    """One token per row per step, chosen by `choose(logits, log_probs) -> int32 [rows]`
    (greedy: argmax; sampling: a draw); the loop of `greedy_search` and `sample_search`.

    Returns (sequences int32 [rows, max_decode_length], log_probs float32 [rows]):
    tokens up to and including EOS, then PAD, and the sum of the chosen tokens'
    log-probabilities. Stops as soon as every row has ended.
    """
    length = max_decode_length
    state = {
        "index": ops.convert_to_tensor(0, dtype="int32"),
        "ids": ops.zeros((rows,), dtype="int32"),                        # [R] last token
        "seqs": ops.zeros((rows, length), dtype="int32"),                # [R, L]
        "log_probs": ops.zeros((rows,)),                                 # [R]
        "finished": ops.zeros((rows,), dtype="bool"),                    # [R]
        "cache": cache,                                                  # leaves [R, ...]
    }

    def cond(state):
        return ops.logical_and(ops.less(state["index"], length),
                               ops.logical_not(ops.all(state["finished"])))

    def body(state):
        index = state["index"]
        logits, new_cache = step(state["ids"], state["cache"], index)
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)   # [R, V]
        chosen = choose(logits, log_probs)                                   # [R]
        chosen_log_prob = ops.take_along_axis(log_probs, chosen[:, None], axis=1)[:, 0]
        finished = state["finished"]
        tokens = ops.where(finished, PAD_ID, chosen)
        at_index = ops.equal(ops.arange(length, dtype="int32"), index)        # [L]
        new_log_probs = state["log_probs"] + ops.where(finished, 0.0, chosen_log_prob)
        ends = ops.logical_or(finished, ops.equal(tokens, eos_id))
        if on_choice is not None:
            _report_single_choice(on_choice, index, tokens, new_log_probs, finished, ends)
        return {
            "index": index + 1,
            "ids": tokens,
            "seqs": ops.where(at_index[None, :], tokens[:, None], state["seqs"]),
            "log_probs": new_log_probs,
            "finished": ends,
            "cache": new_cache,
        }

    state = ops.while_loop(cond, body, state)
    return state["seqs"], state["log_probs"]


def _report_single_choice(on_choice: OnChoice, index, tokens, log_probs, finished, ends):
    """`on_choice` of a token-by-token step (k = 1): the chosen token the one
    candidate (dead on a row that had ended), live unless it ends the row,
    the finished slot taking it when it is EOS (its score unpenalized)."""
    dead = ops.full_like(log_probs, NEG_INF)
    candidate = ops.where(finished, dead, log_probs)[:, None]                   # [R, 1]
    new_eos = ops.logical_and(ends, ops.logical_not(finished))[:, None]
    on_choice({"index": index, "log_probs": candidate,
               "parents": ops.zeros_like(tokens)[:, None], "tokens": tokens[:, None],
               "live_pick": ops.zeros_like(tokens)[:, None],
               "live_log_probs": ops.where(ends, dead, log_probs)[:, None],
               "finished_pick": ops.cast(new_eos, "int32"),
               "finished_scores": ops.where(ends, log_probs, dead)[:, None]})
