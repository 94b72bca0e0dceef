"""TextPairReader: gzip/plain/sgm pairs and the documented bad-input policy."""

import gzip
import logging

import pytest

from t2t_revival.data.data_error import DataError
from t2t_revival.data.text_pair_reader import TextPairReader


def test_reads_multi30k_gzip(shared_data):
    d = shared_data / "multi30k"
    reader = TextPairReader(d / "val.en.gz", d / "val.de.gz")
    pairs = list(reader)
    assert len(pairs) == reader.pairs == 1014
    assert pairs[0] == ("A group of men are loading cotton onto a truck",
                        "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen")


def test_empty_line_of_the_wmt_sample_is_dropped_and_counted(shared_data):
    d = shared_data / "wmt14/train_sample_tokenized"
    reader = TextPairReader(d / "src-train.txt", d / "tgt-train.txt")
    pairs = list(reader)
    assert len(pairs) == 9999 and reader.empty_dropped == 1
    assert all(s and t for s, t in pairs)


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    with gzip.open(tmp_path / "a.de.gz", "wt") as f:
        f.write("eins\nzwei\n")
    with pytest.raises(DataError) as e:
        list(TextPairReader(tmp_path / "a.en", tmp_path / "a.de.gz"))
    msg = str(e.value)
    assert "a.en has 3 lines" in msg and "a.de.gz has 2" in msg
    assert msg.rstrip().endswith("target_lines=2")


def test_undecodable_line_is_skipped_with_file_and_line(tmp_path, caplog):
    (tmp_path / "s").write_bytes(b"good\nbad \xff\xfe here\nalso good\n")
    (tmp_path / "t").write_bytes(b"gut\nschlecht\nauch gut\n")
    reader = TextPairReader(tmp_path / "s", tmp_path / "t")
    with caplog.at_level(logging.WARNING):
        pairs = list(reader)
    assert pairs == [("good", "gut"), ("also good", "auch gut")]
    assert reader.undecodable_skipped == 1
    assert f"{tmp_path / 's'}:2 is not valid UTF-8" in caplog.text


def test_sgm_segments(tmp_path):
    (tmp_path / "src.sgm").write_text(
        '<srcset setid="x" srclang="en">\n<doc docid="d1">\n<p>\n'
        '<seg id="1">Hello &amp; world.</seg>\n<seg id="2"> Spaces </seg>\n'
        '</p>\n</doc>\n</srcset>\n')
    (tmp_path / "ref.sgm").write_text(
        '<refset setid="x" trglang="de">\n<doc docid="d1">\n'
        '<seg id="1">Hallo Welt.</seg>\n<seg id="2">Leer</seg>\n</doc>\n</refset>\n')
    pairs = list(TextPairReader(tmp_path / "src.sgm", tmp_path / "ref.sgm", fmt="sgm"))
    # Text as is between the tags (like sacrebleu), surrounding spaces stripped.
    assert pairs == [("Hello &amp; world.", "Hallo Welt."), ("Spaces", "Leer")]
    (tmp_path / "short.sgm").write_text('<seg id="1">Nur eins</seg>\n')
    with pytest.raises(DataError, match="has 2 <seg> lines"):
        list(TextPairReader(tmp_path / "src.sgm", tmp_path / "short.sgm", fmt="sgm"))


def test_a_carriage_return_inside_a_line_becomes_a_space(tmp_path):
    """One rule for what a line is: datagen's dev/test text files are read
    back by read_text_lines (as sacrebleu reads them: a bare CR ends a line
    there), so a CR inside a corpus line must not reach them."""
    from t2t_revival.files.text_lines import read_text_lines, write_text_lines

    (tmp_path / "s").write_bytes(b"one\rtwo\nthree\r\n")
    (tmp_path / "t").write_bytes(b"eins zwei\ndrei\n")
    pairs = list(TextPairReader(tmp_path / "s", tmp_path / "t"))
    assert pairs == [("one two", "eins zwei"), ("three", "drei")]
    write_text_lines(str(tmp_path / "src.txt"), [s for s, _ in pairs])
    assert read_text_lines(str(tmp_path / "src.txt"), "source") == ["one two", "three"]


@pytest.mark.parametrize("make, why", [
    (lambda p: None, "does not exist"),
    (lambda p: p.mkdir(), "is a directory, not a file"),
])
def test_a_corpus_file_that_cannot_be_opened_is_named(tmp_path, make, why):
    (tmp_path / "a.en").write_text("one\n")
    make(tmp_path / "a.de.gz")
    with pytest.raises(DataError) as e:
        list(TextPairReader(tmp_path / "a.en", tmp_path / "a.de.gz"))
    assert str(e.value).startswith(f"The corpus file {tmp_path / 'a.de.gz'} {why}; "
                                   f"check --tmp_dir")
