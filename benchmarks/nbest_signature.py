"""The SavedModel's n-best signature against its 1-best one: same export,
same sentences, a clean process.

Exports a checkpoint once (`export_saved_model`) and times, in a process
that imports only tensorflow and tensorflow_text (`python -I`: what TF
Serving runs), `serving_default` (the best output and its score) and
`translate_nbest` with `num_hypotheses` = 1 and = the beam size, on the
first test sentences in order of length, `--batch_size` at a time. Each
signature runs an untimed pass first (its trace), then the rounds alternate
the signatures. Prints one JSON line: per signature the median seconds of
a pass over every batch, each round's, the ratio to `serving_default`, and
how many n-best lists' first hypothesis equals `serving_default`'s output.

    python -m benchmarks.nbest_signature --output_dir=t2t_train/tiny
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "nbest_signature"

_TIMER = r"""
import json, statistics, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
path, source, batch, rounds, beam = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
sentences = json.load(open(source))
batches = [sentences[i:i + batch] for i in range(0, len(sentences), batch)]
model = tf.saved_model.load(path)
best, nbest = model.signatures["serving_default"], model.signatures["translate_nbest"]
calls = {"serving_default": lambda chunk: best(sentences=tf.constant(chunk))["outputs"],
         "translate_nbest_1": lambda chunk: nbest(sentences=tf.constant(chunk),
                                                  num_hypotheses=tf.constant(1))["outputs"][:, 0],
         f"translate_nbest_{beam}": lambda chunk: nbest(
             sentences=tf.constant(chunk), num_hypotheses=tf.constant(beam))["outputs"][:, 0]}
firsts, times = {}, {name: [] for name in calls}
for name, call in calls.items():   # untimed: each signature's trace
    firsts[name] = [o.decode("utf-8") for chunk in batches for o in call(chunk).numpy()]
for round_ in range(rounds):
    for name in (list(calls) if round_ % 2 == 0 else list(calls)[::-1]):
        start = time.perf_counter()
        for chunk in batches:
            calls[name](chunk).numpy()
        times[name].append(round(time.perf_counter() - start, 3))
reference = firsts["serving_default"]
print(json.dumps({name: {"rounds_s": times[name], "median_s": statistics.median(times[name]),
                         "first_equals_serving_default": sum(
                             a == b for a, b in zip(firsts[name], reference))}
                  for name in calls}))
"""


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--max_sentences", type=int, default=256)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    from t2t_revival.decode.decoder import read_text_lines
    from t2t_revival.export.saved_model_export import export_saved_model
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    beam = TrainingDirectory(args.output_dir).read_hparams().beam_size
    sentences = [s for s in read_text_lines(args.source, "source") if s.strip()]
    sentences = sorted(sentences[:args.max_sentences], key=len)
    work = tempfile.mkdtemp(prefix="nbest_signature_")
    try:
        source = os.path.join(work, "sentences.json")
        with open(source, "w", encoding="utf-8") as f:
            json.dump(sentences, f)
        start = time.perf_counter()
        path = export_saved_model(args.output_dir, args.checkpoint_path,
                                  export_dir=os.path.join(work, "export"), version=1)
        export_s = round(time.perf_counter() - start, 1)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(args.threads))
        out = subprocess.run([sys.executable, "-I", "-c", _TIMER, path, source,
                              str(args.batch_size), str(args.rounds), str(beam)],
                             capture_output=True, text=True, env=env, check=False)
        if out.returncode:
            sys.stderr.write(out.stderr[-3000:])
            raise UserError(f"timing the export failed with exit code {out.returncode} (its "
                            f"error output is above). Received: --output_dir={args.output_dir!r}")
        timed = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = timed["serving_default"]["median_s"]
    for entry in timed.values():
        entry["cost_vs_serving_default"] = round(entry["median_s"] / base, 3)
    import tensorflow as tf
    harness.print_result({
        "benchmark": PROG, "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "sentences": len(sentences),
        "batch_size": args.batch_size, "beam_size": beam, "export_s": export_s,
        "signatures": timed, "machine": harness.describe(tensorflow=tf.__version__),
        "loadavg": harness.load_average()})


if __name__ == "__main__":
    harness.run(main, PROG)
