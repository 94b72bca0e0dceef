"""English constituency parsing on the Wall Street Journal Penn Treebank (paper 6.3).

Trees are linearized as in Vinyals et al. 2015 (`t2t_revival/parsing/linearize.py`):
the source is the sentence's words, the target the tree with POS tags in place
of the words (`(S (NP NNP NNP )NP (VP VBD ... )VP . )S`). Both sides share one
SentencePiece vocabulary, like the translation problems.

Besides what every Text2TextProblem writes, generate_data writes the gold
trees of "dev" and "test" as bracketed trees, one a line
(`gold_tree_file(split, data_dir)`), for `t2t-parse-eval --gold`.

Their `eval_metric` is "evalb": decoding one of these problems with
`t2t-decoder --decode_reference` scores EVALB labelled bracketing F1
(`score_predictions`) instead of BLEU.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
from typing import Any, Iterator, Sequence

from absl import logging

from t2t_revival.data.data_error import DataError
from t2t_revival.data.scored_predictions import ScoredPredictions
from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.parsing import (
    EvalbScore, RepairedTree, TreebankError, delinearize, read_parsing_examples,
    repair_linearized, restore_gold_tags, score_trees)
from t2t_revival.registry import register_problem

# Linearized WSJ trees are long. With the bracket-fusing vocabulary one tree
# token is one id: the sample's longest target is 573 ids (a 249-word
# sentence), its longest dev/test targets 138 ids; 512 keeps all but one of
# its 3,914 trees.
_MAX_LENGTH = 512
# Paper 6.3: beam 21, alpha 0.3, maximum output length = input length + 300.
_PARSING_DECODE = dict(beam_size=21, alpha=0.3, extra_length=300)


class _ExampleReader:
    """(source, target) pairs of treebank files, with TextPairReader's counters."""

    def __init__(self, files: Sequence[pathlib.Path]):
        self.files = list(files)
        self.pairs = 0
        self.empty_dropped = 0  # trees with no word left (only empty elements)
        self.undecodable_skipped = 0

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for path in self.files:
            try:
                examples = read_parsing_examples(path)
            except TreebankError as e:
                raise DataError(str(e)) from None
            for source, target in examples:
                self.pairs += 1
                yield source, target


class _ParsingProblem(Text2TextProblem):
    """Linearized-tree parsing over `.mrg` files; subclasses pick the files."""

    eval_metric = "evalb"
    eval_metrics = ("evalb",)
    # Let BPE fuse brackets with labels: `(NP` and `)NP` become one piece each
    # instead of two, which cuts target lengths by about a third.
    vocab_split_by_unicode_script = False
    num_shards = {"train": 4, "dev": 1}

    def split_files(self, split: str, tmp_dir: str) -> list[pathlib.Path]:
        raise NotImplementedError

    def readers(self, split: str, tmp_dir: str) -> list[_ExampleReader]:
        return [_ExampleReader(self.split_files(split, tmp_dir))]

    def prepare(self, tmp_dir: str) -> None:
        for split in ("train", "dev", "test"):
            self.split_files(split, tmp_dir)  # a DataError when files are missing

    def hparams_overrides(self, hparams: Any) -> dict[str, Any]:
        """The vocabulary size, max_length 512 and the paper's parsing decoding."""
        return {"vocab_size": self.vocab_size, "max_length": _MAX_LENGTH,
                **_PARSING_DECODE}

    # ---- gold trees ------------------------------------------------------
    def gold_tree_file(self, split: str, data_dir: str) -> str:
        """The gold trees of "dev" or "test", bracketed, one a line (normalized)."""
        return os.path.join(data_dir, f"{self.name}-{split}.gold.trees")

    def generate_data(self, data_dir: str, tmp_dir: str) -> None:
        super().generate_data(data_dir, tmp_dir)
        for split in ("dev", "test"):
            path = self.gold_tree_file(split, str(data_dir))
            if os.path.isfile(path):
                continue
            lines = [delinearize(target, source).to_string()
                     for source, target in self.text_pairs(split, str(tmp_dir))]
            write_atomically(path, "".join(line + "\n" for line in lines))
            logging.info("%s %s: wrote %d gold trees to %s", self.name, split,
                         len(lines), path)

    def has_data(self, data_dir: str) -> bool:
        return super().has_data(data_dir) and all(
            os.path.isfile(self.gold_tree_file(s, data_dir)) for s in ("dev", "test"))

    # ---- scoring -----------------------------------------------------------
    def score_predictions(self, predictions: Sequence[str], references: Sequence[str],
                          sources: Sequence[str], language: str = "de",
                          metric: str = "") -> ScoredPredictions:
        """EVALB F1 (`evalb`, the only `metric`); `outputs["trees"]` holds the
        predicted trees, bracketed. `language` is not used."""
        self.check_eval_metric(metric)
        score, trees = self.evalb(predictions, references, sources)
        return ScoredPredictions(
            metric="evalb", score=score.f1, text=score.summary(), details=score,
            json_text=json.dumps({"evalb": score.to_dict()}, indent=2, sort_keys=True),
            outputs={"trees": [t.tree.to_string() for t in trees]})

    @staticmethod
    def evalb(predictions: Sequence[str], references: Sequence[str],
              sources: Sequence[str]) -> tuple[EvalbScore, list[RepairedTree]]:
        """EVALB of linearized predictions against linearized gold targets.

        Each prediction is rebuilt over its source words (`repair_linearized`,
        which never fails; a malformed one is repaired and counted in
        `repaired`), each reference with `delinearize`. The predicted tree
        then takes the gold POS tags (same words, same order), so that only
        its brackets are scored and every sentence is.

        Returns:
            the EvalbScore (with `repaired` and `flat` set) and the predicted
            trees, in order.
        """
        gold, test = [], []
        repaired = flat = 0
        for number, (pred, ref, src) in enumerate(zip(predictions, references, sources), 1):
            try:
                gold.append(delinearize(ref, src))
            except TreebankError as e:
                raise DataError(f"reference line {number} is not a well-formed "
                                f"linearized tree for its source sentence; pass the "
                                f"<problem>-test.target.txt written by t2t-datagen "
                                f"({e})") from None
            result = repair_linearized(pred, src)
            repaired += int(result.repaired)
            flat += int("flat" in result.repairs)
            # Score the brackets, not the model's POS tags (Vinyals et al. 2015).
            restore_gold_tags(result.tree, gold[-1].tags())
            test.append(result)
        score = score_trees(gold, [r.tree for r in test])
        return dataclasses.replace(score, repaired=repaired, flat=flat), test


