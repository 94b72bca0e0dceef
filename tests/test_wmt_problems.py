"""WMT14 problems on archives built here in the official layout, and their errors."""

import gzip
import io
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT
from t2t_revival.data.data_error import DataError
from t2t_revival.hparams import HParams
from t2t_revival.problems.translate_wmt import TranslateEndeWmt32k, TranslateEnfrWmt32k


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _sgm(lines, kind):
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(lines, 1))
    return f'<{kind}set setid="x">\n<doc docid="d" origlang="en">\n{segs}</doc>\n</{kind}set>\n'


def _tar(path, members):
    """members: {name: text or bytes}; mode from the suffix (.tgz or .tar)."""
    with tarfile.open(path, "w:gz" if str(path).endswith(".tgz") else "w") as tar:
        for name, data in members.items():
            data = data.encode("utf-8") if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _text(lines):
    return "".join(s + "\n" for s in lines)


@pytest.fixture(scope="module")
def ende_tmp_dir(shared_data, tmp_path_factory):
    """WMT14 En-De archives holding the 10k-pair sample and the real newstests."""
    d = tmp_path_factory.mktemp("wmt_ende")
    sample = shared_data / "wmt14/train_sample_tokenized"
    en, de = _lines(sample / "src-train.txt"), _lines(sample / "tgt-train.txt")
    _tar(d / "training-parallel-europarl-v7.tgz", {
        "training/europarl-v7.de-en.en": _text(en[:4000]),
        "training/europarl-v7.de-en.de": _text(de[:4000])})
    _tar(d / "training-parallel-commoncrawl.tgz", {
        "commoncrawl.de-en.en": _text(en[4000:7000]),
        "commoncrawl.de-en.de": _text(de[4000:7000])})
    _tar(d / "training-parallel-nc-v9.tgz", {
        "training/news-commentary-v9.de-en.en": _text(en[7000:]),
        "training/news-commentary-v9.de-en.de": _text(de[7000:])})
    nt13 = shared_data / "wmt14/newstest2013.en-de"
    _tar(d / "dev.tgz", {
        "dev/newstest2013-src.en.sgm": _sgm(_lines(nt13 / "newstest2013.en"), "src"),
        "dev/newstest2013-src.de.sgm": _sgm(_lines(nt13 / "newstest2013.de"), "src")})
    nt14 = shared_data / "wmt14/newstest2014.en-de"
    _tar(d / "test-full.tgz", {
        "test-full/newstest2014-deen-src.en.sgm": _sgm(_lines(nt14 / "newstest2014.en"), "src"),
        "test-full/newstest2014-deen-ref.de.sgm": _sgm(_lines(nt14 / "newstest2014.de"), "ref")})
    return d


class _SmallEnde(TranslateEndeWmt32k):
    """The En-De problem with a vocabulary small enough for 20k sentences."""
    vocab_size = 1000
    num_shards = {"train": 3, "dev": 1}


def test_ende_datagen_from_archives(ende_tmp_dir, shared_data, tmp_path):
    problem = _SmallEnde(download=False)
    problem.generate_data(str(tmp_path), str(ende_tmp_dir))
    assert problem.has_data(str(tmp_path))
    train = problem.stats("train", str(tmp_path))
    assert train["examples"] == 9999 and train["empty_dropped"] == 1
    assert problem.stats("dev", str(tmp_path))["examples"] == 3000
    src, ref = problem.source_target_files("test", str(tmp_path))
    nt14 = shared_data / "wmt14/newstest2014.en-de"
    assert _lines(src) == _lines(nt14 / "newstest2014.en")  # the sgm round trip
    assert _lines(ref) == _lines(nt14 / "newstest2014.de")
    hp = HParams(**problem.hparams_overrides(HParams()), max_length=64, batch_size=1024)
    vocab = problem.vocabulary(str(tmp_path))
    assert vocab.vocab_size == hp.vocab_size == 1000
    batches = list(problem.dataset("eval", str(tmp_path), hp))
    rows = sum(b["inputs"].shape[0] for b in batches)
    assert rows == 3000 - problem.count_too_long("dev", str(tmp_path), 64)
    nt13_en = set(_lines(shared_data / "wmt14/newstest2013.en-de/newstest2013.en"))
    first = batches[0]["inputs"].numpy()[0]
    assert vocab.decode(first) in nt13_en


