"""`t2t-query`: translate with a model served by TF Serving (REST API).

    t2t-query --server=http://localhost:8501 --model_name=t2t \\
        --sentences="A man is riding a bicycle.|Two dogs play in the snow."
    t2t-query --model_name=t2t --input_file=test.en > test.hyp.de
    echo "A dog runs." | t2t-query --model_name=t2t

Prints one translation per input line (with --scores, `score<TAB>translation`).
With --num_hypotheses=N (the export's translate_nbest signature) each line
holds the N best, tab-separated, each followed by a tab and its score with
--scores: t2t-decoder's return_beams=true(,write_beam_scores=true) lines.
Sentences go to the server in batches of --batch_size.
"""

from __future__ import annotations

import sys

from absl import flags

from t2t_revival.cli import entry_point, float_flags, path_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("server", "http://localhost:8501", "TF Serving's REST base URL.")
flags.DEFINE_string("model_name", "t2t", "The served model's name (MODEL_NAME).")
flags.DEFINE_integer("model_version", None, "A model version (default: the newest).",
                     lower_bound=1)
flags.DEFINE_string("sentences", None, "Sentences to translate, separated by '|'.")
path_flags.define_path("input_file", None,
                       "A file of sentences, one a line (default: standard input).")
flags.DEFINE_integer("batch_size", 32, "Sentences per request.", lower_bound=1)
flags.DEFINE_bool("scores", False, "Print each translation's score before it (after "
                  "each hypothesis with --num_hypotheses).")
flags.DEFINE_integer("num_hypotheses", 1, "The best N translations of each sentence "
                     "(the export's translate_nbest signature; at most its beam size).",
                     lower_bound=1)
flags.DEFINE_float("timeout", 60.0, "Seconds for each request, from connecting to the "
                   "answer's last byte: a deadline, not a wait per read.", lower_bound=0.1)
float_flags.require_finite("timeout")


def main(argv: list[str]) -> int:
    from t2t_revival.errors import UserError
    from t2t_revival.export.serving_query import query_nbest, query_server

    if FLAGS.sentences is not None and FLAGS.input_file:
        raise UserError("pass --sentences or --input_file, not both. "
                        f"Received: input_file={FLAGS.input_file!r}")
    from t2t_revival.files.text_lines import read_text_lines, text_lines_of

    if FLAGS.sentences is not None:
        sentences = FLAGS.sentences.split("|")
    elif FLAGS.input_file:
        sentences = read_text_lines(FLAGS.input_file, "input_file")
    else:
        sentences = text_lines_of(sys.stdin.buffer.read(), "the standard input",
                                  "input=stdin")
    for start in range(0, len(sentences), FLAGS.batch_size):
        batch = sentences[start:start + FLAGS.batch_size]
        if FLAGS.num_hypotheses > 1:
            for hypotheses in query_nbest(FLAGS.server, FLAGS.model_name, batch,
                                          FLAGS.num_hypotheses, version=FLAGS.model_version,
                                          timeout=FLAGS.timeout):
                print("\t".join(f"{text}\t{score:.4f}" if FLAGS.scores else text
                                for text, score in hypotheses), flush=True)
            continue
        for text, score in query_server(FLAGS.server, FLAGS.model_name, batch,
                                        version=FLAGS.model_version, timeout=FLAGS.timeout):
            print(f"{score:.4f}\t{text}" if FLAGS.scores else text, flush=True)
    return 0


def run() -> None:
    entry_point.run(main, prog="t2t-query")


if __name__ == "__main__":
    run()
