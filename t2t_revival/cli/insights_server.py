"""`t2t-insights-server`: T2T Insights, a web page that shows what a model did
with a sentence: its translation and n-best list, the beam search as a graph,
every layer's and head's attention, the tokenization, and two runs side by side.

    t2t-insights-server --output_dir=t2t_train/base            # one run
    t2t-insights-server --output_dir=runs/a --label=a --output_dir=runs/b --label=b
    t2t-insights-server --configuration=configuration.json    # tensor2tensor's JSON

then open http://127.0.0.1:8010/ (docs/insights.md). It serves on 127.0.0.1
unless --host says otherwise: the page runs any sentence through the models,
so expose it only where that is meant.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

from absl import flags

from t2t_revival.cli import entry_point, path_flags

FLAGS = flags.FLAGS

path_flags.define_path("configuration", None,
                       "tensor2tensor's InsightConfiguration JSON: the runs to serve "
                       "(docs/insights.md), instead of --output_dir.")
flags.DEFINE_multi_string("output_dir", [], "A training directory to serve (repeatable).")
flags.DEFINE_multi_string("label", [], "The label of each --output_dir, in order "
                          "(default: the folder's name).")
flags.DEFINE_string("host", "127.0.0.1", "The address to serve on (0.0.0.0: every one).")
flags.DEFINE_integer("port", 8010, "The port to serve on (0: any free one).",
                     lower_bound=0, upper_bound=65535)
flags.DEFINE_string("decode_hparams", "", "Decode settings of every run, over its "
                    "hparams (as t2t-decoder's); the page changes them per query.")
path_flags.define_path("static_path", None, "Serve the page from this folder instead "
                       "of the package's (index.html, insights.js, insights.css).")


def main(argv: list[str]) -> int:
    from t2t_revival.errors import UserError
    from t2t_revival.insights.insights_configuration import InsightsConfiguration

    if bool(FLAGS.configuration) == bool(FLAGS.output_dir):
        raise UserError("pass --configuration=FILE or --output_dir=RUN (repeatable), one "
                        "of the two")
    configuration = InsightsConfiguration.from_file(FLAGS.configuration, FLAGS.decode_hparams) \
        if FLAGS.configuration else InsightsConfiguration.from_output_dirs(
            FLAGS.output_dir, FLAGS.label, FLAGS.decode_hparams)
    from werkzeug.serving import make_server

    from t2t_revival.insights.insights_app import STATIC_DIR, insights_app
    from t2t_revival.insights.run_insights import RunInsights

    static = FLAGS.static_path or STATIC_DIR
    if not os.path.isfile(os.path.join(static, "index.html")):
        raise UserError(f"--static_path: no index.html in {static}; point it at a folder "
                        "holding the page's index.html, insights.js and insights.css")
    runs = {}
    for served in configuration.runs:
        print(f"Loading {served.label} from {served.output_dir} ...", file=sys.stderr, flush=True)
        runs[served.label] = RunInsights(served.label, served.output_dir,
                                         served.source_language, served.target_language,
                                         served.decode_hparams, served.checkpoint_path)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:   # werkzeug says a taken port in lines of its own and exits: asked first here
        socket.create_server((FLAGS.host, FLAGS.port)).close()
        server = make_server(FLAGS.host, FLAGS.port, insights_app(runs, configuration, static),
                             threaded=True)
    except OSError as e:
        raise UserError(f"cannot serve on {FLAGS.host}:{FLAGS.port} ({e.strerror or e}); "
                        "pick another --port or --host") from None
    print(f"T2T Insights serves {len(runs)} run{'s' if len(runs) != 1 else ''} at "
          f"http://{FLAGS.host}:{server.server_port}/ (Ctrl+C stops it)",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def run() -> None:
    entry_point.run(main, prog="t2t-insights-server")


if __name__ == "__main__":
    run()
