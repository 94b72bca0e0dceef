"""Lexical constraints and target prefixes on the Multi30k test set: how often
outputs hold their constraints, BLEU and speed with and without them, the
compiled and uncompiled searches' agreement. Prints one JSON line.

    python -m benchmarks.constrained_decoding --output_dir=t2t_train/tiny

Constraints (issue 58's acceptance): from each reference, its
`--phrases_per_sentence` (2) longest content words: the reference's
whitespace words with punctuation stripped from their ends, of at least 3
characters, not in `STOPWORDS` (German function words), each once; the
longest first (ties: the earlier), then given in sentence order. A sentence
with none gets no constraint. Reported:

- `constraints.all_met`: outputs holding every constraint (as a substring
  of the output text), of the sentences that had any;
- `bleu_without` / `bleu_with`: sacreBLEU of the plain and constrained
  outputs (XLA search) against the references;
- `tokens_per_second_without` / `_with`: target tokens (pieces of the
  outputs, EOS included) per second of a timed pass after a warm-up pass
  (which traces and compiles), the same run, batch and beam;
- `xla_equal_uncompiled`: constrained outputs of the XLA search equal to the
  uncompiled search's;
- `prefix_full_reference.reproduced`: outputs equal to their reference when
  the whole reference is the prefix; `prefix_two_words.start_with_prefix`:
  outputs starting with the reference's first two words when those are it.
"""

import re
import time

from benchmarks import harness

PROG = "constrained_decoding"
DEFAULT_REFERENCE = harness.SHARED_DATA / "multi30k" / "test_2016_flickr.de.gz"

# German function words (articles, pronouns, prepositions, conjunctions,
# auxiliaries): not content words.
STOPWORDS = frozenset("""
der die das den dem des ein eine einer einen einem eines und oder aber in im
an am auf aus bei mit nach von vom zu zum zur für über unter vor hinter neben
zwischen durch um gegen ohne ist sind war waren wird werden hat haben sich er
sie es ihr ihre ihren ihrem sein seine seinen seinem seiner wir ich du man
nicht noch auch als wie was wer wo dass ob wenn sehr viel viele einige
andere anderen anderer etwas dieser diese dieses jemand ihm ihn deren dessen
""".split())


def content_words(reference: str, count: int) -> list[str]:
    """The `count` longest content words of `reference`, in sentence order."""
    words = []
    for raw in reference.split():
        word = raw.strip(".,;:!?\"'()[]")
        if len(word) >= 3 and word.lower() not in STOPWORDS and word not in words:
            words.append(word)
    longest = sorted(words, key=lambda w: (-len(w), words.index(w)))[:count]
    return [w for w in words if w in longest]


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--reference", default=str(DEFAULT_REFERENCE),
                        help="the references of --source, one per line (.gz read as gzip)")
    parser.add_argument("--max_sentences", type=int, default=None,
                        help="decode only the first N sentences (default all)")
    parser.add_argument("--phrases_per_sentence", type=int, default=2)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args()
    from t2t_revival.errors import UserError
    from t2t_revival.files.text_lines import read_text_lines

    if (args.max_sentences is not None and args.max_sentences < 1) \
            or args.phrases_per_sentence < 1:
        raise UserError("--max_sentences must be >= 1 and --phrases_per_sentence >= 1. "
                        f"Received: --max_sentences={args.max_sentences}, "
                        f"--phrases_per_sentence={args.phrases_per_sentence}")
    load_before = harness.load_average()
    settings = {"beam_size": args.beam_size, "batch_size": args.batch_size}
    sources, xla = harness.sources_and_decoder(args, {**settings, "xla": "true"})
    references = read_text_lines(args.reference, "reference")[:len(sources)]
    if len(references) != len(sources):
        raise UserError(f"--reference has {len(references)} lines, --source {len(sources)}; "
                        f"they must align. Received: --reference={args.reference!r}")
    import tensorflow as tf

    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.metrics.bleu import sacre_bleu

    uncompiled = Decoder.load(args.output_dir, args.checkpoint_path,
                              {**settings, "xla": "false"})
    phrases = [content_words(r, args.phrases_per_sentence) for r in references]

    def timed(**guides):
        xla.translate(sources, **guides)   # traces and compiles
        start = time.perf_counter()
        outputs = xla.translate(sources, **guides)
        seconds = time.perf_counter() - start
        return outputs, round(harness.target_tokens(xla.vocab, outputs) / seconds, 1)

    plain, speed_without = timed()
    constrained, speed_with = timed(constraints=phrases)
    skipped = len(xla.skipped)
    reference_check = uncompiled.translate(sources, constraints=phrases)
    held = [all(p in o for p in ps) for o, ps in zip(constrained, phrases) if ps]
    full = xla.translate(sources, prefixes=references)
    two_words = [" ".join(r.split()[:2]) for r in references]
    started = xla.translate(sources, prefixes=two_words)
    harness.print_result({
        "benchmark": PROG,
        "sentences": len(sources),
        "beam_size": args.beam_size, "batch_size": args.batch_size,
        "constraint_rule": f"the {args.phrases_per_sentence} longest content words of "
                           "each reference (>= 3 characters, not a German function word)",
        "constraints": {"sentences_with": len(held), "all_met": sum(held),
                        "all_met_percent": round(100 * sum(held) / max(len(held), 1), 2),
                        "skipped_lines": skipped},
        "bleu_without": round(sacre_bleu(plain, references).score, 2),
        "bleu_with": round(sacre_bleu(constrained, references).score, 2),
        "tokens_per_second_without": speed_without,
        "tokens_per_second_with": speed_with,
        "xla_equal_uncompiled": sum(a == b for a, b in zip(constrained, reference_check)),
        "prefix_full_reference": {"reproduced": sum(_same(o, r) for o, r in
                                                    zip(full, references))},
        "prefix_two_words": {"start_with_prefix": sum(o.startswith(p) for o, p in
                                                      zip(started, two_words))},
        "machine": harness.describe(tensorflow=tf.__version__),
        "loadavg_before": load_before, "loadavg_after": harness.load_average(),
    })


def _same(output: str, reference: str) -> bool:
    """The same text, spaces aside (the vocabulary may normalize them)."""
    return re.sub(r"\s+", " ", output.strip()) == re.sub(r"\s+", " ", reference.strip())


if __name__ == "__main__":
    harness.run(main, PROG)
