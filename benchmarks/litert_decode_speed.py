"""Decoding speed on LiteRT programs beside CTranslate2, at batch 1, in one
process without TensorFlow (issue 62). Prints one JSON line.

    python -m benchmarks.litert_decode_speed \\
        --litert=t2t_train/tiny/export/litert --ctranslate2=t2t_train/tiny/export/ctranslate2

t2t-decoder's LiteRT path (`LiteRTTranslator`, `litert=auto|true`) translates a
sentence at a time: the encoder and the cached decoder step on LiteRT
(XNNPACK), under our `beam_search` with Keras's numpy backend (set here
before Keras is imported, as t2t-decoder does). This times that
`LiteRTTranslator` and `CTranslate2Translator` (float32, batch 1, the same
beam) on the same sentences, exports of the same checkpoint (made first with
`t2t-exporter --format=litert` and `--format=ctranslate2`), alternating the
engines for --rounds rounds after a warm-up; each figure is from the median
round, target tokens being the outputs' pieces plus EOS. `same_output`
counts the sentences on which both give the same translation. Each engine at
its own default threads (LiteRT: the usable cores; CTranslate2's
translator: `thread_setting`). The decoder's TensorFlow search at batch 1 is
`decode_speed.py`'s (another process: TensorFlow and Keras's numpy backend
do not share one).
"""

import argparse
import os
import statistics
import sys
import time

os.environ["KERAS_BACKEND"] = "numpy"   # before Keras: the LiteRT path's beam search

from benchmarks import harness  # noqa: E402

PROG = "litert_decode_speed"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--litert", required=True,
                        help="a LiteRT export (t2t-exporter --format=litert), or its folder "
                             "of versions")
    parser.add_argument("--ctranslate2", required=True,
                        help="a CTranslate2 export of the same checkpoint, or its folder "
                             "of versions")
    parser.add_argument("--source", default=str(harness.SHARED_DATA / "multi30k"
                                                / "test_2016_flickr.en.gz"))
    parser.add_argument("--max_sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from t2t_revival.errors import UserError
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator
    from t2t_revival.decode.litert_translator import LiteRTTranslator
    from t2t_revival.files.text_lines import read_text_lines

    if args.rounds < 1 or args.max_sentences < 1:
        raise UserError(f"--rounds and --max_sentences must be at least 1. Received: "
                        f"--rounds={args.rounds}, --max_sentences={args.max_sentences}")
    load_before = harness.load_average()
    litert = LiteRTTranslator(args.litert)
    beam = int(litert.settings["beam_size"])
    ct2 = CTranslate2Translator(args.ctranslate2, beam_size=beam, batch_size=1)
    if os.path.realpath(litert.settings["checkpoint"]) != os.path.realpath(
            ct2.settings["checkpoint"]):
        raise UserError(f"the exports are of different checkpoints: "
                        f"{litert.settings['checkpoint']} and {ct2.settings['checkpoint']}")
    sources = read_text_lines(args.source, "source")[:args.max_sentences]
    engines = {"litert": litert.translate, "ctranslate2_float32": ct2.translate}
    for translate in engines.values():
        translate(sources[:5])   # warm-up
    seconds = {name: [] for name in engines}
    outputs = {}
    for round_ in range(args.rounds):
        for name in (list(engines) if round_ % 2 == 0 else list(engines)[::-1]):
            start = time.perf_counter()
            outputs.setdefault(name, engines[name](sources))
            seconds[name].append(time.perf_counter() - start)
    tokens = {name: harness.target_tokens(litert.vocab, out) for name, out in outputs.items()}
    results = {name: {"sentences": len(sources), "seconds": round(statistics.median(s), 2),
                      "target_tokens_per_second": round(tokens[name] / statistics.median(s), 1),
                      "round_tokens_per_second": [round(tokens[name] / t, 1) for t in s]}
               for name, s in seconds.items()}
    harness.print_result({
        "benchmark": PROG, "litert": litert.export_dir, "ctranslate2": ct2.export_dir,
        "beam_size": beam, "batch_size": 1, "rounds": args.rounds, "results": results,
        "ratio_litert_vs_ctranslate2_float32": round(
            results["litert"]["target_tokens_per_second"]
            / results["ctranslate2_float32"]["target_tokens_per_second"], 2),
        "same_output": sum(a == b for a, b in zip(outputs["litert"],
                                                   outputs["ctranslate2_float32"])),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "machine": harness.describe(), "loadavg_before": load_before,
        "loadavg_after": harness.load_average()})


if __name__ == "__main__":
    harness.run(main, PROG)
