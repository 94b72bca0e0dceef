"""WMT14 English-German and English-French, the corpora of Vaswani et al. 2017.

Put these archives in --tmp_dir (t2t-datagen downloads them when it can):

En-De (about 4.5M training pairs):
  http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz
      training/europarl-v7.de-en.{en,de}
  http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz
      commoncrawl.de-en.{en,de}
  http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz
      training/news-commentary-v9.de-en.{en,de}
En-Fr (about 36M pairs) uses the fr-en files of the same three archives and:
  http://www.statmt.org/wmt13/training-parallel-un.tgz
      un/undoc.2000.fr-en.{en,fr}
  http://www.statmt.org/wmt10/training-giga-fren.tar
      giga-fren.release2.fixed.{en,fr}.gz
Dev, newstest2013 (both pairs):
  http://www.statmt.org/wmt14/dev.tgz
      dev/newstest2013-src.{en,de,fr}.sgm
Test, newstest2014 "full" (the paper's Table 2):
  http://www.statmt.org/wmt14/test-full.tgz
      test-full/newstest2014-deen-src.en.sgm, test-full/newstest2014-deen-ref.de.sgm
      test-full/newstest2014-fren-src.en.sgm, test-full/newstest2014-fren-ref.fr.sgm

These are the archives tensor2tensor's translate_ende.py / translate_enfr.py
read (its later versions swapped in news-commentary v13 and the WMT17 dev
set; we keep WMT14's, as the paper did). newstest2013 is multi-way parallel,
so its "-src" sgm files of both languages form the dev pairs.

tensor2tensor's other names for these corpora are here too:
translate_ende_wmt8k and translate_enfr_wmt8k (8192 pieces),
translate_ende_wmt32k_packed (packed training batches) and, on OpenNMT's
1M-pair En-Fr sample, translate_enfr_wmt_small8k / _small32k:
  https://s3.amazonaws.com/opennmt-trainingdata/baseline-1M-enfr.tgz
      baseline-1M-enfr/baseline-1M_{train,valid}.{en,fr}
"""

from __future__ import annotations

from typing import Any

from t2t_revival.data.remote_file import RemoteFile, extract_member
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.data.text_pair_reader import TextPairReader
from t2t_revival.registry import register_problem

_WMT13 = "http://www.statmt.org/wmt13/"
_WMT14 = "http://www.statmt.org/wmt14/"
EUROPARL = RemoteFile(_WMT13 + "training-parallel-europarl-v7.tgz")
COMMONCRAWL = RemoteFile(_WMT13 + "training-parallel-commoncrawl.tgz")
NEWS_COMMENTARY = RemoteFile(_WMT14 + "training-parallel-nc-v9.tgz")
UN = RemoteFile(_WMT13 + "training-parallel-un.tgz")
GIGA_FREN = RemoteFile("http://www.statmt.org/wmt10/training-giga-fren.tar")
DEV = RemoteFile(_WMT14 + "dev.tgz")
TEST_FULL = RemoteFile(_WMT14 + "test-full.tgz")


class WmtArchivesProblem(Text2TextProblem):
    """A translation problem read from members of WMT-style archives in tmp_dir.

    `corpora` maps each split to (archive, source member, target member,
    format) entries, format "text" or "sgm"; the archive is a .tgz, .tar or
    .zip (`extract_member`). Missing archives are listed with their URLs.
    """

    vocab_size = 32768
    num_shards = {"train": 100, "dev": 1}
    # split -> [(archive, source member, target member, "text" or "sgm"), ...]
    corpora: dict[str, list[tuple[RemoteFile, str, str, str]]] = {}

    def remote_files(self) -> list[RemoteFile]:
        seen: dict[str, RemoteFile] = {}
        for entries in self.corpora.values():
            for archive, *_ in entries:
                seen.setdefault(archive.name, archive)
        return list(seen.values())

    def readers(self, split: str, tmp_dir: str) -> list[TextPairReader]:
        out = []
        for archive, src, tgt, fmt in self.corpora[split]:
            path = archive.path(tmp_dir)
            out.append(TextPairReader(extract_member(path, src, tmp_dir),
                                      extract_member(path, tgt, tmp_dir), fmt=fmt))
        return out


