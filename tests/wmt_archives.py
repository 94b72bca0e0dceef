"""WMT archives of the official layouts, built from the shared data (test helper).

The real archives cannot be downloaded here, so the WMT problems' tests (and
the tensor2tensor walkthrough) put small archives of the same member names
and formats in a tmp_dir.
"""

from __future__ import annotations

import gzip
import io
import pathlib
import tarfile


def lines(path) -> list[str]:
    """The lines of a text file (.gz too), without their newlines."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def sgm(sentences, kind: str) -> str:
    """An SGML test set ("src" or "ref") of `sentences`, one <seg> each."""
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(sentences, 1))
    return f'<{kind}set setid="x">\n<doc docid="d" origlang="en">\n{segs}</doc>\n</{kind}set>\n'


def text(sentences) -> str:
    return "".join(s + "\n" for s in sentences)


def tar(path, members: dict) -> None:
    """members: {name: text or bytes}; .tgz compressed, .tar not."""
    with tarfile.open(path, "w:gz" if str(path).endswith((".tgz", ".gz")) else "w") as t:
        for name, data in members.items():
            data = data.encode("utf-8") if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def build_ende_wmt14(tmp_dir, shared_data: pathlib.Path, with_multi30k: bool = False,
                     dev_lines: int | None = None) -> pathlib.Path:
    """The five WMT14 En-De archives of translate_ende_wmt32k in `tmp_dir`.

    Training: the shared 10k-pair WMT sample split over Europarl, Common
    Crawl and News Commentary (with `with_multi30k`, Multi30k's 29k training
    pairs added to News Commentary: enough text for a 32768-piece
    vocabulary); dev: newstest2013 (its first `dev_lines`); test: newstest2014.
    """
    d = pathlib.Path(tmp_dir)
    d.mkdir(parents=True, exist_ok=True)
    sample = shared_data / "wmt14/train_sample_tokenized"
    en, de = lines(sample / "src-train.txt"), lines(sample / "tgt-train.txt")
    nc_en, nc_de = en[7000:], de[7000:]
    if with_multi30k:
        nc_en += lines(shared_data / "multi30k/train.en.gz")
        nc_de += lines(shared_data / "multi30k/train.de.gz")
    tar(d / "training-parallel-europarl-v7.tgz", {
        "training/europarl-v7.de-en.en": text(en[:4000]),
        "training/europarl-v7.de-en.de": text(de[:4000])})
    tar(d / "training-parallel-commoncrawl.tgz", {
        "commoncrawl.de-en.en": text(en[4000:7000]),
        "commoncrawl.de-en.de": text(de[4000:7000])})
    tar(d / "training-parallel-nc-v9.tgz", {
        "training/news-commentary-v9.de-en.en": text(nc_en),
        "training/news-commentary-v9.de-en.de": text(nc_de)})
    nt13 = shared_data / "wmt14/newstest2013.en-de"
    cut = slice(0, dev_lines)
    tar(d / "dev.tgz", {
        "dev/newstest2013-src.en.sgm": sgm(lines(nt13 / "newstest2013.en")[cut], "src"),
        "dev/newstest2013-src.de.sgm": sgm(lines(nt13 / "newstest2013.de")[cut], "src")})
    nt14 = shared_data / "wmt14/newstest2014.en-de"
    tar(d / "test-full.tgz", {
        "test-full/newstest2014-deen-src.en.sgm": sgm(lines(nt14 / "newstest2014.en"), "src"),
        "test-full/newstest2014-deen-ref.de.sgm": sgm(lines(nt14 / "newstest2014.de"), "ref")})
    return d
