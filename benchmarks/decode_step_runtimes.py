"""The decoder's cached step on LiteRT (XNNPACK) beside XLA and uncompiled
TensorFlow, and beside the XLA search's cost per step. Prints one JSON line.

    python -m benchmarks.decode_step_runtimes
    python -m benchmarks.decode_step_runtimes --shapes=recipe --batch_sizes=1

For each model shape (`recipe`: transformer_multi30k, 8,192 pieces; `base`:
transformer_base, 32,000 pieces; random weights, seeded) and each batch
(beam 4: batch x 4 rows), the step beam search calls (`Transformer.decode_step`)
at fixed shapes: sources of --source_length tokens and a cache of
max_decode_length(source_length, extra_length) positions, the length the
XLA search runs for those sources. The same step runs three ways in one
process, each called from Python with the cache as explicit inputs and
outputs (`t2t_revival.export.litert_conversion`):

- `litert`: converted with TFLiteConverter and run by the LiteRT interpreter
  (XNNPACK, --threads threads);
- `xla`: the same tf.function with jit_compile=True;
- `uncompiled`: the same tf.function, uncompiled.

Their outputs (logits and the written cache) are compared to the
uncompiled step's (`max_abs_diff`). `litert_with_search_ms` adds to the LiteRT
step what a search around it needs at the least per step: the top 2 x beam
of each sentence's logits (numpy argpartition) and the reorder of the rows'
cache buffers by parent (numpy take): a LiteRT-stepped search costs at
least that a step.

The honest peer: the product's XLA search (`Decoder.compiled_search`) runs
the whole loop (encoder, steps, top-k, reorder) in one compiled program, no
Python call per step. `xla_search_per_step_ms` times it on a batch of
random sources and divides by its steps: the EOS row of the output
projection is zeroed, so no hypothesis ends and every search runs all
max_decode_length steps (checked: `search_steps`, `eos_in_outputs`). Its
shorter cache buffers at the first positions (`resize_cache`) are part of
its cost, as is its encoder (once per batch).

`ratios`: xla_search_per_step / litert (and litert_with_search): above 1,
LiteRT is faster. Issue 62 builds a LiteRT-stepped search only at >= 1.3x.
CTranslate2 is not run here (it needs a trained export): decode_speed.py
times it beside our search on a trained model.

Times are medians of --repeats timed calls after a warm-up.
"""

import os
import statistics
import time

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "decode_step_runtimes"
SHAPES = {"recipe": ("transformer_multi30k", 8192), "base": ("transformer_base", 32000)}


def _median_ms(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e3, 3)


def _model(hparams_set: str, vocab_size: int):
    import keras
    import numpy as np

    from t2t_revival import registry
    from t2t_revival.models.build_model import build_model
    from t2t_revival.special_ids import EOS_ID

    hp = registry.hparams_sets.get(hparams_set)().replace(vocab_size=vocab_size)
    keras.utils.set_random_seed(0)
    model = build_model(hp)
    # Zero EOS's row of the (shared) output projection: no hypothesis ends,
    # so the search runs every step of max_decode_length.
    embedding = model.shared_embedding.weights[0]
    table = embedding.numpy()
    table[EOS_ID] = 0.0
    embedding.assign(table)
    return hp, model, np


