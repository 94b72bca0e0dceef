"""Decoding: beam search and greedy search over a step callback, decode hparams."""

from t2t_revival.decode.beam_search import NEG_INF, beam_search, greedy_search, length_penalty
from t2t_revival.decode.decode_hparams import (DecodeHParams, DecodeHParamsError,
                                               parse_decode_hparams)
from t2t_revival.special_ids import EOS_ID, PAD_ID

__all__ = ["EOS_ID", "NEG_INF", "PAD_ID", "beam_search", "greedy_search",
           "length_penalty", "DecodeHParams", "DecodeHParamsError",
           "parse_decode_hparams"]
