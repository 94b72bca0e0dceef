"""The whole Multi30k En-De recipe on a small CPU: datagen, training, checkpoint
averaging, beam decoding of test_2016_flickr, sacreBLEU and tokenized BLEU.

    nohup python -m benchmarks.multi30k_recipe > multi30k_recipe.log 2>&1 &
    tail -f multi30k_recipe.log

Each stage runs the project's own command line (`t2t-trainer`,
`t2t-avg-checkpoints`, `t2t-decoder`) as a subprocess and streams its progress
lines, prefixed with the stage name and the minutes since the start. Training
stops at `--train_steps` or after `--max_train_minutes`, whichever comes first,
so the whole recipe fits its time budget on a slower or busier machine too (it
then reaches a lower BLEU; the JSON says at which step it stopped). The last
line printed is one JSON object with the BLEU figures and timings.

By default (`--tune_on_val='average=5,10;alpha=0.6,1.0'`) the checkpoint
averaging and the length penalty are chosen on Multi30k's val set (one
decode of val per combination, the best sacreBLEU wins) before the one
decode of test_2016_flickr; a `beam=4,8` axis tunes the beam size too. The
JSON lists every combination's val figure under "tuned_on_val".
The test set is never used to choose. `--tune_on_val=` decodes test with
`--average` and `--decode_hparams` as given. The defaults (9,600 updates, the
last 2,500 with the learning rate falling linearly to 0 (`--cooldown_steps`),
at most 110 minutes of training, then about 5 of datagen, tuning and
decoding) fit two hours end to end: 107 minutes on the 2-core development
host. On a slower machine the trainer fits the cooldown to the time limit:
when the pace so far will not reach `--train_steps` within
`--max_train_minutes`, the cooldown ends, and training stops, where the
limit runs out (t2t-trainer's `--max_train_minutes`). `--noxla --hparams=mixed_precision=mixed_bfloat16` trains in
bfloat16 without XLA: on a CPU with avx512_bf16 that was the faster step for
the earlier d_model 256 set, but it is 0.83x of XLA float32 for the
registered one (benchmarks/RESULTS.md); decoding is float32 either way.

Rerunning the command resumes training from the latest checkpoint in
--output_dir (with a fresh time budget) and redoes averaging and decoding;
`--skip_train` redoes only the averaging, tuning and decoding. A SIGTERM
(`kill`), Ctrl-C or SIGHUP (a closed terminal) goes to the stage running: the trainer saves a checkpoint
at its step and stops, and the recipe exits with 128 + the signal.
"""

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time

from benchmarks import harness
from t2t_revival.errors import UserError
from t2t_revival.process.stopped_by_signal import STOP_SIGNALS

PROG = "multi30k_recipe"
TEST_SOURCE = "test_2016_flickr.en.gz"
TEST_REFERENCE = "test_2016_flickr.de.gz"
VAL_SOURCE = "val.en.gz"
VAL_REFERENCE = "val.de.gz"
# What --tune_on_val tries by default: the last 5 or 10 checkpoints, and the
# paper's length penalty or a stronger one. (Wider alphas and beam 8 won on
# val but lost 1.2 BLEU on test_2016_flickr: val's references are longer;
# benchmarks/RESULTS.md, 2026-11-26.)
DEFAULT_TUNING = "average=5,10;alpha=0.6,1.0"
# --tune_on_val's axes: the type of each one's values, and the decode hparam
# each sets (average is the checkpoint averaging, no decode hparam).
TUNING_AXES = {"average": (int, None), "alpha": (float, "alpha"), "beam": (int, "beam_size")}


