"""The token-bucketed tf.data input pipeline over sharded TFRecords of ids.

    files -> (per-worker file shard) -> parse -> drop pairs longer than
    max_length -> shuffle -> batch by tokens into a FIXED set of padded shapes

Each bucket `b` of `boundaries` holds pairs with `max(len(inputs),
len(targets)) <= b` (EOS included); its batches are `[batch_size // b, b]`
for both "inputs" and "targets" (right-padded with 0), so a batch never holds
more than `batch_size` tokens (real plus padding) per side, and XLA compiles
once per bucket. Training drops each bucket's remainder so every batch has
one of the declared shapes; evaluation keeps it (the last batch of a bucket
may have fewer rows).

Packing (`hparams.packing`, tensor2tensor's `pack_dataset`) is the other
batching: several pairs share one row of `max_length` slots,

    ... -> shuffle -> windows of `pack_window` pairs -> first-fit into rows
        -> batches of `batch_size // max_length` rows of `max_length`

so a batch is ONE shape `[batch_size // max_length, max_length]` (at most
`batch_size` token slots per side, as for buckets) and carries, beside
"inputs" and "targets", the segment ids "inputs_segmentation" /
"targets_segmentation" (1..n for the n pairs of a row, 0 at PAD) and the
per-segment positions "inputs_position" / "targets_position" (0, 1, ... in
each pair). Pair k of a row puts its source in source segment k and its
target in target segment k; a pair goes into the first row of its window
where both sides still fit.

Subword sampling (`sampling`, a `SubwordSampling`: hparams
`source_sampling_alpha`, `target_sampling_alpha`) segments each training
pair anew right after parsing, before the length filter:

    shards -> per shard: batches of 256 records -> parse -> resegment
        (seeded by seed, epoch, shard, batch) -> interleave (in order) -> ...
"""

from __future__ import annotations

import random
import re
from typing import Sequence

import tensorflow as tf

from t2t_revival.data.data_error import DataError
from t2t_revival.data.subword_sampling import SubwordSampling

DEFAULT_MIN_BOUNDARY = 8
DEFAULT_SHUFFLE_BUFFER = 10_000
DEFAULT_PACK_WINDOW = 1024
"""Pairs packed together: a pair may go into any row that its window opened."""
PACKED_FEATURES = ("inputs", "targets", "inputs_segmentation", "inputs_position",
                   "targets_segmentation", "targets_position")
"""The int32 `[rows, max_length]` features of a packed batch."""


