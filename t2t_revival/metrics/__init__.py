"""Metrics: BLEU (sacreBLEU and the paper's tokenized BLEU)."""

from t2t_revival.metrics.bleu import (BleuInputError, bleu_files, moses_tokenize,
                                      read_lines, sacre_bleu, split_compounds,
                                      tokenized_bleu)
from t2t_revival.metrics.bleu_score import BleuScore

__all__ = ["BleuInputError", "BleuScore", "bleu_files", "moses_tokenize", "read_lines",
           "sacre_bleu", "split_compounds", "tokenized_bleu"]