@register_problem
class TranslateEndeWmt32k(WmtArchivesProblem):
    """WMT14 En-De (Europarl v7, Common Crawl, News Commentary v9; ~4.5M pairs), 32768 shared BPE pieces."""

    corpora = {
        "train": [
            (EUROPARL, "training/europarl-v7.de-en.en", "training/europarl-v7.de-en.de", "text"),
            (COMMONCRAWL, "commoncrawl.de-en.en", "commoncrawl.de-en.de", "text"),
            (NEWS_COMMENTARY, "training/news-commentary-v9.de-en.en",
             "training/news-commentary-v9.de-en.de", "text"),
        ],
        "dev": [(DEV, "dev/newstest2013-src.en.sgm", "dev/newstest2013-src.de.sgm", "sgm")],
        "test": [(TEST_FULL, "test-full/newstest2014-deen-src.en.sgm",
                  "test-full/newstest2014-deen-ref.de.sgm", "sgm")],
    }


@register_problem
class TranslateEndeWmt8k(TranslateEndeWmt32k):
    """WMT14 En-De, the corpora of translate_ende_wmt32k, 8192 shared BPE pieces (tensor2tensor's name)."""

    vocab_size = 8192


@register_problem
class TranslateEndeWmt32kPacked(TranslateEndeWmt32k):
    """WMT14 En-De as translate_ende_wmt32k, trained on packed batches (rows of 256 tokens).

    tensor2tensor packed the pairs into rows of 256 at datagen; here the
    input pipeline packs them at training (`packing=true`, `max_length=256`),
    so the data files are those of an unpacked problem (written under this
    problem's name; the vocabulary trained on the same corpora is the same).
    """

    def hparams_overrides(self, hparams: Any) -> dict[str, Any]:
        return {**super().hparams_overrides(hparams), "packing": True, "max_length": 256}


@register_problem
class TranslateEnfrWmt32k(WmtArchivesProblem):
    """WMT14 En-Fr (Europarl, Common Crawl, News Commentary, UN, Gigaword; ~36M pairs), 32768 shared BPE pieces."""

    corpora = {
        "train": [
            (EUROPARL, "training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr", "text"),
            (COMMONCRAWL, "commoncrawl.fr-en.en", "commoncrawl.fr-en.fr", "text"),
            (NEWS_COMMENTARY, "training/news-commentary-v9.fr-en.en",
             "training/news-commentary-v9.fr-en.fr", "text"),
            (UN, "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr", "text"),
            (GIGA_FREN, "giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz",
             "text"),
        ],
        "dev": [(DEV, "dev/newstest2013-src.en.sgm", "dev/newstest2013-src.fr.sgm", "sgm")],
        "test": [(TEST_FULL, "test-full/newstest2014-fren-src.en.sgm",
                  "test-full/newstest2014-fren-ref.fr.sgm", "sgm")],
    }


@register_problem
class TranslateEnfrWmt8k(TranslateEnfrWmt32k):
    """WMT14 En-Fr, the corpora of translate_enfr_wmt32k, 8192 shared BPE pieces (tensor2tensor's name)."""

    vocab_size = 8192


OPENNMT_ENFR_1M = RemoteFile("https://s3.amazonaws.com/opennmt-trainingdata/baseline-1M-enfr.tgz")


@register_problem
class TranslateEnfrWmtSmall32k(WmtArchivesProblem):
    """En-Fr on OpenNMT's 1M-pair WMT sample (tensor2tensor's "small" En-Fr), 32768 shared BPE pieces.

    Dev is the sample's own validation set, as in tensor2tensor; test is
    newstest2014 (test-full.tgz).
    """

    corpora = {
        "train": [(OPENNMT_ENFR_1M, "baseline-1M-enfr/baseline-1M_train.en",
                   "baseline-1M-enfr/baseline-1M_train.fr", "text")],
        "dev": [(OPENNMT_ENFR_1M, "baseline-1M-enfr/baseline-1M_valid.en",
                 "baseline-1M-enfr/baseline-1M_valid.fr", "text")],
        "test": TranslateEnfrWmt32k.corpora["test"],
    }


@register_problem
class TranslateEnfrWmtSmall8k(TranslateEnfrWmtSmall32k):
    """En-Fr on OpenNMT's 1M-pair WMT sample, 8192 shared BPE pieces (tensor2tensor's name)."""

    vocab_size = 8192