def default_bucket_boundaries(max_length: int,
                              min_length: int = DEFAULT_MIN_BOUNDARY) -> list[int]:
    """A small geometric set of padded lengths up to `max_length`.

    8, 16, 24, 32, 48, 64, 96, 128, 192, 256, ... (each step x2 or x1.5, all
    multiples of 8), cut at `max_length`, which is always the last boundary:
    e.g. 8 buckets for max_length=128, 10 for 256. A step within 25% of
    max_length is left out (max_length=100 gives ..., 64, 100).
    """
    boundaries, x = [], min_length
    while x < max_length:
        boundaries.append(x)
        # 8 -> 16, then alternate x1.5 and x(4/3): 16, 24, 32, 48, 64, 96, ...
        x = 2 * x if x == min_length else (x * 3 // 2 if (x & (x - 1)) == 0 else x * 4 // 3)
    # No bucket within 25% of max_length (e.g. 96 for 100): max_length covers it.
    while boundaries and boundaries[-1] * 5 > max_length * 4:
        boundaries.pop()
    boundaries.append(max_length)
    return boundaries


def bucket_shapes(batch_size: int, max_length: int,
                  boundaries: Sequence[int] = ()) -> list[tuple[int, int]]:
    """The declared padded batch shapes `[(rows, length), ...]`, one per bucket.

    Args:
        batch_size: tokens per batch (per replica), padding included.
        max_length: longest pair kept; boundaries above it are dropped and
            max_length becomes the last boundary when no boundary reaches it.
        boundaries: explicit padded lengths (hparams.bucket_boundaries), or
            empty for `default_bucket_boundaries(max_length)`.
    """
    if boundaries:
        kept = [b for b in boundaries if b < max_length]
        bounds = kept + [max_length]
    else:
        bounds = default_bucket_boundaries(max_length)
    if batch_size < bounds[-1]:
        raise DataError(
            f"batch_size (tokens per replica) must be at least the longest bucket "
            f"({bounds[-1]} tokens) so every bucket holds one sequence; raise "
            f"batch_size or lower max_length. Received: batch_size={batch_size}, "
            f"max_length={max_length}")
    return [(batch_size // b, b) for b in bounds]


def packed_shape(batch_size: int, max_length: int) -> tuple[int, int]:
    """The one shape `(rows, max_length)` of packed batches: `batch_size // max_length` rows.

    Args:
        batch_size: tokens per batch (per replica), padding included.
        max_length: the row length, and the longest pair kept.
    """
    if batch_size < max_length:
        raise DataError(
            f"batch_size (tokens per replica) must be at least max_length "
            f"({max_length} tokens) for packed batches of batch_size // max_length "
            f"rows; raise batch_size or lower max_length. Received: "
            f"batch_size={batch_size}, max_length={max_length}")
    return batch_size // max_length, max_length


_PARSE_BATCH = 256


def _parse(records: tf.Tensor) -> dict[str, tf.Tensor]:
    """Serialized Examples [n] -> {"inputs": int32 [n, max_len], "inputs_length": [n], ...}.

    Vectorized: parsing a batch of records at a time is much faster than one
    at a time; `_unpad` cuts each row back to its length after unbatching.
    """
    features = tf.io.parse_example(records, {
        "inputs": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int32),
        "targets": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int32),
    })
    out = {}
    for k, v in features.items():
        out[k] = tf.cast(v.to_tensor(), tf.int32)
        out[k + "_length"] = v.row_lengths()
    return out


def _unpad(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    return {k: example[k][:example[k + "_length"]] for k in ("inputs", "targets")}


def _length(example: dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.maximum(tf.shape(example["inputs"])[0], tf.shape(example["targets"])[0])


def unreadable_records(files: Sequence[str]) -> dict[str, str]:
    """{path: TensorFlow's message} for each TFRecord file that cannot be read through.

    TensorFlow's DataLossError ("truncated record at 2140", "corrupted record
    at 12") does not name the file; this reads each file once (record
    framing and checksums, in C++, no parsing) to find which.
    """
    bad = {}
    for path in files:
        try:
            tf.data.TFRecordDataset(path).reduce(0, lambda n, _: n + 1)
        except tf.errors.DataLossError as e:
            what = re.search(r"(?:truncated|corrupted) record at \d+", e.message or "")
            bad[str(path)] = what.group(0) if what else str(e).strip()[-120:]
    return bad


def readable_record_count(path: str) -> int:
    """How many records of the TFRecord file `path` can be read, up to any damage."""
    return int(_records_to_damage(path).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))


def _records_to_damage(path) -> tf.data.Dataset:
    """The records of one file, ending quietly at a truncated or corrupted record."""
    return tf.data.TFRecordDataset(path).ignore_errors()


def token_bucketed_dataset(files: Sequence[str], batch_size: int, max_length: int,
                           boundaries: Sequence[int] = (), training: bool = True,
                           shuffle: bool | None = None, input_context=None,
                           seed: int | None = None,
                           shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                           skip_corrupt: bool = False,
                           sampling: SubwordSampling | None = None) -> tf.data.Dataset:
    """Batches `{"inputs": int32 [rows, b], "targets": int32 [rows, b]}` by tokens.

    Args:
        files: TFRecord shards of tf.train.Example with int64 lists
            "inputs" and "targets" (EOS included).
        batch_size: tokens per replica per batch, padding included.
        max_length: pairs whose longer side exceeds it are dropped.
        boundaries: bucket lengths (see `bucket_shapes`).
        training: repeat forever and drop bucket remainders (fixed shapes);
            otherwise one pass in file order, remainders kept.
        shuffle: shuffle files and examples; defaults to `training`.
        input_context: a `tf.distribute.InputContext`; each input pipeline
            reads files `input_pipeline_id::num_input_pipelines` (or, with
            fewer files than pipelines, every n-th record).
        seed: shuffle seed (None: nondeterministic).
        shuffle_buffer: examples in the shuffle buffer.
        skip_corrupt: read each file up to a truncated or corrupted record and
            skip the rest of it, instead of failing (DataLossError).
        sampling: segment each pair anew, sampled (subword regularization;
            see the module's docstring), or None for the ids as read.
    """
    shapes = bucket_shapes(batch_size, max_length, boundaries)
    shuffle = training if shuffle is None else shuffle
    ds = _examples(files, shapes[-1][1], training, shuffle, input_context, seed,
                   shuffle_buffer, skip_corrupt, sampling)
    return _bucketed(ds, shapes, training)


def weighted_token_bucketed_dataset(file_groups: Sequence[Sequence[str]],
                                    weights: Sequence[float], batch_size: int,
                                    max_length: int, boundaries: Sequence[int] = (),
                                    input_context=None, seed: int | None = None,
                                    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                                    skip_corrupt: bool = False,
                                    sampling: SubwordSampling | None = None
                                    ) -> tf.data.Dataset:
    """Training batches drawn from several corpora in the ratio of `weights`.

    Each group of files (one corpus) is read, filtered and shuffled as in
    `token_bucketed_dataset`, repeated forever; `tf.data.Dataset.
    sample_from_datasets` picks each next example from corpus i with
    probability weights[i] / sum(weights) (upsampling without copies on
    disk); the mix is then bucketed by tokens like a single corpus.

    Args:
        file_groups: the TFRecord shards of each corpus.
        weights: one positive weight per group.
        Others: as for `token_bucketed_dataset` (training mode, shuffled).
    """
    if len(file_groups) != len(weights):
        raise DataError(f"one weight per corpus is needed: {len(file_groups)} corpora, "
                        f"{len(weights)} weights. Received: weights={list(weights)}")
    if any(not (w > 0 and w < float("inf")) for w in weights):
        raise DataError(f"corpus weights must be positive numbers. "
                        f"Received: weights={list(weights)}")
    shapes = bucket_shapes(batch_size, max_length, boundaries)
    parts = [_examples(files, shapes[-1][1], True, True, input_context,
                       None if seed is None else seed + i, shuffle_buffer, skip_corrupt,
                       sampling)
             for i, files in enumerate(file_groups)]
    total = float(sum(weights))
    ds = tf.data.Dataset.sample_from_datasets(parts, weights=[w / total for w in weights],
                                              seed=seed)
    return _bucketed(ds, shapes, True)


def _examples(files: Sequence[str], limit: int, training: bool, shuffle: bool,
              input_context, seed: int | None, shuffle_buffer: int,
              skip_corrupt: bool = False,
              sampling: SubwordSampling | None = None) -> tf.data.Dataset:
    """This worker's pairs `{"inputs": int32 [n], "targets": int32 [m]}`, 0 < max(n, m) <= limit.

    Repeated when `training`; files and pairs shuffled when `shuffle`;
    segmented anew by `sampling` when given (in a deterministic order then).
    """
    files = sorted(str(f) for f in files)
    if not files:
        raise DataError("No TFRecord files to read; run t2t-datagen first. Received: files=[]")

    numbers = list(range(len(files)))  # a shard's number among all (the samples' seeds)
    record_shard = None
    if input_context is not None and input_context.num_input_pipelines > 1:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) >= n:
            files, numbers = files[i::n], numbers[i::n]
        else:
            record_shard = (n, i)

    read = _records_to_damage if skip_corrupt else tf.data.TFRecordDataset
    in_order = sampling is not None or not shuffle
    if sampling is not None:
        ds = _resegmented(files, numbers, read, training, shuffle, seed, record_shard,
                          sampling)
    else:
        ds = tf.data.Dataset.from_tensor_slices(files)
        if shuffle:
            ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        if training:
            ds = ds.repeat()
        ds = ds.interleave(read, cycle_length=min(4, len(files)),
                           num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle)
        if record_shard is not None:
            ds = ds.shard(*record_shard)
        ds = ds.batch(_PARSE_BATCH).map(_parse, num_parallel_calls=tf.data.AUTOTUNE,
                                        deterministic=not shuffle).unbatch()
    ds = ds.map(_unpad, num_parallel_calls=tf.data.AUTOTUNE, deterministic=in_order)
    ds = ds.filter(lambda ex: tf.logical_and(_length(ex) <= limit, _length(ex) > 0))
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds


def _resegmented(files: Sequence[str], numbers: Sequence[int], read, training: bool,
                 shuffle: bool, seed: int | None, record_shard: tuple[int, int] | None,
                 sampling: SubwordSampling) -> tf.data.Dataset:
    """The parsed records of `files` (shard numbers `numbers`), each batch of
    `_PARSE_BATCH` records of a shard segmented anew by `sampling`, its seed
    made of (seed, epoch, shard number, batch of the shard, input pipeline):
    the same batches whatever the order the shards' reads finish in."""
    base = seed if seed is not None else random.SystemRandom().randrange(1 << 62)
    pipeline = record_shard[1] if record_shard is not None else 0
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(numbers, tf.int64), list(files)))
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if training:
        ds = ds.repeat()
    ds = ds.enumerate()  # (visit, (shard number, path)): the epoch is visit // len(files)

    def one_shard(visit, shard):
        number, path = shard
        records = read(path)
        if record_shard is not None:
            records = records.shard(*record_shard)

        def parse(batch, serialized):
            key = tf.stack([tf.constant(base, tf.int64), visit // len(files), number, batch,
                            tf.constant(pipeline, tf.int64)])
            return sampling.resegment(_parse(serialized), key)

        return records.batch(_PARSE_BATCH).enumerate().map(
            parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    ds = ds.interleave(one_shard, cycle_length=min(4, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.unbatch()


def _bucketed(ds: tf.data.Dataset, shapes: Sequence[tuple[int, int]],
              training: bool) -> tf.data.Dataset:
    """Examples -> batches of the declared `shapes` [(rows, length), ...]."""
    bounds = [b for _, b in shapes]
    rows = [r for r, _ in shapes]
    # bucket_by_sequence_length's bucket k holds lengths < boundary k and pads
    # to boundary k - 1 (with pad_to_bucket_boundary), hence the +1. Its extra
    # last bucket (length >= max) never fills: the filter of _examples emptied it.
    ds = ds.bucket_by_sequence_length(
        _length,
        bucket_boundaries=[b + 1 for b in bounds],
        bucket_batch_sizes=rows + [1],
        padded_shapes={"inputs": [None], "targets": [None]},
        pad_to_bucket_boundary=True,
        drop_remainder=training,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def packed_dataset(files: Sequence[str], batch_size: int, max_length: int,
                   training: bool = True, shuffle: bool | None = None,
                   input_context=None, seed: int | None = None,
                   shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                   pack_window: int = DEFAULT_PACK_WINDOW,
                   skip_corrupt: bool = False,
                   sampling: SubwordSampling | None = None) -> tf.data.Dataset:
    """Packed batches: the six `PACKED_FEATURES`, each int32 `[batch_size // max_length, max_length]`.

    Args:
        files: TFRecord shards of tf.train.Example with int64 lists
            "inputs" and "targets" (EOS included).
        batch_size: tokens per replica per batch, padding included: rows of
            `max_length` slots, `batch_size // max_length` of them.
        max_length: the row length; pairs whose longer side exceeds it are
            dropped.
        training: repeat forever and drop the last partial batch (one fixed
            shape); otherwise one pass, the last batch may have fewer rows.
        shuffle: shuffle files and pairs (before packing); defaults to `training`.
        input_context: a `tf.distribute.InputContext` (see `token_bucketed_dataset`).
        seed: shuffle seed (None: nondeterministic).
        shuffle_buffer: pairs in the shuffle buffer.
        pack_window: pairs packed together (first fit into the rows the
            window opens); larger packs tighter and costs O(window^2) work.
        skip_corrupt, sampling: as for `token_bucketed_dataset`.
    """
    rows, length = packed_shape(batch_size, max_length)
    shuffle = training if shuffle is None else shuffle
    ds = _examples(files, max_length, training, shuffle, input_context, seed,
                   shuffle_buffer, skip_corrupt, sampling)
    ds = ds.map(lambda ex: {**ex, "inputs_length": tf.shape(ex["inputs"])[0],
                            "targets_length": tf.shape(ex["targets"])[0]})
    ds = ds.padded_batch(pack_window)  # (K, longest) ids and (K,) lengths
    ds = ds.map(lambda window: pack_window_rows(window, length),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=not shuffle or sampling is not None)
    ds = ds.unbatch().batch(rows, drop_remainder=training)
    return ds.prefetch(tf.data.AUTOTUNE)


def pack_window_rows(window: dict[str, tf.Tensor], length: int) -> dict[str, tf.Tensor]:
    """First-fit packing of K pairs into R rows of `length` slots (R <= K).

    Args:
        window: int32 `"inputs"` `[K, Ls]`, `"targets"` `[K, Lt]` (right-padded)
            and their lengths `"inputs_length"`, `"targets_length"` `[K]`,
            each at most `length`.
        length: row length.
    Returns:
        the six `PACKED_FEATURES`, int32 `[R, length]`: pair i goes into the
        first row where both its sides still fit, as that row's next segment.
    """
    source_len = tf.cast(window["inputs_length"], tf.int32)  # (K,)
    target_len = tf.cast(window["targets_length"], tf.int32)  # (K,)
    k = tf.shape(source_len)[0]

    def place(i, source_fill, target_fill, pairs, row, segment, source_start,
              target_start):
        # Per row (K,): slots used and pairs placed so far (by pairs 0..i-1).
        fits = tf.logical_and(source_fill + source_len[i] <= length,
                              target_fill + target_len[i] <= length)  # (K,)
        r = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)  # an empty row fits
        at = [[r]]
        return (i + 1,
                tf.tensor_scatter_nd_add(source_fill, at, source_len[i:i + 1]),
                tf.tensor_scatter_nd_add(target_fill, at, target_len[i:i + 1]),
                tf.tensor_scatter_nd_add(pairs, at, [1]),
                row.write(i, r), segment.write(i, pairs[r] + 1),
                source_start.write(i, source_fill[r]),
                target_start.write(i, target_fill[r]))

    zeros = tf.zeros([k], tf.int32)
    arrays = [tf.TensorArray(tf.int32, size=k) for _ in range(4)]
    placed = tf.while_loop(lambda i, *_: i < k, place,
                           (tf.constant(0), zeros, zeros, zeros, *arrays))
    # (K,) each: pair i's row, segment id in it, first source and target slot.
    row, segment, source_start, target_start = (a.stack() for a in placed[4:])
    num_rows = tf.reduce_max(row) + 1
    out = {}
    for side, lengths, start in (("inputs", source_len, source_start),
                                 ("targets", target_len, target_start)):
        ids = tf.RaggedTensor.from_tensor(window[side], lengths=lengths)  # (K, None)
        position = tf.ragged.range(lengths)  # (K, None): 0 .. len-1 per pair
        rows_of = tf.repeat(row, lengths)  # (N,) a row per token
        cols = tf.repeat(start, lengths) + position.flat_values  # (N,)
        at = tf.stack([rows_of, cols], axis=1)  # (N, 2)
        shape = tf.stack([num_rows, length])
        out[side] = tf.scatter_nd(at, tf.cast(ids.flat_values, tf.int32), shape)
        out[side + "_segmentation"] = tf.scatter_nd(at, tf.repeat(segment, lengths), shape)
        out[side + "_position"] = tf.scatter_nd(at, position.flat_values, shape)
    return out
