"""Decoding speed: sentences and target tokens per second with beam search on
the Multi30k test set, at decode batch sizes 32 and 1, with the XLA-compiled
search and the uncompiled one, beside CTranslate2. Prints one JSON line.

    python benchmarks/decode_speed.py --output_dir=t2t_train/tiny \
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
same sentences, batches, beam and length limit, and the same number of
threads as TensorFlow (--threads), and as many batches at once
(--parallel_batches: our decode hparam, CTranslate2's inter_threads). `ratios` divides our tokens/s by
CTranslate2 float32's, per batch size and search. The load average is read
before and after (the machine may be shared; ratios within one run are what
to compare).
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/, also when loaded by path
import machine  # noqa: E402  (benchmarks/machine.py)
from model_arguments import add_model_arguments, user_errors_exit  # noqa: E402  (benchmarks/model_arguments.py)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _loadavg() -> list[str]:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[:3]
    except OSError:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--batch_sizes", default="32,1")
    parser.add_argument("--searches", default="uncompiled,xla",
                        help="which of our searches to time: uncompiled, xla")
    parser.add_argument("--max_sentences", type=int, default=0,
                        help="decode only the first N sentences (0 = all)")
    parser.add_argument("--max_sentences_batch1", type=int, default=200,
                        help="cap for batch size 1, which is slow on a CPU")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads of TensorFlow and of CTranslate2")
    parser.add_argument("--parallel_batches", type=int, default=1,
                        help="batches decoded at once, a thread each: our decode hparam "
                             "parallel_batches and CTranslate2's inter_threads (each "
                             "with --threads intra-op threads)")
    parser.add_argument("--ctranslate2", action=argparse.BooleanOptionalAction,
                        default=True, help="also time the CTranslate2 export")
    parser.add_argument("--ct2_compute_types", default="float32")
    parser.add_argument("--decode_hparams", default="",
                        help="more decode hparams for our searches, e.g. "
                             "early_stop=best_finished")
    args = parser.parse_args()
    load_before = _loadavg()

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
    searches = args.searches.split(",")
    results, ct2_results, ratios = [], [], []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        subset = sources[:args.max_sentences_batch1] if batch == 1 else sources
        reference, tokens_per_second, vocab = None, {}, None
        for search in searches:
            decoder = Decoder(args.output_dir, args.checkpoint_path, decode_hparams=(
                f"beam_size={args.beam_size},batch_size={batch},"
                f"xla={'true' if search == 'xla' else 'false'},"
                f"parallel_batches={args.parallel_batches}"
                + (f",{args.decode_hparams}" if args.decode_hparams else "")))
            vocab = decoder.vocab
            start = time.perf_counter()
            decoder.translate(subset)                       # trace every length bucket
            warm_up = time.perf_counter() - start
            start = time.perf_counter()
            outputs = decoder.translate(subset)
            seconds = time.perf_counter() - start
            if search == "uncompiled":
                reference = outputs
            entry = _entry(subset, outputs, seconds, vocab, reference)
            entry.update(batch_size=batch, search=search,
                         warm_up_seconds=round(warm_up, 1))
            tokens_per_second[search] = entry["target_tokens_per_second"]
            results.append(entry)
        if ct2_dir:
            entries = _time_ctranslate2(args, ct2_dir, subset, batch, reference, vocab)
            ct2_results += entries
            for entry in entries:
                if entry["compute_type"] == "float32":
                    ratios.append({"batch_size": batch, **{
                        f"{search}_vs_ctranslate2_float32": round(
                            tps / entry["target_tokens_per_second"], 2)
                        for search, tps in tokens_per_second.items()}})
    report = {
        "benchmark": "decode_speed", "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "beam_size": args.beam_size,
        "threads": args.threads, "parallel_batches": args.parallel_batches,
        "decode_hparams": args.decode_hparams, "results": results,
        "machine": machine.describe(tensorflow=tf.__version__),
    }
    if ct2_dir:
        import shutil

        import ctranslate2
        report["ctranslate2_results"] = ct2_results
        report["ratios"] = ratios
        report["machine"] += f", ctranslate2 {ctranslate2.__version__}"
        shutil.rmtree(os.path.dirname(ct2_dir), ignore_errors=True)
    report["loadavg_before"], report["loadavg_after"] = load_before, _loadavg()
    print(json.dumps(report))


def _entry(subset, outputs, seconds, vocab, reference):
    tokens = sum(len(vocab.encode(o)) + 1 for o in outputs)
    entry = {"sentences": len(subset),
             "sentences_per_second": round(len(subset) / seconds, 2),
             "target_tokens_per_second": round(tokens / seconds, 1),
             "seconds": round(seconds, 2)}
    if reference is not None:
        entry["same_output_as_uncompiled"] = sum(a == b for a, b in zip(outputs, reference))
    return entry


def _time_ctranslate2(args, ct2_dir, subset, batch, reference, vocab):
    """CTranslate2 on the same sentences and batches, one entry per compute type."""
    from t2t_revival.export.ctranslate2_translator import CTranslate2Translator

    entries = []
    for compute_type in args.ct2_compute_types.split(","):
        translator = CTranslate2Translator(
            ct2_dir, compute_type=compute_type, intra_threads=args.threads,
            inter_threads=args.parallel_batches,
            beam_size=args.beam_size, batch_size=batch)
        translator.translate(subset[:max(batch, 1) * 3])  # warm-up
        start = time.perf_counter()
        outputs = translator.translate(subset)
        seconds = time.perf_counter() - start
        entry = _entry(subset, outputs, seconds, vocab, reference)
        entry.update(batch_size=batch, compute_type=compute_type)
        entries.append(entry)
    return entries


if __name__ == "__main__":
    with user_errors_exit("decode_speed"):
        main()
