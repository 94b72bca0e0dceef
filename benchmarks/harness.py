"""What every benchmark shares: where the shared folder is, what machine it
ran on, the JSON it prints, a user error as one line, a peer run, our model
at a peer's shape, and the arguments that name a trained model.

Benchmarks run from the repository root as modules (`python -m
benchmarks.NAME`), so they import `benchmarks.harness` and the library as
installed; none edits `sys.path`.

The shared folder is `../shared` beside the repository (its data/ and
peers/); a checkout elsewhere (a git worktree) sets `T2T_SHARED` to it.

Machine facts: the development VM is restored on whichever host serves the
session, and the hosts differ: on 2026-11-22 TensorFlow's float32 matmul
peak was 0.33-0.36 TFLOP/s, on the evening of 2026-11-23 0.08-0.13, with
AVX2 and no AVX-512, and nothing in the load average to show it
(RESULTS.md). So each figure says which CPU it came from (`describe`), and
the time-boxed recipe also records a quick matmul peak (`matmul_tflops`): a
speed or a BLEU-in-two-hours from one host is not comparable with another's
without it.

User errors: a benchmark raises `UserError` (`t2t_revival.errors`); `run`
prints it as `NAME: error: ...`, one line on stderr, and exits with status
2, as the CLIs do; argparse's own errors (`argument_parser`) end the same
way, under the same name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Sequence

from t2t_revival.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]
"""The repository."""
SHARED = pathlib.Path(os.environ.get("T2T_SHARED") or ROOT.parent / "shared")
"""The shared folder: $T2T_SHARED, or ../shared beside the repository."""
SHARED_DATA = SHARED / "data"
USAGE_ERROR = 2


# ------------------------------------------------------------ the command line
def argument_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The parser of benchmark `prog` (its module name, e.g. "train_step"),
    described by the first line of its docstring `doc`."""
    return argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])


def run(main: Callable[[], Any], prog: str) -> None:
    """Run a benchmark's `main()`; a `UserError` ends it with one line
    `prog: error: ...` on stderr and exit status 2 (no traceback)."""
    try:
        main()
    except UserError as e:
        one_line = " ".join(str(e).split())
        print(f"{prog}: error: {one_line}", file=sys.stderr, flush=True)
        sys.exit(USAGE_ERROR)


def print_result(result: Mapping[str, Any], indent: int | None = None) -> None:
    """Print a benchmark's result: one JSON object, the last line of stdout."""
    print(json.dumps(result, indent=indent), flush=True)


