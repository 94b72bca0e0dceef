"""Serving latency of the exported SavedModel, with and without XLA.

Exports a training directory's checkpoint twice (`export_saved_model`, then
with `xla=True`) to a temporary directory, and times each export's
`serving_default` signature in a clean process that imports only
tensorflow and tensorflow_text (`python -I`, no PYTHONPATH: what TF Serving
runs): the test sentences in order of length, `--batch_sizes` at a time,
after an untimed pass over the same batches (the first request of each
shape traces, and with XLA compiles). Prints one JSON line: per batch size
and export, the median and 90th percentile latency per batch, sentences per
second, the untimed pass's seconds (`warm_up_s`: mostly compiles, one per
batch shape met first there), each export's seconds (`export_s`), and how
many outputs equal the plain export's.

    python -m benchmarks.saved_model_latency --output_dir=t2t_train/tiny
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import harness

PROG = "saved_model_latency"

# Runs in the clean process: argv = saved model, sentences JSON file, batch
# sizes, threads. Imports nothing of this project.
_TIMER = r"""
import json, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
path, source, batch_sizes, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tf.config.threading.set_intra_op_parallelism_threads(threads)
sentences = json.load(open(source))
model = tf.saved_model.load(path)
serve = model.signatures["serving_default"]
report = {}
for batch in (int(b) for b in batch_sizes.split(",")):
    batches = [sentences[i:i + batch] for i in range(0, len(sentences), batch)]
    start = time.perf_counter()
    for chunk in batches:                                   # warm-up: trace / compile
        serve(sentences=tf.constant(chunk))
    warm_up = time.perf_counter() - start
    times, outputs = [], []
    start = time.perf_counter()
    for chunk in batches:
        t = time.perf_counter()
        result = serve(sentences=tf.constant(chunk))["outputs"].numpy()
        times.append(time.perf_counter() - t)
        outputs += [o.decode("utf-8") for o in result]
    total = time.perf_counter() - start
    times.sort()
    report[batch] = {"batches": len(batches), "sentences": len(sentences),
                     "median_ms": round(1000 * times[len(times) // 2], 1),
                     "p90_ms": round(1000 * times[int(len(times) * 0.9)], 1),
                     "sentences_per_second": round(len(sentences) / total, 1),
                     "warm_up_s": round(warm_up, 1),
                     "outputs": outputs}
print(json.dumps(report))
"""


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--max_sentences", type=int, default=256)
    parser.add_argument("--batch_sizes", default="32,1")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    from t2t_revival.decode.decoder import read_text_lines
    from t2t_revival.errors import UserError
    from t2t_revival.export.saved_model_export import export_saved_model

    sentences = [s for s in read_text_lines(args.source, "source") if s.strip()]
    sentences = sorted(sentences[:args.max_sentences], key=len)
    work = tempfile.mkdtemp(prefix="saved_model_latency_")
    source = os.path.join(work, "sentences.json")
    with open(source, "w", encoding="utf-8") as f:
        json.dump(sentences, f)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    results, export_seconds = {}, {}
    for name, xla in (("plain", False), ("xla", True)):
        start = time.perf_counter()
        path = export_saved_model(args.output_dir, args.checkpoint_path,
                                  export_dir=os.path.join(work, name), version=1, xla=xla)
        export_seconds[name] = round(time.perf_counter() - start, 1)
        out = subprocess.run([sys.executable, "-I", "-c", _TIMER, path, source,
                              args.batch_sizes, str(args.threads)],
                             capture_output=True, text=True, env=env, check=False)
        if out.returncode:
            sys.stderr.write(out.stderr[-3000:])
            raise UserError(f"timing the {name} export failed with exit code {out.returncode} "
                            f"(its error output is above). Received: --output_dir="
                            f"{args.output_dir!r}")
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    entries = []
    for batch in results["plain"]:
        plain = results["plain"][batch]
        for name in ("plain", "xla"):
            entry = dict(results[name][batch])
            outputs = entry.pop("outputs")
            same = sum(a == b for a, b in zip(outputs, plain["outputs"]))
            entry.update(export=name, batch_size=int(batch), export_s=export_seconds[name],
                         same_output_as_plain=same)
            entries.append(entry)
    import shutil

    import tensorflow as tf
    shutil.rmtree(work, ignore_errors=True)
    harness.print_result({
        "benchmark": "saved_model_latency", "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "threads": args.threads,
        "results": entries,
        "machine": harness.describe(tensorflow=tf.__version__),
        "loadavg": harness.load_average()})


if __name__ == "__main__":
    harness.run(main, PROG)
