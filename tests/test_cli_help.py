"""`--help` of every console script shows its own text and flags.

absl prints the docstring of `__main__` and the flags registered under
`sys.argv[0]`; a console script's `__main__` is pip's wrapper, which has
neither, so without `entry_point.run`'s fix `t2t-decoder --help` listed no flags.
The subprocess below runs each CLI the way pip's wrapper does.
"""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

CLIS = {
    "trainer": ("`t2t-trainer`", ["--problem", "--hparams_set", "--hparams",
                                  "--train_steps", "--max_train_minutes"]),
    "decoder": ("`t2t-decoder`", ["--decode_from_file", "--decode_to_file",
                                  "--decode_hparams", "--checkpoint_path", "--score_file"]),
    "exporter": ("`t2t-exporter`", ["--output_dir", "--format", "--quantization"]),
    "datagen": ("`t2t-datagen`", ["--problem", "--data_dir", "--tmp_dir"]),
    "avg_checkpoints": ("`t2t-avg-checkpoints`", ["--num_last_checkpoints"]),
    "bleu": ("`t2t-bleu`", ["--translation", "--reference"]),
    "query": ("`t2t-query`", ["--server", "--model_name"]),
    "parse_eval": ("`t2t-parse-eval`", ["--gold", "--predicted"]),
    "t2t_import": ("`t2t-import`", ["--t2t_dir", "--vocab_file", "--output_dir",
                                    "--checkpoint", "--target_space_id"]),
}


def _help(module, wrapper):
    code = (f"import sys; sys.argv = [{wrapper!r}, '--help']; "
            f"from t2t_revival.cli.{module} import run; sys.exit(run())")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("module", sorted(CLIS))
def test_help_shows_the_cli_text_and_flags(module):
    title, expected_flags = CLIS[module]
    out = _help(module, f"/venv/bin/t2t-{module}")
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])   # help is no failure
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.startswith(title), out.stdout[:300]
    listed = {line.split(":")[0].strip().replace("--[no]", "--")
              for line in out.stdout.splitlines() if line.startswith("  --")}
    assert set(expected_flags) <= listed, (sorted(listed), out.stdout[-2000:])


def test_thin_wrapper_script_help_lists_the_trainer_flags():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(ROOT / "t2t_trainer.py"), "--help"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.startswith("`t2t-trainer`"), out.stdout[:300]
    assert "  --hparams_set: Registered hparam set name." in out.stdout


@pytest.mark.parametrize("flag", ["--helpshort", "--helpfull"])
def test_other_help_flags_exit_0_and_bad_flags_still_exit_2(flag):
    code = ("import sys; sys.argv = ['/venv/bin/t2t-bleu', %r]; "
            "from t2t_revival.cli.bleu import run; sys.exit(run())")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for argv, status in ((flag, 0), ("--no_such_flag", 2)):
        out = subprocess.run([sys.executable, "-c", code % argv], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == status, (argv, out.returncode, out.stderr[-2000:])


# Every flag that names a file or folder, per CLI.
PATH_FLAGS = {
    "trainer": ["data_dir", "tmp_dir", "output_dir", "warm_start_from"],
    "decoder": ["output_dir", "checkpoint_path", "decode_from_file", "decode_to_file",
                "decode_reference", "score_file"],
    "exporter": ["output_dir", "checkpoint_path", "export_dir"],
    "datagen": ["data_dir", "tmp_dir", "tfds_data_dir"],
    "avg_checkpoints": ["output_dir"],
    "bleu": ["translation", "reference"],
    "query": ["input_file"],
    "parse_eval": ["gold", "predicted"],
}


def test_every_path_flag_reads_a_leading_tilde_as_home():
    """The shell expands `--flag ~/x` but not `--flag=~/x`; every CLI reads
    the `~` alike (t2t-trainer alone did), a checkpoint list entry by entry."""
    from absl import flags

    from conftest import run_cli

    home = os.path.expanduser("~")
    for module, names in PATH_FLAGS.items():
        assert run_cli(module, "--helpshort").returncode == 0
        for name in names:
            parser = flags.FLAGS[name].parser
            assert parser.parse("~/runs/x") == f"{home}/runs/x", (module, name)
            assert parser.parse("runs/~x") == "runs/~x", (module, name)
            assert parser.parse("") == "" and parser.parse(None) is None, (module, name)
            # A list (t2t-decoder's ensemble, t2t-bleu's references) entry by
            # entry; a single path as it is after its first character.
            expected = f"{home}/a/ckpt-1,{home}/b" if (module, name) in \
                (("decoder", "checkpoint_path"), ("bleu", "reference")) else f"{home}/a/ckpt-1,~/b"
            assert parser.parse("~/a/ckpt-1,~/b") == expected, (module, name)


@pytest.mark.parametrize("module", ["trainer", "decoder"])
def test_help_lists_our_flags_and_tensor2tensors_only_under_helpfull(module):
    """tensor2tensor's spellings that ours lack (56 of the trainer's 89 flags,
    refused or without effect) were sorted among ours in `--help`: they are
    in a `--helpfull` section of their own, and `--help` says so."""
    from t2t_revival.cli.tensor2tensor_flags import HELP_SECTION

    out = _help(module, f"/venv/bin/t2t-{module}")
    assert "tensor2tensor's flag:" not in out.stdout
    assert "--helpfull lists them" in out.stdout
    assert len(out.stdout.splitlines()) < 160, len(out.stdout.splitlines())
    code = (f"import sys; sys.argv = ['/venv/bin/t2t-{module}', '--helpfull']; "
            f"from t2t_revival.cli.{module} import run; sys.exit(run())")
    full = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120).stdout
    section = full[full.index(f"\n{HELP_SECTION}:"):]
    assert "  --worker_replicas: tensor2tensor's flag:" in section
    assert "--decode_hparams: Overrides" not in section   # ours stay in their own


@pytest.mark.parametrize("module", ["decoder", "exporter", "t2t_import"])
def test_a_missing_required_flag_is_said_in_our_words(module):
    """absl's "Flag --output_dir must have a value other than None.." was the
    decoder's answer to a newcomer who left out --output_dir."""
    from conftest import one_line_error, run_cli

    line = one_line_error(run_cli(module), f"t2t-{module.replace('_', '-').replace('t2t-', '')}",
                          "--output_dir is required: the training directory",
                          "Received: output_dir=None")
    assert "other than None" not in line
