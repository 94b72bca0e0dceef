"""translate_ende_wmt_bpe32k: WMT16 En-De as Google's preprocessed archive ships it.

tensor2tensor's `translate_ende_wmt_bpe32k` read `wmt16_en_de.tar.gz`, the
archive of Google's GNMT `wmt16_en_de.sh` (Moses-tokenized, cleaned, split
into 32,000 BPE merges):
  https://drive.google.com/uc?export=download&id=0B_bZck-ksdkpM25jRUN2X2UxMm8
      (save as wmt16_en_de.tar.gz)
      train.tok.clean.bpe.32000.{en,de}   training pairs (about 4.5M)
      newstest2013.tok.bpe.32000.{en,de}  dev
      newstest2014.tok.bpe.32000.{en,de}  test
Put the archive in --tmp_dir, or its files already extracted there (as
tensor2tensor left them). This problem reads the same files; their BPE joins
("@@ ") are undone, so sentences are the archive's tokenized text, and one
SentencePiece vocabulary of 32,000 pieces is trained on them, as for every
problem here: the archive's `vocab.bpe.32000` (a whitespace-token
vocabulary, tensor2tensor's TokenTextEncoder) is not used. Translations and
references are tokenized text, so BLEU here is the paper's tokenized BLEU.
"""

from __future__ import annotations

import os
import re
from typing import Iterator

from t2t_revival.data.remote_file import RemoteFile, extract_member, fetch_all
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.data.text_pair_reader import TextPairReader
from t2t_revival.registry import register_problem

GNMT_WMT16_ENDE = RemoteFile(
    "https://drive.google.com/uc?export=download&id=0B_bZck-ksdkpM25jRUN2X2UxMm8",
    filename="wmt16_en_de.tar.gz")
# split -> the stem of its .en/.de files in the archive.
_STEMS = {"train": "train.tok.clean.bpe.32000", "dev": "newstest2013.tok.bpe.32000",
          "test": "newstest2014.tok.bpe.32000"}
_BPE_JOIN = re.compile(r"@@( |$)")


def undo_bpe(line: str) -> str:
    """`Das Haus@@ boot` -> `Das Hausboot` (subword-nmt's joins removed)."""
    return _BPE_JOIN.sub("", line)


@register_problem
class TranslateEndeWmtBpe32k(Text2TextProblem):
    """WMT16 En-De from Google's preprocessed wmt16_en_de.tar.gz (tokenized; BPE joins undone), 32000 shared BPE pieces."""

    vocab_size = 32000
    num_shards = {"train": 100, "dev": 1}

    def extracted(self, tmp_dir: str) -> bool:
        """Whether tmp_dir already holds the archive's files, extracted."""
        return all(os.path.isfile(os.path.join(tmp_dir, f"{stem}.{lang}"))
                   for stem in _STEMS.values() for lang in ("en", "de"))

    def remote_files(self) -> list[RemoteFile]:
        return [GNMT_WMT16_ENDE]

    def prepare(self, tmp_dir: str) -> None:
        if not self.extracted(tmp_dir):
            fetch_all(self.remote_files(), tmp_dir, download=self.download)

    def readers(self, split: str, tmp_dir: str) -> list[TextPairReader]:
        if self.extracted(tmp_dir):
            paths = [os.path.join(tmp_dir, f"{_STEMS[split]}.{lang}") for lang in ("en", "de")]
        else:
            archive = GNMT_WMT16_ENDE.path(tmp_dir)
            paths = [extract_member(archive, f"{_STEMS[split]}.{lang}", tmp_dir)
                     for lang in ("en", "de")]
        return [TextPairReader(*paths)]

    def text_pairs(self, split: str, tmp_dir: str) -> Iterator[tuple[str, str]]:
        for source, target in super().text_pairs(split, tmp_dir):
            yield undo_bpe(source), undo_bpe(target)
