"""The decoder's journal, `<decode_to_file>.partial` (issue 77, part 3): a
rerun continues only the same decode of the same checkpoint's contents; a
damaged journal is kept aside and the decode starts over, said in one line;
a folder of its name is one error line. (A disk that fills while it is
written, and the rerun that continues: test_full_disk.py.)"""

import shutil

import pytest

from conftest import one_line_error, run_cli
from full_disk import NO_SPACE, write_decode_sources
from t2t_revival.decode.decode_journal import DecodeJournal
from t2t_revival.errors import UserError

SOURCES = ["ein mann", "ein hund", "rot", "der ball"]


def _journal(tmp_path, checkpoint="a" * 64):
    return DecodeJournal(str(tmp_path / "hyp.de"), SOURCES, {"checkpoint": "run/ckpt-3"},
                         checkpoint=checkpoint)


def _written(tmp_path, translations=("a man", "a dog")):
    """A journal of the first len(translations) lines, closed as a kill leaves it."""
    journal = _journal(tmp_path)
    assert journal.resume() == 0
    journal.add(list(range(len(translations))), list(translations))
    journal.close()
    return tmp_path / "hyp.de.partial"


def test_the_same_decode_continues_and_a_line_cut_short_is_dropped(tmp_path):
    path = _written(tmp_path)
    with open(path, "ab") as f:
        f.write(b"2\tre")   # a kill in the middle of a line
    said = []
    journal = _journal(tmp_path)
    assert journal.resume(said.append) == 2 and said == []
    assert journal.done == {0: "a man", 1: "a dog"}
    journal.add([2, 3], ["red", "the ball"])
    journal.finish([journal.done[i] for i in range(4)])
    assert (tmp_path / "hyp.de").read_text() == "a man\na dog\nred\nthe ball\n"
    assert not path.exists()


def test_a_journal_of_another_version_of_the_checkpoint_starts_over_said(tmp_path):
    _written(tmp_path)
    said = []
    journal = _journal(tmp_path, checkpoint="b" * 64)   # same path, other contents
    assert journal.resume(said.append) == 0 and journal.done == {}
    assert said == [f"The checkpoint changed since the partial decode in {tmp_path}/hyp.de"
                    f".partial (a file rewritten under the same name); starting over"]
    journal.close()
    assert (tmp_path / "hyp.de.partial").read_text() == journal.header + "\n"


@pytest.mark.parametrize("line, why", [
    (b"x\ta red ball\n", "line 4 is not an input line's number, a tab and its translation"),
    (b"2 a red ball\n", "line 4 is not an input line's number, a tab and its translation"),
    (b"99\ta red ball\n", "line 4 is not an input line's number, a tab and its translation"),
    (b"-1\ta red ball\n", "line 4 is not an input line's number, a tab and its translation"),
    (b"2\tein \xff\xfe ball\n", "line 4 is not UTF-8"),
])
def test_a_damaged_journal_is_kept_aside_said_and_the_decode_starts_over(tmp_path, line, why):
    path = _written(tmp_path)
    with open(path, "ab") as f:
        f.write(line + b"3\tthe ball\n")
    damaged = path.read_bytes()
    said = []
    journal = _journal(tmp_path)
    assert journal.resume(said.append) == 0 and journal.done == {}
    assert said == [f"{path} is damaged ({why}); kept as {path}.damaged, and decoding from "
                    f"the first line"]
    assert (tmp_path / "hyp.de.partial.damaged").read_bytes() == damaged
    journal.add([0, 1, 2, 3], ["a", "b", "c", "d"])
    journal.finish(["a", "b", "c", "d"])
    assert (tmp_path / "hyp.de").read_text() == "a\nb\nc\nd\n"


def test_a_folder_of_the_journals_name_is_a_user_error(tmp_path):
    (tmp_path / "hyp.de.partial").mkdir()
    with pytest.raises(UserError, match=r"hyp\.de\.partial is a folder; t2t-decoder keeps the "
                                        r"lines it has decoded in a file of that name: move "
                                        r"or remove the folder"):
        _journal(tmp_path).resume()


