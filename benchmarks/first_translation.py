"""The wait before the first translation: fresh processes, timed from their start.

    python -m benchmarks.first_translation --output_dir=t2t_train/tiny \
        --data_dir=t2t_data --rows=all

Each row starts a fresh process, as a person would, and times it from the
start to its first output (a translation line on stdout, or t2t-decoder's
`Wrote N translations` for a file), split into phases that the process
itself reports: the CLIs print `t2t-phase: <name> <time>` lines to stderr
under `T2T_PHASE_TIMES=1` (`t2t_revival.process.phase_times`: checked, imported,
built, restored, first_batch with its XLA compilation), the trainer its
`compiling the training step` and `eval at step` lines. `phases` holds each
phase's seconds from the previous one (`to_first_output` the last), and
`phases_at_s`, `first_output_s` and `exit_s` are from the process start.

Rows (--rows, comma-separated, or `all`; `quick` is import_tensorflow,
decoder_2 and the mistakes, under a minute on a quiet machine):

- import_tensorflow: a bare `python -c "import tensorflow"`, the yardstick
  (`ratio_to_import_tensorflow` divides each row's first output by it);
- decoder_1, decoder_2, decoder_100, decoder_1000: t2t-decoder on the first
  N lines of --source (with --decode_hparams);
- interactive: `t2t-decoder --decode_interactive`'s first answer to one line;
- saved_model: a process that imports TensorFlow and tensorflow-text, loads
  the newest SavedModel under output_dir/export and translates 2 lines;
- ctranslate2: `CTranslate2Translator` on the newest CTranslate2 export
  (output_dir/export/ctranslate2), 2 lines: the reference, same run;
- trainer: t2t-trainer, 1 update and one evaluation with
  --eval_decode_sentences dev sentences decoded, from a fresh output_dir
  (--data_dir must hold translate_ende_multi30k's data): `first_update_s`
  and `first_evaluation_s` (from the first update's end to the eval line);
- mistake_problem, mistake_hparam, mistake_hparams_set, mistake_run_dir:
  the time t2t-trainer (and t2t-decoder for the run directory) takes to
  report a mistyped --problem, --hparams=foo=1, an unknown --hparams_set and
  a missing run directory (`tensorflow_imported` says whether it loaded
  TensorFlow first: it should not).

`compile_cache` gives the compile cache's root (`T2T_COMPILE_CACHE`; null
when off) and its entries before and after (XLA programs, LiteRT program
sets): a run on a warm cache loads the programs a cold one compiles or
converts (run it twice to see both). Each decoder row says its `engine`
(`litert`: t2t-decoder's small jobs without TensorFlow, litert=auto; or
`tensorflow`) and whether it `converted` the LiteRT programs first.

The machine may be shared: `loadavg_before`/`loadavg_after` come with the
figures, and only figures from a quiet machine belong in RESULTS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks import harness
from t2t_revival.errors import UserError
from t2t_revival.process.phase_times import ENV_VAR, PREFIX
from t2t_revival.process.xla_compile_cache import root_from_environment

PROG = "first_translation"
DECODER_ROWS = {"decoder_1": 1, "decoder_2": 2, "decoder_100": 100, "decoder_1000": 1000}
MISTAKE_ROWS = ("mistake_problem", "mistake_hparam", "mistake_hparams_set", "mistake_run_dir")
ROWS = ("import_tensorflow", *DECODER_ROWS, "interactive", "saved_model", "ctranslate2",
        "trainer", *MISTAKE_ROWS)
QUICK = ("import_tensorflow", "decoder_2", *MISTAKE_ROWS)

# Runs in a clean process: argv = SavedModel directory, sentences (JSON).
# Imports nothing of this project.
_SAVED_MODEL = r"""
import json, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
print("t2t-phase: imported %.3f" % time.time(), file=sys.stderr, flush=True)
model = tf.saved_model.load(sys.argv[1])
print("t2t-phase: loaded %.3f" % time.time(), file=sys.stderr, flush=True)
outputs = model.signatures["serving_default"](sentences=tf.constant(json.loads(sys.argv[2])))
for line in outputs["outputs"].numpy():
    print(line.decode("utf-8"), flush=True)
