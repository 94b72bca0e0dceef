"""Word alignments from the encoder-decoder attention (Pharaoh format).

`t2t-decoder --decode_hparams alignments=true` writes, for each output, the
line `0-0 1-2 ...`: pairs `source word-target word`, 0-based, the words
being the whitespace tokens of the source line and of the output (fairseq's
`--print-alignment` and Marian's `--alignment` print the same format).

How: one teacher-forced pass of the model over (source, output), as forced
scoring runs (`forced_scoring.score_targets`), with the decoder's
encoder-decoder attention weights returned (`Transformer.decode(...,
return_attention=True)`): no change to the search. Of the weights
`[layers, heads, T, S]`, the layer `alignment_layer` (Python indexing: -1
is the last) and the heads combined by `alignment_heads` ("mean", "max", or
one head's number) give a token matrix `[T, S]` whose row i is the attention
that predicts target token i. Subword pieces are merged into words: a
source word's weight is the sum of its pieces' columns (the source EOS is
dropped), a target word's row the mean of its pieces' rows (the target EOS is
dropped). Each target word is aligned to the source word of highest weight:
one link per target word, every output word has one (the rule of fairseq's
`extract_hard_alignment` and of Garg et al. 2019).

A piece's word: piece k of ids `x` lies in word `len(decode(x[:k+1]).split()) - 1`
(the next word when that text ends in a space: a piece that is only a space
belongs to the word after it), clamped to the line's words. It holds for
SentencePiece and tensor2tensor vocabularies alike, whose pieces do not mark
word starts the same way.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from keras import ops

from t2t_revival.settings.decode_hparams import ALIGNMENT_HEADS, head_number
from t2t_revival.decode.decode_length import cut_line, decode_in_length_order, padded_length
from t2t_revival.errors import UserError
from t2t_revival.special_ids import EOS_ID, PAD_ID

def piece_words(vocab, ids: Sequence[int], words: int) -> list[int]:
    """The word (0 .. words-1) each of `ids` (no EOS or PAD) falls in, in the
    text `vocab.decode(ids)` (see the module doc); [] when `words` is 0."""
    if not words:
        return []
    found = []
    for k in range(len(ids)):
        text = vocab.decode(ids[:k + 1])
        index = len(text.split()) - (0 if not text or text[-1].isspace() else 1)
        found.append(min(max(index, 0), words - 1))
    return found


def combine_heads(attention, layer: int, heads: str):
    """float32 `[B, layers, H, T, S]` -> `[B, T, S]`: `layer`'s heads
    combined by `heads` ("mean", "max" or a head's number, see `ALIGNMENT_HEADS`)."""
    weights = attention[:, layer]  # (B, H, T, S)
    if heads == "mean":
        return ops.mean(weights, axis=1)
    if heads == "max":
        return ops.max(weights, axis=1)
    return weights[:, int(heads)]


def word_attention(attention, source_words, target_words):
    """Token attention merged into words.

    Args:
        attention: float32 `[B, T, S]` (row i predicts target token i).
        source_words: int32 `[B, S]`, each source token's word, -1 for EOS
            and PAD (those columns are dropped).
        target_words: int32 `[B, T]`, each target token's word, -1 for EOS
            and PAD.

    Returns:
        float32 `[B, T, S]`: entry (w, v) is the attention of target word w
        (the mean over its pieces) on source word v (the sum over its pieces);
        rows and columns past the words are 0.
    """
    source_length, target_length = ops.shape(attention)[2], ops.shape(attention)[1]
    to_source = ops.one_hot(source_words, source_length)  # (B, S, S words); -1: zeros
    to_target = ops.one_hot(target_words, target_length)  # (B, T, T words)
    summed = ops.einsum("btw,bts,bsv->bwv", to_target, attention, to_source)
    pieces = ops.sum(to_target, axis=1)  # (B, T words)
    return summed / ops.maximum(pieces, 1.0)[:, :, None]


def pharaoh(source_of_target: Sequence[int]) -> str:
    """`"s-t s-t ..."` for target words t = 0, 1, ... aligned to source words s."""
    return " ".join(f"{s}-{t}" for t, s in enumerate(source_of_target))


class WordAligner:
    """Word alignments of (source, output) pairs with a `Decoder`'s model.

        aligner = WordAligner(decoder)
        aligner.align(["A dog runs ."], ["Ein Hund rennt ."])  # ["0-0 1-1 2-2 3-3"]

    Args:
        decoder: a loaded `Decoder` of one model (an ensemble has no single
            attention: a UserError); its decode hparams' `alignment_layer`
            and `alignment_heads` pick the attention.
        layer, heads: other choices than the decode hparams' (a benchmark
            compares them).
    """

    def __init__(self, decoder, layer: int | None = None, heads: str | None = None):
        import tensorflow as tf

        self.decoder, model = decoder, decoder.model
        if not hasattr(model, "decoder_layers"):
            raise UserError("word alignments need one model, not an ensemble: pass one "
                            "checkpoint to --checkpoint_path. Received: an ensemble of "
                            f"{len(getattr(model, 'models', []))} models")
        dhp, hp = decoder.decode_hparams, decoder.hparams
        self.heads = dhp.alignment_heads if heads is None else heads
        self.layer = check_alignment_settings(
            dhp.alignment_layer if layer is None else layer, self.heads,
            hp.decoder_layers, hp.num_heads)
        ids = tf.TensorSpec([None, None], tf.int32)
        self.word_attention = tf.function(self._word_attention, autograph=False,
                                          input_signature=[ids] * 4)
        """(inputs [B, S], targets [B, T], source_words [B, S], target_words
        [B, T]) -> word attention float32 [B, T, S] (`word_attention`)."""

    def _word_attention(self, inputs, targets, source_words, target_words):
        model = self.decoder.model
        encoder_output, encoder_padding = model.encode(inputs, training=False)
        _, attention = model.decode(targets, encoder_output, encoder_padding,
                                    training=False, return_attention=True)
        return word_attention(combine_heads(attention["cross"], self.layer, self.heads),
                              source_words, target_words)

    def matrices(self, sources: Sequence[str], outputs: Sequence[str],
                 progress: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
        """Each pair's word attention, float32 `[target words, source words]`
        (`word_attention`; `[0, 0]` when a side is empty). Words past the
        `max_length` tokens the model reads have no row or column."""
        decoder, hp = self.decoder, self.decoder.hparams
        vocab, dhp = decoder.vocab, decoder.decode_hparams
        source_ids = decoder.encode(list(sources))  # cut or refused as the search's
        target_ids = [cut_line(vocab.encode_target(o) + [EOS_ID], hp.max_length, EOS_ID)
                      if o.strip() else [] for o in outputs]
        counts = [(len(s.split()), len(o.split())) for s, o in zip(sources, outputs)]
        found: dict[int, np.ndarray] = {}

        def pad(rows: list[list[int]], value: int) -> np.ndarray:
            length = padded_length(max(len(r) for r in rows), hp.max_length)
            return np.array([r + [value] * (length - len(r)) for r in rows], np.int32)

        def align_batch(batch: list[int]) -> list[str]:
            chunk = [i for i in batch if target_ids[i]]   # an empty output: no words
            if not chunk:
                return [""] * len(batch)
            words = [(piece_words(vocab, source_ids[i][:-1], counts[i][0]) + [-1],
                      piece_words(vocab, target_ids[i][:-1], counts[i][1]) + [-1])
                     for i in chunk]
            merged = self.word_attention(
                pad([source_ids[i] for i in chunk], PAD_ID),
                pad([target_ids[i] for i in chunk], PAD_ID),
                pad([w[0] for w in words], -1), pad([w[1] for w in words], -1))
            for i, matrix in zip(chunk, np.asarray(merged)):
                found[i] = matrix[:counts[i][1], :counts[i][0]]
            return [""] * len(batch)

        decode_in_length_order([len(ids) for ids in source_ids], dhp.batch_size,
                               align_batch, progress, batch_tokens=dhp.batch_tokens,
                               max_length=hp.max_length)
        return [found.get(i, np.zeros((0, 0), np.float32)) for i in range(len(sources))]

    def align(self, sources: Sequence[str], outputs: Sequence[str],
              progress: Callable[[int, int], None] | None = None) -> list[str]:
        """The Pharaoh line of each (source, output) pair: `"0-0 1-2 ..."`, one
        link per output word (within max_length tokens); `""` when the source
        or the output is empty."""
        return [pharaoh(matrix.argmax(axis=1).tolist()) if matrix.size else ""
                for matrix in self.matrices(sources, outputs, progress)]

    def align_lines(self, sources: Sequence[str], lines: Sequence[str],
                    progress: Callable[[int, int], None] | None = None) -> list[str]:
        """One alignment line per line of `Decoder.translate`'s output: with
        return_beams, each beam's alignment, best first, separated by tabs (as
        the beams are); the scores of write_beam_scores are skipped."""
        dhp = self.decoder.decode_hparams
        step = 2 if dhp.write_beam_scores else 1
        beams = [line.split("\t")[::step] if dhp.return_beams else line.split("\t")[:1]
                 for line in lines]
        pairs = [(source, beam) for source, outputs in zip(sources, beams) for beam in outputs]
        aligned = iter(self.align([p[0] for p in pairs], [p[1] for p in pairs], progress))
        return ["\t".join(next(aligned) for _ in outputs) for outputs in beams]


def check_alignment_settings(layer: int, heads: str, layers: int, num_heads: int) -> int:
    """`layer` as an index in [0, layers) (Python indexing: -1 the last);
    a UserError when it or `heads` does not fit a model of `layers` decoder
    layers of `num_heads` heads."""
    if not -layers <= layer < layers:
        raise UserError(f"decode hparam 'alignment_layer' must be in [{-layers}, {layers}) "
                        f"for this model of {layers} decoder layers (-1 is the last). "
                        f"Received: alignment_layer={layer}")
    number = head_number(heads)
    if heads not in ALIGNMENT_HEADS and not (number is not None and number < num_heads):
        raise UserError(f"decode hparam 'alignment_heads' must be mean, max or a head "
                        f"number in [0, {num_heads}). Received: alignment_heads={heads!r}")
    return layer % layers
