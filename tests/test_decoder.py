"""t2t-decoder end to end on a briefly trained tiny model, and its user errors."""

import pytest

from conftest import run_cli


def _decoder(*args):
    """t2t-decoder ARGS, in this process (its output and exit status are the
    subject here, not the process)."""
    return run_cli("decoder", *args)


@pytest.mark.slow
def test_decodes_multi30k_test_file_and_reports_both_bleu(tiny_run_test_decodes):
    from readme_workflow import TINY_RUN_TEST_LINES as n

    out, hyp = tiny_run_test_decodes   # t2t-decoder of the first n test sentences (conftest)
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == n
    assert sum(1 for l in lines if l.strip()) > 0.99 * n   # (990 of 1,000 before issue 71)
    assert "sacreBLEU" in out.stdout and "tokenized BLEU" in out.stdout, out.stdout
    assert f"{n}/{n}" in out.stderr  # the progress bar reached the end
    assert not list(hyp.parent.glob("*.tmp*"))


@pytest.mark.slow
def test_outputs_in_input_order_and_empty_lines(tiny_run, shared_data):
    from decoding import decoder_of
    from t2t_revival.decode.decoder import read_text_lines

    out_dir, _ = tiny_run
    sources = read_text_lines(str(shared_data / "multi30k" / "val.en.gz"), "val")[:40]
    decoder = decoder_of(str(out_dir), settings="batch_size=7")
    forward = decoder.translate(sources)
    mixed = sources[::-1] + [""]
    backward = decoder.translate(mixed)
    assert backward[-1] == ""                   # empty line in, empty line out
    assert backward[:-1][::-1] == forward       # same translations, input order
    assert len(set(forward)) > 20               # real, input-dependent outputs
    beams = decoder_of(str(out_dir), settings="return_beams=true,beam_size=3")
    first = beams.translate(sources[:3])
    assert all(len(line.split("\t")) == 3 for line in first)


def test_user_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"a good line\n\xff\xfe broken\n")
    from t2t_revival.settings.hparams import HParams
    HParams().save(str(tmp_path / "hparams.json"))  # past that check, to the files
    cases = [
        ([f"--output_dir={tmp_path / 'nope'}", f"--decode_from_file={bad}"],
         "hparams.json"),
        ([f"--output_dir={tmp_path}", f"--decode_from_file={bad}"], "not UTF-8"),
        ([f"--output_dir={tmp_path}"], "--decode_from_file"),
        ([f"--output_dir={tmp_path}", f"--decode_from_file={tmp_path / 'missing'}"],
         "does not exist"),
        ([f"--output_dir={tmp_path}", f"--decode_from_file={bad}",
          "--decode_hparams=beam_size=zero"], "beam_size"),
    ]
    for args, message in cases:
        out = _decoder(*args)
        lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-decoder: error:")]
        assert out.returncode == 2, (args, out.stderr[-2000:])
        assert len(lines) == 1 and message in lines[0], (args, out.stderr[-2000:])
        assert "Traceback" not in out.stderr
