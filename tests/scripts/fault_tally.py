"""The fault tally of issue 60: each numbered case run as a user runs it,
through the CLIs in fresh processes, on a tiny run made here, and its
outcome classified.

    python tests/scripts/fault_tally.py WORK_DIR [--only=SUBSTRING]

Outcomes: `clean error` (non-zero exit, one `prog: error:` line, no
traceback) and `correct` (the work done, checked) are what each case should
give; `traceback`, `hang` (past the time limit), `lost work` (files that
existed changed or lines decoded gone), `silent wrong` (exit 0 but the check
fails) and `other` (an exit status or line the case does not expect) are
defects. `not run` where the machine cannot set the case up (a tmpfs for the
full disks needs mount rights). Prints one line a case, then the counts.
Minutes on 2 cores; not part of the test suite.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

TESTS = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from tiny_runs import (PROBLEM, TINY_HPARAMS, WORDS, TinyMulti30k,  # noqa: E402
                       digests, trainer_args, write_corpus,
                       write_own_corpora)

ROOT = TESTS.parent
TIMEOUT = 300
ENV = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")


class Outcome(Exception):
    """A case's classified result."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind, self.detail = kind, detail


def cli(module: str, *args, redirect: str = "", timeout: int = TIMEOUT):
    """`python -m t2t_revival.cli.<module> ARGS` in a fresh process; with
    `redirect` (">&-", "2>&-") through a shell that closes the stream."""
    command = [sys.executable, "-m", f"t2t_revival.cli.{module}", *map(str, args)]
    if redirect:
        command = ["sh", "-c", f'exec "$@" {redirect}', "sh", *command]
    try:
        done = subprocess.run(command, capture_output=True, env=ENV, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Outcome("hang", f"no exit after {timeout} s") from None
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    if "Traceback" in out + err:
        raise Outcome("traceback", (err or out).strip().splitlines()[-1][:150])
    return done.returncode, out, err


def one_line(module: str, *args, needles=(), **kwargs) -> str:
    """Run; expect a clean error holding every needle (else raise an Outcome)."""
    status, out, err = cli(module, *args, **kwargs)
    prog = "t2t-" + module.replace("_", "-")
    lines = [line for line in err.splitlines() if line.startswith(f"{prog}: error: ")]
    if status == 0:
        raise Outcome("silent wrong", f"exit 0 where an error was due: {out[-150:]!r}")
    if len(lines) != 1:
        raise Outcome("other", f"exit {status}, {len(lines)} error lines: {err[-200:]!r}")
    missing = [n for n in needles if n not in lines[0]]
    if missing:
        raise Outcome("other", f"the line lacks {missing}: {lines[0][:200]}")
    return lines[0]


def works(module: str, *args, **kwargs) -> str:
    """Run; expect exit 0 (else an Outcome). Returns stdout + stderr."""
    status, out, err = cli(module, *args, **kwargs)
    if status != 0:
        raise Outcome("other", f"exit {status}: {err[-200:]!r}")
    return out + err


def unchanged(before: dict, after: dict) -> None:
    if before != after:
        changed = sorted(set(before.items()) ^ set(after.items()))[:3]
        raise Outcome("lost work", f"files changed: {changed}")


def files(directory) -> dict:
    return {k: v for k, v in digests(directory).items() if os.path.basename(k) != ".lock"}


# ---------------------------------------------------------------- set-up
class Work:
    """The tiny data and runs the cases share, made once in `root`."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.data = root / "data"
        if not (self.data / "vocab.translate_ende_multi30k.model").exists():
            write_corpus(str(root / "raw"))
            TinyMulti30k(download=False).generate_data(str(self.data), str(root / "raw"))
        self.run3 = root / "run3"
        if not (self.run3 / "ckpt-3.index").exists():
            works("trainer", *trainer_args(self.data, self.run3, 3,
                                           "--save_checkpoints_steps=1"))

    def copy(self, name: str) -> pathlib.Path:
        target = self.root / "cases" / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.run3, target)
        return target

    def case_dir(self, name: str) -> pathlib.Path:
        path = self.root / "cases" / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def mounted_full_tmpfs(where: pathlib.Path, size="16m") -> pathlib.Path | None:
    """A tmpfs at `where`, or None where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True)
    return where if done.returncode == 0 else None


