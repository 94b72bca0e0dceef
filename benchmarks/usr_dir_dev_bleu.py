"""docs/your-own-data.md's usr_dir problem trained 150 updates: its dev BLEU.

    python -m benchmarks.usr_dir_dev_bleu [--train_steps=150] [--work_dir=DIR]

The docs' `my_usr_dir` (the WMT14 sample, newstest2013 as dev) saved in
--work_dir, then its commands: t2t-datagen and t2t-trainer with
--t2t_usr_dir, transformer_tiny scoring dev BLEU on the first 40 dev
sentences every 50 updates (without XLA, max_length 256, 1 checkpoint kept),
and t2t-decoder of the run's best/ on those sentences without the flag.
Prints one JSON object: "dev_bleu" ({step: BLEU as printed}), "best_step"
and "best_dev_bleu" (best/best.json), "learned" (the best above 0: the model
learned something by then), and "decoder_bleu" (t2t-decoder's sacreBLEU of
best/, the figure the trainer recorded).

tests/test_usr_dir.py::test_readme_usr_dir_problem_end_to_end_with_dev_bleu
runs the same commands for 6 updates (tests/test_dev_metric.DEV_BLEU_FLAGS):
the plumbing. That 150 updates learn something (a fraction of a BLEU point,
varying from run to run: CI22 had 0.0, 0.11, 0.0 at steps 50, 100, 150, a
run alone 0.0, 0.06, 0.25) is this benchmark's figure; the test asserted it
until issue 71.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re

from benchmarks import harness

PROG = "usr_dir_dev_bleu"
PROBLEM = "translate_ende_my_sample"
DOCS = harness.ROOT / "docs" / "your-own-data.md"
EVERY, SENTENCES = 50, 40


def parse_args(argv=None):
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--train_steps", type=int, default=150)
    parser.add_argument("--tmp_dir", default=str(harness.SHARED_DATA / "wmt14"),
                        help="the WMT14 folder the docs' problem reads")
    parser.add_argument("--work_dir", default=None,
                        help="where the usr_dir, the data and the run go, kept (default: a "
                             "temporary folder, removed)")
    return parser.parse_args(argv)


def usr_dir_code() -> str:
    """The docs' my_usr_dir/__init__.py: its fenced python block."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if "class TranslateEndeMySample" in b)


def main():
    args = parse_args()
    with harness.work_folder(args.work_dir, PROG) as work:
        os.makedirs(os.path.join(work, "my_usr_dir"), exist_ok=True)
        with open(os.path.join(work, "my_usr_dir", "__init__.py"), "w", encoding="utf-8") as f:
            f.write(usr_dir_code())
        cli = functools.partial(harness.cli, cwd=work)   # the docs' commands run in `work`
        data_dir, out_dir = "my_sample_data", os.path.join("t2t_train", "my_sample")
        cli("datagen", "--t2t_usr_dir=my_usr_dir", f"--problem={PROBLEM}",
            f"--tmp_dir={args.tmp_dir}", f"--data_dir={data_dir}")
        train = cli("trainer", "--t2t_usr_dir=my_usr_dir", f"--problem={PROBLEM}",
                    "--hparams_set=transformer_tiny", f"--data_dir={data_dir}",
                    f"--output_dir={out_dir}", f"--train_steps={args.train_steps}",
                    f"--local_eval_frequency={EVERY}", "--eval_steps=5",
                    f"--save_checkpoints_steps={EVERY}", "--keep_checkpoint_max=1",
                    "--log_step_count_steps=50", f"--eval_decode_sentences={SENTENCES}",
                    "--noxla", "--hparams=max_length=256")
        dev_bleu = {int(s): float(b) for s, b in re.findall(
            rf"eval at step (\d+): .* bleu ([\d.]+) \({SENTENCES} dev sentences", train.stdout)}
        with open(os.path.join(work, out_dir, "best", "best.json"), encoding="utf-8") as f:
            best = json.load(f)
        dev = [os.path.join(work, data_dir, f"{PROBLEM}-dev.{side}.txt")
               for side in ("source", "target")]
        for path, name in zip(dev, ("dev.src", "dev.ref")):
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()[:SENTENCES]
            with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        decode = cli("decoder", f"--output_dir={out_dir}",
                     f"--checkpoint_path={os.path.join(out_dir, 'best')}",
                     "--decode_from_file=dev.src", "--decode_reference=dev.ref",
                     "--decode_to_file=dev.hyp", "--json")
        harness.print_result({
            "benchmark": PROG, "date": datetime.date.today().isoformat(),
            "machine": harness.describe(), "train_steps": args.train_steps,
            "dev_sentences": SENTENCES, "dev_bleu": dev_bleu, "best_step": best["step"],
            "best_dev_bleu": best["value"], "learned": best["value"] > 0.0,
            "decoder_bleu": json.loads(decode.stdout)["sacrebleu"]["score"],
            "work_dir": args.work_dir})


if __name__ == "__main__":
    harness.run(main, PROG)