"""
# The same with CTranslate2Translator (ctranslate2 and sentencepiece only).
_CTRANSLATE2 = r"""
import json, sys, time
from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator
print("t2t-phase: imported %.3f" % time.time(), file=sys.stderr, flush=True)
translator = CTranslate2Translator(sys.argv[1])
print("t2t-phase: loaded %.3f" % time.time(), file=sys.stderr, flush=True)
for line in translator.translate(json.loads(sys.argv[2])):
    print(line, flush=True)
"""


def _command(name: str) -> list[str]:
    """The console script `name` beside this Python (what a user runs), else
    its module run by this Python."""
    script = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", f"t2t_revival.cli.{name.split('-', 1)[1]}"]


def timed_process(command: list[str], stdin_text: str | None = None,
                  first_output: str | None = None, timeout: float = 3600) -> dict:
    """Run `command` with T2T_PHASE_TIMES=1; time its phases, first output and exit.

    The first output is the first stdout line, or the first line (stdout or
    stderr) that starts with `first_output`. Returns {"first_output_s",
    "exit_s", "returncode", "phases": {name: seconds since the previous
    phase}, "phases_at_s": {name: seconds since the start}, "lines":
    [(seconds, stream, line)], "stderr_tail"}."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(harness.ROOT), os.environ.get("PYTHONPATH")) if p))
    env[ENV_VAR] = "1"
    start = time.time()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE if stdin_text is not None
                            else subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def read(stream, name):
        for line in stream:
            with lock:
                lines.append((time.time() - start, name, line.rstrip("\n")))

    readers = [threading.Thread(target=read, args=(proc.stdout, "stdout"), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, "stderr"), daemon=True)]
    for reader in readers:
        reader.start()
    if stdin_text is not None:
        proc.stdin.write(stdin_text)
        proc.stdin.close()
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise UserError(f"the process did not finish in {timeout:.0f} s. "
                        f"Received: {' '.join(command)}") from None
    exit_s = time.time() - start
    for reader in readers:
        reader.join()
    lines.sort()
    phases, phases_at, previous = {}, {}, 0.0
    for _, stream, line in lines:
        if stream == "stderr" and line.startswith(PREFIX):
            name, stamp = line[len(PREFIX):].rsplit(" ", 1)
            at = float(stamp) - start
            phases[name], phases_at[name] = round(at - previous, 2), round(at, 2)
            previous = at
    first = next((at for at, stream, line in lines
                  if (first_output is None and stream == "stdout") or
                  (first_output is not None and line.startswith(first_output))), None)
    if first is not None:
        phases["to_first_output"] = round(first - previous, 2)
    return {"first_output_s": None if first is None else round(first, 2),
            "exit_s": round(exit_s, 2), "returncode": returncode, "phases": phases,
            "phases_at_s": phases_at,
            "lines": lines,
            "stderr_tail": "\n".join(l for _, s, l in lines if s == "stderr"
                                     and not l.startswith(PREFIX))[-1500:]}


def _checked(result: dict, what: str) -> dict:
    """`result` of a run that must succeed; a UserError with its stderr otherwise."""
    if result["returncode"] != 0:
        sys.stderr.write(result["stderr_tail"] + "\n")
        raise UserError(f"{what} failed with exit code {result['returncode']} (its error "
                        f"output is above).")
    return result


def _newest(folder: str, what: str) -> str:
    versions = [v for v in os.listdir(folder) if v.isdigit()] if os.path.isdir(folder) else []
    if not versions:
        raise UserError(f"no {what} under {folder}; export one first (t2t-exporter), or "
                        f"leave its row out of --rows. Received: {folder!r}")
    return os.path.join(folder, max(versions, key=int))