def _one(hp, model, np, batch: int, beam: int, source_length: int, threads: int,
         repeats: int, search_repeats: int) -> dict:
    import tensorflow as tf

    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import DecodeHParams
    from t2t_revival.decode.decode_length import max_decode_length, position_limit
    from t2t_revival.decode.flat_cache import is_per_sentence
    from t2t_revival.export.litert_conversion import (cache_specs, step_function,
                                                      step_output_names, to_litert)
    from t2t_revival.decode.litert_program import LiteRTProgram
    from t2t_revival.special_ids import EOS_ID

    rows = batch * beam
    dhp = DecodeHParams.from_hparams(hp, {"beam_size": beam})
    cache_length = max_decode_length(source_length, dhp.extra_length,
                                     position_limit(hp.position_encoding, hp.max_length))
    specs = cache_specs(model, batch, rows, source_length, cache_length)
    uncompiled = step_function(model, specs, rows)
    xla = step_function(model, specs, rows, jit_compile=True)
    start = time.perf_counter()
    litert = LiteRTProgram(to_litert(uncompiled), ["ids", "index", *specs],
                           step_output_names(specs), num_threads=threads)
    convert_s = time.perf_counter() - start

    rng = np.random.default_rng(0)
    cache = {name: rng.standard_normal(spec.shape).astype("float32") for name, spec in
             specs.items()}
    for name in cache:
        if name.endswith("encoder_padding"):
            cache[name] = np.zeros(specs[name].shape, np.float32)
    ids = rng.integers(3, hp.vocab_size, rows).astype("int32")
    index = np.int32(cache_length // 2)
    tensors = [tf.constant(ids), tf.constant(index)] + [tf.constant(v) for v in cache.values()]
    names = step_output_names(specs)
    reference = [t.numpy() for t in uncompiled(*tensors)]
    outputs = {"xla": [t.numpy() for t in xla(*tensors)],
               "litert": [litert(ids=ids, index=index, **cache)[n] for n in names]}
    diff = {engine: float(max(np.max(np.abs(a - b)) for a, b in zip(got, reference)))
            for engine, got in outputs.items()}

    row_names = [n for n in specs if not is_per_sentence(n)]

    def litert_with_search():
        out = litert(ids=ids, index=index, **cache)
        logits = out["logits"].reshape(batch, -1)
        best = np.argpartition(logits, -2 * beam, axis=1)[:, -2 * beam:]
        parents = (best[:, :beam] // hp.vocab_size + np.arange(batch)[:, None] * beam).ravel()
        return [np.take(out[n], parents, axis=0) for n in row_names]

    times = {"litert_ms": _median_ms(lambda: litert(ids=ids, index=index, **cache), repeats),
             "litert_with_search_ms": _median_ms(litert_with_search, repeats),
             "xla_ms": _median_ms(lambda: [t.numpy() for t in xla(*tensors)], repeats),
             "uncompiled_ms": _median_ms(lambda: [t.numpy() for t in uncompiled(*tensors)],
                                         repeats)}

    # The product's XLA search: the whole loop compiled, no Python per step.
    trained = type("Trained", (), dict(hparams=hp, run_record=None, vocab=None,
                                       checkpoint_path=None, model=model))
    decoder = Decoder(trained, dhp)
    search = decoder.compiled_search(batch)
    sources = tf.constant(rng.integers(3, hp.vocab_size, (batch, source_length)), tf.int32)
    start = time.perf_counter()
    sequences, _ = search(sources)
    compile_s = time.perf_counter() - start
    sequences = np.asarray(sequences)
    search_ms = _median_ms(lambda: np.asarray(search(sources)[0]), search_repeats)
    steps = sequences.shape[-1]
    times["xla_search_per_step_ms"] = round(search_ms / steps, 3)
    return {
        "rows": rows, "source_length": source_length, "cache_length": cache_length,
        **times,
        "ratios": {
            "xla_search_per_step_over_litert": round(
                times["xla_search_per_step_ms"] / times["litert_ms"], 3),
            "xla_search_per_step_over_litert_with_search": round(
                times["xla_search_per_step_ms"] / times["litert_with_search_ms"], 3),
            "xla_step_over_litert": round(times["xla_ms"] / times["litert_ms"], 3),
            "uncompiled_step_over_litert": round(times["uncompiled_ms"] / times["litert_ms"], 3),
        },
        "max_abs_diff": diff,
        "max_abs_logit": float(np.max(np.abs(reference[0]))),
        "xla_search_ms": search_ms, "search_steps": int(steps),
        "eos_in_outputs": bool((sequences == EOS_ID).any()),
        "litert_convert_s": round(convert_s, 1), "xla_search_compile_s": round(compile_s, 1),
    }


def main():
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--shapes", default="recipe,base", help="of: recipe, base")
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--source_length", type=int, default=16,
                        help="source tokens (a padded length: a multiple of 16)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="TensorFlow's intra-op threads and LiteRT's num_threads")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls of each step")
    parser.add_argument("--search_repeats", type=int, default=3, help="timed XLA searches")
    args = parser.parse_args()
    for name in args.shapes.split(","):
        if name not in SHAPES:
            raise UserError(f"unknown shape; use some of {', '.join(SHAPES)}. "
                                    f"Received: --shapes={args.shapes!r}")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    load_before = harness.load_average()
    results = {}
    for name in args.shapes.split(","):
        hparams_set, vocab_size = SHAPES[name]
        hp, model, np = _model(hparams_set, vocab_size)
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            results[f"{name}_batch{batch}"] = _one(hp, model, np, batch, args.beam_size,
                                                   args.source_length, args.threads,
                                                   args.repeats, args.search_repeats)
    harness.print_result({
        "benchmark": PROG,
        "shapes": {name: dict(zip(("hparams_set", "vocab_size"), SHAPES[name]))
                   for name in args.shapes.split(",")},
        "beam_size": args.beam_size, "threads": args.threads,
        "results": results,
        "machine": harness.describe(tensorflow=tf.__version__),
        "load_average_before": load_before, "load_average_after": harness.load_average(),
    })


if __name__ == "__main__":
    harness.run(main, PROG)
