"""Constituency parsing support: treebank trees, linearization, repair, EVALB.

Pure Python (no TensorFlow). What a parsing Problem and the decoder use:

    from t2t_revival.parsing import (read_parsing_examples, repair_linearized,
                                     evaluate_files)

    pairs = read_parsing_examples("wsj/02")        # [(source_text, target_text)]
    result = repair_linearized(decoded_text, source_text)   # never raises
    print(result.tree.to_string(), result.repairs)
    score = evaluate_files("gold.mrg", "predicted.txt")     # EvalbScore; .f1
"""

from t2t_revival.parsing.evalb import (
    DELETE_LABELS, evalb_label, evaluate_files, predicted_tree, score_trees,
    sentence_brackets)
from t2t_revival.parsing.evalb_score import EvalbScore
from t2t_revival.parsing.linearize import (
    delinearize, linearize, linearize_tokens, read_parsing_examples)
from t2t_revival.parsing.repair import (
    flat_tree, guess_tag, repair_bracketed, repair_linearized, restore_gold_tags)
from t2t_revival.parsing.repaired_tree import RepairedTree
from t2t_revival.parsing.tree import Tree
from t2t_revival.parsing.treebank import (
    normalize_tree, parse_tree, parse_trees, read_treebank, read_treebank_file,
    strip_function_tags, treebank_files)
from t2t_revival.parsing.treebank_error import TreebankError

__all__ = [
    "DELETE_LABELS", "EvalbScore", "RepairedTree", "Tree", "TreebankError",
    "delinearize", "evalb_label", "evaluate_files", "flat_tree", "guess_tag",
    "linearize", "linearize_tokens", "normalize_tree", "parse_tree", "parse_trees",
    "predicted_tree", "read_parsing_examples", "read_treebank",
    "read_treebank_file", "repair_bracketed", "repair_linearized", "restore_gold_tags", "score_trees",
    "sentence_brackets", "strip_function_tags", "treebank_files",
]
