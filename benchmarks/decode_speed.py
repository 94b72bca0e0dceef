"""Decoding speed: sentences and target tokens per second with beam search on
the Multi30k test set, at decode batch sizes 1 and 32. Prints one JSON line.

    python benchmarks/decode_speed.py --output_dir=t2t_train/tiny \
        --source=../shared/data/multi30k/test_2016_flickr.en.gz

Untimed warm-up batches trace each decoding graph first; target tokens are the
SentencePiece pieces of the outputs, EOS included.
"""

import argparse
import json
import os
import platform
import sys
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
    args = parser.parse_args()

    import tensorflow as tf
    from t2t_revival.decode.decoder import Decoder, read_text_lines

    sources = read_text_lines(args.source, "source")
    if args.max_sentences:
        sources = sources[:args.max_sentences]
    results = []
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
    print(json.dumps({
        "benchmark": "decode_speed", "output_dir": args.output_dir,
        "beam_size": args.beam_size, "results": results,
        "machine": f"{platform.machine()} {os.cpu_count()} cores, tensorflow {tf.__version__}",
    }))


if __name__ == "__main__":
    main()
