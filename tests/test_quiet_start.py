"""Quiet by default: no TensorFlow C++ start-up lines and no absl log lines
from the CLIs (our own lines come plain), and `t2t-trainer --registry_help`
lists the registries without importing TensorFlow."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from t2t_revival.cli import tensorflow_noise

# What TensorFlow's runtime prints at start-up on a machine like this one: the
# CUDA stub, the failed cuInit, the CPU feature guard, oneDNN, XLA's service
# lines, and any absl C++ log line (those carry a 0000 date before logging is
# set up). Written independently of the CLI's own filter.
NOISE = re.compile(r"cuda|cpu_feature_guard|TF_ENABLE_ONEDNN_OPTS|oneDNN|XLA service|"
                   r"StreamExecutor|absl::InitializeLog|^[IWEF]0000 |precompiled_charsmap",
                   re.IGNORECASE | re.MULTILINE)
# An absl log line: `I1128 00:40:23.874246 139654954986368 problem.py:275] ...`
# (level, date, time, thread id, source line).
ABSL_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ", re.MULTILINE)


def _quiet_env():
    """The user's environment: no TF_CPP_MIN_LOG_LEVEL of the test suite's."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run(args, timeout=600):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=_quiet_env(), timeout=timeout)


def test_registry_help_is_quiet_whole_and_imports_no_tensorflow():
    code = ("import sys; sys.argv = ['t2t-trainer', '--registry_help']\n"
            "from t2t_revival.cli import trainer\n"
            "try:\n    trainer.run()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'tensorflow_text', 'jax'))\n"
            "print('HEAVY', heavy)")
    out = _run(["-c", code], timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []"
    assert not NOISE.search(out.stdout + out.stderr), out.stderr
    assert out.stderr == ""
    lines = out.stdout.splitlines()
    assert "  transformer  The paper's encoder-decoder Transformer, built from an `HParams`." \
        in lines
    sample = next(l for l in lines if l.startswith("  parsing_english_ptb_sample "))
    # The whole first paragraph of the docstring, not its first line.
    assert sample.endswith("0180-0199 test; 4000 shared pieces. Offline and for tests."), sample


def test_models_registered_lazily_resolve_to_the_class():
    from t2t_revival import registry

    from t2t_revival.models.transformer import Transformer

    assert registry.models.get("transformer") is Transformer
    assert registry.models.names() == ["transformer"]


def test_a_lazy_entry_is_replaced_only_by_its_own_target():
    from t2t_revival.registry import Registry, RegistryError

    reg = Registry("model")
    reg.register_lazy("transformer", "t2t_revival.models.transformer:Transformer")
    assert reg.descriptions()[0][1].startswith("The paper's encoder-decoder Transformer")

    class Transformer:
        """Another class of the same name."""

    with pytest.raises(RegistryError, match="already registered .*by t2t_revival.models"):
        reg.register("transformer")(Transformer)
    with pytest.raises(RegistryError, match="already registered"):
        reg.register_lazy("transformer", "elsewhere:Transformer")


@pytest.mark.parametrize("argv,verbose", [
    ([], False), (["--verbose"], True), (["--noverbose"], False),
    (["--verbose=false"], False), (["--verbosity=1"], True), (["-v", "2"], True),
    (["--verbosity=0"], False), (["-v=-1"], False), (["--problem=x"], False),
])
def test_what_counts_as_asking_for_verbose(argv, verbose):
    assert tensorflow_noise.verbose_requested(["prog", *argv]) is verbose


def test_native_stderr_filter_drops_only_the_known_noise(capfd):
    with tensorflow_noise.quiet_native_stderr(quiet=True):
        os.write(2, b"I0000 00:00:1.2 1 cudart_stub.cc:31] Could not find cuda drivers\n"
                    b"E0000 00:00:1.2 1 some_op.cc:12] a real error\n"
                    b"normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use id\n")
    assert capfd.readouterr().err == "E0000 00:00:1.2 1 some_op.cc:12] a real error\n"
    with tensorflow_noise.quiet_native_stderr(quiet=False):     # --verbose: everything passes
        os.write(2, b"I0000 cudart_stub.cc:31] Could not find cuda drivers\n")
    assert "cudart_stub" in capfd.readouterr().err


@pytest.mark.parametrize("argv,hiding", [([], True), (["--verbose"], False)])
def test_what_the_start_decided_is_held_by_absls_logger(argv, hiding):
    """`quiet_native_stderr()`'s default: whether the CLIs' start
    (`quiet_tensorflow_startup`) put its filter on absl's logger."""
    code = ("import sys\n"
            "from t2t_revival.cli import tensorflow_noise\n"
            "print(tensorflow_noise.hiding_noise())")
    out = _run(["-c", code, *argv], timeout=120)
    assert (out.returncode, out.stdout) == (0, f"{hiding}\n"), out.stderr


def test_a_tiny_training_run_prints_no_tensorflow_startup_lines(shared_data, tmp_path):
    """datagen of the WSJ sample (about 10 s) and 2 steps of transformer_tiny
    shrunk to one small layer (the start-up lines, not the model, are the subject)."""
    out = _run([str(ROOT / "t2t_trainer.py"), "--problem=parsing_english_ptb_sample",
                "--hparams_set=transformer_tiny",
                "--hparams=num_hidden_layers=1,d_model=16,d_ff=32,num_heads=2",
                f"--data_dir={tmp_path / 'data'}",
                f"--tmp_dir={shared_data}", f"--output_dir={tmp_path / 'run'}",
                "--train_steps=2", "--xla=false", "--eval_steps=1",
                "--local_eval_frequency=0", "--save_checkpoints_steps=2",
                "--eval_decode_sentences=0"])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "step 2/2" in out.stdout and "eval at step 2:" in out.stdout, out.stdout
    # A sign of life while the first update and the first evaluation trace
    # (compile, with XLA), with the time it took (issue 61).
    lines = out.stdout.splitlines()
    assert lines.index("tracing the training step...") \
        < next(i for i, l in enumerate(lines) if l.startswith("step ")), out.stdout
    assert any(re.fullmatch(r"traced the training step in \d+\.\d s \(its first update "
                            r"included\)", l) for l in lines), out.stdout
    assert lines.index("tracing the dev loss...") \
        < next(i for i, l in enumerate(lines) if l.startswith("eval at step 2:")), out.stdout
    assert not NOISE.search(out.stdout + out.stderr), out.stderr[-3000:]
    # No absl line at all: TensorFlow's own INFO lines (the checkpoint saver's)
    # are hidden, and ours (datagen's) come as plain lines.
    assert not ABSL_LINE.search(out.stdout + out.stderr), out.stderr[-3000:]
    assert "Sharding callback" not in out.stderr
    assert any(line.startswith("parsing_english_ptb_sample train: 3396 pairs")
               for line in out.stderr.splitlines()), out.stderr[-3000:]


def test_our_log_records_are_plain_lines_a_library_s_keep_absl_s_format(tmp_path):
    import logging

    from absl import logging as absl_logging

    from t2t_revival.cli import plain_own_lines
    from t2t_revival.data import problem

    def record(level, pathname, msg, *args):
        return logging.LogRecord("absl", level, str(pathname), 12, msg, args, None)

    formatter = plain_own_lines.PlainOwnLines()
    assert formatter.format(record(logging.INFO, problem.__file__,
                                   "%s dev: %d pairs", "p", 3)) == "p dev: 3 pairs"
    assert formatter.format(record(logging.WARNING, problem.__file__, "a.gz:5 is not "
                                   "valid UTF-8")) == "warning: a.gz:5 is not valid UTF-8"
    # A usr_dir's module is the user's own code: plain too.
    assert formatter.format(record(logging.INFO, tmp_path / "my_usr_dir" / "__init__.py",
                                   "mine")) == "mine"
    # An installed library's record (absl's own module here) keeps the prefix.
    library = formatter.format(record(logging.WARNING, absl_logging.__file__, "theirs"))
    assert ABSL_LINE.match(library) and library.endswith("__init__.py:12] theirs"), library


@pytest.mark.parametrize("argv,plain", [([], True), (["--verbose"], False),
                                        (["--verbosity=1"], False)])
def test_verbose_keeps_absl_s_format_for_every_line(argv, plain):
    from absl import logging as absl_logging

    from t2t_revival.cli import plain_own_lines

    handler = absl_logging.get_absl_handler()
    before = handler.python_handler.formatter
    try:
        handler.setFormatter(absl_logging.PythonFormatter())
        plain_own_lines.show_own_lines_plain(["t2t-trainer", *argv])
        installed = isinstance(handler.python_handler.formatter,
                               plain_own_lines.PlainOwnLines)
        assert installed is plain
    finally:
        handler.setFormatter(before)


def test_pairs_dropped_for_length_are_said_once_per_split(tiny_data, caplog):
    """The dev split is read at every evaluation: its dropped pairs are said
    at the first only, and nothing is said where no pair is dropped."""
    import logging

    from t2t_revival import registry
    from t2t_revival.settings.hparams import resolve

    problem = registry.problems.get("translate_ende_multi30k")()   # tiny_data's files
    short = resolve("transformer_tiny", "max_length=8", problem)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            problem.dataset("eval", str(tiny_data), short)
        problem.dataset("eval", str(tiny_data), short.replace(max_length=256))
    said = [r.getMessage() for r in caplog.records if "are longer than" in r.getMessage()]
    assert len(said) == 1, said
    assert re.fullmatch(r"translate_ende_multi30k dev: [1-9]\d* of 40 pairs are longer "
                        r"than 8 tokens and are dropped\.", said[0]), said
