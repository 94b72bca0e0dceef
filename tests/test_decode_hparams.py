"""--decode_hparams out of range: one line with the range, before any model loads."""

import pytest

from conftest import one_line_error, run_cli


@pytest.mark.parametrize("text, message", [
    ("beam_size=0", "'beam_size' must be in [1, inf) (the beam width; 1 is greedy search). "
                    "Received: beam_size=0"),
    ("alpha=-0.5", "'alpha' must be in [0, inf)"),
    ("alpha=nan", "'alpha' must be a finite number in [0, inf)"),
    ("alpha=inf", "'alpha' must be a finite number in [0, inf)"),
    ("extra_length=-1", "'extra_length' must be in [0, 1024]"),
    # Unbounded, its cache of input + extra_length positions per row was an
    # out-of-memory kill (14 GB at 100000), not a longer translation.
    ("extra_length=100000", "'extra_length' must be in [0, 1024] (output tokens allowed "
                            "beyond the input's length, a cache held for every row; the "
                            "paper uses 50, parsing 300). Received: extra_length=100000"),
    ("batch_size=0", "'batch_size' must be in [1, inf)"),
])
def test_decode_hparams_out_of_range_are_refused_with_the_range(text, message):
    from t2t_revival.settings.decode_hparams import DecodeHParamsError, parse_decode_hparams

    with pytest.raises(DecodeHParamsError) as error:
        parse_decode_hparams(text)
    assert message in str(error.value)


def test_decoder_refuses_decode_hparams_out_of_range_before_loading(tiny_trained):
    result = run_cli("decoder", f"--output_dir={tiny_trained}", "--decode_interactive",
                     "--decode_hparams=alpha=nan", stdin="ein mann\n")
    one_line_error(result, "t2t-decoder", "'alpha' must be a finite number in [0, inf)")
    assert "Decoding with" not in result.stderr


@pytest.mark.parametrize("text, message", [
    # Unbounded, 1e8 was a 3.7 GB allocation failing in a traceback.
    ("max_constraint_tokens=100000000", "'max_constraint_tokens' must be in [1, 1024] "
                                        "(constraint subwords per sentence, the width of the "
                                        "search's constraint tensors, whose memory grows with "
                                        "its square). Received: max_constraint_tokens=100000000"),
    # str.isdigit is true for a superscript, which int() refuses: a traceback.
    ("alignments=true,alignment_heads=²", "decode hparam 'alignment_heads' must be mean, max "
                                          "or a head number. Received: alignment_heads='²'"),
    ("alignments=true,alignment_heads=٣", "Received: alignment_heads='٣'"),   # (Arabic-Indic 3)
])
def test_decode_hparams_beyond_their_bounds_are_one_error(text, message):
    """Issue 77, part 5."""
    from t2t_revival.settings.decode_hparams import DecodeHParamsError, parse_decode_hparams

    with pytest.raises(DecodeHParamsError) as error:
        parse_decode_hparams(text)
    assert message in str(error.value)


def test_the_largest_constraint_width_and_a_head_number_are_taken():
    from t2t_revival.decode.word_alignment import check_alignment_settings
    from t2t_revival.errors import UserError
    from t2t_revival.settings.decode_hparams import parse_decode_hparams

    assert parse_decode_hparams("max_constraint_tokens=1024")["max_constraint_tokens"] == 1024
    assert parse_decode_hparams("alignments=true,alignment_heads=3")["alignment_heads"] == "3"
    assert check_alignment_settings(-1, "3", 2, 4) == 1
    with pytest.raises(UserError, match=r"a head number in \[0, 4\). Received: "
                                        r"alignment_heads='²'"):
        check_alignment_settings(-1, "²", 2, 4)


def test_max_input_size_0_means_no_cut_and_is_taken_with_litert():
    """Issue 77, part 5: 0 (like -1) cuts nothing, so the LiteRT programs
    serve it; a cut (> 0) they do not."""
    from t2t_revival.settings.decode_hparams import DecodeHParamsError, parse_decode_hparams

    for size in (0, -1):
        assert parse_decode_hparams(f"max_input_size={size},litert=true")["litert"] == "true"
    with pytest.raises(DecodeHParamsError, match="drop max_input_size or litert=true"):
        parse_decode_hparams("max_input_size=5,litert=true")


def test_a_beam_that_cannot_fit_is_refused_before_any_litert_conversion(tiny_trained, tmp_path,
                                                                        monkeypatch):
    """Issue 77, part 5: beam_size=100000000 started a LiteRT conversion,
    which ran out of memory before the memory estimate refused the beam."""
    from t2t_revival.decode.engine_choice import EngineChoice

    def no_engine_yet(*args, **kwargs):
        raise AssertionError("the engine (a LiteRT conversion) was chosen before the memory "
                             "check")

    monkeypatch.setattr(EngineChoice, "for_job", no_engine_yet)
    sources = tmp_path / "src.en"
    sources.write_text("ein mann\n")
    result = run_cli("decoder", f"--output_dir={tiny_trained}", f"--decode_from_file={sources}",
                     "--decode_hparams=beam_size=100000000,litert=true")
    one_line_error(result, "t2t-decoder", "decoding would need about",
                   "one sentence's beam of 100000000 rows", "lower beam_size",
                   "Received: beam_size=100000000")
    assert "Converting" not in result.stderr