def fill(mount: pathlib.Path) -> None:
    """Fill the tmpfs `mount` to its last byte."""
    for i, size in enumerate((1 << 20, 1 << 12, 1)):
        try:
            with open(mount / f"filler{i}", "wb", buffering=0) as f:
                while True:
                    f.write(b"x" * size)
        except OSError:
            pass


# ----------------------------------------------------------------- cases
def case_1_misaligned(w: Work):
    corpora, data = w.case_dir("1_own"), w.case_dir("1_od")
    write_own_corpora(corpora, train_lines=(3000, 2000))
    before = files(data)
    args = ["--problem=translate_plain_text", f"--tmp_dir={corpora}", f"--data_dir={data}"]
    one_line("datagen", *args, needles=["has 3000 lines and"])
    unchanged(before, files(data))
    write_own_corpora(corpora)
    works("datagen", *args)
    return "clean error", "clean error; fixed corpora then generate in the same data_dir"


def case_1_all_blank(w: Work):
    corpora, data = w.case_dir("1b_own"), w.case_dir("1b_od")
    write_own_corpora(corpora, blank_train=True)
    before = files(data)
    one_line("datagen", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
             f"--data_dir={data}", needles=["blank.en", "all 50 pairs have an empty side"])
    unchanged(before, files(data))
    return "clean error", "clean error naming the corpus"


def case_2_full_disk_trainer(w: Work):
    mount = mounted_full_tmpfs(w.case_dir("2_tmpfs"))
    if mount is None:
        raise Outcome("not run", "cannot mount a tmpfs here")
    try:
        out = mount / "run"
        works("trainer", *trainer_args(w.data, out, 1))
        fill(mount)
        before = files(mount)
        for module, args in (("trainer", trainer_args(w.data, out, 2)),
                             ("trainer", trainer_args(w.data, mount / "fresh", 1)),
                             ("avg_checkpoints", [f"--output_dir={out}"])):
            one_line(module, *args, needles=["No space left on device"])
            unchanged(before, files(mount))
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    return "clean error", "3 clean errors (resume, fresh, average), files unchanged"


