"""`SubwordSampling`: subword regularization, each training pair segmented anew every epoch.

datagen writes each sentence's ids once: its one best segmentation, so every
epoch sees the same. With `source_sampling_alpha` or `target_sampling_alpha`
above 0 (hparams), the training pipeline reads those ids, turns each side
back into its text (exact: the vocabulary's `decode(encode(s)) == s`) and
segments it again with the SentencePiece model, sampled (Kudo 2018's
subword regularization; for the BPE models datagen trains, SentencePiece's
BPE-dropout, Provilkov et al. 2020), EOS appended as datagen does, before the
length filter, the shuffle and the batching (buckets or packing). A side at
alpha 0 is segmented without sampling: datagen's ids again.

Deterministic per seed: the batch of `input_pipeline._PARSE_BATCH` records
that starts at record `b * 256` of shard `f`, read in epoch `e` by input
pipeline `w`, is sampled with a seed made of (the pipeline's seed, e, f, b,
w, side), whatever the order the shards' reads interleave in. So two
pipelines built with the same seed give the same batches (the trainer
builds its pipeline with `seed + step` at a (re)start: a run resumed at a
step sees the stream any resume at that step sees), and a pair is
segmented anew each epoch.

Why not tensorflow_text's `SentencepieceTokenizer(nbest_size, alpha)` in
the graph: its op draws from SentencePiece's generator of each thread,
seeded from `std::random_device` in a copy of SentencePiece nothing can seed
from Python, so two runs with the same seed would differ. The op here is
the Python `sentencepiece` module, one `tf.numpy_function` a batch (about
70,000 sentences a second on one core, far above what the trainer takes:
benchmarks/RESULTS.md, input_pipeline).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from t2t_revival.data.data_error import DataError
from t2t_revival.data.sharded_record_writer import vocabulary_of
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.special_ids import EOS_ID

SIDES = ("source", "target")
"""The sides a pair's features ("inputs", "targets") are, in hparams' names."""


@dataclasses.dataclass(frozen=True)
class SubwordSampling:
    """How training pairs are segmented on the fly (the hparams `*_sampling_*`).

    Attributes:
        vocab_file: the SentencePiece `.model` the data was encoded with.
        source_alpha, target_alpha: each side's sampling alpha (0: no
            sampling; BPE: the probability a merge is skipped; unigram: the
            smoothing of Kudo 2018).
        source_nbest_size, target_nbest_size: unigram only: segmentations
            sampled from (-1: all).
    """

    vocab_file: str
    source_alpha: float = 0.0
    target_alpha: float = 0.0
    source_nbest_size: int = -1
    target_nbest_size: int = -1

    @staticmethod
    def requested(hparams: Any) -> bool:
        """Whether `hparams` sample either side (an alpha above 0)."""
        return any(getattr(hparams, f"{side}_sampling_alpha", 0.0) > 0 for side in SIDES)

    @classmethod
    def from_hparams(cls, hparams: Any, vocabulary: Any) -> "SubwordSampling":
        """The sampling `hparams` ask for, over the data's `vocabulary`; a
        DataError when that vocabulary cannot sample (not the project's
        SentencePiece) or has no n-best (BPE) and an nbest_size is set."""
        asked = ", ".join(f"{side}_sampling_alpha={getattr(hparams, f'{side}_sampling_alpha'):g}"
                          for side in SIDES)
        if not isinstance(vocabulary, SubwordVocabulary):
            raise DataError(
                f"subword sampling (hparams source_sampling_alpha, target_sampling_alpha) "
                f"needs data encoded with t2t-datagen's own SentencePiece vocabulary; this "
                f"data's is a {vocabulary.kind} vocabulary ({vocabulary.model_file}), which "
                f"cannot sample: set both to 0, or generate the data anew with t2t-datagen "
                f"into another --data_dir. Received: {asked}")
        if vocabulary.model_type != "unigram":
            for side in SIDES:
                nbest = getattr(hparams, f"{side}_sampling_nbest_size")
                if nbest != -1 and getattr(hparams, f"{side}_sampling_alpha") > 0:
                    raise DataError(
                        f"{side}_sampling_nbest_size applies to unigram SentencePiece models; "
                        f"{vocabulary.model_file} is {vocabulary.model_type}, sampled by "
                        f"BPE-dropout (alpha: the probability a merge is skipped) with no "
                        f"n-best: leave it at -1. Received: {side}_sampling_nbest_size={nbest}")
        return cls(vocabulary.model_file,
                   source_alpha=hparams.source_sampling_alpha,
                   target_alpha=hparams.target_sampling_alpha,
                   source_nbest_size=hparams.source_sampling_nbest_size,
                   target_nbest_size=hparams.target_sampling_nbest_size)

    # ---- in the pipeline ----------------------------------------------------
    def resegment(self, parsed: dict, key):
        """Parsed records, segmented anew: `input_pipeline._parse`'s dict
        (`"inputs"` int32 `[n, L]` right-padded, `"inputs_length"` `[n]`, the
        same for "targets") -> the same dict of the new segmentations (EOS
        included). `key`: int64 `[k]`, what the batch's seed is made of."""
        import tensorflow as tf

        values = tf.numpy_function(
            self.resegmented_batch,
            [parsed["inputs"], parsed["inputs_length"], parsed["targets"],
             parsed["targets_length"], key],
            [tf.int32] * 4, stateful=False)
        out = {}
        for i, feature in enumerate(("inputs", "targets")):
            flat, lengths = values[2 * i], values[2 * i + 1]
            flat.set_shape([None])
            lengths.set_shape([None])
            out[feature] = tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor()
            out[feature + "_length"] = lengths
        return out

    def resegmented_batch(self, inputs: np.ndarray, inputs_length: np.ndarray,
                          targets: np.ndarray, targets_length: np.ndarray,
                          key: np.ndarray) -> list[np.ndarray]:
        """(inputs' ids, their lengths, targets' ids, their lengths) of a batch
        segmented anew, ids flat int32 with EOS, from the padded ids `[n, L]`
        and lengths `[n]` of each side; `key` seeds the samples."""
        vocab = vocabulary_of(self.vocab_file)
        out = []
        for number, (side, ids, lengths) in enumerate(
                (("source", inputs, inputs_length), ("target", targets, targets_length))):
            rows = [row[:n - 1] if n and row[n - 1] == EOS_ID else row[:n]
                    for row, n in zip(ids, lengths)]
            texts = vocab.decode_exactly(rows)
            alpha = getattr(self, f"{side}_alpha")
            if alpha > 0:
                entropy = [int(k) % (1 << 63) for k in key] + [number]
                seed = int(np.random.SeedSequence(entropy).generate_state(1)[0])
                pieces = vocab.sample_encode_batch(
                    texts, alpha, getattr(self, f"{side}_nbest_size"), seed,
                    target=side == "target")
            elif side == "target":
                pieces = vocab.encode_target_batch(texts, num_threads=1)
            else:
                pieces = vocab.encode_batch(texts, num_threads=1)
            out.append(np.fromiter((i for row in pieces for i in (*row, EOS_ID)), np.int32))
            out.append(np.array([len(row) + 1 for row in pieces], np.int32))
        return out


def training_sampling(problem: Any, data_dir: str, hparams: Any) -> SubwordSampling | None:
    """The `SubwordSampling` of `problem`'s training pairs in `data_dir` that
    `hparams` ask for, or None when they ask for none (both alphas 0)."""
    if not SubwordSampling.requested(hparams):
        return None
    return SubwordSampling.from_hparams(hparams, problem.vocabulary(data_dir))
