"""`t2t-parse-eval`: EVALB (COLLINS.prm) labelled bracketing F1 of predicted trees.

    t2t-parse-eval --gold=wsj23.mrg --predicted=decoded.txt [--json]

Files hold bracketed trees, one per line or `.mrg` style over several lines;
predicted lines may also be linearized trees (`(S (NP NNP )NP ... )S`), which
are rebuilt over the gold sentence's words. Malformed predictions are repaired
and counted. See `t2t_revival/parsing/evalb.py` for the scoring rules.
"""

from __future__ import annotations

import json

from absl import flags

from t2t_revival.cli import entry_point, path_flags
from t2t_revival.errors import UserError
from t2t_revival.parsing.evalb import evaluate_files

FLAGS = flags.FLAGS

path_flags.define_path("gold", None, "Gold trees: a .mrg file or one bracketed tree per line.")
path_flags.define_path("predicted", None,
                       "Predicted trees, one per gold tree: bracketed (one per line or "
                       ".mrg) or linearized, one per line.")
flags.DEFINE_bool("json", False, "Print the counts and scores as one JSON object.")


def main(argv: list[str]) -> int:
    for name in ("gold", "predicted"):
        if not getattr(FLAGS, name):
            raise UserError(f"--{name} is required: the file of {name} trees. "
                            f"Received: --{name}={getattr(FLAGS, name)!r}")
    score = evaluate_files(FLAGS.gold, FLAGS.predicted)
    if FLAGS.json:
        print(json.dumps(score.to_dict(), sort_keys=True))
    else:
        print(score.summary())
    return 0


def run() -> None:
    entry_point.run(main, prog="t2t-parse-eval")


if __name__ == "__main__":
    run()