def case_3_usr_dir_exits(w: Work):
    usr, out = w.case_dir("3_usr"), w.case_dir("3_out")
    (usr / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    one_line("trainer", f"--t2t_usr_dir={usr}", "--hparams_set=transformer_tiny",
             f"--output_dir={out}", f"--data_dir={w.data}", needles=["exits_at_import.py"])
    one_line("exporter", f"--t2t_usr_dir={usr}", f"--output_dir={out}",
             needles=["exits_at_import.py"])
    if os.listdir(out):
        raise Outcome("silent wrong", f"files written: {os.listdir(out)}")
    return "clean error", "clean errors naming the module (trainer, exporter)"


def case_4_warm_start_other_architecture(w: Work):
    two = w.root / "run_2layers"
    if not (two / "ckpt-1.index").exists():
        works("trainer", *trainer_args(w.data, two, 1)[:2],
              f"--hparams={TINY_HPARAMS.replace('num_hidden_layers=1', 'num_hidden_layers=2')}",
              *trainer_args(w.data, two, 1)[3:])
    out = w.case_dir("4_warm") / "run"
    one_line("trainer", *trainer_args(w.data, out, 1, f"--warm_start_from={two / 'ckpt-1'}"),
             needles=["num_hidden_layers"])
    if (out / "ckpt-1.index").exists():
        raise Outcome("silent wrong", "trained from another architecture")
    return "clean error", "clean refusal naming num_hidden_layers"


def _three_lines(w: Work, name: str):
    d = w.case_dir(name)
    write_lines(d / "in.txt", ["a man runs", "the red dog", "ein haus"])
    return d / "in.txt", d / "hyp.txt"


def _decode_with_closed(w: Work, redirect: str, name: str):
    source, hyp = _three_lines(w, name)
    works("decoder", f"--output_dir={w.run3}", f"--decode_from_file={source}",
          f"--decode_to_file={hyp}", redirect=redirect)
    if len(hyp.read_text().splitlines()) != 3:
        raise Outcome("lost work", "the translations are not all written")
    return "correct", "exit 0, 3 lines written"


def case_5_decoder_stdout_closed(w: Work):
    return _decode_with_closed(w, ">&-", "5_out")


def case_5_decoder_stderr_closed(w: Work):
    return _decode_with_closed(w, "2>&-", "5_err")


def case_5_bleu_and_registry_help_stdout_closed(w: Work):
    source, _ = _three_lines(w, "5_bleu")
    works("bleu", f"--translation={source}", f"--reference={source}", redirect=">&-")
    works("trainer", "--registry_help", redirect=">&-")
    return "correct", "exit 0 (t2t-bleu, --registry_help)"


def case_6_sampling_that_cannot_fit(w: Work):
    source, hyp = _three_lines(w, "6_refused")
    one_line("decoder", f"--output_dir={w.run3}", f"--decode_from_file={source}",
             f"--decode_to_file={hyp}",
             "--decode_hparams=sampling=true,samples_per_input=1000000000,return_beams=true",
             needles=["GB of memory", "samples_per_input"])
    if hyp.exists():
        raise Outcome("silent wrong", "wrote a file")
    return "clean error", "refused before the model loads, with the estimate"


def case_6_sampling_in_chunks(w: Work):
    source, hyp = _three_lines(w, "6_chunks")
    works("decoder", f"--output_dir={w.run3}", f"--decode_from_file={source}",
          f"--decode_to_file={hyp}", "--decode_hparams=sampling=true,samples_per_input=2000")
    if len(hyp.read_text().splitlines()) != 3:
        raise Outcome("lost work", "not 3 lines")
    return "correct", "2000 samples a line in chunks, 3 lines written"


def case_7_decoder_full_disk(w: Work):
    mount = mounted_full_tmpfs(w.case_dir("7_tmpfs"), size="1m")
    if mount is None:
        raise Outcome("not run", "cannot mount a tmpfs here")
    try:
        d = w.case_dir("7_in")
        write_lines(d / "in.txt", [" ".join(WORDS[i % 15:i % 15 + 3]) for i in range(20)])
        fill(mount)
        one_line("decoder", f"--output_dir={w.run3}", f"--decode_from_file={d / 'in.txt'}",
                 f"--decode_to_file={mount / 'hyp.txt'}", needles=["No space left on device"])
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    return "clean error", "clean error at the first refused write"


def case_8_damaged_vocabulary_copy(w: Work):
    run = w.copy("8_vocab")
    (run / "vocab.model").write_bytes(b"not a vocabulary")
    before = files(run)
    line = one_line("trainer", *trainer_args(w.data, run, 5),
                    needles=["vocab.model", f"copy {w.data}"])
    if "resume with the --data_dir" in line:
        raise Outcome("other", "wrong advice: " + line)
    unchanged(before, files(run))
    return "clean error", "clean error: copy the vocabulary back"


def case_8_damaged_warm_start(w: Work):
    run = w.copy("8_warm")
    os.truncate(run / "ckpt-3.data-00000-of-00001", 100)
    line = one_line("trainer", *trainer_args(w.data, w.case_dir("8_warm_out") / "run", 1,
                                             f"--warm_start_from={run / 'ckpt-3'}"),
                    needles=["--warm_start_from checkpoint"])
    if "checkpoint_path" in line:
        raise Outcome("other", "wrong advice: " + line)
    return "clean error", "clean error naming --warm_start_from"


def case_8_no_intact_checkpoint_but_best(w: Work):
    run = w.copy("8_best")
    for step in (1, 2, 3):
        os.truncate(run / f"ckpt-{step}.data-00000-of-00001", 100)
    before = files(run)
    one_line("trainer", *trainer_args(w.data, run, 5), needles=[f"{run / 'best'} holds"])
    unchanged(before, files(run))
    return "clean error", "clean error naming the intact best/"


def case_8_interrupted_best_update(w: Work):
    from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
    from t2t_revival.run_dir.best_record import BestRecord

    run = w.copy("8_best_kill")
    best = BestCheckpoint(str(run))
    record3 = best.record()
    best.update(str(run / "ckpt-2"), BestRecord(step=2, metric="loss",
                                                value=record3.value + 1.0,
                                                higher_is_better=False, checkpoint="ckpt-2"))
    half = run / ".best.incomplete"   # as a kill mid-copy of ckpt-3 leaves it
    half.mkdir()
    (half / "best.json.pending").write_text(record3.to_json())
    (half / "ckpt-3.index").write_bytes(b"x" * 64)
    output = works("trainer", *trainer_args(w.data, run, 4))
    if half.exists() or "Finished the best/ update a kill interrupted" not in output:
        raise Outcome("lost work", "the better ckpt-3 did not reach best/")
    step = json.loads((run / "best" / "best.json").read_text())["step"]
    if step < 3:
        raise Outcome("lost work", f"best/ holds step {step}")
    return "correct", f"resumed: ckpt-3's copy finished at the start, best/ at step {step}"


def case_8_export_on_best_once(w: Work):
    run = w.copy("8_export")
    output = works("trainer", *trainer_args(w.data, run, 4, "--export_ctranslate2",
                                            "--export_on_best"))
    if output.count("Exported the") != 1:
        raise Outcome("silent wrong", f"{output.count('Exported the')} export lines")
    return "correct", "one export, the end says it was exported when found"


def case_9_vocab_size_below_characters(w: Work):
    wmt = ROOT.parent / "shared" / "data" / "wmt14" / "train_sample_tokenized"
    if not wmt.is_dir():
        raise Outcome("not run", f"no {wmt}")
    corpora, data = w.case_dir("9_own"), w.case_dir("9_od")
    for name, n in (("train", 200), ("dev", 20), ("test", 20)):
        for side, lang in (("src", "en"), ("tgt", "de")):
            with open(wmt / f"{side}-train.txt", encoding="utf-8") as f:
                write_lines(corpora / f"{name}.{lang}", [next(f).rstrip("\n") for _ in range(n)])
    (corpora / "corpora.json").write_text(json.dumps(
        {"vocab_size": 300, "train": [{"source": "train.en", "target": "train.de"}],
         "dev": {"source": "dev.en", "target": "dev.de"},
         "test": {"source": "test.en", "target": "test.de"}}))
    one_line("datagen", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
             f"--data_dir={data}", needles=["vocab_size=300", "at least"])
    unchanged({}, files(data))
    return "clean error", "clean error with both numbers"


CASES = [(name, f) for name, f in globals().items() if name.startswith("case_")]
GOOD = ("correct", "clean error")


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1]).resolve()
    only = next((a.split("=", 1)[1] for a in argv[2:] if a.startswith("--only=")), "")
    root.mkdir(parents=True, exist_ok=True)
    work = Work(root)
    counts: dict[str, int] = {}
    for name, case in CASES:
        if only not in name:
            continue
        start = time.time()
        try:
            kind, detail = case(work)
        except Outcome as outcome:
            kind, detail = outcome.kind, outcome.detail
        counts[kind] = counts.get(kind, 0) + 1
        print(f"{name:48s} {kind:12s} {time.time() - start:5.0f} s  {detail}", flush=True)
    print("tally:", ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), flush=True)
    return 0 if set(counts) <= set(GOOD) | {"not run"} else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
