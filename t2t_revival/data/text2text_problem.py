"""`Text2TextProblem`: a problem of (source text, target text) pairs with a shared vocabulary."""

from __future__ import annotations

import collections
import itertools
import json
import os
import time
from typing import Iterator

from absl import logging

from t2t_revival.atomic_file import write_atomically
from t2t_revival.data.problem import Problem
from t2t_revival.data.remote_file import RemoteFile, fetch_all
from t2t_revival.data.sharded_record_writer import ShardedRecordWriter
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.text_pair_reader import TextPairReader
from t2t_revival.special_ids import EOS_ID

_ENCODE_CHUNK = 2000


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
    3. encode "train" and "dev", append EOS, write sharded TFRecords
       (`ShardedRecordWriter`) and a stats JSON (counts and a histogram of
       pair lengths, used to report the pairs max_length drops);
    4. write the plain text of "dev" and "test" for decoding and BLEU.
    """

    vocab_max_sentences: int = 1_000_000
    seed: int = 1234
    vocab_split_by_unicode_script: bool = True
    """SentencePiece's no-mixed-script rule (False for linearized trees)."""

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
        self.prepare(tmp_dir)
        vocab = self._make_vocabulary(data_dir, tmp_dir)
        for split in self.num_shards:
            self._write_split(split, vocab, data_dir, tmp_dir)
        for split in ("dev", "test"):
            paths = self.source_target_files(split, data_dir)
            if all(os.path.isfile(p) for p in paths):
                continue
            pairs = list(self.text_pairs(split, tmp_dir))
            for path, side in zip(paths, (0, 1)):
                write_atomically(path, "".join(p[side] + "\n" for p in pairs))
            logging.info("%s %s: wrote %d source/target lines to %s", self.name,
                         split, len(pairs), paths[0])

    def _make_vocabulary(self, data_dir: str, tmp_dir: str) -> SubwordVocabulary:
        path = self.vocab_file(data_dir)
        if os.path.isfile(path):
            return SubwordVocabulary(path)
        start = time.time()
        logging.info("%s: training a %d-piece BPE vocabulary on up to %d sentences",
                     self.name, self.vocab_size, self.vocab_max_sentences)
        sentences = itertools.chain.from_iterable(self.text_pairs("train", tmp_dir))
        vocab = SubwordVocabulary.train(sentences, path, self.vocab_size,
                                        max_sentences=self.vocab_max_sentences,
                                        seed=self.seed,
                                        split_by_unicode_script=self.vocab_split_by_unicode_script)
        logging.info("%s: vocabulary %s done in %.1f s", self.name, path,
                     time.time() - start)
        return vocab

    def encoded_pairs(self, split: str, vocab: SubwordVocabulary, tmp_dir: str,
                      counts: dict) -> Iterator[tuple[list[int], list[int]]]:
        """(inputs, targets) id lists with EOS appended; fills `counts` on the way."""
        readers = self.readers(split, tmp_dir)
        hist: collections.Counter = collections.Counter()

        def chunks():
            for reader in readers:
                it = iter(reader)
                while chunk := list(itertools.islice(it, _ENCODE_CHUNK)):
                    yield chunk

        for chunk in chunks():
            src = vocab.encode_batch([s for s, _ in chunk])
            tgt = vocab.encode_batch([t for _, t in chunk])
            for s, t in zip(src, tgt):
                s.append(EOS_ID)
                t.append(EOS_ID)
                hist[max(len(s), len(t))] += 1
                yield s, t
        counts["examples"] = sum(hist.values())
        counts["empty_dropped"] = sum(r.empty_dropped for r in readers)
        counts["undecodable_skipped"] = sum(r.undecodable_skipped for r in readers)
        counts["length_histogram"] = {str(k): hist[k] for k in sorted(hist)}

    def _write_split(self, split: str, vocab: SubwordVocabulary, data_dir: str,
                     tmp_dir: str) -> None:
        stats_path = self.stats_file(split, data_dir)
        writer = ShardedRecordWriter(self.data_files(split, data_dir), seed=self.seed,
                                     description=f"{self.name} {split}")
        if not writer.missing() and os.path.isfile(stats_path):
            logging.info("%s %s: already generated, skipping", self.name, split)
            return
        counts: dict = {}
        writer.write(self.encoded_pairs(split, vocab, tmp_dir, counts))
        write_atomically(stats_path, json.dumps(counts, indent=1) + "\n")
        logging.info("%s %s: %d pairs (%d with an empty side dropped, %d undecodable "
                     "skipped)", self.name, split, counts["examples"],
                     counts["empty_dropped"], counts["undecodable_skipped"])
