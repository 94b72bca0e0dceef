"""`Problem`: a registered dataset with its vocabulary, data generation and input pipeline."""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Sequence

from absl import logging

from t2t_revival.data.data_error import DataError
from t2t_revival.data.scored_predictions import ScoredPredictions
from t2t_revival.data.subword_sampling import training_sampling
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.data.vocabulary_file import SENTENCEPIECE_SUFFIX, SUFFIXES, load_vocabulary
from t2t_revival.errors import UserError
from t2t_revival.registry import snake_case
from t2t_revival.process.usable_cores import usable_cores

SPLITS = ("train", "dev", "test")
MODES = {"train": "train", "eval": "dev"}


class Problem:
    """A dataset the trainer, decoder and exporter know by its registered name.

    What the rest of the project calls (the contract):

    - `generate_data(data_dir, tmp_dir)`: read (or download into) `tmp_dir`
      the raw corpora and write into `data_dir`: the shared vocabulary
      (`vocab_file(data_dir)`), TFRecord shards of token ids for "train" and
      "dev" (`data_files(split, data_dir)`), their statistics, and plain-text
      source/target files of "dev" and "test" for decoding and BLEU
      (`source_target_files(split, data_dir)`). A rerun skips finished work
      and completes an interrupted run, with identical results. The trainer
      calls it when `has_data(data_dir)` is False.
    - `locate_data(data_dir, tmp_dir)`: called by t2t-datagen and the trainer
      right after construction, before anything else; a problem whose
      definition lives in the data (translate_plain_text's corpora.json) reads
      it here. The base does nothing.
    - `vocabulary(data_dir) -> SubwordVocabulary` (ids PAD=0, EOS=1, UNK=2).
    - `hparams_overrides(hparams) -> dict` of HParams fields the problem sets
      (`vocab_size` at least); works before datagen.
    - `dataset(mode, data_dir, hparams, input_context=None, shuffle=None,
      seed=None)`: mode "train" (repeated, shuffled, fixed shapes) or "eval"
      (the dev split, one pass) -> token-bucketed batches
      `{"inputs": int32 [rows, length], "targets": int32 [rows, length]}` whose
      shapes come from `batch_shapes(hparams, mode)` (packed training batches,
      `hparams.packing`, add segment ids and positions).
    - `source_target_files(split, data_dir) -> (source_path, target_path)`:
      the plain-text source sentences and references of "dev" or "test", one
      sentence a line, written by generate_data (the decoder translates the
      first and scores the second with `score_predictions`).
    - `eval_metric`: what predictions are scored with, "bleu" (the default),
      "chrf" or "evalb"; `score_predictions(predictions, references, sources)`
      computes it (t2t-decoder --decode_reference reports it), or another of
      `eval_metrics` given as `metric` (the trainer's --eval_metric;
      `check_eval_metric` says which are taken).

    Subclasses set `vocab_size` and implement `generate_data`; see
    `Text2TextProblem` for translation-style problems.

    Args:
        download: whether generate_data may download missing corpora (with a
            short timeout); when False (or offline) a missing file is a
            DataError listing each missing file, its URL and its path.
        num_workers: processes generate_data may use (t2t-datagen's
            --num_workers; default: the cores this process may run on).
    """

    registered_name: str = ""
    vocab_size: int = 0
    """The declared size of the shared vocabulary (pieces, special ids included)."""
    num_shards: dict[str, int] = {"train": 10, "dev": 1}
    """TFRecord shards per split (at least the number of training workers)."""
    eval_metric: str = "bleu"
    """The metric of `score_predictions`: "bleu" (sacreBLEU and the paper's
    tokenized BLEU; sacreBLEU is the headline), "chrf" (the same, and
    sacreBLEU's chrF2, the headline) or "evalb" (labelled bracketing F1 of
    parses)."""
    eval_metrics: tuple[str, ...] = ("bleu", "chrf")
    """The metrics `score_predictions` can compute (`eval_metric` among them):
    what the trainer's --eval_metric may choose."""

    def __init__(self, download: bool = True, num_workers: int | None = None):
        self.download = download
        if num_workers is not None and num_workers < 1:
            raise UserError(f"num_workers must be at least 1. Received: num_workers={num_workers}")
        self.num_workers = num_workers or usable_cores()
        """Worker processes that encode and write the shards (output identical for any)."""
        self._said_too_long: set[tuple[str, str, int]] = set()   # (a trainer keeps one problem)

    @property
    def name(self) -> str:
        return self.registered_name or snake_case(type(self).__name__)

    # ---- files in data_dir --------------------------------------------
    def vocab_file(self, data_dir: str) -> str:
        """`vocab.<name>.model` (SentencePiece), or `vocab.<name>.subwords` (a
        tensor2tensor vocabulary) or `vocab.<name>.marian.json` (a Marian
        model's tokenizer) that the data was encoded with, where one is there."""
        for suffix in SUFFIXES:
            path = self.vocab_file_of(data_dir, suffix)
            if os.path.isfile(path) or suffix == SENTENCEPIECE_SUFFIX:
                return path

    def vocab_file_of(self, data_dir: str, suffix: str = SENTENCEPIECE_SUFFIX) -> str:
        """`vocab.<name><suffix>` (`vocabulary_file.SUFFIXES`: the kind of
        vocabulary datagen encodes with)."""
        return os.path.join(data_dir, f"vocab.{self.name}{suffix}")

    def data_files(self, split: str, data_dir: str) -> list[str]:
        """The TFRecord shard paths of `split` ("train" or "dev")."""
        n = self.num_shards[split]
        return [os.path.join(data_dir, f"{self.name}-{split}-{i:05d}-of-{n:05d}")
                for i in range(n)]

    def stats_file(self, split: str, data_dir: str) -> str:
        return os.path.join(data_dir, f"{self.name}-{split}.stats.json")

    def source_target_files(self, split: str, data_dir: str) -> tuple[str, str]:
        """(source, target) plain-text paths of "dev" or "test" in data_dir."""
        if split not in ("dev", "test"):
            raise DataError(f"Plain-text files exist for the 'dev' and 'test' splits. "
                            f"Received: split={split!r}")
        base = os.path.join(data_dir, f"{self.name}-{split}")
        return base + ".source.txt", base + ".target.txt"

    def has_data(self, data_dir: str) -> bool:
        """Whether generate_data has completed in `data_dir`."""
        needed = [self.vocab_file(data_dir)]
        for split in self.num_shards:
            needed += self.data_files(split, data_dir) + [self.stats_file(split, data_dir)]
        for split in ("dev", "test"):
            needed += list(self.source_target_files(split, data_dir))
        return all(os.path.isfile(p) for p in needed)

    # ---- what subclasses provide ---------------------------------------
    def locate_data(self, data_dir: str, tmp_dir: str) -> None:
        """Where this run's data and raw corpora are (before `hparams_overrides`)."""

    def generate_data(self, data_dir: str, tmp_dir: str) -> None:
        raise NotImplementedError

    def vocabulary(self, data_dir: str) -> SubwordVocabulary | T2TSubwordVocabulary:
        return load_vocabulary(self.vocab_file(data_dir))

    def hparams_overrides(self, hparams: Any) -> dict[str, Any]:
        """HParams fields this problem sets: the vocabulary size."""
        return {"vocab_size": self.vocab_size}

    def check_eval_metric(self, metric: str = "") -> str:
        """`metric` ("" = `eval_metric`) if this problem can score with it,
        else a UserError listing `eval_metrics`."""
        choices = list(dict.fromkeys((self.eval_metric, *self.eval_metrics)))
        if (metric or self.eval_metric) not in choices:
            raise UserError(f"problem {self.name} scores its predictions with "
                            f"{' or '.join(choices)}; choose one of them (or leave "
                            f"--eval_metric out for its own, {self.eval_metric}). "
                            f"Received: eval_metric={metric!r}")
        return metric or self.eval_metric

    def score_predictions(self, predictions: Sequence[str], references: Sequence[str],
                          sources: Sequence[str], language: str = "de",
                          metric: str = "") -> ScoredPredictions:
        """Score decoded `predictions` against `references` with `metric`
        ("" = `eval_metric`, see `check_eval_metric`).

        Here sacreBLEU (cased, 13a) and the paper's tokenized BLEU, whose
        Moses tokenizer takes `language`; sacreBLEU the headline figure, or
        with "chrf" sacreBLEU's chrF2 (also reported). Subclasses with
        another metric override this (and may use `sources`).
        """
        from t2t_revival.metrics.bleu import format_scores, sacre_bleu, tokenized_bleu
        from t2t_revival.metrics.chrf_ter import CHRF, chrf

        metric = self.check_eval_metric(metric)
        scores = [sacre_bleu(predictions, references),
                  tokenized_bleu(predictions, references, language)]
        others = {CHRF: chrf(predictions, references)} if metric == CHRF else {}
        headline = others[CHRF].score if others else scores[0].score
        return ScoredPredictions(metric=metric, score=headline,
                                 text=format_scores(scores, others=others),
                                 details=[*scores, *others.values()],
                                 json_text=format_scores(scores, True, others))

    def language_pairs(self, sources: Sequence[str]) -> dict[str, tuple[str, list[int]]]:
        """{"en-de": (target language, its indices in `sources`)}; {} for one pair."""
        return {}

    # ---- input pipeline ------------------------------------------------
    def batch_shapes(self, hparams: Any, mode: str = "train") -> list[tuple[int, int]]:
        """The fixed padded batch shapes `[(rows, length), ...]` of `dataset(mode)`.

        One shape `[(batch_size // max_length, max_length)]` for packed
        training batches (`hparams.packing`), else one per bucket.
        """
        from t2t_revival.data import input_pipeline  # imports TensorFlow: only on use

        if hparams.packing and mode == "train":
            return [input_pipeline.packed_shape(hparams.batch_size, hparams.max_length)]
        return input_pipeline.bucket_shapes(hparams.batch_size, hparams.max_length,
                                            hparams.bucket_boundaries)

    def stats(self, split: str, data_dir: str) -> dict[str, Any]:
        """Counts written by generate_data: examples, dropped pairs, length histogram."""
        path = self.stats_file(split, data_dir)
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise DataError(
                f"No generated data for problem {self.name} in {data_dir}; run "
                f"t2t-datagen --problem={self.name} --data_dir={data_dir} first. "
                f"Received: data_dir={data_dir!r}") from None

    def count_too_long(self, split: str, data_dir: str, max_length: int) -> int:
        """Pairs of `split` whose longer side (EOS included) exceeds max_length."""
        hist = self.stats(split, data_dir)["length_histogram"]
        return sum(c for length, c in hist.items() if int(length) > max_length)

    def corrupt_data_error(self, data_dir: str) -> DataError | None:
        """A DataError naming every shard in data_dir that cannot be read, or None.

        Call it when reading `dataset` raised `tf.errors.DataLossError`
        (TensorFlow's message names no file); None means the shards are
        intact and the error came from elsewhere (re-raise it then).
        """
        from t2t_revival.data import input_pipeline  # imports TensorFlow: only on use

        bad = input_pipeline.unreadable_records(
            [f for split in self.num_shards for f in self.data_files(split, data_dir)
             if os.path.isfile(f)])
        if not bad:
            return None
        first, reason = next(iter(bad.items()))
        return DataError(
            f"{len(bad)} data shard(s) of {self.name} are truncated or corrupt, first "
            f"{first} ({reason}); delete {'it' if len(bad) == 1 else 'them'} and rerun "
            f"t2t-datagen --problem={self.name} --data_dir={data_dir} (it rewrites only "
            f"the missing shards). Received: corrupt_shards="
            f"{[os.path.basename(p) for p in bad]}")

    def missing_data_error(self, data_dir: str) -> DataError | None:
        """A DataError naming the data shards missing from data_dir, or None.

        Call it when reading `dataset` raised `tf.errors.NotFoundError`: a
        shard deleted while training read it. None means every shard is
        there and the error came from elsewhere (re-raise it then).
        """
        missing = [f for split in self.num_shards for f in self.data_files(split, data_dir)
                   if not os.path.isfile(f)]
        if not missing:
            return None
        return DataError(
            f"{len(missing)} data shard(s) of {self.name} are missing, first {missing[0]} "
            f"(deleted while in use?); rerun t2t-datagen --problem={self.name} "
            f"--data_dir={data_dir} (it writes only the missing shards). Received: "
            f"missing_shards={[os.path.basename(p) for p in missing]}")

    def dataset(self, mode: str, data_dir: str, hparams: Any, input_context=None,
                shuffle: bool | None = None, seed: int | None = None,
                skip_corrupt: bool = False):
        """Token-bucketed batches of the "train" or "eval" (dev) split.

        Pairs longer than `hparams.max_length` are dropped, their number (if any)
        logged once per split of this problem object (`count_too_long`). With `skip_corrupt`,
        each shard is read up to a damaged record, the rest skipped (`corrupt_records`
        counts them). With `hparams.packing`, training batches are packed instead
        (`input_pipeline.packed_dataset`: several pairs per row, with segment ids and
        per-segment positions). `hparams.*_sampling_alpha`: `subword_sampling`.
        """
        if mode not in MODES:
            raise DataError(f"mode must be 'train' or 'eval'. Received: mode={mode!r}")
        split = MODES[mode]
        if mode == "train" and getattr(hparams, "corpus_weights", ()):
            raise DataError(f"hparam corpus_weights applies to problems with several "
                            f"training corpora (translate_plain_text); {self.name} has one. "
                            f"Received: corpus_weights={list(hparams.corpus_weights)}")
        files = self.data_files(split, data_dir)
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            present = sorted(glob.glob(os.path.join(data_dir, f"{self.name}-{split}-*")))
            raise DataError(
                f"{len(missing)} of {len(files)} {split} shards of {self.name} are "
                f"missing in {data_dir} (found {len(present)} files); run t2t-datagen "
                f"--problem={self.name} --data_dir={data_dir}. Received: "
                f"first_missing={missing[0]!r}")
        limit = self.batch_shapes(hparams, mode)[-1][1]
        total, too_long = check_something_survives(self, split, data_dir, limit)
        said = (split, os.path.abspath(data_dir), limit)
        if too_long and said not in self._said_too_long:   # once: dev is read at every eval
            self._said_too_long.add(said)
            logging.info("%s %s: %d of %d pairs are longer than %d tokens and are dropped.",
                         self.name, split, too_long, total, limit)
        if mode == "train" and "dev" in self.num_shards:
            # Evaluation runs after hours of training: refuse an empty dev split now.
            check_something_survives(self, "dev", data_dir, limit)
        from t2t_revival.data import input_pipeline  # imports TensorFlow: only on use

        common = dict(batch_size=hparams.batch_size, max_length=hparams.max_length,
                      shuffle=shuffle, input_context=input_context, seed=seed,
                      skip_corrupt=skip_corrupt,
                      sampling=training_sampling(self, data_dir, hparams) if mode == "train"
                      else None)
        if hparams.packing and mode == "train":
            return input_pipeline.packed_dataset(files, **common)
        return input_pipeline.token_bucketed_dataset(
            files, boundaries=hparams.bucket_boundaries, training=(mode == "train"), **common)

    def corrupt_records(self, split: str, data_dir: str) -> tuple[int, dict[str, str]]:
        """(records lost, {damaged shard: what is wrong}) of a split read with
        `dataset(..., skip_corrupt=True)`: the split's pairs (its stats) minus
        the records readable before each damage. Reads every shard once."""
        from t2t_revival.data import input_pipeline  # imports TensorFlow: only on use

        files = self.data_files(split, data_dir)
        damaged = input_pipeline.unreadable_records(files)
        if not damaged:
            return 0, {}
        readable = sum(input_pipeline.readable_record_count(f) for f in files)
        return max(int(self.stats(split, data_dir)["examples"]) - readable, 0), damaged


def check_something_survives(problem: Problem, split: str, data_dir: str,
                             limit: int) -> tuple[int, int]:
    """(pairs, pairs longer than limit) of `problem`'s `split`; a DataError
    when none is left.

    A training pipeline repeats forever, so one whose filter keeps nothing
    would wait forever for its first batch: this is checked from the
    stats datagen wrote, before any record is read.
    """
    total = problem.stats(split, data_dir)["examples"]
    too_long = problem.count_too_long(split, data_dir, limit)
    if total == 0:
        raise DataError(
            f"The {split} split of {problem.name} in {data_dir} holds no pairs; check "
            f"the corpus files and rerun t2t-datagen into a new --data_dir. "
            f"Received: {split} pairs=0")
    if too_long == total:
        hist = problem.stats(split, data_dir)["length_histogram"]
        shortest = min(int(n) for n in hist)
        raise DataError(
            f"Every one of the {total} {split} pairs of {problem.name} is longer than "
            f"max_length={limit} tokens (the shortest has {shortest}, EOS included), "
            f"so nothing is left to {'train' if split == 'train' else 'evaluate'} on; "
            f"raise max_length to at least {shortest}. Received: max_length={limit}")
    return total, too_long
