"""Where the compiled search's time goes: XLA's own per-operation trace of
`Decoder.translate`, summed by part of the model. Prints one JSON line.

    python -m benchmarks.decode_profile --output_dir=t2t_train/tiny \
        --checkpoint_path=t2t_train/tiny/averaged/ckpt-2000 --batch_size=1

The XLA search (`xla=true`) translates the first --max_sentences lines of
--source once untimed (every program compiled), then once under
TensorFlow's profiler, which records each operation XLA's CPU runtime
runs. The optimized HLO, dumped to a temporary directory, names the
TensorFlow op each one came from, which says which part it belongs to:

- `encoder and set-up`: everything outside the search loop;
- `decoder self-attention`, `decoder cross-attention`, `decoder
  feed-forward`: a decoder layer's sub-layers, each with its LayerNorm;
- `output projection`: the logits over the vocabulary;
- `log-softmax`, `top-k`: the search's scoring of the next tokens;
- `gathers`: the beam reorder of the cache and state, and other gathers;
- `search bookkeeping`: the rest of the loop body (lengths, masks, scores);
- `thread pool waits`: XLA's runtime waiting for its worker threads;
- `operations with no TensorFlow op`: ones XLA made (e.g. the reduce-windows
  of a chunked top-k).

`per_step_us` divides by the decoding steps (calls of the output
projection); `unmapped_ms` is the time of operations that the dumped HLO
does not name (0 when every one is accounted for). Profiling costs a little
time per operation: compare the shares, not the wall time, with
`benchmarks.decode_speed`.
"""

import collections
import glob
import os
import re
import shutil
import tempfile
import time

from benchmarks import harness

PROG = "decode_profile"

# Events that contain other events (their time is their operations' time).
_CONTAINERS = re.compile(r"^(while|conditional|call)(\.\d+)?$|^ThunkExecutor::Execute$")
_INSTRUCTION = re.compile(r'^\s*(?:ROOT )?%([^\s=]+) = ')
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def part_of(op_name: str, instruction: str) -> str:
    """The part of the decoder an optimized-HLO instruction belongs to, from
    the TensorFlow op name it came from (e.g. `while/decoder_layer_0_1/ffn_1/...`;
    empty for an operation XLA made up)."""
    if not op_name:
        return "operations with no TensorFlow op"
    if not re.match(r"while(_\d+)?/", op_name):
        return "encoder and set-up"
    for key, part in (("cross_attention", "decoder cross-attention"),
                      ("self_attention", "decoder self-attention"),
                      ("ffn", "decoder feed-forward"),
                      ("LogSoftmax", "log-softmax"),
                      ("log_softmax", "log-softmax"),  # beam search's row normalizer
                      ("TopKV2", "top-k")):
        if key in op_name:
            return part
    if re.match(r"while(_\d+)?/(MatMul|einsum|output_projection)", op_name) and (
            instruction.startswith("dot") or "MatMul" in instruction):
        return "output projection"
    if "Gather" in op_name:
        return "gathers"
    return "search bookkeeping"


def read_hlo_dump(dump_dir: str) -> dict:
    """{module name: {instruction: op_name}} from XLA's after-optimizations dumps.

    The decoder traces its search once per batch bucket and XLA compiles it
    once per input length: programs of one name, which the trace does not
    tell apart. Their instructions are merged under that name: they come
    from one TensorFlow graph, and an instruction name found in several is
    in practice the same op (the first program's is kept)."""
    modules = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(dump_dir, "*after_optimizations.txt")):
        with open(path) as f:
            first = f.readline()
            name = first.split()[1].rstrip(",") if first.startswith("HloModule") else ""
            ops = {}
            for line in f:
                match = _INSTRUCTION.match(line)
                if match:
                    op_name = _OP_NAME.search(line)
                    ops[match.group(1)] = op_name.group(1) if op_name else ""
        for instruction, op_name in ops.items():
            modules[name].setdefault(instruction, op_name)
    return dict(modules)


def read_trace(logdir: str):
    """(event name, module name, duration ms) of every XLA operation event."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
            events = plane.event_metadata
            for line in plane.lines:
                for event in line.events:
                    meta = events.get(event.metadata_id)
                    module = ""
                    for stat in event.stats:
                        if stat_names.get(stat.metadata_id) == "hlo_module":
                            module = (stat_names.get(stat.ref_value, "")
                                      if stat.ref_value else stat.str_value)
                    if meta is not None:
                        yield meta.name, module, event.duration_ps / 1e9


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--max_sentences", type=int, default=100)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="TensorFlow's intra-op threads")
    parser.add_argument("--decode_hparams", default="",
                        help="more decode hparams, e.g. early_stop=best_finished")
    args = parser.parse_args()
    from t2t_revival.settings.decode_hparams import parse_decode_hparams

    overrides = {"batch_size": args.batch_size, "xla": True,
                 **parse_decode_hparams(args.decode_hparams)}
    work = tempfile.mkdtemp(prefix="decode_profile_")
    dump_dir, logdir = os.path.join(work, "hlo"), os.path.join(work, "trace")
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [
        os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump_dir}",
        "--xla_dump_hlo_as_text"]))
    try:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        sources, decoder = harness.sources_and_decoder(args, overrides)
        decoder.translate(sources)  # compile every program
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        decoder.translate(sources)
        seconds = time.perf_counter() - start
        tf.profiler.experimental.stop()

        modules = read_hlo_dump(dump_dir)
        parts, steps, unmapped = collections.Counter(), 0, 0.0
        for name, module, ms in read_trace(logdir):
            if _CONTAINERS.match(name):
                continue
            if name == "SlinkyThreadPool::Await":
                parts["thread pool waits"] += ms
                continue
            ops = modules.get(module)
            if ops is None or name not in ops:
                if module:
                    unmapped += ms
                continue
            part = part_of(ops[name], name)
            parts[part] += ms
            steps += part == "output projection"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(parts.values())
    harness.print_result({
        "benchmark": "decode_profile", "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "batch_size": args.batch_size,
        "sentences": len(sources), "decode_hparams": args.decode_hparams,
        "threads": args.threads, "profiled_seconds": round(seconds, 2),
        "steps": steps, "operations_ms": round(total, 1),
        "unmapped_ms": round(unmapped, 1),
        "parts": {part: {"ms": round(ms, 1), "share": round(ms / total, 3),
                         "per_step_us": round(ms / max(steps, 1) * 1e3, 1)}
                  for part, ms in parts.most_common()},
        "machine": harness.describe(tensorflow=tf.__version__),
        "loadavg": harness.load_average()})


if __name__ == "__main__":
    harness.run(main, PROG)
