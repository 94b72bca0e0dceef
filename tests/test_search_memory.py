"""The decoder's memory bounds (issue 60 item 6): sampled rows drawn in
chunks that fit `search_memory.SEARCH_BYTES`, and a setting that cannot fit
refused before the model loads."""

from conftest import one_line_error, run_cli
from t2t_revival.settings.hparams import HParams


def test_sampling_draws_its_samples_in_chunks_of_bounded_rows(tiny_trained, tmp_path, monkeypatch):
    """Issue 60 item 6: samples_per_input rows are not one search call: the samples
    are drawn in chunks that fit `SEARCH_BYTES`, every one kept, best first."""
    from t2t_revival.decode import decoder as decoder_module
    from t2t_revival.decode import search_memory

    hparams = HParams.load(str(tiny_trained / "hparams.json"))
    length = 64   # more than any of these lines decodes
    monkeypatch.setattr(search_memory, "SEARCH_BYTES",
                        3 * 7 * search_memory.row_bytes(hparams, length))
    drawn = []
    real = decoder_module.sample_search

    def counted(*args, **kwargs):
        drawn.append(kwargs["samples_per_input"])
        return real(*args, **kwargs)

    monkeypatch.setattr(decoder_module, "sample_search", counted)
    sources = tmp_path / "src.en"
    sources.write_text("ein mann\nder hund\nrot\n")
    out = tmp_path / "samples.de"
    result = run_cli("decoder", f"--output_dir={tiny_trained}", f"--decode_from_file={sources}",
                     f"--decode_to_file={out}",
                     "--decode_hparams=sampling=true,samples_per_input=50,return_beams=true,"
                     "extra_length=8,temperature=3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert drawn and max(drawn) <= 7, drawn
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]   # (a sample may spell \x85)
    assert len(lines) == 3 and all(len(line.split("\t")) == 50 for line in lines), lines


def test_a_sampling_setting_that_cannot_fit_is_refused_before_the_model_loads(tiny_trained, tmp_path):
    sources = tmp_path / "src.en"
    sources.write_text("ein mann\nder hund\nrot\n")
    result = run_cli("decoder", f"--output_dir={tiny_trained}", f"--decode_from_file={sources}",
                     "--decode_hparams=sampling=true,samples_per_input=1000000000,return_beams=true")
    one_line_error(result, "t2t-decoder", "decoding would need about",
                   "return_beams keeps all 1000000000 samples of each of the 3 lines",
                   "Received: samples_per_input=1000000000, return_beams=true")
    assert "Decoding with" not in result.stderr
    assert not list(tmp_path.glob("src.en.*"))