def test_the_decoder_says_a_damaged_journal_and_a_folder_of_its_name(tiny_trained, tmp_path,
                                                                      monkeypatch):
    import builtins

    from full_disk import disk_full_after

    sources = tmp_path / "src.en"
    sources.write_text("".join(f"{s} {'rot ' * i}\n" for i in range(5) for s in SOURCES))
    out = tmp_path / "hyp.de"
    flags = [f"--output_dir={tiny_trained}", f"--decode_from_file={sources}",
             f"--decode_to_file={out}", "--decode_hparams=batch_size=4,parallel_batches=1"]
    partial = tmp_path / "hyp.de.partial"
    partial.mkdir()
    one_line_error(run_cli("decoder", *flags), "t2t-decoder",
                   f"{out}.partial is a folder", "move or remove the folder",
                   f"Received: decode_to_file={str(out)!r}")
    partial.rmdir()
    clean = run_cli("decoder", *flags)
    assert clean.returncode == 0, clean.stderr[-3000:]
    expected = out.read_bytes()
    out.unlink()
    disk_full_after(monkeypatch, builtins, room=100 + len(expected) // 2, suffix=".partial")
    one_line_error(run_cli("decoder", *flags), "t2t-decoder", f"could not write {partial}")
    monkeypatch.undo()
    with open(partial, "ab") as f:
        f.write(b"7\tein \xff\xfe\n")   # not UTF-8: a rerun read it as a traceback
    rerun = run_cli("decoder", *flags)
    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr, rerun.stderr[-3000:]
    said = [l for l in rerun.stderr.splitlines() if "is damaged" in l]
    assert len(said) == 1 and said[0].startswith(f"{partial} is damaged (line ") and \
        said[0].endswith(f"is not UTF-8); kept as {partial}.damaged, and decoding from the "
                         f"first line"), rerun.stderr[-3000:]
    assert out.read_bytes() == expected and not partial.exists()
    assert (tmp_path / "hyp.de.partial.damaged").exists()


def test_a_checkpoint_rewritten_in_place_starts_the_decode_over(trained_copy, tmp_path,
                                                                monkeypatch):
    """Issue 77, part 3: a killed decode of ckpt-3, resumed after ckpt-3 was
    rewritten under the same name (as t2t-avg-checkpoints rewrites
    averaged/ckpt-N), starts over, said in one line, and writes the new
    checkpoint's translations only."""
    import builtins

    from full_disk import disk_full_after

    total = 24
    sources = write_decode_sources(tmp_path / "src.en", total, period=5)
    flags = [f"--output_dir={trained_copy}", f"--decode_from_file={sources}",
             "--decode_hparams=batch_size=4,parallel_batches=1,beam_size=2"]
    # The translations of ckpt-1's contents: what ckpt-3 will hold.
    reference = tmp_path / "reference.de"
    done = run_cli("decoder", *flags, f"--checkpoint_path={trained_copy / 'ckpt-1'}",
                   f"--decode_to_file={reference}")
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "hyp.de"
    third = [*flags, f"--checkpoint_path={trained_copy / 'ckpt-3'}", f"--decode_to_file={out}"]
    disk_full_after(monkeypatch, builtins, room=100 + len(reference.read_bytes()) // 2,
                    suffix=".partial")
    one_line_error(run_cli("decoder", *third), "t2t-decoder",
                   f"could not write {out}.partial ({NO_SPACE})")
    monkeypatch.undo()
    assert len((tmp_path / "hyp.de.partial").read_text().splitlines()) > 1
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(trained_copy / f"ckpt-1{suffix}", trained_copy / f"ckpt-3{suffix}")
    rerun = run_cli("decoder", *third)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "decoded before" not in rerun.stderr, rerun.stderr[-3000:]
    said = [l for l in rerun.stderr.splitlines() if "The checkpoint changed" in l]
    assert said == [f"The checkpoint changed since the partial decode in {out}.partial (a "
                    f"file rewritten under the same name); starting over"], rerun.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