def parse_args(argv=None):
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--raw_dir", default=str(harness.SHARED_DATA / "multi30k"),
                        help="the Multi30k files (train/val/test_2016_flickr .en.gz/.de.gz)")
    parser.add_argument("--data_dir", default="t2t_data",
                        help="TFRecords and vocabulary (t2t-datagen output)")
    parser.add_argument("--output_dir", default=os.path.join("t2t_train", "multi30k_recipe"),
                        help="checkpoints, hparams.json, decodes")
    parser.add_argument("--hparams_set", default="transformer_multi30k")
    parser.add_argument("--hparams", default="", help="overrides, k=v,...")
    parser.add_argument("--train_steps", type=int, default=9600,
                        help="the last update; about 103 minutes of training on the "
                             "2-core AVX-512 development host, so the cooldown ends "
                             "inside --max_train_minutes (on a slower machine the "
                             "trainer ends it where those run out)")
    parser.add_argument("--cooldown_steps", type=int, default=2500,
                        help="the trainer's learning_rate_cooldown_steps: the learning "
                             "rate falls linearly to 0 over the last N updates before "
                             "--train_steps (0 = the paper's schedule to the end)")
    parser.add_argument("--max_train_minutes", type=float, default=110.0,
                        help="stop training after this many minutes (0 = no limit)")
    parser.add_argument("--xla", dest="xla", action="store_true", default=True,
                        help="train with XLA (t2t-trainer's default)")
    parser.add_argument("--noxla", dest="xla", action="store_false",
                        help="t2t-trainer --noxla: with --hparams=mixed_precision="
                             "mixed_bfloat16, the faster step on a CPU with avx512_bf16 "
                             "(benchmarks/RESULTS.md)")
    parser.add_argument("--seed", type=int, default=None,
                        help="t2t-trainer's --seed (initial weights, dropout, data "
                             "order; default: t2t-trainer's): another seed measures "
                             "how far a figure is luck")
    parser.add_argument("--save_checkpoints_steps", type=int, default=250)
    parser.add_argument("--local_eval_frequency", type=int, default=1000)
    parser.add_argument("--eval_decode_sentences", type=int, default=200,
                        help="dev sentences the trainer decodes and scores at each "
                             "evaluation (t2t-trainer's flag; 0 = dev loss only)")
    parser.add_argument("--average", type=int, default=5,
                        help="average the last N checkpoints (0 = decode the last one)")
    parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
    parser.add_argument("--tune_on_val", default=DEFAULT_TUNING,
                        help="choose the averaging and the length penalty (and, with a "
                             "beam=B,... axis, the beam size) on Multi30k's val set before "
                             "the one test decode: the default, '%(default)s', decodes val "
                             "once per combination and keeps the best sacreBLEU (the test "
                             "set is never used to choose); empty = --average and "
                             "--decode_hparams as given")
    parser.add_argument("--skip_train", action="store_true",
                        help="redo only the averaging, tuning and decoding of the training "
                             "run in --output_dir (no further training)")
    args = parser.parse_args(argv)
    if not 0 <= args.cooldown_steps <= args.train_steps:
        parser.error(f"--cooldown_steps must be in [0, --train_steps={args.train_steps}]. "
                     f"Received: --cooldown_steps={args.cooldown_steps}")
    if "learning_rate_cooldown_steps" in args.hparams:
        parser.error("set the cooldown with --cooldown_steps, not in --hparams")
    try:
        args.tune_on_val = parse_tuning(args.tune_on_val)
    except ValueError as e:
        parser.error(f"--tune_on_val: {e}")
    return args


def parse_tuning(text: str) -> dict[str, list] | None:
    """'average=5,10;alpha=0.6,1.0;beam=4' -> {'average': [5, 10], 'alpha': [0.6, 1.0],
    'beam': [4]}."""
    if not text:
        return None
    grid: dict[str, list] = {}
    for part in text.split(";"):
        name, _, values = part.partition("=")
        name = name.strip()
        cast = TUNING_AXES.get(name, (None,))[0]
        if cast is None or not values.strip():
            raise ValueError(f"expected 'average=N,...;alpha=A,...;beam=B,...', got {part!r}")
        try:
            grid[name] = [cast(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"{name} takes {cast.__name__}s, got {values!r}") from None
    return grid


class Stages:
    """Runs each stage's command, prefixing its lines with the stage and time."""

    def __init__(self):
        self.start = time.time()
        self.seconds: dict[str, float] = {}

    def log(self, stage: str, line: str) -> None:
        minutes = (time.time() - self.start) / 60.0
        print(f"[{minutes:6.1f} min] {stage}: {line}", flush=True)

    def run(self, stage: str, module: str, *args: str) -> list[str]:
        command = [sys.executable, "-m", f"t2t_revival.cli.{module}", *args]
        self.log(stage, " ".join(command[2:]))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join(p for p in (str(harness.ROOT),
                                                          os.environ.get("PYTHONPATH")) if p))
        started = time.time()
        # Its own session: a Ctrl-C reaches it once, through PassSignals.
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, env=env, bufsize=1,
                                start_new_session=True)
        with PassSignals(proc) as signals:
            lines = self._stream(stage, proc)
            code = proc.wait()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + time.time() - started, 1)
        if signals.signum is not None:
            name = signal.Signals(signals.signum).name
            rerun = ("rerun the same command to resume training from its last checkpoint"
                     if stage == "train" else "rerun with --skip_train to redo the stages "
                                              "after training")
            self.log(stage, f"stopped by {name} (exit code {code}); {rerun}")
            sys.exit(128 + signals.signum)
        if code != 0:
            self.log(stage, f"failed with exit code {code}")
            sys.exit(code)
        return lines

    def _stream(self, stage: str, proc: subprocess.Popen) -> list[str]:
        """Log the stage's output lines as they come; returns them all."""
        lines, shown_percent = [], -10
        for raw in proc.stdout:
            # The decoder's progress bar redraws with carriage returns.
            for line in raw.rstrip("\n").split("\r"):
                if not line.strip() or _is_noise(line):
                    continue
                lines.append(line)
                progress = re.search(r"\] (\d+)/(\d+)", line)
                if progress:  # a progress bar: a line every 10%
                    percent = 100 * int(progress.group(1)) // max(int(progress.group(2)), 1)
                    if percent < shown_percent + 10:
                        continue
                    shown_percent = percent
                if not line.startswith((" ", "{", "}")):  # not --json output
                    self.log(stage, line.strip())
        return lines


