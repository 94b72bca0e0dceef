"""t2t-decoder on one device and on several: the same output file, and its cost.

Each round runs t2t-decoder as a fresh process once per device count, the
counts alternated: `--cpu_devices=N` (the CPU split into N logical devices,
one model copy each), or with `--gpus` `--worker_gpu=N` (N GPUs: the
scaling figure, on a machine with GPUs and TensorFlow). The default search
(beam 4, batches of 32, xla=auto, litert=false), on the Multi30k test set.
Prints one JSON line: per count, each round's whole-process seconds and
decode seconds (from the process's `restored` phase, `T2T_PHASE_TIMES`, to
its exit: loading the copies and tracing their searches included), the
medians, their ratio to one device, and whether each output file is
byte-identical to one device's.

    python -m benchmarks.decode_devices --output_dir=t2t_train/tiny --counts=1,2
"""

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "decode_devices"


def decode(args, count: int, out_path: str) -> dict:
    """One fresh t2t-decoder on `count` devices: its seconds and output digest."""
    flag = f"--worker_gpu={count}" if args.gpus else f"--cpu_devices={count}"
    command = [sys.executable, "-m", "t2t_revival.cli.decoder", f"--output_dir={args.output_dir}",
               f"--decode_from_file={args.source}", f"--decode_to_file={out_path}",
               f"--decode_hparams=litert=false,{args.decode_hparams}".rstrip(","), flag]
    if args.checkpoint_path:
        command.append(f"--checkpoint_path={args.checkpoint_path}")
    path = os.pathsep.join(p for p in (str(harness.ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2", T2T_PHASE_TIMES="1",
               T2T_COMPILE_CACHE="off")
    start = time.time()
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    end = time.time()
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        raise UserError(f"t2t-decoder on {count} devices failed with exit code "
                                f"{out.returncode}. Received: {' '.join(command)}")
    restored = [float(line.split()[-1]) for line in out.stderr.splitlines()
                if line.startswith("t2t-phase: restored")]
    with open(out_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {"process_s": round(end - start, 2),
            "decode_s": round(end - restored[0], 2) if restored else None, "sha256": digest}


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--counts", default="1,2", help="device counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpus", action="store_true",
                        help="decode on N GPUs (--worker_gpu) instead of N CPU devices")
    parser.add_argument("--decode_hparams", default="", help="more decode hparams")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    runs = {count: [] for count in counts}
    with tempfile.TemporaryDirectory(prefix="decode_devices_") as work:
        for round_ in range(args.rounds):
            for count in counts if round_ % 2 == 0 else counts[::-1]:
                runs[count].append(decode(args, count, os.path.join(work, f"{count}.out")))
    reference = runs[counts[0]][0]["sha256"]
    base = statistics.median(r["decode_s"] for r in runs[counts[0]])
    results = []
    for count in counts:
        decode_median = statistics.median(r["decode_s"] for r in runs[count])
        results.append({
            "devices": count, "rounds": runs[count],
            "median_process_s": statistics.median(r["process_s"] for r in runs[count]),
            "median_decode_s": decode_median,
            "speed_vs_first": round(base / decode_median, 3),
            "same_output_as_first": all(r["sha256"] == reference for r in runs[count])})
    harness.print_result({
        "benchmark": PROG, "output_dir": args.output_dir, "source": args.source,
        "kind": "GPU" if args.gpus else "logical CPU", "results": results,
        "machine": harness.describe(), "loadavg": harness.load_average()})


if __name__ == "__main__":
    harness.run(main, PROG)
