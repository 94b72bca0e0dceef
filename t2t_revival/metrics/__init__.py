"""Metrics: BLEU (sacreBLEU, the paper's tokenized BLEU, tensor2tensor's bleu_hook)."""

from t2t_revival.metrics.bleu import (BleuInputError, bleu_files, moses_tokenize,
                                      read_lines, sacre_bleu, split_compounds,
                                      tokenized_bleu)
from t2t_revival.metrics.bleu_score import BleuScore
from t2t_revival.metrics.t2t_bleu import bleu_tokenize, t2t_bleu

__all__ = ["BleuInputError", "BleuScore", "bleu_files", "moses_tokenize", "read_lines",
           "sacre_bleu", "split_compounds", "tokenized_bleu", "bleu_tokenize", "t2t_bleu"]
