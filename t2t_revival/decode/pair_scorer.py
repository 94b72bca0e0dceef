"""`PairScorer`: t2t-decoder --score_file's forced scoring of given pairs
(`Decoder.score`), batched in length order as translation is."""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from t2t_revival.decode.decode_length import decode_in_length_order, padded_length
from t2t_revival.decode.forced_scoring import score_targets
from t2t_revival.errors import UserError
from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.special_ids import EOS_ID, PAD_ID


class PairScorer:
    """Each (source, target) pair's log-probability and score.

    Args:
        model: the model (or ensemble) with `encode` and `decode`.
        hparams, vocab: its hparams (max_length) and vocabulary.
        decode_hparams: the settings (alpha, batch_size, batch_tokens,
            parallel_batches).
    """

    def __init__(self, model, hparams, vocab, decode_hparams: DecodeHParams):
        self.model, self.hparams, self.vocab = model, hparams, vocab
        self.decode_hparams = decode_hparams
        self.score_batch = tf.function(self._score_batch, reduce_retracing=True,
                                       autograph=False)
        """Forced scoring of a batch: (inputs [B, S], targets [B, T]) -> (log_probs, scores)."""

    def _score_batch(self, inputs, targets):
        """inputs [B, S], targets [B, T] -> (log_probs [B], scores [B])."""
        return score_targets(self.model, inputs, targets, self.decode_hparams.alpha,
                             self.decode_hparams.length_penalty)

    def score(self, pairs: Sequence[tuple[str, str]],
              progress: Callable[[int, int], None] | None = None
              ) -> list[tuple[float, float]]:
        """(log-probability, length-penalized score) of each (source, target) pair.

        Forced decoding (`forced_scoring.score_targets`): the target is scored
        with EOS appended; the score is the log-probability / ((5 + length) /
        6) ** alpha, length counting EOS, the score beam search gives that
        output. An empty source is a lone EOS, an empty target EOS alone. A
        source or target longer than max_length tokens is a UserError.
        """
        hp, dhp = self.hparams, self.decode_hparams
        sources, targets = [], []
        for line, (source, target) in enumerate(pairs, start=1):
            for side, text, ids, encode in (("source", source, sources, self.vocab.encode),
                                            ("target", target, targets,
                                             self.vocab.encode_target)):
                ids.append(encode(text) + [EOS_ID])
                if len(ids[-1]) > hp.max_length:
                    raise UserError(
                        f"pair {line}: the {side} has {len(ids[-1])} tokens, more than "
                        f"the model's max_length of {hp.max_length}; split the pair. "
                        f"Received: {side}={text[:60]!r}...")

        def pad(rows: list[list[int]]) -> tf.Tensor:
            length = padded_length(max(len(r) for r in rows), hp.max_length)
            return tf.constant([r + [PAD_ID] * (length - len(r)) for r in rows], tf.int32)

        def score_batch(chunk: list[int]) -> list[tuple[float, float]]:
            log_probs, scores = self.score_batch(pad([sources[i] for i in chunk]),
                                            pad([targets[i] for i in chunk]))
            return list(zip(log_probs.numpy().tolist(), scores.numpy().tolist()))

        return decode_in_length_order([len(s) for s in sources], dhp.batch_size,
                                      score_batch, progress, batch_tokens=dhp.batch_tokens,
                                      max_length=hp.max_length,
                                      parallel_batches=dhp.parallel_batches)
