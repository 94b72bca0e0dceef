"""Translating text with a trained model directory.

A training `output_dir` holds everything decoding needs (the resolved
hparams, the run record with the problem and model names, the shared
SentencePiece vocabulary and the checkpoints; see `TrainingDirectory`), so no
training flag is needed again.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, Sequence

import tensorflow as tf

from t2t_revival.decode.beam_search import beam_search
from t2t_revival.decode.decode_hparams import DecodeHParams
from t2t_revival.errors import UserError
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.special_ids import EOS_ID
# Re-exported for callers: the decoder reads and writes text files.
from t2t_revival.text_lines import read_text_lines, write_text_lines  # noqa: F401

# Inputs are padded up to a multiple of this many tokens, so a file of
# sentences of every length compiles a handful of decoding graphs, not one per
# length.
_LENGTH_QUANTUM = 8


class Decoder:
    """Beam-search translation with the model of a training directory.

    Args:
        output_dir: the training directory (`TrainingDirectory`).
        checkpoint_path: a checkpoint prefix (e.g. `output_dir/averaged/ckpt-5000`);
            default the latest in output_dir.
        decode_hparams: `"beam_size=4,alpha=0.6,extra_length=50,batch_size=32,
            return_beams=false"` overrides of the defaults in hparams.json.
    """

    def __init__(self, output_dir: str, checkpoint_path: str | None = None,
                 decode_hparams: str = ""):
        self.output_dir = output_dir
        trained = TrainingDirectory(output_dir).load(checkpoint_path)
        self.hparams, self.run_record = trained.hparams, trained.run_record
        self.decode_hparams = DecodeHParams.from_hparams(self.hparams, decode_hparams)
        self.vocab, self.checkpoint_path = trained.vocab, trained.checkpoint_path
        self.model = trained.model
        # autograph=False: the model and beam search use no Python control flow
        # on tensors (beam search loops with ops.while_loop), and autograph's
        # conversion cache can hand back a stale function in long processes.
        self._search = tf.function(self._search_batch, reduce_retracing=True,
                                   autograph=False)

    # ------------------------------------------------------------------
    def _search_batch(self, inputs, max_decode_length: int):
        """inputs int32 [B, S] -> (sequences [B, (beam,) L], scores [B, (beam)])."""
        encoder_output, encoder_padding = self.model.encode(inputs, training=False)
        cache = self.model.init_cache(encoder_output, encoder_padding, max_decode_length)
        dhp = self.decode_hparams
        return beam_search(self.model.decode_step, cache, tf.shape(inputs)[0],
                           beam_size=dhp.beam_size, alpha=dhp.alpha,
                           max_decode_length=max_decode_length,
                           return_beams=dhp.return_beams)

    def _encode(self, sentences: Sequence[str]) -> list[list[int]]:
        encoded = []
        for i, sentence in enumerate(sentences):
            ids = self.vocab.encode(sentence) + [EOS_ID] if sentence.strip() else []
            if len(ids) > self.hparams.max_length:
                raise UserError(
                    f"input line {i + 1} has {len(ids)} tokens, more than the model's "
                    f"max_length of {self.hparams.max_length}; split the line. "
                    f"Received: line {i + 1}={sentence[:60]!r}...")
            encoded.append(ids)
        return encoded

    def translate(self, sentences: Sequence[str],
                  progress: Callable[[int, int], None] | None = None) -> list[str]:
        """Translations in input order; an empty line gives an empty line.

        Inputs are sorted by length for batching (`batch_size` sentences at a
        time). With return_beams, each output line holds the beams, best
        first, separated by tabs.
        """
        encoded = self._encode(sentences)
        outputs = [""] * len(sentences)
        order = sorted((i for i, ids in enumerate(encoded) if ids),
                       key=lambda i: len(encoded[i]))
        batch = self.decode_hparams.batch_size
        done = len(sentences) - len(order)
        for start in range(0, len(order), batch):
            chunk = order[start:start + batch]
            length = max(len(encoded[i]) for i in chunk)
            length = min(int(math.ceil(length / _LENGTH_QUANTUM) * _LENGTH_QUANTUM),
                         max(length, self.hparams.max_length))
            inputs = [encoded[i] + [0] * (length - len(encoded[i])) for i in chunk]
            max_decode_length = self.decode_hparams.max_decode_length(length)
            if self.hparams.position_encoding == "learned":
                # Learned positions have max_length rows; no output can be longer.
                max_decode_length = min(max_decode_length, self.hparams.max_length)
            sequences, _ = self._search(tf.constant(inputs, tf.int32), max_decode_length)
            sequences = sequences.numpy()
            for row, i in enumerate(chunk):
                if self.decode_hparams.return_beams:
                    outputs[i] = "\t".join(self.vocab.decode(s) for s in sequences[row])
                else:
                    outputs[i] = self.vocab.decode(sequences[row])
            done += len(chunk)
            if progress:
                progress(done, len(sentences))
        return outputs


class ProgressBar:
    """A one-line progress display on stderr: `decoded 320/1000 (12.1 sentences/s)`."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.start = time.time()

    def __call__(self, done: int, total: int) -> None:
        rate = done / max(time.time() - self.start, 1e-9)
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\rdecoding [{'#' * filled}{'.' * (width - filled)}] "
                          f"{done}/{total} ({rate:.1f} sentences/s)")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
