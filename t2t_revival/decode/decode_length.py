"""How long inputs and outputs may be when decoding, and the sort-and-batch loop.

One owner for the rule that `Decoder`, the serving SavedModel
(`TranslationModule`), the CTranslate2 export and `CTranslate2Translator`
share, so that all four decode the same batch to the same length limit:

- a batch of inputs (EOS included) is padded with PAD up to a multiple of
  `LENGTH_QUANTUM` (16) tokens, so a file of sentences of every length
  compiles a handful of decoding graphs (XLA programs), not one per length;
  never past `max_length` (learned positions have `max_length` rows), unless
  the input itself is;
- a batch decoded by the XLA-compiled search is also padded to a fixed number
  of rows (`batch_bucket`: the next power of two, at most the decode batch
  size), with copies of its last row, so a file compiles one program per
  length bucket, plus one for a smaller last batch;
- the longest output is that padded length + `extra_length`, capped at
  `max_length` with learned positions (no position row beyond it);
  `extra_length` itself is at most `setting_ranges.MAX_EXTRA_LENGTH` (1024);
- an input longer than `max_length` is cut to `max_length` tokens with EOS
  last, by the SavedModel (`cut_to_max_length`, in the graph) and by the
  decoders (`cut_line`, counted and reported at the end with
  `cut_lines_report`); a decoder may refuse it instead (`check_input_length`):
  one long line should not abort a whole file or fail a server's batch;
- sentences are decoded in order of length, `batch_size` at a time or as
  many as fit in a budget of `batch_tokens` padded source tokens
  (`length_sorted_batches`), and the results put back in input order
  (`decode_in_length_order`), several batches at once with
  `parallel_batches`; empty inputs give empty outputs.

The length functions take Python ints or int32 tf tensors (inside a
`tf.function`) alike. The module imports no TensorFlow itself (it does so only
when handed a tensor), so that the CTranslate2 translator can serve without
it (`decode/__init__` imports nothing).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import numbers
from typing import Callable, Iterator, Sequence

from t2t_revival.errors import UserError

# Inputs are padded up to a multiple of this many tokens. 16, not 8: the
# XLA-compiled search builds one program per padded length, and Multi30k's
# test set then needs 3 of them instead of 6 (the limit of the longest output,
# padded length + extra_length, changed for none of its 1,000 sentences).
LENGTH_QUANTUM = 16

def _is_int(*values) -> bool:
    return all(isinstance(v, numbers.Integral) for v in values)


def _minimum(a, b):
    if _is_int(a, b):
        return min(a, b)
    import tensorflow as tf
    return tf.minimum(a, b)


def _maximum(a, b):
    if _is_int(a, b):
        return max(a, b)
    import tensorflow as tf
    return tf.maximum(a, b)


def padded_length(length, max_length: int):
    """The length a batch whose longest input has `length` tokens is padded to.

    `length` rounded up to a multiple of `LENGTH_QUANTUM`, but not past
    `max_length` (unless `length` itself is longer).

    Args:
        length: int or int32 scalar tensor, the longest input, EOS included.
        max_length: int, the model's `max_length`.
    """
    rounded = (length + LENGTH_QUANTUM - 1) // LENGTH_QUANTUM * LENGTH_QUANTUM
    return _maximum(length, _minimum(rounded, max_length))


def position_limit(position_encoding: str, max_length: int) -> int | None:
    """The longest output the position encoding allows (None: no limit).

    Learned positions have `max_length` rows, and so has Marian's sinusoid
    table (positions past it fail there: an imported run keeps that limit);
    the other sinusoids have no limit.
    """
    return max_length if position_encoding in ("learned", "marian_sinusoid") else None


def max_decode_length(padded_length, extra_length: int, limit: int | None = None):
    """The most output positions (EOS included) for a batch padded to `padded_length`.

    Args:
        padded_length: int or int32 scalar tensor, from `padded_length`.
        extra_length: int, `DecodeHParams.extra_length`.
        limit: `position_limit(...)`; None for no cap.
    """
    longest = padded_length + extra_length
    return longest if limit is None else _minimum(longest, limit)


def longest_decode_length(max_length: int, extra_length: int,
                          position_encoding: str) -> int:
    """The longest output any batch can get: a `max_length` input's limit.

    The number of decoder positions an export must hold.
    """
    return max_decode_length(padded_length(max_length, max_length), extra_length,
                             position_limit(position_encoding, max_length))


def batch_bucket(size: int, largest: int | None = None) -> int:
    """The number of rows a compiled search decodes a batch of `size` inputs with.

    The next power of two, but not more than `largest` (the decode batch size;
    None: no cap) unless `size` itself is; `size` may be an int32 scalar
    tensor (then without `largest`). So sentence batches of 32 are
    decoded as 32 rows, a last batch of 8 as 8, and token batches take one of
    a few sizes (1, 2, 4, ...).
    """
    if not _is_int(size):  # an int32 scalar tensor (largest not supported)
        import tensorflow as tf
        powers = tf.constant([2 ** i for i in range(31)], tf.int32)
        return tf.reduce_min(tf.where(powers >= size, powers, powers[-1]))
    bucket = 1
    while bucket < size:
        bucket *= 2
    return max(size, min(bucket, largest)) if largest else bucket


def check_input_length(line: int, length: int, max_length: int, sentence: str) -> None:
    """Refuse input line `line` (1-based) of `length` tokens (EOS included) if too long."""
    if length > max_length:
        raise UserError(
            f"input line {line} has {length} tokens, more than the model's "
            f"max_length of {max_length}; split the line, or decode with "
            f"--decode_hparams=long_inputs=cut to cut it. "
            f"Received: line {line}={sentence[:60]!r}...")


def cut_line(ids: list, max_length: int, eos_id) -> list:
    """An EOS-terminated id (or piece) list cut to `max_length` ids, EOS last
    (as `cut_to_max_length` cuts a batch in the SavedModel)."""
    if len(ids) <= max_length:
        return ids
    return ids[:max_length - 1] + [eos_id]


def fit_inputs(sentences: Sequence[str], encode: Callable[[str], list], end,
               max_length: int, long_inputs: str = "cut", max_input_size: int = -1
               ) -> tuple[list[list], int]:
    """(each input's tokens, how many were cut to max_length): the input rule
    every engine applies (`Translator.fit`), written once.

    A sentence's tokens are `encode(sentence)` and the end symbol `end` (EOS
    ids, or the piece that spells it); a blank sentence gives [] (an empty
    output). tensor2tensor's `max_input_size` (> 0) cuts first, not counted;
    then a sentence longer than `max_length` tokens (its end included) is
    cut to it, `end` last (`cut_line`), and counted, or refused with
    long_inputs="refuse" (`check_input_length`: a UserError naming the line).
    """
    fitted, cut = [], 0
    for line, sentence in enumerate(sentences, start=1):
        tokens = list(encode(sentence)) + [end] if sentence.strip() else []
        if 0 < max_input_size < len(tokens):
            tokens = cut_line(tokens, max_input_size, end)
        if len(tokens) > max_length:
            if long_inputs == "refuse":
                check_input_length(line, len(tokens), max_length, sentence)
            tokens = cut_line(tokens, max_length, end)
            cut += 1
        fitted.append(tokens)
    return fitted, cut


def cut_lines_report(cut: int, total: int, max_length: int) -> str:
    """The line a decoder prints at the end when it cut `cut` of `total` inputs."""
    lines = "line was" if total == 1 else "lines were"
    return (f"{cut} of {total} input {lines} longer than {max_length} tokens "
            f"(the model's max_length) and {'was' if cut == 1 else 'were'} cut to "
            f"{max_length} tokens; pass --decode_hparams=long_inputs=refuse to stop "
            f"at such a line instead")


def cut_to_max_length(ids, max_length: int, pad_id: int, eos_id: int):
    """Cut a batch of id rows to its longest row, then to `max_length` (EOS last).

    Args:
        ids: int32 tensor [B, S], each row EOS-terminated and PAD-padded, none
            empty (an empty row is a lone EOS).
    Returns:
        (ids [B, L], L): L = min(longest row, max_length) as an int32 scalar
        tensor; a row longer than L keeps its first L - 1 tokens and EOS.
    """
    import tensorflow as tf

    lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, pad_id), tf.int32), axis=1)  # [B]
    # (At least 1: reduce_max of an empty batch is the smallest int32.)
    length = tf.minimum(tf.maximum(tf.reduce_max(lengths), 1), max_length)
    ids = ids[:, :length]
    too_long = lengths > length                                            # [B]
    last = tf.one_hot(length - 1, length, on_value=True, off_value=False)  # [L]
    ids = tf.where(tf.logical_and(too_long[:, None], last[None, :]), eos_id, ids)
    return ids, length


def length_sorted_batches(lengths: Sequence[int], batch_size: int,
                          batch_tokens: int = 0,
                          max_length: int | None = None) -> Iterator[list[int]]:
    """Indices of the non-empty inputs, shortest first, in batches.

    Equal lengths keep their input order (a stable sort). With `batch_tokens`
    0, `batch_size` inputs a batch; else as many inputs as fit in
    `batch_tokens` tokens counted as the batch is decoded, padding included
    (inputs x `padded_length` of the longest, with `max_length`), as
    fairseq's --max-tokens and OpenNMT-tf's batch_type=tokens count them; an
    input longer than the budget is a batch of its own.
    """
    order = sorted((i for i, n in enumerate(lengths) if n), key=lambda i: lengths[i])
    if not batch_tokens:
        for start in range(0, len(order), batch_size):
            yield order[start:start + batch_size]
        return
    limit = max_length if max_length is not None else max(lengths, default=1)
    batch: list[int] = []
    for i in order:
        # Sorted shortest first: input i is the longest of the batch it joins.
        if batch and (len(batch) + 1) * padded_length(lengths[i], limit) > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def decode_in_length_order(lengths: Sequence[int], batch_size: int,
                           decode_batch: Callable[[list[int]], Sequence[str]],
                           progress: Callable[[int, int], None] | None = None,
                           batch_tokens: int = 0,
                           max_length: int | None = None,
                           parallel_batches: int = 1,
                           on_batch: Callable[[list[int], list[str]], None] | None = None
                           ) -> list[str]:
    """Outputs in input order, decoded in `length_sorted_batches`.

    Args:
        lengths: the tokens of each input; 0 for an empty input, which gives "".
        batch_size, batch_tokens, max_length: see `length_sorted_batches`.
        decode_batch: indices of one batch -> their outputs, in that order.
        progress: called with (inputs done, all inputs) after each batch.
        parallel_batches: how many batches are decoded at once, each by
            `decode_batch` in a thread of its own (CTranslate2's
            inter_threads, Marian's --cpu-threads): on a CPU, a small model's
            steps leave cores idle that a second batch fills. `decode_batch`
            must then be safe to call from several threads. Batches are still
            taken, and reported to `progress`, in length order; if one fails,
            the batches not started are dropped, those that finished are
            still taken (`on_batch`), and the error is raised.
        on_batch: called with each batch's indices and outputs as it is
            taken, in this thread (the decoder's `DecodeJournal` writes them);
            an error it raises stops the decoding.
    """
    outputs = [""] * len(lengths)
    done = sum(1 for n in lengths if not n)
    batches = length_sorted_batches(lengths, batch_size, batch_tokens, max_length)
    with contextlib.closing(_decoded(batches, decode_batch, parallel_batches)) as decoded:
        for chunk, results in decoded:
            results = list(results)
            if len(results) != len(chunk):
                raise ValueError(f"decode_batch returned {len(results)} outputs for "
                                 f"{len(chunk)} inputs")
            for i, output in zip(chunk, results):
                outputs[i] = output
            if on_batch:
                on_batch(chunk, results)
            done += len(chunk)
            if progress:
                progress(done, len(lengths))
    return outputs


def _decoded(batches: Iterator[list[int]], decode_batch, parallel_batches: int):
    """(batch, decode_batch(batch)) in the order of `batches`, with up to
    `parallel_batches` of them decoding at once in a thread pool; after a
    failure, the batches that finished first (`_first_taken`)."""
    if parallel_batches <= 1:
        for chunk in batches:
            yield chunk, decode_batch(chunk)
        return
    pool = concurrent.futures.ThreadPoolExecutor(parallel_batches,
                                                 thread_name_prefix="decode_batch")
    pending: collections.deque = collections.deque()
    try:
        for chunk in batches:
            pending.append((chunk, pool.submit(decode_batch, chunk)))
            # One batch queued behind each running one, so that no thread
            # waits for the caller to take a result.
            if len(pending) >= 2 * parallel_batches:
                yield from _first_taken(pending, pool)
        while pending:
            yield from _first_taken(pending, pool)
    finally:
        # After an error (or a stop): drop what has not started, wait for
        # what has (a decode cannot be interrupted).
        pool.shutdown(wait=True, cancel_futures=True)


def _first_taken(pending: collections.deque, pool: concurrent.futures.Executor):
    """Yield the first pending batch and its outputs. If it failed: the
    batches not started are dropped, those running waited for, and every
    other one that finished is yielded (the caller's journal keeps them)
    before its error is raised."""
    chunk, future = pending.popleft()
    try:
        outputs = future.result()
    except BaseException as error:
        pool.shutdown(wait=True, cancel_futures=True)
        finished = [(other, done) for other, done in pending
                    if not done.cancelled() and done.exception() is None]
        pending.clear()
        for other, done in finished:
            yield other, done.result()
        raise error
    yield chunk, outputs
