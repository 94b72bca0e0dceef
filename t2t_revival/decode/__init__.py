"""Decoding: beam search and sampling over a step callback, the `Decoder` of a
trained model, ensembles and forced scoring. Its settings, `DecodeHParams`,
are `t2t_revival.decode_hparams` (no TensorFlow)."""

from t2t_revival.decode.beam_search import NEG_INF, beam_search, greedy_search, length_penalty
from t2t_revival.special_ids import EOS_ID, PAD_ID

__all__ = ["EOS_ID", "NEG_INF", "PAD_ID", "beam_search", "greedy_search", "length_penalty"]
