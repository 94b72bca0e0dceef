"""WMT14 problems on archives built here in the official layout, and their errors."""

import gzip
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from wmt_archives import build_ende_wmt14, lines as _lines, sgm, tar as _tar, text as _text
from t2t_revival.data.data_error import DataError
from t2t_revival.settings.hparams import HParams
from t2t_revival.problems.translate_wmt import TranslateEndeWmt32k, TranslateEnfrWmt32k


@pytest.fixture(scope="module")
def ende_tmp_dir(shared_data, tmp_path_factory):
    """WMT14 En-De archives holding the 10k-pair sample and the real newstests."""
    return build_ende_wmt14(tmp_path_factory.mktemp("wmt_ende"), shared_data)


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


def test_a_host_that_does_not_answer_is_tried_once(tmp_path, monkeypatch):
    """Offline, each missing file once waited out its own download (a
    newcomer's trainer without --tmp_dir spent 21-25 s before its line): a
    host that does not answer is tried once; a 404 is that file's alone."""
    import urllib.error

    from t2t_revival.data import remote_file
    from t2t_revival.data.remote_file import RemoteFile, fetch_all

    tried = []

    def urlopen(url, timeout):
        tried.append(url)
        if "a.example" in url:
            raise urllib.error.URLError("[Errno -2] Name or service not known")
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)

    monkeypatch.setattr(remote_file.urllib.request, "urlopen", urlopen)
    files = [RemoteFile(f"http://a.example/{n}.gz") for n in range(6)] + \
        [RemoteFile(f"http://b.example/{n}.gz") for n in range(2)]
    with pytest.raises(DataError, match=r"^8 corpus file\(s\) missing") as e:
        fetch_all(files, str(tmp_path))
    assert tried == ["http://a.example/0.gz", "http://b.example/0.gz", "http://b.example/1.gz"]
    assert f"http://a.example/5.gz -> {tmp_path / '5.gz'}" in str(e.value)


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


# ---- tensor2tensor's other WMT names (issue 57 item 4) ----------------------

def _pairs(tag, n, target_lang):
    return ([f"{tag} english {i}" for i in range(n)],
            [f"{tag} {target_lang} {i}" for i in range(n)])


@pytest.mark.parametrize("name, base, vocab_size", [
    ("translate_ende_wmt8k", "translate_ende_wmt32k", 8192),
    ("translate_ende_wmt32k_packed", "translate_ende_wmt32k", 32768),
    ("translate_enfr_wmt8k", "translate_enfr_wmt32k", 8192),
])
def test_tensor2tensor_names_of_the_wmt14_corpora(name, base, vocab_size):
    """tensor2tensor's 8k and packed problems read the archives of the 32k
    ones (the missing-file listing is the same) with their own vocabulary
    size; the packed one trains on packed batches of 256."""
    from t2t_revival.registry import problems

    problem, same = problems.get(name)(download=False), problems.get(base)(download=False)
    assert problem.name == name and problem.vocab_size == vocab_size
    assert problem.corpora == same.corpora
    overrides = problem.hparams_overrides(HParams())
    assert overrides["vocab_size"] == vocab_size
    packed = name.endswith("_packed")
    assert overrides.get("packing", False) is packed
    if packed:
        hp = HParams().replace(**overrides)
        assert hp.packing and hp.max_length == 256


def test_enfr_small_reads_the_opennmt_sample_and_newstest2014(tmp_path, shared_data):
    from t2t_revival.problems.translate_wmt import TranslateEnfrWmtSmall32k, TranslateEnfrWmtSmall8k

    en, fr = _pairs("train", 5, "français")
    ven, vfr = _pairs("valid", 2, "français")
    _tar(tmp_path / "baseline-1M-enfr.tgz", {
        "baseline-1M-enfr/baseline-1M_train.en": _text(en),
        "baseline-1M-enfr/baseline-1M_train.fr": _text(fr),
        "baseline-1M-enfr/baseline-1M_valid.en": _text(ven),
        "baseline-1M-enfr/baseline-1M_valid.fr": _text(vfr)})
    problem = TranslateEnfrWmtSmall32k(download=False)
    assert list(problem.text_pairs("train", str(tmp_path))) == list(zip(en, fr))
    assert list(problem.text_pairs("dev", str(tmp_path))) == list(zip(ven, vfr))
    assert (problem.vocab_size, TranslateEnfrWmtSmall8k.vocab_size) == (32768, 8192)
    # Without the archives, both are listed with their URLs (test: newstest2014).
    with pytest.raises(DataError, match=r"^2 corpus file\(s\) missing.*"
                       r"opennmt-trainingdata/baseline-1M-enfr.tgz ->.*wmt14/test-full.tgz ->"):
        problem.generate_data(str(tmp_path / "d"), str(tmp_path / "none"))


