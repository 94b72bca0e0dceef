"""Decoding speed: sentences and target tokens per second with beam search on
the Multi30k test set, at decode batch sizes 32 and 1, with the XLA-compiled
search and the uncompiled one, beside CTranslate2. Prints one JSON line.

    python -m benchmarks.decode_speed --output_dir=t2t_train/tiny \
        --checkpoint_path=t2t_train/tiny/averaged/ckpt-2000

For each batch size: `Decoder.translate` with `xla=false` (the uncompiled
search: the reference) and `xla=true`, each after untimed passes that trace
(and compile) every decoding graph; target tokens are the SentencePiece
pieces of the outputs, EOS included. Every entry counts its outputs equal to
the uncompiled search's (`same_output_as_uncompiled`). `--decode_hparams` adds
settings to both searches (e.g. `early_stop=best_finished`).

When ctranslate2 is installed (and unless --no-ctranslate2), the same
checkpoint is also exported to CTranslate2 (a temporary directory) and
decoded with `CTranslate2Translator` at --ct2_compute_types (float32): the
same sentences, batches, beam and length limit. By default it gets the same
thread setting as ours: --threads intra-op threads (TensorFlow's; CTranslate2's
intra_threads) and --parallel_batches batches at once (our decode hparam;
CTranslate2's inter_threads). --ct2_threads and --ct2_parallel_batches give
CTranslate2 a setting of its own, so that each engine's best setting can be
timed in one run; 0 for --parallel_batches, --ct2_threads or
--ct2_parallel_batches leaves that setting at the engine's own default
(`DecodeHParams.resolved`, `CTranslate2Translator`'s `thread_setting`), and
each entry reports the setting it ran with (`parallel_batches`;
`intra_threads` and `inter_threads`). `ratios` divides our tokens/s by CTranslate2 float32's, per
batch size and search.

--rounds=N times every engine N times, after its warm-up, alternating the
engines and reversing their order every round; an entry's figures are from
its median time, `round_tokens_per_second` lists every round's, and
`round_ratios` the ratio of each round (ours and CTranslate2's timed back to
back). The load
average is read before and after (the machine may be shared; ratios within
one run are what to compare).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

from benchmarks import harness

PROG = "decode_speed"


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--batch_sizes", default="32,1")
    parser.add_argument("--searches", default="uncompiled,xla",
                        help="which of our searches to time: uncompiled, xla")
    parser.add_argument("--max_sentences", type=int, default=0,
                        help="decode only the first N sentences (0 = all)")
    parser.add_argument("--max_sentences_batch1", type=int, default=200,
                        help="cap for batch size 1, which is slow on a CPU")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads of TensorFlow (and of CTranslate2, "
                             "unless --ct2_threads)")
    parser.add_argument("--parallel_batches", type=int, default=1,
                        help="batches decoded at once, a thread each: our decode hparam "
                             "parallel_batches (and CTranslate2's inter_threads, unless "
                             "--ct2_parallel_batches)")
    parser.add_argument("--ct2_threads", type=int, default=None,
                        help="CTranslate2's intra_threads (default: --threads)")
    parser.add_argument("--ct2_parallel_batches", type=int, default=None,
                        help="CTranslate2's inter_threads (default: --parallel_batches)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed passes of every engine, alternated; the median is reported")
    parser.add_argument("--ctranslate2", action=argparse.BooleanOptionalAction,
                        default=True, help="also time the CTranslate2 export")
    parser.add_argument("--ct2_compute_types", default="float32")
    parser.add_argument("--decode_hparams", default="",
                        help="more decode hparams for our searches, e.g. "
                             "early_stop=best_finished")
    args = parser.parse_args()
    if args.ct2_threads is None:
        args.ct2_threads = args.threads
    if args.ct2_parallel_batches is None:
        args.ct2_parallel_batches = args.parallel_batches
    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.errors import UserError

    for flag, least in (("threads", 1), ("rounds", 1), ("parallel_batches", 0),
                        ("ct2_threads", 0), ("ct2_parallel_batches", 0)):
        if getattr(args, flag) < least:
            raise UserError(f"--{flag} must be at least {least}"
                            f"{' (0: the default)' if not least else ''}. "
                            f"Received: --{flag}={getattr(args, flag)}")
    searches = args.searches.split(",")
    if not searches or any(s not in ("uncompiled", "xla") for s in searches):
        raise UserError("--searches must list uncompiled and/or xla, comma-separated. "
                        f"Received: --searches={args.searches!r}")
    overrides = parse_decode_hparams(args.decode_hparams)
    load_before = harness.load_average()

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    from t2t_revival.decode.decoder import Decoder, read_text_lines

    ct2_dir = None
    if args.ctranslate2:
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            print("ctranslate2 is not installed: timing t2t only", file=sys.stderr)
        else:
            from t2t_revival.export.ctranslate2_export import export_ctranslate2
            ct2_dir = export_ctranslate2(args.output_dir, args.checkpoint_path,
                                         export_dir=tempfile.mkdtemp(
                                             prefix="decode_speed_ct2_"), version=1)

    sources = read_text_lines(args.source, "source")
    if args.max_sentences:
        sources = sources[:args.max_sentences]
    results, ct2_results, ratios = [], [], []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        subset = sources[:args.max_sentences_batch1] if batch == 1 else sources
        engines = [_our_engine(args, overrides, Decoder, search, batch, subset)
                   for search in searches]
        if ct2_dir:
            engines += _ctranslate2_engines(args, ct2_dir, subset, batch)
        _time_rounds(engines, subset, args.rounds)
        vocab = engines[0]["vocab"]
        reference = next((e["outputs"] for e in engines if e["name"] == "uncompiled"), None)
        ours, theirs = {}, []
        for engine in engines:
            entry = _entry(subset, engine, vocab, reference)
            entry.update(batch_size=batch, **engine["labels"])
            if "search" in engine["labels"]:
                results.append(entry)
                ours[engine["name"]] = entry
            else:
                ct2_results.append(entry)
                theirs.append(entry)
        for entry in theirs:
            if entry["compute_type"] == "float32":
                ratio = {"batch_size": batch}
                for search, our_entry in ours.items():
                    ratio[f"{search}_vs_ctranslate2_float32"] = round(
                        our_entry["target_tokens_per_second"]
                        / entry["target_tokens_per_second"], 2)
                    if args.rounds > 1:
                        ratio[f"{search}_round_ratios"] = [
                            round(ours_tps / theirs_tps, 2) for ours_tps, theirs_tps in
                            zip(our_entry["round_tokens_per_second"],
                                entry["round_tokens_per_second"])]
                ratios.append(ratio)
    report = {
        "benchmark": "decode_speed", "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "beam_size": args.beam_size,
        "threads": args.threads, "parallel_batches": args.parallel_batches,
        "rounds": args.rounds,
        "decode_hparams": args.decode_hparams, "results": results,
        "machine": harness.describe(tensorflow=tf.__version__),
    }
    if ct2_dir:
        import shutil

        import ctranslate2
        report["ct2_threads"] = args.ct2_threads
        report["ct2_parallel_batches"] = args.ct2_parallel_batches
        report["ctranslate2_results"] = ct2_results
        report["ratios"] = ratios
        report["machine"] += f", ctranslate2 {ctranslate2.__version__}"
        shutil.rmtree(os.path.dirname(ct2_dir), ignore_errors=True)
    report["loadavg_before"], report["loadavg_after"] = load_before, harness.load_average()
    harness.print_result(report)


def _our_engine(args, overrides, Decoder, search, batch, subset) -> dict:
    """Our decoder with one search and the --decode_hparams `overrides`,
    warmed up: a first pass traces (and compiles) every decoding graph."""
    decoder = Decoder.load(args.output_dir, args.checkpoint_path, {
        "beam_size": args.beam_size, "batch_size": batch, "xla": search == "xla",
        "parallel_batches": args.parallel_batches, **overrides})
    start = time.perf_counter()
    decoder.translate(subset)
    return {"name": search, "translate": decoder.translate, "vocab": decoder.vocab,
            "labels": {"search": search,
                       "parallel_batches": decoder.decode_hparams.parallel_batches},
            "warm_up_seconds": round(time.perf_counter() - start, 1)}


def _ctranslate2_engines(args, ct2_dir, subset, batch) -> list[dict]:
    """CTranslate2 on the same sentences and batches, one engine per compute type."""
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator

    engines = []
    for compute_type in args.ct2_compute_types.split(","):
        translator = CTranslate2Translator(
            ct2_dir, compute_type=compute_type, intra_threads=args.ct2_threads,
            inter_threads=args.ct2_parallel_batches,
            beam_size=args.beam_size, batch_size=batch)
        translator.translate(subset[:max(batch, 1) * 3])  # warm-up
        engines.append({"name": f"ctranslate2_{compute_type}",
                        "translate": translator.translate,
                        "labels": {"compute_type": compute_type,
                                   "intra_threads": translator.intra_threads,
                                   "inter_threads": translator.inter_threads}})
    return engines


def _time_rounds(engines: list[dict], subset: list[str], rounds: int) -> None:
    """Times every engine `rounds` times, alternating them and reversing their
    order every round: sets each one's `seconds` (per round) and `outputs`
    (of the first round)."""
    for engine in engines:
        engine["seconds"] = []  # one per round
    for round_ in range(rounds):
        for engine in (engines if round_ % 2 == 0 else engines[::-1]):
            start = time.perf_counter()
            outputs = engine["translate"](subset)
            engine["seconds"].append(time.perf_counter() - start)
            engine.setdefault("outputs", outputs)


def _entry(subset, engine, vocab, reference) -> dict:
    """The figures of one engine, from its median round."""
    outputs, rounds = engine["outputs"], engine["seconds"]
    seconds = statistics.median(rounds)
    tokens = harness.target_tokens(vocab, outputs)
    entry = {"sentences": len(subset),
             "sentences_per_second": round(len(subset) / seconds, 2),
             "target_tokens_per_second": round(tokens / seconds, 1),
             "seconds": round(seconds, 2)}
    if len(rounds) > 1:
        entry["round_tokens_per_second"] = [round(tokens / s, 1) for s in rounds]
    if "warm_up_seconds" in engine:
        entry["warm_up_seconds"] = engine["warm_up_seconds"]
    if reference is not None:
        entry["same_output_as_uncompiled"] = sum(a == b for a, b in zip(outputs, reference))
    return entry


if __name__ == "__main__":
    harness.run(main, PROG)
