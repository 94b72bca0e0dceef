"""Metrics: BLEU (sacreBLEU, the paper's tokenized BLEU, tensor2tensor's bleu_hook),
sacreBLEU's chrF, chrF++ and TER."""

from t2t_revival.metrics.bleu import (BleuInputError, bleu_files, bleu_scores, moses_tokenize,
                                      read_lines, read_references, reference_streams,
                                      sacre_bleu, split_compounds, tokenized_bleu)
from t2t_revival.metrics.bleu_score import BleuScore
from t2t_revival.metrics.chrf_ter import chrf, chrf_ter_scores, ter
from t2t_revival.metrics.metric_score import MetricScore
from t2t_revival.metrics.t2t_bleu import bleu_tokenize, t2t_bleu

__all__ = ["BleuInputError", "BleuScore", "MetricScore", "bleu_files", "bleu_scores",
           "chrf", "chrf_ter_scores", "moses_tokenize", "read_lines", "read_references",
           "reference_streams", "sacre_bleu", "split_compounds", "ter", "tokenized_bleu",
           "bleu_tokenize", "t2t_bleu"]
