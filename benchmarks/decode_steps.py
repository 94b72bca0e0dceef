"""How much of what beam search computes is for sentences still searching,
and how many steps a sentence takes for its tokens. Prints one JSON line.

    python -m benchmarks.decode_steps --output_dir=t2t_train/tiny \\
        --checkpoint_path=t2t_train/tiny/averaged/ckpt-2000 --batch_size=32

Counts, not time: `Decoder.translate` with the XLA search's batches (its
rows: a partial batch filled up by repeating its last input) run eagerly
(`tf.config.run_functions_eagerly`: the same search, uncompiled), so that
every step of the staged loop (`beam_search`'s stages of halving batch
size) is seen by the search's observer (`Decoder.on_beam_step`): how many
batch elements the step ran (`stage_steps`: steps by stage size) and how
many of them were still searching.
`searching_share` is the share of the computed element-steps that an
element still searching needed (1 - it is the most a search that refilled
finished slots could save); `steps_per_sentence` (those element-steps per
sentence, a partial batch's repeated rows included) against
`target_tokens_per_sentence` (pieces with EOS, as `decode_speed` counts
them) is how far the search goes on after a sentence's first finished
hypothesis. Slow (eager: about 0.15 s a step of the Multi30k recipe model
on 2 cores): a few hundred sentences at batch 32, tens at batch 1.
"""

import collections
import threading

from benchmarks import harness

PROG = "decode_steps"


def step_counter(counts: collections.Counter):
    """A beam search observer (`beam_search`'s `on_step`) that counts every
    step into `counts`: `steps`, `stage_steps_<elements>`, `element_steps`
    (batch elements run) and `searching_element_steps` (of them, still
    searching)."""
    from keras import ops

    lock = threading.Lock()  # the first batch of each program runs in a thread

    def count(state):
        elements = state["searching"].shape[0]
        searching = int(ops.sum(ops.cast(state["searching"], "int32")))
        with lock:
            counts["steps"] += 1
            counts[f"stage_steps_{elements}"] += 1
            counts["element_steps"] += elements
            counts["searching_element_steps"] += searching
    return count


def main():
    parser = harness.argument_parser(PROG, __doc__)
    harness.add_model_arguments(parser)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_sentences", type=int, default=320)
    parser.add_argument("--decode_hparams", default="",
                        help="more decode hparams, e.g. early_stop=best_finished")
    args = parser.parse_args()

    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.errors import UserError

    def refuse_without_beams(beam_size: int | None, sampling: bool) -> None:
        if sampling or (beam_size is not None and beam_size < 2):
            raise UserError("decode_steps counts beam search's stages: it needs beam_size >= 2 "
                            f"and no sampling. Received: --decode_hparams={args.decode_hparams!r}")

    # What --decode_hparams asks for is refused before the model loads; the
    # run's own default beam, after.
    asked = parse_decode_hparams(args.decode_hparams)
    refuse_without_beams(asked.get("beam_size"), asked.get("sampling", False))
    import tensorflow as tf

    sources, decoder = harness.sources_and_decoder(
        args, {"batch_size": args.batch_size, "xla": True, "parallel_batches": 1, **asked})
    dhp = decoder.decode_hparams
    refuse_without_beams(dhp.beam_size, dhp.sampling)
    counts = collections.Counter()
    decoder.on_beam_step = step_counter(counts)
    tf.config.run_functions_eagerly(True)
    try:
        outputs = decoder.translate(sources)
    finally:
        tf.config.run_functions_eagerly(False)
    tokens = harness.target_tokens(decoder.vocab, [o.split("\t", 1)[0] for o in outputs])
    stages = {int(k.rsplit("_", 1)[1]): v for k, v in counts.items()
              if k.startswith("stage_steps_")}
    harness.print_result({
        "benchmark": "decode_steps", "output_dir": args.output_dir,
        "checkpoint_path": args.checkpoint_path, "batch_size": args.batch_size,
        "beam_size": dhp.beam_size, "decode_hparams": args.decode_hparams,
        "sentences": len(sources), "steps": counts["steps"],
        "stage_steps": dict(sorted(stages.items(), reverse=True)),
        "element_steps": counts["element_steps"],
        "searching_element_steps": counts["searching_element_steps"],
        "searching_share": round(counts["searching_element_steps"]
                                 / max(counts["element_steps"], 1), 4),
        "target_tokens": tokens,
        "target_tokens_per_sentence": round(tokens / len(sources), 2),
        "steps_per_sentence": round(counts["searching_element_steps"] / len(sources), 2),
        "machine": harness.describe(tensorflow=tf.__version__)})


if __name__ == "__main__":
    harness.run(main, PROG)
