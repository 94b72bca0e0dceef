"""Word alignments: how often output words copied from the source align to
their source word, for each decoder layer and head combination. Prints JSON.

    python -m benchmarks.word_alignments --output_dir=t2t_train/tiny

Translates --source (the Multi30k test_2016 English side by default) with
beam search (the run's decode settings), then aligns every output to its
source, and every line of --reference (the German side) to its source (the
model's attention over a human translation: a measure that does not depend
on how well the model translates), with each layer (0 .. layers-1) and each `alignment_heads` choice
(mean, max, each head alone). The measure (issue 58's acceptance, goal >= 90%):

    verbatim words: output words (case-sensitive) that equal exactly one
    word of the source line and no other word of the output, contain a
    letter or digit, and are not in `FUNCTION_WORDS` (words spelled alike
    in English and German: "in", "an", ...); names, numbers and borrowed
    words. `verbatim_aligned` is the share of them whose alignment link
    goes to that source word.

The best combination is the one to make `alignment_layer` and
`alignment_heads`' default (`DecodeHParams`). The load average is read
before and after (the machine may be shared).
"""

import time

from benchmarks import harness

PROG = "word_alignments"
FUNCTION_WORDS = frozenset({"in", "an", "am", "so", "was", "man", "die", "also", "of", "a"})
"""Words spelled alike in English and German that are not copies."""


def verbatim_pairs(source: str, output: str) -> list[tuple[int, int]]:
    """(source word, output word) of each verbatim word (see the module doc)."""
    source_words, output_words = source.split(), output.split()
    pairs = []
    for t, word in enumerate(output_words):
        if (source_words.count(word) == 1 and output_words.count(word) == 1
                and any(c.isalnum() for c in word) and word.lower() not in FUNCTION_WORDS):
            pairs.append((source_words.index(word), t))
    return pairs


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--max_sentences", type=int, default=None,
                        help="align only the first N sentences (default all)")
    parser.add_argument("--reference", default=str(harness.SHARED_DATA / "multi30k" /
                                                   "test_2016_flickr.de.gz"),
                        help="translations of --source to align too")
    parser.add_argument("--targets", default="outputs,references",
                        help="what to align: outputs (the model's beam search), references")
    args = parser.parse_args()
    load_before = harness.load_average()
    sources, decoder = harness.sources_and_decoder(args, {})
    from t2t_revival.decode.decoder import read_text_lines

    report = {"benchmark": PROG, "output_dir": args.output_dir,
              "checkpoint": decoder.checkpoint_path, "source": args.source,
              "sentences": len(sources)}
    for kind in args.targets.split(","):
        start = time.time()
        if kind == "outputs":
            targets = decoder.translate(sources)
        else:
            targets = read_text_lines(args.reference, "reference")[:len(sources)]
        report[f"{kind}_seconds"] = round(time.time() - start, 1)
        report[kind] = measure(decoder, sources, targets)
    report["loadavg_before"], report["loadavg_after"] = load_before, harness.load_average()
    harness.print_result(report)


def measure(decoder, sources, targets) -> dict:
    """{verbatim_words, table: one row per layer and heads, best: the best row}."""
    from t2t_revival.decode.word_alignment import WordAligner

    wanted = [verbatim_pairs(s, o) for s, o in zip(sources, targets)]
    total = sum(len(w) for w in wanted)
    hp = decoder.hparams
    table = []
    for layer in range(hp.num_hidden_layers):
        for heads in ["mean", "max"] + [str(h) for h in range(hp.num_heads)]:
            start = time.time()
            lines = WordAligner(decoder, layer=layer, heads=heads).align(sources, targets)
            links = [dict((t, s) for s, t in (map(int, link.split("-"))
                                              for link in line.split())) for line in lines]
            hits = sum(links[i].get(t) == s for i, w in enumerate(wanted) for s, t in w)
            table.append({"alignment_layer": layer, "alignment_heads": heads,
                          "verbatim_aligned": round(hits / max(total, 1), 4),
                          "seconds": round(time.time() - start, 2)})
    return {"verbatim_words": total, "table": table,   # no verbatim word: no best
            "best": max(table, key=lambda row: row["verbatim_aligned"]) if total else None}


if __name__ == "__main__":
    harness.run(main, PROG)
