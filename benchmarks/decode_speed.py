"""Decoding speed: sentences and target tokens per second with beam search on
the Multi30k test set, at decode batch sizes 1 and 32. Prints one JSON line.

    python benchmarks/decode_speed.py --output_dir=t2t_train/tiny \
        --source=../shared/data/multi30k/test_2016_flickr.en.gz

Untimed warm-up batches trace each decoding graph first; target tokens are the
SentencePiece pieces of the outputs, EOS included.

When ctranslate2 is installed (and unless --no-ctranslate2), the same
checkpoint is also exported to CTranslate2 (a temporary directory) and
decoded with `CTranslate2Translator` at compute types float32 and int8: the
same sentences, batches, beam and length limit, and the same number of
threads as TensorFlow (--threads). Its figures go in `ctranslate2_results`,
each with the share of outputs identical to ours.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True, help="a t2t-trainer output_dir")
    parser.add_argument("--source", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "data", "multi30k",
        "test_2016_flickr.en.gz"))
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--max_sentences", type=int, default=0,
                        help="decode only the first N sentences (0 = all)")
    parser.add_argument("--max_sentences_batch1", type=int, default=200,
                        help="cap for batch size 1, which is slow on a CPU")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads of TensorFlow and of CTranslate2")
    parser.add_argument("--ctranslate2", action=argparse.BooleanOptionalAction,
                        default=True, help="also time the CTranslate2 export")
    parser.add_argument("--ct2_compute_types", default="float32,int8")
    args = parser.parse_args()

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
            ct2_dir = export_ctranslate2(args.output_dir, export_dir=tempfile.mkdtemp(
                prefix="decode_speed_ct2_"), version=1)

    sources = read_text_lines(args.source, "source")
    if args.max_sentences:
        sources = sources[:args.max_sentences]
    results, ct2_results = [], []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        subset = sources[:args.max_sentences_batch1] if batch == 1 else sources
        decoder = Decoder(args.output_dir, decode_hparams=
                          f"beam_size={args.beam_size},batch_size={batch}")
        decoder.translate(subset[:max(batch, 1) * 3])  # warm-up: trace graphs
        decoder.translate(subset)                       # trace every length bucket
        start = time.perf_counter()
        outputs = decoder.translate(subset)
        seconds = time.perf_counter() - start
        tokens = sum(len(decoder.vocab.encode(o)) + 1 for o in outputs)
        results.append({"batch_size": batch, "sentences": len(subset),
                        "sentences_per_second": round(len(subset) / seconds, 2),
                        "target_tokens_per_second": round(tokens / seconds, 1),
                        "seconds": round(seconds, 2)})
        if ct2_dir:
            ct2_results += _time_ctranslate2(args, ct2_dir, subset, batch, outputs,
                                             decoder.vocab)
    report = {
        "benchmark": "decode_speed", "output_dir": args.output_dir,
        "beam_size": args.beam_size, "threads": args.threads, "results": results,
        "machine": f"{platform.machine()} {os.cpu_count()} cores, tensorflow {tf.__version__}",
    }
    if ct2_dir:
        import shutil

        import ctranslate2
        report["ctranslate2_results"] = ct2_results
        report["machine"] += f", ctranslate2 {ctranslate2.__version__}"
        shutil.rmtree(os.path.dirname(ct2_dir), ignore_errors=True)
    print(json.dumps(report))


def _time_ctranslate2(args, ct2_dir, subset, batch, ours, vocab):
    """CTranslate2 on the same sentences and batches, one entry per compute type."""
    from t2t_revival.export.ctranslate2_translator import CTranslate2Translator

    entries = []
    for compute_type in args.ct2_compute_types.split(","):
        translator = CTranslate2Translator(
            ct2_dir, compute_type=compute_type, intra_threads=args.threads,
            beam_size=args.beam_size, batch_size=batch)
        translator.translate(subset[:max(batch, 1) * 3])  # warm-up
        start = time.perf_counter()
        outputs = translator.translate(subset)
        seconds = time.perf_counter() - start
        tokens = sum(len(vocab.encode(o)) + 1 for o in outputs)
        entries.append({"batch_size": batch, "compute_type": compute_type,
                        "sentences": len(subset),
                        "sentences_per_second": round(len(subset) / seconds, 2),
                        "target_tokens_per_second": round(tokens / seconds, 1),
                        "seconds": round(seconds, 2),
                        "same_output_as_ours": round(
                            sum(a == b for a, b in zip(outputs, ours)) / len(subset), 3)})
    return entries


if __name__ == "__main__":
    main()