def test_missing_archives_are_listed_with_urls_and_paths(ende_tmp_dir, tmp_path):
    with pytest.raises(DataError) as e:
        TranslateEndeWmt32k(download=False).generate_data(str(tmp_path / "d"),
                                                          str(tmp_path / "t"))
    msg = str(e.value)
    assert msg.startswith("5 corpus file(s) missing")
    for url in ("http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
                "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
                "http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
                "http://www.statmt.org/wmt14/dev.tgz",
                "http://www.statmt.org/wmt14/test-full.tgz"):
        name = url.rsplit("/", 1)[1]
        assert f"{url} -> {tmp_path / 't' / name}" in msg
    # Only what is missing is listed.
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in os.listdir(ende_tmp_dir):
        if name.endswith(".tgz") and name != "dev.tgz":
            os.symlink(ende_tmp_dir / name, partial / name)
    with pytest.raises(DataError, match=r"^1 corpus file\(s\) missing.*wmt14/dev.tgz ->"):
        _SmallEnde(download=False).generate_data(str(tmp_path / "d2"), str(partial))


def test_archive_without_the_member_is_a_user_error(tmp_path):
    _tar(tmp_path / "dev.tgz", {"dev/other.sgm": "x"})
    with pytest.raises(DataError, match="has no member dev/newstest2013-src.en.sgm"):
        list(TranslateEndeWmt32k().text_pairs("dev", str(tmp_path)))


def test_enfr_reads_tgz_and_the_giga_tar_of_gz_files(tmp_path):
    def pair(tag, n):
        return ([f"{tag} english {i}" for i in range(n)], [f"{tag} français {i}" for i in range(n)])

    members = {}
    for archive, en_name, fr_name, n in (
            ("training-parallel-europarl-v7.tgz", "training/europarl-v7.fr-en.en",
             "training/europarl-v7.fr-en.fr", 3),
            ("training-parallel-commoncrawl.tgz", "commoncrawl.fr-en.en",
             "commoncrawl.fr-en.fr", 2),
            ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.fr-en.en",
             "training/news-commentary-v9.fr-en.fr", 2),
            ("training-parallel-un.tgz", "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr", 2)):
        en, fr = pair(archive.split("-")[2].split(".")[0], n)
        _tar(tmp_path / archive, {en_name: _text(en), fr_name: _text(fr)})
    en, fr = pair("giga", 4)
    _tar(tmp_path / "training-giga-fren.tar", {
        "giga-fren.release2.fixed.en.gz": gzip.compress(_text(en).encode()),
        "giga-fren.release2.fixed.fr.gz": gzip.compress(_text(fr).encode())})
    pairs = list(TranslateEnfrWmt32k().text_pairs("train", str(tmp_path)))
    assert len(pairs) == 3 + 2 + 2 + 2 + 4
    assert pairs[0] == ("europarl english 0", "europarl français 0")
    assert pairs[-1] == ("giga english 3", "giga français 3")


def test_datagen_cli_missing_files_is_one_line_exit_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.datagen", "--problem=translate_ende_wmt32k",
         f"--data_dir={tmp_path / 'd'}", f"--tmp_dir={tmp_path / 't'}", "--nodownload"],
        capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-datagen: error:")]
    assert len(lines) == 1, out.stderr
    assert "training-parallel-europarl-v7.tgz" in lines[0] and "test-full.tgz" in lines[0]
    assert "Traceback" not in out.stderr


def test_an_archive_with_a_damaged_deflate_stream_is_a_user_error(tmp_path):
    """A corrupt (not only truncated) .tgz: zlib.error, which is not an
    OSError, is named as a damaged archive, and nothing is left extracted."""
    import random

    from t2t_revival.data.remote_file import extract_member

    noise = random.Random(0).randbytes(3 << 20)   # incompressible: the stream is long
    _tar(tmp_path / "train.tgz", {"training/a.de": noise})
    data = bytearray((tmp_path / "train.tgz").read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = bytes(4096)
    (tmp_path / "train.tgz").write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"^Cannot read the archive .*train\.tgz \(.*\); it is "
                                        r"damaged or incomplete, download it again"):
        extract_member(str(tmp_path / "train.tgz"), "training/a.de", str(tmp_path / "out"))
    out = tmp_path / "out"
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def test_a_download_cut_short_is_not_kept(tmp_path):
    """A server that closes the connection before the Content-Length it
    announced: the download fails and leaves nothing under the file's name
    (a rerun would take it as complete); a whole one is kept."""
    import http.server
    import threading

    from t2t_revival.data.remote_file import RemoteFile

    body = b"x" * 100_000

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if self.path.endswith("whole.gz") else body[:1000])

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        cut = RemoteFile(f"{base}/cut.gz")
        assert cut.download(str(tmp_path)) is False
        whole = RemoteFile(f"{base}/whole.gz")
        assert whole.download(str(tmp_path)) is True
    finally:
        server.shutdown()
        server.server_close()
    assert sorted(os.listdir(tmp_path)) == ["whole.gz"]
    assert (tmp_path / "whole.gz").read_bytes() == body
