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
