"""t2t-trainer's user errors: one clear line, exit status 2, no traceback."""

import pytest

from conftest import run_cli


def _trainer(*args):
    """t2t-trainer ARGS, in this process (its output and exit status are the
    subject, not the process: tests/test_quiet_start.py starts one)."""
    return run_cli("trainer", *args)


def test_registry_help_lists_the_sets():
    out = _trainer("--registry_help")
    assert out.returncode == 0, out.stderr
    for name in ("transformer_base", "transformer_big", "transformer_tiny",
                 "transformer_parsing_base"):
        assert name in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--hparams_set=nope"], "Unknown hparam set 'nope'"),
    (["--hparams", "d_model=abc"], "'d_model' expects int"),
    (["--hparams", "d_modle=512"], "Did you mean 'd_model'"),
    (["--no_such_flag"], "Unknown command line flag 'no_such_flag'"),
    (["--registry_help=maybe"], "registry_help"),
    (["--eval_early_stopping_evals=3", "--local_eval_frequency=0"],
     "--eval_early_stopping_evals counts evaluations: set --local_eval_frequency=N too"),
    (["--export_on_best"], "--export_on_best needs --export_saved_model or"),
    (["--eval_decode_hparams=beam=3"], "Unknown decode hparam 'beam'"),
    (["--eval_decode_sentences=-1"], "eval_decode_sentences"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    out = _trainer(*args)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-trainer: error:")]
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr
