"""Your own aligned plain-text corpora, named in a corpora.json: no code to write.

    my_corpora/corpora.json   (paths relative to it; see CorporaSpec)
      {"vocab_size": 8000,
       "train": [{"source": "indomain.en.gz", "target": "indomain.de.gz", "weight": 3},
                 {"source": "general.en.gz", "target": "general.de.gz"}],
       "dev": {"source": "dev.en", "target": "dev.de"},
       "test": {"source": "test.en", "target": "test.de"}}

    t2t-trainer --problem=translate_plain_text --tmp_dir=my_corpora \\
        --data_dir=my_data --output_dir=my_run --hparams_set=transformer_base

(the trainer runs the datagen first; `t2t-datagen --problem=translate_plain_text
--tmp_dir=my_corpora --data_dir=my_data` runs it alone). Each training corpus
gets its own TFRecord shards; the weights act at training time
(`tf.data.Dataset.sample_from_datasets` in the input pipeline), through the
hparam `corpus_weights` that corpora.json sets, so hparams.json records them
and `--hparams corpus_weights=[...]` changes them without a new datagen.

Many target languages in one model: corpora.json names a "target_lang" per
corpus (`CorporaSpec`); each source line then starts with its corpus's token
(`>>de<< ...`, `language_tokens`), in the shards and in the dev and test
source files alike, the vocabulary holds the tokens as pieces, and the dev
metric is also reported per language pair (`language_pairs`).
"""

from __future__ import annotations

import contextlib
import json
import os

from absl import logging

from t2t_revival.files.atomic_file import copy_atomically, write_atomically
from t2t_revival.data.corpora_spec import CorporaSpec
from t2t_revival.data.data_error import DataError
from t2t_revival.data.language_tokens import language_token, lines_by_language
from t2t_revival.data.sharded_record_writer import ShardedRecordWriter
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.data.vocabulary_file import vocabulary_suffix
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.data.text_pair_reader import TextPairReader
from t2t_revival.registry import register_problem

CORPORA_FILE = "corpora.json"
"""The name of the spec in --tmp_dir."""


