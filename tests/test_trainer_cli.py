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
    (["--eval_metric=ter"], "problem translate_ende_multi30k scores its predictions with "
                            "bleu or chrf; choose one of them"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    out = _trainer(*args)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-trainer: error:")]
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_registry_help_lists_every_hparam_field_where_the_error_points():
    """The unknown-field error sends the user to --registry_help: it lists
    every HParams field with its type, default and meaning."""
    import dataclasses

    from t2t_revival.settings.hparams import HParams, HParamsError

    with pytest.raises(HParamsError, match=r"`t2t-trainer --registry_help` lists the fields"):
        HParams().override_from_string("d_modle=512")
    out = _trainer("--registry_help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("Hparam fields (--hparams"))
    end = next(i for i, l in enumerate(lines) if i > start and not l.startswith("  "))
    assert lines[end].startswith("tensor2tensor's hparam names")   # (the next table)
    rows = {l.split()[0]: l.split(None, 3)[1:] for l in lines[start + 1:end]}
    assert list(rows) == [f.name for f in dataclasses.fields(HParams)]
    assert rows["batch_size"][:2] == ["int", "4096"]
    assert rows["batch_size"][2].startswith("Tokens per replica per step")
    assert rows["packing"][:2] == ["bool", "false"]
    assert rows["bucket_boundaries"][:2] == ["list", "[]"]
    assert all(len(row) == 3 and row[2] for row in rows.values()), rows


@pytest.mark.parametrize("problem, expected", [
    ("translate_ende_multi30k", [
        "t2t-avg-checkpoints --output_dir=out --num_last_checkpoints=5",
        "t2t-decoder --output_dir=out --checkpoint_path=out/averaged/ckpt-7 "
        "--decode_from_file=data/translate_ende_multi30k-test.source.txt "
        "--decode_reference=data/translate_ende_multi30k-test.target.txt "
        "--decode_to_file=test.hyp.de",
        "t2t-bleu --translation=test.hyp.de "
        "--reference=data/translate_ende_multi30k-test.target.txt",
        "t2t-exporter --output_dir=out --checkpoint_path=out/averaged/ckpt-7"]),
    ("translate_enfr_wmt32k", [
        "t2t-avg-checkpoints --output_dir=out --num_last_checkpoints=5",
        "t2t-decoder --output_dir=out --checkpoint_path=out/averaged/ckpt-7 "
        "--decode_from_file=data/translate_enfr_wmt32k-test.source.txt "
        "--decode_reference=data/translate_enfr_wmt32k-test.target.txt "
        "--decode_to_file=test.hyp.fr --language=fr",
        "t2t-bleu --translation=test.hyp.fr "
        "--reference=data/translate_enfr_wmt32k-test.target.txt --language=fr",
        "t2t-exporter --output_dir=out --checkpoint_path=out/averaged/ckpt-7"]),
    ("parsing_english_ptb_sample", [
        "t2t-avg-checkpoints --output_dir=out --num_last_checkpoints=5",
        "t2t-decoder --output_dir=out --checkpoint_path=out/averaged/ckpt-7 "
        "--decode_from_file=data/parsing_english_ptb_sample-test.source.txt "
        "--decode_reference=data/parsing_english_ptb_sample-test.target.txt "
        "--decode_to_file=test.hyp",
        "t2t-parse-eval --gold=data/parsing_english_ptb_sample-test.gold.trees "
        "--predicted=test.hyp.trees",
        "t2t-exporter --output_dir=out --checkpoint_path=out/averaged/ckpt-7"]),
])
def test_the_next_commands_after_training_go_on_to_scoring_and_export(problem, expected):
    """What the trainer prints last: the workflow after training, through the
    score and the export of the same averaged checkpoint (README.md's workflow
    block for the main job: tests/test_readme_snippets.py)."""
    from t2t_revival.cli.next_commands import next_commands

    assert next_commands(problem, "out", "data", 7) == expected
