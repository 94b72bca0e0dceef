"""`Text2TextProblem`: a problem of (source text, target text) pairs with a shared vocabulary."""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Iterator

from absl import logging

from t2t_revival.files.atomic_file import atomic_open, remove_leftover_temporaries, write_atomically
from t2t_revival.data.problem import Problem
from t2t_revival.data.remote_file import RemoteFile, fetch_all
from t2t_revival.data.sharded_record_writer import ShardedRecordWriter
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.vocabulary_file import SUFFIXES, load_vocabulary
from t2t_revival.data.text_pair_reader import TextPairReader


class Text2TextProblem(Problem):
    """Source/target sentence pairs, one SentencePiece vocabulary for both sides.

    Subclasses say where the text is: `remote_files()` (what must be in
    tmp_dir, with URLs) and `readers(split, tmp_dir)` (TextPairReaders over
    the files of "train", "dev" and "test", in a fixed order).

    generate_data, each step skipped when its output exists (so a rerun
    completes an interrupted run with identical files):
    1. make sure the corpora are in tmp_dir (download, or a DataError listing
       what is missing);
    2. train the vocabulary on a seeded sample of at most
       `vocab_max_sentences` training sentences (both languages);
    3. encode "train" and "dev" in `num_workers` processes, append EOS, write
       sharded TFRecords (`ShardedRecordWriter`: the same bytes for any number
       of workers, memory bounded whatever the corpus) and a stats JSON (counts and a histogram of
       pair lengths, used to report the pairs max_length drops);
    4. write the plain text of "dev" and "test" for decoding and BLEU.
    """

    vocab_max_sentences: int = 1_000_000
    """Sentences (both languages) the vocabulary is trained on, at most: a seeded
    reservoir sample of the training text (`SubwordVocabulary.train`), so the
    vocabulary's memory and time are the same for 1M pairs and for 36M. A
    million sentences (about 25M words of WMT) hold each of a 32k vocabulary's
    pieces many times (a merge is kept for being frequent), while SentencePiece
    training on them stays within a few GB."""
    seed: int = 1234
    vocab_split_by_unicode_script: bool = True
    """SentencePiece's no-mixed-script rule (False for linearized trees)."""

    def __init__(self, download: bool = True, num_workers: int | None = None):
        super().__init__(download=download, num_workers=num_workers)
        self._train_pairs: int | None = None

    def language_tokens(self) -> tuple[str, ...]:
        """The target-language tokens (`>>de<<`) the vocabulary holds as pieces
        of their own: a multilingual problem's (its readers put them before
        the source lines); () for one target language."""
        return ()

    def remote_files(self) -> list[RemoteFile]:
        return []

    def readers(self, split: str, tmp_dir: str) -> list[TextPairReader]:
        raise NotImplementedError

    def text_pairs(self, split: str, tmp_dir: str) -> Iterator[tuple[str, str]]:
        """(source, target) sentence pairs of `split`, in a fixed order."""
        for reader in self.readers(split, tmp_dir):
            yield from reader

    def prepare(self, tmp_dir: str) -> None:
        """Fetch the corpora into tmp_dir (hook for extraction in subclasses)."""
        fetch_all(self.remote_files(), tmp_dir, download=self.download)

    # ---- generation ----------------------------------------------------
    def generate_data(self, data_dir: str, tmp_dir: str) -> None:
        data_dir, tmp_dir = str(data_dir), str(tmp_dir)
        os.makedirs(data_dir, exist_ok=True)
        # What a killed run left half-written (its outputs are named after
        # the problem: `<name>-...`, `<name>.corpora.json`, `vocab.<name><suffix>`).
        removed = remove_leftover_temporaries(
            data_dir, (f"{self.name}-", f"{self.name}.",
                       *(f"vocab.{self.name}{suffix}." for suffix in SUFFIXES)))
        if removed:
            logging.info("%s: removed %d temporary file(s) of an interrupted datagen: %s",
                         self.name, len(removed), ", ".join(removed))
        self.prepare(tmp_dir)
        vocab = self._make_vocabulary(data_dir, tmp_dir)
        for split in self.num_shards:
            self._write_split(split, vocab, data_dir, tmp_dir)
        for split in ("dev", "test"):
            paths = self.source_target_files(split, data_dir)
            if all(os.path.isfile(p) for p in paths):
                continue
            count = 0
            with atomic_open(paths[0]) as src, atomic_open(paths[1]) as tgt:
                for count, (s, t) in enumerate(self.text_pairs(split, tmp_dir), start=1):
                    src.write(s + "\n")
                    tgt.write(t + "\n")
            logging.info("%s %s: wrote %d source/target lines to %s", self.name,
                         split, count, paths[0])

    def _make_vocabulary(self, data_dir: str, tmp_dir: str) -> SubwordVocabulary:
        path = self.vocab_file(data_dir)
        if os.path.isfile(path):
            return load_vocabulary(path)
        start = time.time()
        logging.info("%s: training a %d-piece BPE vocabulary on up to %d sentences",
                     self.name, self.vocab_size, self.vocab_max_sentences)
        counter = itertools.count()
        pairs = self.text_pairs("train", tmp_dir)
        sentences = itertools.chain.from_iterable(p for p, _ in zip(pairs, counter))
        vocab = SubwordVocabulary.train(sentences, path, self.vocab_size,
                                        max_sentences=self.vocab_max_sentences,
                                        seed=self.seed,
                                        split_by_unicode_script=self.vocab_split_by_unicode_script,
                                        language_tokens=self.language_tokens())
        self._train_pairs = next(counter)  # the pairs read: the ETA of the train split
        logging.info("%s: vocabulary %s done in %.1f s", self.name, path,
                     time.time() - start)
        return vocab

    def expected_pairs(self, split: str) -> int | None:
        """The pairs `split` will give, when known (for the progress log's ETA)."""
        return self._train_pairs if split == "train" else None

    def _write_split(self, split: str, vocab: SubwordVocabulary, data_dir: str,
                     tmp_dir: str) -> None:
        stats_path = self.stats_file(split, data_dir)
        writer = ShardedRecordWriter(self.data_files(split, data_dir), seed=self.seed,
                                     description=f"{self.name} {split}",
                                     num_workers=self.num_workers)
        if not writer.missing() and os.path.isfile(stats_path):
            writer.clean_up()  # left by a run killed after writing the stats
            logging.info("%s %s: already generated, skipping", self.name, split)
            return
        self._write_records(writer, stats_path, self.readers(split, tmp_dir), vocab,
                            f"{self.name} {split}", self.expected_pairs(split))

    def _write_records(self, writer: ShardedRecordWriter, stats_path: str,
                       readers: list[TextPairReader], vocab: SubwordVocabulary,
                       description: str, expected_pairs: int | None) -> dict:
        """Encode the pairs of `readers` into `writer`'s shards; write their stats
        JSON to `stats_path`; returns the stats."""
        hist = writer.write(itertools.chain.from_iterable(readers), vocab.model_file,
                            expected_pairs=expected_pairs)
        counts = {
            "examples": sum(hist.values()),
            "empty_dropped": sum(r.empty_dropped for r in readers),
            "undecodable_skipped": sum(r.undecodable_skipped for r in readers),
            "length_histogram": {str(k): hist[k] for k in sorted(hist)},
        }
        write_atomically(stats_path, json.dumps(counts, indent=1) + "\n")
        writer.clean_up()
        logging.info("%s: %d pairs (%d with an empty side dropped, %d undecodable "
                     "skipped)", description, counts["examples"],
                     counts["empty_dropped"], counts["undecodable_skipped"])
        return counts