@register_problem
class TranslatePlainText(Text2TextProblem):
    """Your own aligned text files (.gz too) named in <tmp_dir>/corpora.json, with per-corpus training weights; vocab_size from it."""

    shards_per_corpus = 4
    """TFRecord shards of each training corpus."""
    num_shards = {"train": shards_per_corpus, "dev": 1}

    def __init__(self, download: bool = True, num_workers: int | None = None):
        super().__init__(download=download, num_workers=num_workers)
        self.spec: CorporaSpec | None = None

    # ---- where the spec is ---------------------------------------------
    def spec_file(self, data_dir: str) -> str:
        """Datagen's copy of corpora.json in data_dir (absolute paths)."""
        return os.path.join(data_dir, f"{self.name}.{CORPORA_FILE}")

    def locate_data(self, data_dir: str, tmp_dir: str) -> None:
        """Read tmp_dir/corpora.json, or else the copy datagen left in data_dir."""
        given = os.path.join(tmp_dir, CORPORA_FILE) if tmp_dir else ""
        copy = self.spec_file(data_dir)
        if given and os.path.isfile(given):
            spec = CorporaSpec.load(given)
            if os.path.isfile(copy) and not spec.same_data(CorporaSpec.load(copy, False)):
                raise DataError(
                    f"{data_dir} holds data generated from other corpora or another "
                    f"vocabulary than {given} names (see {copy}); use a new --data_dir "
                    f"for these corpora. Received: data_dir={data_dir!r}")
        elif os.path.isfile(copy):
            spec = CorporaSpec.load(copy, check_files=False)
        else:
            raise DataError(
                f"{self.name} reads your corpora from a {CORPORA_FILE}, and there is none "
                f"in --tmp_dir ({given or 'not given'}) nor a generated one in --data_dir; "
                f"write one (docs/your-own-data.md) and pass its folder as --tmp_dir. "
                f"Received: tmp_dir={tmp_dir!r}, data_dir={data_dir!r}")
        self.spec = spec
        self.vocab_size = spec.vocab_size

    def _spec(self) -> CorporaSpec:
        if self.spec is None:
            raise RuntimeError(f"{self.name}: call locate_data(data_dir, tmp_dir) first")
        return self.spec

    def hparams_overrides(self, hparams) -> dict:
        spec = self._spec()
        return {"vocab_size": spec.vocab_size, "corpus_weights": spec.weights}

    # ---- files in data_dir ---------------------------------------------
    def corpus_files(self, index: int, data_dir: str) -> list[str]:
        """The TFRecord shards of training corpus `index`."""
        n = self.shards_per_corpus
        return [os.path.join(data_dir, f"{self.name}-train-corpus{index}-{i:05d}-of-{n:05d}")
                for i in range(n)]

    def corpus_stats_file(self, index: int, data_dir: str) -> str:
        return os.path.join(data_dir, f"{self.name}-train-corpus{index}.stats.json")

    def data_files(self, split: str, data_dir: str) -> list[str]:
        if split != "train":
            return super().data_files(split, data_dir)
        return [f for i in range(len(self._spec().train))
                for f in self.corpus_files(i, data_dir)]

    def has_data(self, data_dir: str) -> bool:
        extra = [self.spec_file(data_dir)] + [self.corpus_stats_file(i, data_dir)
                                              for i in range(len(self._spec().train))]
        return super().has_data(data_dir) and all(os.path.isfile(p) for p in extra)

    # ---- generation ----------------------------------------------------
    def language_tokens(self) -> tuple[str, ...]:
        return self._spec().language_tokens

    def readers(self, split: str, tmp_dir: str) -> list[TextPairReader]:
        return [self._reader(c, split) for c in self._spec().corpora(split)]

    def _reader(self, corpus, split: str) -> TextPairReader:
        """The pairs of `corpus`, its source lines after its language token
        in a multilingual spec."""
        prefix = f"{language_token(corpus.target_lang)} " if self.language_tokens() else ""
        return TextPairReader(corpus.source, corpus.target,
                              what=f'"{split}" in corpora.json', source_prefix=prefix)

    def language_pairs(self, sources) -> dict[str, tuple[str, list[int]]]:
        """{pair name ("en-de"): (its target language for the Moses tokenizer
        of the tokenized BLEU, `moses_language`; the indices of its lines)} of
        dev `sources` by their leading token; {} for a spec of one target
        language."""
        from t2t_revival.metrics.bleu import moses_language

        spec = self._spec()
        if not spec.language_tokens:
            return {}
        groups = lines_by_language(sources, [language_token(c) for c in spec.target_langs])
        pairs: dict[str, tuple[str, list[int]]] = {}
        for code, indices in groups.items():
            name = f"{spec.source_lang}-{code}" if spec.source_lang else code
            pairs[name] = (moses_language(code), indices)
        return pairs

    def generate_data(self, data_dir: str, tmp_dir: str) -> None:
        """Generate the data; the spec copy is written last, the mark of a
        complete datagen. A datagen that fails removes what it wrote (data
        made from corpora that need fixing), so that the same command runs
        again once they are fixed; a stop signal keeps it, to resume."""
        os.makedirs(data_dir, exist_ok=True)
        before = set(os.listdir(data_dir))
        try:
            super().generate_data(data_dir, tmp_dir)
        except Exception:
            self._remove_outputs(data_dir, keep=before)
            raise
        write_atomically(self.spec_file(data_dir), self._spec().to_json())

    def _remove_outputs(self, data_dir: str, keep: set[str]) -> None:
        """Remove the files this problem writes in data_dir, but those in `keep`."""
        prefixes = (f"{self.name}-", f"{self.name}.", f"vocab.{self.name}.")
        for name in set(os.listdir(data_dir)) - keep:
            if name.startswith(prefixes):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(data_dir, name))

    def _make_vocabulary(self, data_dir: str, tmp_dir: str
                         ) -> SubwordVocabulary | T2TSubwordVocabulary:
        """corpora.json's "vocab" copied into data_dir (named by its kind:
        vocab.<name>.subwords for a tensor2tensor one, .marian.json for a
        Marian model's tokenizer), or else a SentencePiece model trained."""
        vocab = self._spec().vocab
        if vocab:
            copy = self.vocab_file_of(data_dir, vocabulary_suffix(vocab))
            if not os.path.isfile(copy):
                copy_atomically(vocab, copy)
                logging.info("%s: reusing the vocabulary %s", self.name, vocab)
        return super()._make_vocabulary(data_dir, tmp_dir)

    def _write_split(self, split: str, vocab: SubwordVocabulary | T2TSubwordVocabulary,
                     data_dir: str, tmp_dir: str) -> None:
        if split != "train":
            super()._write_split(split, vocab, data_dir, tmp_dir)
            return
        totals = {"examples": 0, "empty_dropped": 0, "undecodable_skipped": 0}
        hist: dict[str, int] = {}
        for i, corpus in enumerate(self._spec().train):
            stats_path = self.corpus_stats_file(i, data_dir)
            writer = ShardedRecordWriter(self.corpus_files(i, data_dir), seed=self.seed + i,
                                         description=f"{self.name} train corpus {i}",
                                         num_workers=self.num_workers)
            if not writer.missing() and os.path.isfile(stats_path):
                writer.clean_up()
                counts = self._corpus_stats(i, data_dir)
            else:
                counts = self._write_records(
                    writer, stats_path, [self._reader(corpus, "train")],
                    vocab, f"{self.name} train corpus {i} ({corpus.source})", None)
            if not counts["examples"]:
                raise DataError(
                    f"the training corpus {corpus.source} / {corpus.target} holds no "
                    f"sentence pair with text on both sides; fix or remove it in "
                    f"{CORPORA_FILE}. Received: train[{i}] pairs=0")
            for k in totals:
                totals[k] += counts[k]
            for length, c in counts["length_histogram"].items():
                hist[length] = hist.get(length, 0) + c
        totals["length_histogram"] = {k: hist[k] for k in sorted(hist, key=int)}
        write_atomically(self.stats_file("train", data_dir),
                         json.dumps(totals, indent=1) + "\n")

    def _corpus_stats(self, index: int, data_dir: str) -> dict:
        with open(self.corpus_stats_file(index, data_dir), encoding="utf-8") as f:
            return json.load(f)

    # ---- input pipeline ------------------------------------------------
    def dataset(self, mode: str, data_dir: str, hparams, input_context=None,
                shuffle: bool | None = None, seed: int | None = None,
                skip_corrupt: bool = False):
        """The dev split as every problem's; training examples drawn from the
        corpora in the ratio of `hparams.corpus_weights`."""
        if mode != "train":
            return super().dataset(mode, data_dir, hparams.replace(corpus_weights=()),
                                   input_context, shuffle, seed, skip_corrupt)
        if getattr(hparams, "packing", False):
            raise DataError(
                f"hparam packing does not yet combine with the weighted corpora of "
                f"{self.name}; train without it. Received: packing=True")
        spec = self._spec()
        weights = hparams.corpus_weights or spec.weights
        if len(weights) != len(spec.train):
            raise DataError(
                f"hparam corpus_weights has {len(weights)} weights for the "
                f"{len(spec.train)} training corpora of {spec.path}; give one per corpus. "
                f"Received: corpus_weights={list(weights)}")
        # The checks of every problem (missing shards, nothing under max_length, an
        # empty dev split), on the sum of the corpora, then on each corpus.
        super().dataset(mode, data_dir, hparams.replace(corpus_weights=()))
        limit = self.batch_shapes(hparams)[-1][1]
        for i, corpus in enumerate(spec.train):
            hist = self._corpus_stats(i, data_dir)["length_histogram"]
            if all(int(length) > limit for length in hist):
                raise DataError(
                    f"every pair of the training corpus {corpus.source} is longer than "
                    f"max_length={limit} tokens, so its weight {weights[i]:g} could not be "
                    f"honoured; raise max_length or remove the corpus. "
                    f"Received: max_length={limit}")
        from t2t_revival.data import input_pipeline  # imports TensorFlow: only on use
        from t2t_revival.data.subword_sampling import training_sampling

        logging.info("%s train: sampling the %d corpora with weights %s", self.name,
                     len(weights), list(weights))
        return input_pipeline.weighted_token_bucketed_dataset(
            [self.corpus_files(i, data_dir) for i in range(len(spec.train))], weights,
            batch_size=hparams.batch_size, max_length=hparams.max_length,
            boundaries=hparams.bucket_boundaries, input_context=input_context, seed=seed,
            skip_corrupt=skip_corrupt, sampling=training_sampling(self, data_dir, hparams))
