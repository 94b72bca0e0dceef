"""More of tensor2tensor's WMT language pairs, on the WMT archives the readers here serve.

Each reads its archives from --tmp_dir (t2t-datagen downloads them when it
can; offline, it lists each missing file with its URL and where to put it).
One SentencePiece vocabulary is shared by both languages, as in every
problem here (tensor2tensor's En-Zh kept one per side).

En-Cs, translate_encs_wmt32k: News Commentary v13, Common Crawl and Europarl
v7 (tensor2tensor's list without CzEng 1.6, which needs a registration: add
it with your own data, docs/own_data.md); dev newstest2013 (the WMT14
dev.tgz of the En-De problems), test newstest2014.
  http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz
      training-parallel-nc-v13/news-commentary-v13.cs-en.{en,cs}
  http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz
      commoncrawl.cs-en.{en,cs}
  http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz
      training/europarl-v7.cs-en.{en,cs}
  http://www.statmt.org/wmt14/dev.tgz       dev/newstest2013-src.{en,cs}.sgm
  http://www.statmt.org/wmt14/test-full.tgz
      test-full/newstest2014-csen-src.en.sgm, test-full/newstest2014-csen-ref.cs.sgm

En-Ro, translate_enro_wmt8k / _wmt32k: Europarl v7 and SETIMES 2 (a zip);
dev newsdev2016, test newstest2016.
  http://www.statmt.org/europarl/v7/ro-en.tgz    europarl-v7.ro-en.{en,ro}
  http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip
      (save as en-ro.txt.zip)                     SETIMES.en-ro.{en,ro}
  http://data.statmt.org/wmt16/translation-task/dev-romanian-updated.tgz
      dev/newsdev2016-roen-ref.en.sgm, dev/newsdev2016-roen-src.ro.sgm
  http://data.statmt.org/wmt16/translation-task/test.tgz  (save as wmt16-test.tgz)
      test/newstest2016-enro-src.en.sgm, test/newstest2016-enro-ref.ro.sgm

En-Zh, translate_enzh_wmt8k / _wmt32k: News Commentary v13 (tensor2tensor's
default corpus; the UN and CWMT corpora need registrations); dev
newsdev2017, test newstest2017.
  http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz
      training-parallel-nc-v13/news-commentary-v13.zh-en.{en,zh}
  http://data.statmt.org/wmt18/translation-task/dev.tgz  (save as wmt18-dev.tgz)
      dev/newsdev2017-enzh-src.en.sgm, dev/newsdev2017-enzh-ref.zh.sgm
  http://data.statmt.org/wmt17/translation-task/test.tgz  (save as wmt17-test.tgz)
      test/newstest2017-enzh-src.en.sgm, test/newstest2017-enzh-ref.zh.sgm
"""

from __future__ import annotations

from t2t_revival.data.remote_file import RemoteFile
from t2t_revival.problems.translate_wmt import (
    COMMONCRAWL, DEV, EUROPARL, TEST_FULL, WmtArchivesProblem)
from t2t_revival.registry import register_problem

_WMT16 = "http://data.statmt.org/wmt16/translation-task/"
NEWS_COMMENTARY_V13 = RemoteFile(
    "http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz")
_NC13 = "training-parallel-nc-v13/news-commentary-v13"
EUROPARL_RO = RemoteFile("http://www.statmt.org/europarl/v7/ro-en.tgz")
SETIMES_RO = RemoteFile("http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip",
                        filename="en-ro.txt.zip")
DEV_RO = RemoteFile(_WMT16 + "dev-romanian-updated.tgz")
TEST_WMT16 = RemoteFile(_WMT16 + "test.tgz", filename="wmt16-test.tgz")
DEV_WMT18 = RemoteFile("http://data.statmt.org/wmt18/translation-task/dev.tgz",
                       filename="wmt18-dev.tgz")
TEST_WMT17 = RemoteFile("http://data.statmt.org/wmt17/translation-task/test.tgz",
                        filename="wmt17-test.tgz")


@register_problem
class TranslateEncsWmt32k(WmtArchivesProblem):
    """WMT En-Cs (News Commentary v13, Common Crawl, Europarl v7; CzEng left out), 32768 shared BPE pieces."""

    corpora = {
        "train": [
            (NEWS_COMMENTARY_V13, f"{_NC13}.cs-en.en", f"{_NC13}.cs-en.cs", "text"),
            (COMMONCRAWL, "commoncrawl.cs-en.en", "commoncrawl.cs-en.cs", "text"),
            (EUROPARL, "training/europarl-v7.cs-en.en", "training/europarl-v7.cs-en.cs", "text"),
        ],
        "dev": [(DEV, "dev/newstest2013-src.en.sgm", "dev/newstest2013-src.cs.sgm", "sgm")],
        "test": [(TEST_FULL, "test-full/newstest2014-csen-src.en.sgm",
                  "test-full/newstest2014-csen-ref.cs.sgm", "sgm")],
    }


@register_problem
class TranslateEnroWmt8k(WmtArchivesProblem):
    """WMT16 En-Ro (Europarl v7, SETIMES 2), 8192 shared BPE pieces."""

    vocab_size = 8192
    corpora = {
        "train": [
            (EUROPARL_RO, "europarl-v7.ro-en.en", "europarl-v7.ro-en.ro", "text"),
            (SETIMES_RO, "SETIMES.en-ro.en", "SETIMES.en-ro.ro", "text"),
        ],
        "dev": [(DEV_RO, "dev/newsdev2016-roen-ref.en.sgm",
                 "dev/newsdev2016-roen-src.ro.sgm", "sgm")],
        "test": [(TEST_WMT16, "test/newstest2016-enro-src.en.sgm",
                  "test/newstest2016-enro-ref.ro.sgm", "sgm")],
    }


@register_problem
class TranslateEnroWmt32k(TranslateEnroWmt8k):
    """WMT16 En-Ro (Europarl v7, SETIMES 2), 32768 shared BPE pieces."""

    vocab_size = 32768


@register_problem
class TranslateEnzhWmt32k(WmtArchivesProblem):
    """WMT En-Zh (News Commentary v13), 32768 BPE pieces shared by both languages."""

    corpora = {
        "train": [(NEWS_COMMENTARY_V13, f"{_NC13}.zh-en.en", f"{_NC13}.zh-en.zh", "text")],
        "dev": [(DEV_WMT18, "dev/newsdev2017-enzh-src.en.sgm",
                 "dev/newsdev2017-enzh-ref.zh.sgm", "sgm")],
        "test": [(TEST_WMT17, "test/newstest2017-enzh-src.en.sgm",
                  "test/newstest2017-enzh-ref.zh.sgm", "sgm")],
    }


@register_problem
class TranslateEnzhWmt8k(TranslateEnzhWmt32k):
    """WMT En-Zh (News Commentary v13), 8192 BPE pieces shared by both languages."""

    vocab_size = 8192