class PassSignals:
    """While a stage runs, SIGTERM, SIGINT (Ctrl-C) and SIGHUP (its terminal
    closed) to the recipe go to the stage's process instead, once: the
    trainer then saves a checkpoint and stops, the other commands stop with
    one line, and the recipe, having logged that, exits with 128 + the signal. Without it a SIGTERM killed the
    recipe alone, and the trainer, its output gone, died at its next progress
    line without a save; a Ctrl-C gave a traceback."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "PassSignals":
        for signum in STOP_SIGNALS:
            # An ignored one (SIGINT of a background job) stays ignored: the
            # stage inherits that, and would not stop.
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self.handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def handle(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
            self.proc.send_signal(signum)


def _is_noise(line: str) -> bool:
    """TensorFlow's start-up chatter (cuInit, oneDNN, XLA notices)."""
    return bool(re.match(r"^[IWE]\d{4} |^WARNING: All log messages|.*cuda|.*oneDNN", line))


def _json_tail(lines: list[str]) -> dict:
    """The JSON object printed last by a command (`--json`)."""
    start = max(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[start:]))


def average_checkpoints(stages: Stages, stage: str, output_dir: str,
                        n: int) -> tuple[list[str], int]:
    """Average the last `n` checkpoints: the decoder's --checkpoint_path flag
    for it, and how many were averaged (fewer than `n` where fewer are kept)."""
    if n <= 1:
        return [], 1  # the latest checkpoint
    lines = stages.run(stage, "avg_checkpoints", f"--output_dir={output_dir}",
                       f"--num_last_checkpoints={n}")
    averaged = next(line for line in lines if line.startswith("Averaged "))
    # "Averaged <count> checkpoint(s) into <path>"
    return [f"--checkpoint_path={averaged.rsplit(' ', 1)[-1]}"], int(averaged.split()[1])


def decode(stages: Stages, stage: str, args, checkpoint: list[str], source: str,
           reference: str, hypotheses: str, decode_hparams: str) -> dict:
    """Beam-decode `source` of --raw_dir into `hypotheses`; the decoder's BLEU JSON."""
    lines = stages.run(stage, "decoder", f"--output_dir={args.output_dir}", *checkpoint,
                       f"--decode_from_file={os.path.join(args.raw_dir, source)}",
                       f"--decode_to_file={hypotheses}",
                       f"--decode_reference={os.path.join(args.raw_dir, reference)}",
                       f"--decode_hparams={decode_hparams}", "--json")
    return _json_tail(lines)


def _line_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def with_decode_hparam(decode_hparams: str, name: str, value) -> str:
    """`decode_hparams` with `name` set to `value`, in its place, or added last."""
    items = [kv for kv in decode_hparams.split(",") if kv.strip()]
    named = [i for i, kv in enumerate(items) if kv.split("=")[0].strip() == name]
    items = [kv for i, kv in enumerate(items) if i not in named[1:]]
    setting = f"{name}={value}"
    if named:
        items[named[0]] = setting
    else:
        items.append(setting)
    return ",".join(items)


def tune_on_val(stages: Stages, args) -> list[dict]:
    """Decode val once per (average, alpha, beam) of --tune_on_val; its sacreBLEU each.

    Each row also holds the decode hparams it used: an axis not in the grid
    keeps --average or --decode_hparams as given (its value is then None).
    """
    grid = args.tune_on_val
    rows = []
    for n in grid.get("average", [args.average]):
        checkpoint, _ = average_checkpoints(stages, "val", args.output_dir, n)
        for alpha in grid.get("alpha", [None]):
            for beam in grid.get("beam", [None]):
                decode_hparams = args.decode_hparams
                for axis, value in (("alpha", alpha), ("beam", beam)):
                    if value is not None:
                        decode_hparams = with_decode_hparam(
                            decode_hparams, TUNING_AXES[axis][1], value)
                scores = decode(stages, "val", args, checkpoint, VAL_SOURCE, VAL_REFERENCE,
                                os.path.join(args.output_dir, "val.de.decodes"),
                                decode_hparams)
                score = round(scores["sacrebleu"]["score"], 2)
                rows.append({"average": max(n, 1), "alpha": alpha, "beam": beam,
                             "decode_hparams": decode_hparams, "val_sacrebleu": score})
                stages.log("val", f"average {max(n, 1)}, {decode_hparams}: sacreBLEU {score}")
    return rows