def run_row(name: str, args, sources: list[str], work: str) -> dict:
    """One row's figures (its process's timings, without the raw lines)."""
    py = sys.executable
    decoder = [*_command("t2t-decoder"), f"--output_dir={args.output_dir}",
               f"--decode_hparams={args.decode_hparams}"]
    if name == "import_tensorflow":
        result = timed_process([py, "-c", "import tensorflow; print('imported', flush=True)"])
    elif name in DECODER_ROWS:
        n = DECODER_ROWS[name]
        if len(sources) < n:
            raise UserError(f"--source has {len(sources)} lines; row {name} needs {n}. "
                            f"Received: --source={args.source!r}")
        path = os.path.join(work, f"{name}.src")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in sources[:n]))
        result = _checked(timed_process(
            [*decoder, f"--decode_from_file={path}", f"--decode_to_file={path}.hyp"],
            first_output="Wrote "), name)
    elif name == "interactive":
        result = _checked(timed_process([*decoder, "--decode_interactive"],
                                        stdin_text=sources[0] + "\n"), name)
    elif name in ("saved_model", "ctranslate2"):
        base = os.path.join(args.output_dir, "export")
        folder = _newest(base if name == "saved_model" else os.path.join(base, "ctranslate2"),
                         "SavedModel" if name == "saved_model" else "CTranslate2 export")
        result = _checked(timed_process([py, "-c", _SAVED_MODEL if name == "saved_model"
                                         else _CTRANSLATE2, folder,
                                         json.dumps(sources[:2])]), name)
        result["export"] = folder
    elif name == "trainer":
        result = _trainer_row(args, work)
    elif name in MISTAKE_ROWS:
        result = _mistake_row(name, args, work)
    else:
        raise UserError(f"unknown row {name!r}; rows: {', '.join(ROWS)}, all, quick")
    if name in DECODER_ROWS or name == "interactive":
        # litert=auto's path (no TensorFlow), and whether it converted first.
        said = [line for _, _, line in result["lines"]]
        result["engine"] = "litert" if any("on its LiteRT programs" in line
                                           for line in said) else "tensorflow"
        result["converted"] = any(line.startswith("Converting ") for line in said)
    result.pop("lines")
    result.pop("stderr_tail")   # said above when a row failed
    return result


def compile_cache_entries() -> dict | None:
    """The compile cache's XLA programs (`xla_compile_cache`) and LiteRT
    program sets (`litert_program_cache`); None when it is off: a run with a
    warm cache loads what a cold one compiles or converts."""
    import glob

    from t2t_revival.decode.litert_program_cache import FOLDER

    root = root_from_environment()
    return None if root is None else {
        "xla": len(glob.glob(os.path.join(root, "*", "*.pb"))),
        "litert": len(glob.glob(os.path.join(root, FOLDER, "[0-9a-f]*")))}


def _trainer_row(args, work: str) -> dict:
    if not args.data_dir:
        raise UserError("the trainer row needs --data_dir (translate_ende_multi30k's "
                        "t2t-datagen output). Received: --data_dir=''")
    command = [*_command("t2t-trainer"), "--problem=translate_ende_multi30k",
               "--hparams_set=transformer_tiny", f"--data_dir={args.data_dir}",
               f"--output_dir={os.path.join(work, 'trainer_run')}", "--train_steps=1",
               "--local_eval_frequency=0", "--save_checkpoints_steps=1",
               f"--eval_decode_sentences={args.eval_decode_sentences}",
               f"--xla={str(args.trainer_xla).lower()}"]
    result = _checked(timed_process(command, first_output="eval at step"), "trainer")
    stdout = [(at, line) for at, stream, line in result["lines"] if stream == "stdout"]
    update = next((at for at, line in stdout if line.startswith("step 1/1")), None)
    evaluation = result["first_output_s"]
    result["first_update_s"] = None if update is None else round(update, 2)
    result["first_evaluation_s"] = None if update is None or evaluation is None \
        else round(evaluation - update, 2)
    result["notices"] = [line for _, line in stdout if line.startswith(("compil", "trac"))]
    return result


