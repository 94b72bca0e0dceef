"""Multi30k task 1 English-German: the small offline translation problem."""

from __future__ import annotations

import os

from t2t_revival.data.remote_file import RemoteFile
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.data.text_pair_reader import TextPairReader
from t2t_revival.registry import register_problem

_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# split -> file stem of the raw (untokenized, cased) gzip files.
_STEMS = {"train": "train", "dev": "val", "test": "test_2016_flickr"}


@register_problem
class TranslateEndeMulti30k(Text2TextProblem):
    """Multi30k task 1 En-De (29k image-caption pairs), 8192 shared BPE pieces; offline default."""

    # 29,000 short caption pairs (about 12 words each): 8192 shared pieces
    # keep nearly every frequent word whole while still splitting rare German
    # compounds; 256 of them are UTF-8 byte pieces (byte_fallback).
    vocab_size = 8192
    num_shards = {"train": 10, "dev": 1}

    def remote_files(self) -> list[RemoteFile]:
        return [RemoteFile(_URL + f"{stem}.{lang}.gz")
                for stem in _STEMS.values() for lang in ("en", "de")]

    def corpus_dir(self, tmp_dir: str) -> str:
        """tmp_dir itself, or tmp_dir/multi30k when the files are there."""
        sub = os.path.join(tmp_dir, "multi30k")
        if not os.path.isfile(os.path.join(tmp_dir, "train.en.gz")) and \
                os.path.isfile(os.path.join(sub, "train.en.gz")):
            return sub
        return tmp_dir

    def prepare(self, tmp_dir: str) -> None:
        super().prepare(self.corpus_dir(tmp_dir))

    def readers(self, split: str, tmp_dir: str) -> list[TextPairReader]:
        d = self.corpus_dir(tmp_dir)
        stem = _STEMS[split]
        return [TextPairReader(os.path.join(d, f"{stem}.en.gz"),
                               os.path.join(d, f"{stem}.de.gz"))]
