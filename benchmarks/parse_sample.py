"""The WSJ sample's parsing run end to end, with the figure it reaches.

    python -m benchmarks.parse_sample [--train_steps=100] [--work_dir=DIR]

t2t-datagen of parsing_english_ptb_sample, t2t-trainer of a shrunk
transformer_parsing_base (2 layers, d_model 128; without XLA, a one-batch
final evaluation), t2t-decoder of the 245 test trees (beam 4, extra_length
100, uncompiled) with EVALB, and t2t-parse-eval of its trees. Prints one
JSON object: the decoder's EVALB figures ("f1", "matched", "repaired",
"scored", "sentences"), the flat baseline's F1 on the same split
("flat_f1": the words and tags, no structure; 0.0), "f1_above_flat",
t2t-parse-eval's F1 of the same trees ("parse_eval_f1", equal to "f1"),
and the seconds of each stage.

tests/test_parsing_problems.py::test_parse_sample_end_to_end runs the same
commands for 2 updates and 8 trees: the plumbing. That 100 updates learn
some structure ("f1" above "flat_f1") is this benchmark's figure; the test
asserted it until issue 71.
"""

from __future__ import annotations

import datetime
import json
import os
import time

from benchmarks import harness
from benchmarks.harness import cli

PROG = "parse_sample"
PROBLEM = "parsing_english_ptb_sample"
HPARAMS = ("num_hidden_layers=2,d_model=128,d_ff=512,num_heads=4,batch_size=2048,"
           "learning_rate_warmup_steps=400,learning_rate=2.0")
SEARCH = "beam_size=4,extra_length=100,batch_size=64,xla=false"


def parse_args(argv=None):
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--train_steps", type=int, default=100)
    parser.add_argument("--raw_dir", default=str(harness.SHARED_DATA),
                        help="the folder holding ptb_sample/ (the shared data)")
    parser.add_argument("--work_dir", default=None,
                        help="where the data and the run go, kept (default: a temporary "
                             "folder, removed)")
    return parser.parse_args(argv)


def main():
    from t2t_revival.problems.parsing_english import ParsingEnglishPtbSample

    args = parse_args()
    with harness.work_folder(args.work_dir, PROG) as work:
        data_dir, out_dir = os.path.join(work, "data"), os.path.join(work, "run")
        seconds, start = {}, time.time()
        cli("datagen", f"--problem={PROBLEM}", f"--tmp_dir={args.raw_dir}", f"--data_dir={data_dir}")
        seconds["datagen"] = round(time.time() - start, 1)
        start = time.time()
        cli("trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_parsing_base",
            f"--hparams={HPARAMS}", f"--data_dir={data_dir}", f"--output_dir={out_dir}",
            f"--train_steps={args.train_steps}", "--local_eval_frequency=0",
            f"--save_checkpoints_steps={args.train_steps}", "--xla=false", "--eval_steps=1",
            "--eval_decode_sentences=0")
        seconds["train"] = round(time.time() - start, 1)
        problem = ParsingEnglishPtbSample()
        source, target = problem.source_target_files("test", data_dir)
        decodes = os.path.join(work, "test.decodes")
        start = time.time()
        decode = cli("decoder", f"--output_dir={out_dir}", f"--decode_from_file={source}",
                     f"--decode_reference={target}", f"--decode_to_file={decodes}",
                     f"--decode_hparams={SEARCH}", "--json")
        seconds["decode"] = round(time.time() - start, 1)
        evalb = json.loads(decode.stdout)["evalb"]
        with open(source, encoding="utf-8") as f:
            sources = f.read().splitlines()
        with open(target, encoding="utf-8") as f:
            targets = f.read().splitlines()
        flat, _ = problem.evalb([""] * len(sources), targets, sources)
        scored = cli("parse_eval", f"--gold={problem.gold_tree_file('test', data_dir)}",
                     f"--predicted={decodes}.trees", "--json")
        harness.print_result({
            "benchmark": PROG, "date": datetime.date.today().isoformat(),
            "machine": harness.describe(), "train_steps": args.train_steps,
            "hparams": HPARAMS, "decode_hparams": SEARCH,
            "sentences": evalb["sentences"], "scored": evalb["scored"],
            "repaired": evalb["repaired"], "matched": evalb["matched"],
            "f1": evalb["f1"], "flat_f1": flat.f1, "f1_above_flat": evalb["f1"] > flat.f1,
            "parse_eval_f1": json.loads(scored.stdout)["f1"], "seconds": seconds,
            "work_dir": args.work_dir})


if __name__ == "__main__":
    harness.run(main, PROG)