def _mistake_row(name: str, args, work: str) -> dict:
    """The time to report a mistake, and whether TensorFlow was imported by then."""
    flags = {"mistake_problem": ["--problem=translate_ende_multi30kk"],
             "mistake_hparam": ["--hparams=foo=1"],
             "mistake_hparams_set": ["--hparams_set=transformer_tinyy"]}.get(name)
    module = "decoder" if flags is None else "trainer"
    if flags is None:   # a missing run directory
        flags = [f"--output_dir={os.path.join(work, 'no_such_run')}",
                 f"--decode_from_file={os.path.join(work, 'mistake.src')}"]
        with open(flags[1].split("=", 1)[1], "w", encoding="utf-8") as f:
            f.write("A dog.\n")
    else:
        flags += [f"--data_dir={os.path.join(work, 'no_data')}",
                  f"--output_dir={os.path.join(work, 'mistake_run')}"]
    code = ("import sys\n"
            f"sys.argv = ['t2t-{module}', *{flags!r}]\n"
            f"from t2t_revival.cli import {module} as cli\n"
            "try:\n    cli.run()\nfinally:\n"
            "    print('tensorflow imported:', 'tensorflow' in sys.modules, flush=True)\n")
    result = timed_process([sys.executable, "-c", code], first_output=f"t2t-{module}: error:")
    errors = [l for _, s, l in result["lines"] if l.startswith(f"t2t-{module}: error:")]
    result["error"] = errors[0] if errors else None
    result["tensorflow_imported"] = any(l == "tensorflow imported: True"
                                        for _, _, l in result["lines"])
    if result["returncode"] == 0 or not errors:
        raise UserError(f"{name} did not fail with one error line; see its output. "
                        f"Received: {result['stderr_tail'][-300:]!r}")
    return result


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--rows", default="all",
                        help=f"comma-separated rows, 'all' or 'quick' ({', '.join(ROWS)})")
    parser.add_argument("--decode_hparams", default="",
                        help="t2t-decoder's --decode_hparams for the decoder rows "
                             "(e.g. xla=false)")
    parser.add_argument("--data_dir", default="",
                        help="translate_ende_multi30k's data, for the trainer row")
    parser.add_argument("--eval_decode_sentences", type=int, default=200)
    parser.add_argument("--trainer_xla", type=lambda v: v.lower() in ("1", "true", "yes"),
                        default=True, help="the trainer row's --xla (true/false)")
    args = parser.parse_args()
    groups = {"all": ROWS, "quick": QUICK}
    rows = list(dict.fromkeys(row for r in args.rows.split(",") if r.strip()
                              for row in groups.get(r.strip(), (r.strip(),))))
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise UserError(f"unknown rows {', '.join(unknown)}; rows: {', '.join(ROWS)}, "
                        f"all, quick. Received: --rows={args.rows!r}")
    from t2t_revival.files.text_lines import read_text_lines

    sources = read_text_lines(args.source, "source")[:1000]
    if not sources:
        raise UserError(f"--source has no lines. Received: --source={args.source!r}")
    load_before = harness.load_average()
    cache_before = compile_cache_entries()
    work = tempfile.mkdtemp(prefix="first_translation_")
    results = {}
    try:
        for row in rows:
            print(f"{PROG}: {row}...", file=sys.stderr, flush=True)
            try:
                results[row] = run_row(row, args, sources, work)
            except UserError as e:   # the other rows' figures still count
                print(f"{PROG}: row {row} failed: {e}", file=sys.stderr, flush=True)
                results[row] = {"failed": str(e)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = [row for row, result in results.items() if "failed" in result]
    yardstick = results.get("import_tensorflow", {}).get("first_output_s")
    if yardstick:
        for row, result in results.items():
            if row != "import_tensorflow" and result.get("first_output_s"):
                result["ratio_to_import_tensorflow"] = round(
                    result["first_output_s"] / yardstick, 2)
    harness.print_result({
        "benchmark": PROG, "output_dir": args.output_dir,
        "decode_hparams": args.decode_hparams, "rows": list(rows), "results": results,
        "failed_rows": failed,
        "compile_cache": {"root": root_from_environment(), "entries_before": cache_before,
                          "entries_after": compile_cache_entries()},
        "machine": harness.describe(), "loadavg_before": load_before,
        "loadavg_after": harness.load_average()})
    if failed:
        raise UserError(f"rows {', '.join(failed)} failed (their errors are above and in "
                        f"the JSON); the other rows' figures are printed.")


if __name__ == "__main__":
    harness.run(main, PROG)