_WSJ_SECTIONS = {"train": range(2, 22), "dev": range(22, 23), "test": range(23, 24)}


@register_problem
class ParsingEnglishPtb16k(_ParsingProblem):
    """WSJ Penn Treebank parsing: sections 02-21 train, 22 dev, 23 test; 16K vocab.

    The treebank is licensed (LDC99T42) and never downloaded: put its WSJ
    `.mrg` section folders in tmp_dir, as `tmp_dir/wsj/02/wsj_0200.mrg` or
    `tmp_dir/02/wsj_0200.mrg` (the layout of `treebank_3/parsed/mrg/wsj`).
    """

    vocab_size = 16384
    num_shards = {"train": 10, "dev": 1}

    def wsj_dir(self, tmp_dir: str) -> str:
        """tmp_dir/wsj when it holds the section folders, else tmp_dir."""
        sub = os.path.join(tmp_dir, "wsj")
        return sub if os.path.isdir(os.path.join(sub, "02")) else tmp_dir

    def split_files(self, split: str, tmp_dir: str) -> list[pathlib.Path]:
        root = pathlib.Path(self.wsj_dir(str(tmp_dir)))
        files, missing = [], []
        for section in _WSJ_SECTIONS[split]:
            found = sorted(root.joinpath(f"{section:02d}").glob("*.mrg"))
            if not found:
                missing.append(f"{section:02d}")
            files += found
        if missing:
            if len(missing) == len(_WSJ_SECTIONS[split]) > 1:
                missing = [f"{missing[0]}-{missing[-1]}"]
            raise DataError(
                f"The Penn Treebank WSJ sections {', '.join(missing)} ({split} split) "
                f"are missing: expected .mrg files in {root}/NN/ (e.g. "
                f"{root}/02/wsj_0200.mrg) or {tmp_dir}/wsj/NN/. The treebank is "
                f"licensed and cannot be downloaded: obtain it from the LDC "
                f"(LDC99T42, treebank_3/parsed/mrg/wsj) and pass its wsj folder as "
                f"--tmp_dir. Received: tmp_dir={str(tmp_dir)!r}")
        return files


@register_problem
class ParsingEnglishPtb8k(ParsingEnglishPtb16k):
    """WSJ Penn Treebank parsing as parsing_english_ptb16k, with an 8K vocab (tensor2tensor's name).

    tensor2tensor's parsing_english_ptb8k borrowed the vocabulary of its
    En-De-Fr problems (`vocab.endefr.8192`); here, as for every parsing
    problem, the vocabulary is trained on the linearized trees.
    """

    vocab_size = 8192


# The 199 files of the NLTK WSJ sample, split by file number (3,914 trees):
# wsj_0001-0159 train (3,396 trees), 0160-0179 dev (273), 0180-0199 test (245).
_SAMPLE_SPLITS = {"train": (1, 159), "dev": (160, 179), "test": (180, 199)}
_SAMPLE_FILE = re.compile(r"wsj_(\d{4})\.mrg$")


@register_problem
class ParsingEnglishPtbSample(_ParsingProblem):
    """The free 3,914-tree WSJ sample (wsj_0001-0199): 0001-0159 train,
    0160-0179 dev, 0180-0199 test; 4000 shared pieces. Offline and for tests.

    tmp_dir is the folder of the sample's `.mrg` files, or a folder holding
    `ptb_sample/combined/` or `combined/` (e.g. the shared data folder).
    """

    # 3.4k training trees: the targets use ~70 distinct tokens and the
    # sentences ~11k word types; 4000 pieces keep frequent words whole.
    vocab_size = 4000

    def sample_dir(self, tmp_dir: str) -> pathlib.Path:
        root = pathlib.Path(tmp_dir)
        for candidate in (root, root / "combined", root / "ptb_sample" / "combined"):
            if (candidate / "wsj_0001.mrg").is_file():
                return candidate
        return root

    def split_files(self, split: str, tmp_dir: str) -> list[pathlib.Path]:
        root = self.sample_dir(str(tmp_dir))
        first, last = _SAMPLE_SPLITS[split]
        files = []
        if root.is_dir():
            for path in sorted(root.glob("wsj_*.mrg")):
                m = _SAMPLE_FILE.search(path.name)
                if m and first <= int(m.group(1)) <= last:
                    files.append(path)
        if not files:
            raise DataError(
                f"No WSJ sample files wsj_{first:04d}.mrg..wsj_{last:04d}.mrg ({split} "
                f"split) in {root}; pass --tmp_dir=the sample's combined/ folder "
                f"(NLTK's treebank corpus, e.g. shared/data/ptb_sample/combined). "
                f"Received: tmp_dir={str(tmp_dir)!r}")
        return files
