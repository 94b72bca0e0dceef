"""Quiet by default: TensorFlow's C++ start-up lines (the CUDA stub, the failed
cuInit of a machine without a GPU, the CPU feature guard, XLA's service lines)
tell a user nothing about their run.

`quiet_tensorflow_startup`, called by `t2t_revival/cli/__init__.py` before any
CLI module (and so before TensorFlow) is imported, sets
`TF_CPP_MIN_LOG_LEVEL=2` (errors only) unless the user set it, and drops the
known start-up lines that TensorFlow prints whatever that level (they go to
the process's stderr before its logging is set up) while `tensorflow` is
imported and its devices listed; any other line is passed on. `--verbose`
(or absl's `--verbosity=1` and above) shows everything.

What it decided is held by absl's logger, not here: the process hides the
noise when that logger carries its filter (`hiding_noise`).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging as py_logging
import os
import re
import sys
import tempfile
from typing import Iterator

from absl import flags
from absl import logging as absl_logging

from t2t_revival.process.stop_controller import StopController

VERBOSE_FLAG = "verbose"

flags.DEFINE_bool(VERBOSE_FLAG, False,
                  "Show TensorFlow's start-up and INFO log lines (hidden by default; "
                  "TF_CPP_MIN_LOG_LEVEL, when set, is kept).")

# Start-up lines of TensorFlow's C++ runtime, printed at import or when it lists
# its devices whatever TF_CPP_MIN_LOG_LEVEL says.
_STARTUP_NOISE = re.compile("|".join((
    r"All log messages before absl::InitializeLog\(\) is called",
    r"cudart_stub\.cc", r"Could not find cuda drivers",
    r"cuda_platform\.cc.*cuInit", r"cuda_(dnn|fft|blas)\.cc.*Unable to register",
    r"cpu_feature_guard\.cc", r"^To enable the following instructions",
    r"oneDNN custom operations", r"TF_ENABLE_ONEDNN_OPTS",
    # SentencePiece inside tensorflow-text, when the exporter builds its tokenizer.
    r"normalizer\.cc.*precompiled_charsmap is empty",
    # LiteRT's interpreter (t2t-decoder's LiteRT path), once per program.
    r"Created TensorFlow Lite XNNPACK delegate for CPU",
)))
# TensorFlow's and Keras's own Python INFO lines ("Function `serve` contains
# input name(s) ... which will be renamed ... in the SavedModel", "Sharding
# callback duration: ...") are hidden; ours are not. Most go through absl's
# logger, so they are told apart by the file that logs them.
_LIBRARY_PATHS = tuple(os.sep + os.path.join(*p) + os.sep for p in (
    ("tensorflow", "python"), ("keras", "src"), ("tensorflow_text", "python")))


class _LibraryInfoFilter(py_logging.Filter):
    """Drops INFO and DEBUG records logged from TensorFlow's or Keras's code."""

    def filter(self, record: py_logging.LogRecord) -> bool:
        return (record.levelno >= py_logging.WARNING
                or not any(p in record.pathname for p in _LIBRARY_PATHS))


def hiding_noise() -> bool:
    """Whether `quiet_tensorflow_startup` decided to hide the noise in this
    process: its filter is on absl's logger (the process's, for its life)."""
    return any(isinstance(f, _LibraryInfoFilter) for f in absl_logging.get_absl_logger().filters)


def verbose_requested(argv: list[str]) -> bool:
    """Whether argv asks for everything: --verbose, or absl's -v/--verbosity >= 1."""
    verbose = False
    for i, arg in enumerate(argv[1:], start=1):
        name, _, value = arg.partition("=")
        if name in ("--verbose", "--noverbose"):
            verbose = name == "--verbose" and value.lower() not in ("false", "0")
        elif name in ("-v", "--v", "-verbosity", "--verbosity"):
            if not value and i + 1 < len(argv):
                value = argv[i + 1]
            with contextlib.suppress(ValueError):
                verbose = verbose or int(value) >= 1
    return verbose


@contextlib.contextmanager
def quiet_native_stderr(quiet: bool | None = None) -> Iterator[None]:
    """At default verbosity, hold back what C++ code writes to stderr (file
    descriptor 2) in this block, then pass on all but the known noise.

    For short stretches only (TensorFlow's import, an export): the lines come
    out when the block ends, and are lost if the process is killed inside it.

    Args:
        quiet: whether to filter (default: whether `quiet_tensorflow_startup`
            decided to hide the noise in this process).
    """
    if not (hiding_noise() if quiet is None else quiet):
        yield
        return
    stop = StopController.process()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            with stop.stderr_held(saved):   # (a stop's line goes to `saved`)
                yield
        finally:
            sys.stderr.flush()
            if stop.stop_signal is None:
                os.dup2(saved, 2)
                captured.seek(0)
                lines = captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                kept = "".join(l for l in lines if not _STARTUP_NOISE.search(l))
                if kept:
                    sys.stderr.write(kept)
                    sys.stderr.flush()
            os.close(saved)


class _QuietTensorFlowLoader(importlib.abc.Loader):
    """Runs TensorFlow's own loader with its start-up lines filtered out."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        with quiet_native_stderr():
            self.loader.exec_module(module)
            module.config.list_physical_devices()   # the failed cuInit prints here


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """On the first `import tensorflow`, wraps its loader in `_QuietTensorFlowLoader`."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietTensorFlowLoader(spec.loader)
        return spec


def quiet_tensorflow_startup(argv: list[str]) -> None:
    """Before TensorFlow is imported: hide its start-up noise unless asked for.

    Keeps a `TF_CPP_MIN_LOG_LEVEL` the user set; otherwise 2 (C++ errors only),
    3 while the XLA compile cache is on (TensorFlow logs an error line, "Error
    parsing text-format tensorflow.XlaSerializedCacheEntry", for every entry
    it loads: it tries the binary entry as text first), or 0 with `--verbose`.
    Does nothing to a TensorFlow already imported.
    """
    from t2t_revival.process.xla_compile_cache import root_from_environment

    verbose = verbose_requested(argv)
    quiet_level = "3" if root_from_environment() else "2"
    level = os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbose else quiet_level)
    if verbose or level == "0" or "tensorflow" in sys.modules:
        return
    if not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())
    # (absl's own logger, made by absl.logging: one made here first would be a
    # plain Logger, which names absl's module, not TensorFlow's, as each record's
    # caller.) Its filter is also the record that the noise is hidden (`hiding_noise`).
    for logger in (absl_logging.get_absl_logger(), py_logging.getLogger("tensorflow")):
        if not any(isinstance(f, _LibraryInfoFilter) for f in logger.filters):
            logger.addFilter(_LibraryInfoFilter())