def module_command(python: str, name: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """(command, environment) that runs `python -m benchmarks.NAME args` from
    any folder: the repository goes first on the child's PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return [python, "-m", f"benchmarks.{name}", *args], dict(os.environ, PYTHONPATH=path)


def cli(module: str, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    """`python -m t2t_revival.cli.<module> ARGS` as a fresh process, as a user
    runs it (this checkout first on its PYTHONPATH, TensorFlow's start-up
    lines off), in `cwd`; its output captured. A failure passes the tail of
    its stderr on and is one `UserError` naming the command and its status."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", f"t2t_revival.cli.{module}", *args]
    out = subprocess.run(command, capture_output=True, text=True, cwd=cwd,
                         env=dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2"))
    if out.returncode:
        sys.stderr.write(out.stderr[-2000:])
        raise UserError(f"t2t-{module.replace('_', '-')} failed with exit code "
                        f"{out.returncode} (its error output is above). Received: "
                        f"{' '.join(command)}")
    return out


@contextlib.contextmanager
def work_folder(given: str | None, prog: str):
    """The folder a benchmark's data and runs go in: `given` (--work_dir),
    kept, or else a new temporary folder, removed at the end (a benchmark
    leaves nothing behind by default)."""
    if given:
        if os.path.exists(given) and not os.path.isdir(given):
            raise UserError(f"--work_dir must be a folder; {given} is a file. Received: "
                            f"work_dir={given!r}")
        os.makedirs(given, exist_ok=True)
        yield given
    else:
        with tempfile.TemporaryDirectory(prefix=f"{prog}.") as folder:
            yield folder


# ------------------------------------------------------------ the machine
def cpu(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name and its widest AVX level, e.g. 'AMD EPYC, avx2'."""
    name, flags = "", set()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass  # not Linux: the name platform knows, no AVX level
    name = name or platform.processor() or "unknown CPU"
    level = next((f for f in ("avx512f", "avx2", "avx") if f in flags), None)
    return f"{name}, {level}" if level else name


def describe(**versions: str) -> str:
    """'x86_64 2 cores, AMD EPYC, avx2, tensorflow 2.21.0' (versions as given)."""
    parts = [f"{platform.machine()} {os.cpu_count()} cores", cpu()]
    parts += [f"{library} {version}" for library, version in versions.items()]
    return ", ".join(parts)


def matmul_tflops(n: int = 1024, repeats: int = 5,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """numpy's float32 n^3 matmul, best of `repeats`, in TFLOP/s (under a second):
    how fast this host multiplies, to set beside a time-boxed result.
    `clock`: seconds (tests pass a fake)."""
    import numpy as np

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    a @ a  # warm-up: the BLAS threads start
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        a @ a
        best = min(best, clock() - start)
    # 4 significant figures: a small matmul on a slow or loaded host is well
    # under 0.001 TFLOP/s, which 3 decimals rounded to 0.0.
    return float(f"{2.0 * n ** 3 / best / 1e12:.4g}")


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages (the machine may be shared)."""
    return [round(x, 2) for x in os.getloadavg()]


# ------------------------------------------------------------ peers
def run_peer(command: Sequence[str], env: Mapping[str, str] | None = None) -> dict:
    """Run a peer (a subprocess that prints its figures as a JSON line last)
    and return that JSON object. A peer that fails: its stderr's tail is
    passed on, then a UserError names the command."""
    proc = subprocess.run(list(command), capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-2000:])
        raise UserError(f"the peer failed with exit code {proc.returncode} (its error output "
                        f"is above); check the peer's flags and its Python. Received: "
                        f"{' '.join(command)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


PEER_SCRIPT = SHARED / "peers" / "torch_transformer_train.py"
"""The PyTorch nn.Transformer training step that train_step and train_loop
run beside ours."""
SHAPES = {
    "base": dict(d_model=512, layers=6, heads=8, ff=2048, vocab=32000),
    "big": dict(d_model=1024, layers=6, heads=16, ff=4096, vocab=32000),
    "tiny": dict(d_model=128, layers=2, heads=4, ff=512, vocab=8192),
}
"""The peer's model shapes (its flags) by name: transformer_base's,
transformer_big's and transformer_tiny's."""
RUN_FLAGS = [("batch", 64), ("src_len", 32), ("tgt_len", 32), ("steps", 10), ("warmup", 2),
             ("threads", 0)]
"""The peer's other flags, with its defaults: full batches of `batch`
sentences of `src_len` and `tgt_len` tokens, `warmup` untimed and `steps`
timed steps, `threads` torch threads (0: torch's default)."""


def peer_command(shape: Mapping[str, int], run_flags: Mapping[str, int], python: str,
                 script: str, device: str = "", autocast: str = "none",
                 compile: bool = False) -> tuple[list[str], dict[str, str] | None]:
    """(command, environment) of the torch peer at `shape` and `run_flags`
    (every name of `RUN_FLAGS`): the shared `script` itself (CPU, float32),
    or, with `device`, its model on that device through
    `benchmarks.torch_peer_step` (`autocast`, `compile`)."""
    flags = []
    for name, value in list(shape.items()) + [(n, run_flags[n]) for n, _ in RUN_FLAGS]:
        flags += [f"--{name}", str(value)]
    if not device:
        return [python, str(script), *flags], None
    return module_command(python, "torch_peer_step", "--peer_script", str(script),
                          "--device", device, "--autocast", autocast,
                          *(["--compile"] if compile else []), *flags)


# ------------------------------------------------------------ our model at a peer's shape
PROBLEM = "translate_ende_multi30k"
"""The problem whose name the training benchmarks give the trainer (on
synthetic batches only its hparams count)."""


def hparams_overrides(shape: Mapping[str, int], batch: int, src_len: int, tgt_len: int,
                      mixed_precision: str = "float32", more: str = "") -> str:
    """The `--hparams` text that turns transformer_base into `shape`, with a
    token budget of `batch` sentences of max(src_len, tgt_len) tokens, one
    update per batch, and `more` overrides last."""
    length = max(src_len, tgt_len)
    values = dict(num_hidden_layers=shape["layers"], d_model=shape["d_model"],
                  num_heads=shape["heads"], d_ff=shape["ff"], vocab_size=shape["vocab"],
                  max_length=length, mixed_precision=mixed_precision,
                  batch_size=batch * length, gradient_accumulation_steps=1)
    return ",".join([f"{k}={v}" for k, v in values.items()] + ([more] if more else []))


def synthetic_batch(shape: Mapping[str, int], batch: int, src_len: int, tgt_len: int) -> dict:
    """A full batch of random non-pad ids, seeded: {"inputs": int32 [batch,
    src_len], "targets": int32 [batch, tgt_len]}."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {"inputs": rng.integers(1, shape["vocab"], (batch, src_len)).astype("int32"),
            "targets": rng.integers(1, shape["vocab"], (batch, tgt_len)).astype("int32")}


# ------------------------------------------------------------ a trained model
DEFAULT_SOURCE = SHARED_DATA / "multi30k" / "test_2016_flickr.en.gz"


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --output_dir (required), --checkpoint_path and --source (by default
    the Multi30k test set of the shared data) to `parser`: what a decoding
    benchmark decodes."""
    parser.add_argument("--output_dir", required=True, help="a t2t-trainer output_dir")
    parser.add_argument("--checkpoint_path", default=None,
                        help="a checkpoint prefix (default: the latest in output_dir)")
    parser.add_argument("--source", default=str(DEFAULT_SOURCE),
                        help="sentences to translate, one per line (.gz read as gzip)")


def sources_and_decoder(args: argparse.Namespace, overrides: Mapping[str, Any]):
    """(the first `args.max_sentences` lines of --source, the `Decoder` of
    --output_dir and --checkpoint_path with the decode hparams `overrides`).
    A UserError when --source has no lines."""
    from t2t_revival.decode.decoder import Decoder, read_text_lines

    sources = read_text_lines(args.source, "source")[:args.max_sentences]
    if not sources:
        raise UserError(f"--source has no lines to translate. Received: --source={args.source!r}")
    return sources, Decoder.load(args.output_dir, args.checkpoint_path, overrides)


def target_tokens(vocab, outputs: Sequence[str]) -> int:
    """The target tokens of `outputs` (translations): their SentencePiece
    pieces, EOS included; what every decoding benchmark's tokens/s counts."""
    return sum(len(vocab.encode(o)) + 1 for o in outputs)
