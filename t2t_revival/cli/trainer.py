"""`t2t-trainer`: train a registered model on a registered problem."""

from __future__ import annotations

from absl import flags

from t2t_revival import registry
from t2t_revival.cli import common
from t2t_revival.hparams import resolve

FLAGS = flags.FLAGS

flags.DEFINE_bool("registry_help", False,
                  "Print every registered problem, model and hparam set, then exit.")
flags.DEFINE_string("problem", "translate_ende_multi30k", "Registered problem name.")
flags.DEFINE_string("model", "transformer", "Registered model name.")
flags.DEFINE_string("hparams_set", "transformer_base", "Registered hparam set name.")
flags.DEFINE_string("hparams", "",
                    'Overrides of the hparam set, e.g. "num_hidden_layers=2,dropout=0.3,'
                    'bucket_boundaries=[8,16,32]". batch_size is tokens per replica.')


def main(argv: list[str]) -> int:
    if FLAGS.registry_help:
        print(registry.help_text())
        return 0
    registry.load_all()
    hp = resolve(FLAGS.hparams_set, FLAGS.hparams)
    print(hp.to_json(), end="")
    return 0


def run() -> None:
    common.run(main, prog="t2t-trainer")


if __name__ == "__main__":
    run()