def test_ende_bpe32k_reads_the_gnmt_archive_or_its_extracted_files(tmp_path):
    """Google's wmt16_en_de.tar.gz layout: the BPE joins are undone; the same
    pairs come from the archive and from its files extracted in tmp_dir."""
    from t2t_revival.problems.translate_wmt_bpe import TranslateEndeWmtBpe32k, undo_bpe

    assert undo_bpe("Das Haus@@ boot ist gro@@ ß@@") == "Das Hausboot ist groß"
    members = {}
    for stem in ("train.tok.clean.bpe.32000", "newstest2013.tok.bpe.32000",
                 "newstest2014.tok.bpe.32000"):
        members[f"{stem}.en"] = _text([f"{stem[:5]} a@@ b c", "x y@@ z"])
        members[f"{stem}.de"] = _text([f"{stem[:5]} d@@ e f", "u v@@ w"])
    archived, extracted = tmp_path / "archived", tmp_path / "extracted"
    archived.mkdir()
    extracted.mkdir()
    _tar(archived / "wmt16_en_de.tar.gz", members)
    for name, data in members.items():
        (extracted / name).write_text(data, encoding="utf-8")
    problem = TranslateEndeWmtBpe32k(download=False)
    for tmp_dir in (archived, extracted):
        assert list(problem.text_pairs("train", str(tmp_dir))) == [
            ("train ab c", "train de f"), ("x yz", "u vw")]
        assert list(problem.text_pairs("test", str(tmp_dir)))[0] == ("newst ab c", "newst de f")
    with pytest.raises(DataError, match=r"^1 corpus file\(s\) missing.*id=0B_bZck-ksdkpM25jRUN2X2UxMm8"
                                        r" -> .*none/wmt16_en_de.tar.gz"):
        problem.generate_data(str(tmp_path / "d"), str(tmp_path / "none"))


def test_encs_enro_enzh_read_their_archives(tmp_path, shared_data):
    """More of tensor2tensor's WMT pairs: News Commentary v13 (a tgz whose
    members sit in a folder), Europarl's ro-en.tgz, SETIMES' zip, sgm dev and
    test sets; missing ones listed with URL and path."""
    import zipfile

    from t2t_revival.problems.translate_wmt_pairs import (
        TranslateEncsWmt32k, TranslateEnroWmt32k, TranslateEnroWmt8k, TranslateEnzhWmt32k,
        TranslateEnzhWmt8k)

    nc = "training-parallel-nc-v13/news-commentary-v13"
    cs, zh = _pairs("nc", 3, "čeština"), _pairs("nc", 2, "中文")
    _tar(tmp_path / "training-parallel-nc-v13.tgz", {
        f"{nc}.cs-en.en": _text(cs[0]), f"{nc}.cs-en.cs": _text(cs[1]),
        f"{nc}.zh-en.en": _text(zh[0]), f"{nc}.zh-en.zh": _text(zh[1])})
    assert list(TranslateEnzhWmt32k().readers("train", str(tmp_path))[0]) == list(zip(*zh))
    cc, ep = _pairs("cc", 1, "čeština"), _pairs("ep", 2, "čeština")
    _tar(tmp_path / "training-parallel-commoncrawl.tgz", {
        "commoncrawl.cs-en.en": _text(cc[0]), "commoncrawl.cs-en.cs": _text(cc[1])})
    _tar(tmp_path / "training-parallel-europarl-v7.tgz", {
        "training/europarl-v7.cs-en.en": _text(ep[0]),
        "training/europarl-v7.cs-en.cs": _text(ep[1])})
    assert list(TranslateEncsWmt32k().text_pairs("train", str(tmp_path))) == \
        list(zip(*cs)) + list(zip(*cc)) + list(zip(*ep))

    ep, st = _pairs("europarl", 2, "română"), _pairs("setimes", 3, "română")
    _tar(tmp_path / "ro-en.tgz", {"europarl-v7.ro-en.en": _text(ep[0]),
                                  "europarl-v7.ro-en.ro": _text(ep[1])})
    with zipfile.ZipFile(tmp_path / "en-ro.txt.zip", "w") as z:
        z.writestr("SETIMES.en-ro.en", _text(st[0]))
        z.writestr("SETIMES.en-ro.ro", _text(st[1]))
    assert list(TranslateEnroWmt32k().text_pairs("train", str(tmp_path))) == \
        list(zip(*ep)) + list(zip(*st))
    _tar(tmp_path / "wmt18-dev.tgz", {
        "dev/newsdev2017-enzh-src.en.sgm": sgm(["Hello ."], "src"),
        "dev/newsdev2017-enzh-ref.zh.sgm": sgm(["你好。"], "ref")})
    assert list(TranslateEnzhWmt8k().text_pairs("dev", str(tmp_path))) == [("Hello .", "你好。")]
    assert (TranslateEnroWmt8k.vocab_size, TranslateEnzhWmt8k.vocab_size) == (8192, 8192)

    with pytest.raises(DataError) as e:
        TranslateEnroWmt8k(download=False).generate_data(str(tmp_path / "d"),
                                                         str(tmp_path / "none"))
    assert str(e.value).startswith("4 corpus file(s) missing")
    assert ("http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip -> "
            f"{tmp_path / 'none' / 'en-ro.txt.zip'}") in str(e.value)
    assert f"wmt16/translation-task/test.tgz -> {tmp_path / 'none' / 'wmt16-test.tgz'}" \
        in str(e.value)


def test_a_zip_without_the_member_is_a_user_error(tmp_path):
    import zipfile

    from t2t_revival.data.remote_file import extract_member

    with zipfile.ZipFile(tmp_path / "en-ro.txt.zip", "w") as z:
        z.writestr("other", "x\n")
    with pytest.raises(DataError, match="has no member SETIMES.en-ro.en"):
        extract_member(str(tmp_path / "en-ro.txt.zip"), "SETIMES.en-ro.en", str(tmp_path))
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(DataError, match="Cannot read the archive .*bad.zip"):
        extract_member(str(tmp_path / "bad.zip"), "a", str(tmp_path / "out"))