def _trainer_hparams(args) -> str:
    """--hparams for t2t-trainer: the cooldown, then the recipe's --hparams."""
    cooldown = f"learning_rate_cooldown_steps={args.cooldown_steps}" if args.cooldown_steps else ""
    return ",".join(part for part in (cooldown, args.hparams) if part)


def trainer_args(args) -> list[str]:
    """t2t-trainer's command line for the recipe's flags."""
    # Keep every checkpoint an average will read.
    kept = max([args.average, 5, *(args.tune_on_val or {}).get("average", [])])
    return ["--problem=translate_ende_multi30k",
            f"--hparams_set={args.hparams_set}", f"--hparams={_trainer_hparams(args)}",
            f"--tmp_dir={args.raw_dir}", f"--data_dir={args.data_dir}",
            f"--output_dir={args.output_dir}", f"--train_steps={args.train_steps}",
            f"--max_train_minutes={args.max_train_minutes}",
            "--xla" if args.xla else "--noxla",
            *([f"--seed={args.seed}"] if args.seed is not None else []),
            f"--save_checkpoints_steps={args.save_checkpoints_steps}",
            f"--keep_checkpoint_max={kept}",
            f"--local_eval_frequency={args.local_eval_frequency}",
            f"--eval_decode_sentences={args.eval_decode_sentences}"]


def main():
    args = parse_args()
    needed = (TEST_SOURCE, TEST_REFERENCE) + ((VAL_SOURCE, VAL_REFERENCE) if args.tune_on_val
                                              else ())
    for name in needed:
        if not os.path.exists(os.path.join(args.raw_dir, name)):
            raise UserError(f"{name} is not in --raw_dir={args.raw_dir}; download Multi30k "
                            "(github.com/multi30k/dataset, data/task1/raw) there.")
    stages = Stages()
    matmul_start = harness.matmul_tflops()
    stages.log("host", f"{harness.describe()}; numpy float32 matmul {matmul_start} TFLOP/s")
    train_lines = [] if args.skip_train else stages.run("train", "trainer",
                                                         *trainer_args(args))
    steps = [int(m.group(1)) for line in train_lines
             for m in [re.match(r"eval at step (\d+):", line)] if m]
    dev = [line for line in train_lines if line.startswith("eval at step")]

    average, decode_hparams, tuning = args.average, args.decode_hparams, []
    if args.tune_on_val:
        tuning = tune_on_val(stages, args)
        best = max(tuning, key=lambda row: row["val_sacrebleu"])
        average, decode_hparams = best["average"], best["decode_hparams"]
    checkpoint, averaged = average_checkpoints(stages, "average", args.output_dir, average)
    hypotheses = os.path.join(args.output_dir, "test_2016_flickr.de.decodes")
    scores = decode(stages, "decode", args, checkpoint, TEST_SOURCE, TEST_REFERENCE,
                    hypotheses, decode_hparams)
    result = {
        "benchmark": "multi30k_recipe",
        "date": datetime.date.today().isoformat(),
        "test_set": f"test_2016_flickr ({_line_count(hypotheses):,} sentences)",
        "sacrebleu": round(scores["sacrebleu"]["score"], 2),
        "tokenized_bleu": round(scores["tokenized_bleu"]["score"], 2),
        "sacrebleu_signature": scores["sacrebleu"].get("signature"),
        "hparams_set": args.hparams_set, "hparams": _trainer_hparams(args), "xla": args.xla,
        "seed": args.seed,  # None: t2t-trainer's default
        "final_step": steps[-1] if steps else None,
        "final_dev": dev[-1] if dev else None,
        "averaged_checkpoints": averaged,
        "decode_hparams": decode_hparams,
        "tuned_on_val": tuning,
        "stage_minutes": {k: round(v / 60.0, 1) for k, v in stages.seconds.items()},
        "total_minutes": round((time.time() - stages.start) / 60.0, 1),
        "hypotheses": hypotheses,
        "machine": harness.describe(),
        # How fast this host multiplies (numpy float32 1024^3, best of 5), at
        # the start and the end: the VM's hosts differ up to 3x (harness.py).
        "host_matmul_tflops": {"start": matmul_start, "end": harness.matmul_tflops()},
    }
    harness.print_result(result)


if __name__ == "__main__":
    harness.run(main, PROG)
