"""`t2t-datagen`: generate a problem's vocabulary and TFRecords of token ids."""

from __future__ import annotations

import os

from absl import flags, logging

from t2t_revival import registry
from t2t_revival.cli import entry_point, path_flags, tensor2tensor_flags
from t2t_revival.data.tfds_translate_problem import TfdsTranslateProblem
from t2t_revival.errors import UserError

FLAGS = flags.FLAGS

path_flags.define_usr_dir_flag(__name__)
flags.DEFINE_string("problem", "translate_ende_multi30k", "Registered problem name.")
path_flags.define_path("data_dir", None, "Where to write the vocabulary and TFRecords.")
path_flags.define_path("tmp_dir", None,
                       "Where the raw corpora are (or are downloaded to), e.g. "
                       "../shared/data/multi30k for translate_ende_multi30k.")
flags.DEFINE_bool("download", True,
                  "Download missing corpora into --tmp_dir (short timeout); "
                  "--nodownload only reports what is missing.")
path_flags.define_path("tfds_data_dir", None,
                       "For a TFDS problem (translate_*_tfds): the TFDS data_dir the dataset "
                       "was prepared in (default: TFDS's, ~/tensorflow_datasets); "
                       "--tmp_dir is not needed then.")
flags.DEFINE_integer("num_workers", None,
                     "Processes that encode and write the shards (default: the cores "
                     "this process may use). The files are the same for any number.",
                     lower_bound=1)


tensor2tensor_flags.define(tensor2tensor_flags.DATAGEN, __name__)


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(tensor2tensor_flags.DATAGEN)
    path_flags.import_usr_dir()
    problem_cls = registry.problems.get(FLAGS.problem)
    from_tfds = issubclass(problem_cls, TfdsTranslateProblem)
    for name in ("data_dir",) if from_tfds else ("data_dir", "tmp_dir"):
        if not getattr(FLAGS, name):
            raise UserError(f"--{name} is required. Received: --{name}=None")
    if FLAGS.tfds_data_dir and not from_tfds:
        raise UserError(f"--tfds_data_dir is for the TFDS problems (translate_*_tfds); "
                        f"{FLAGS.problem} reads its corpora from --tmp_dir. "
                        f"Received: --tfds_data_dir={FLAGS.tfds_data_dir!r}")
    path_flags.check_directory("data_dir", FLAGS.data_dir, writable=True)
    os.makedirs(FLAGS.data_dir, exist_ok=True)   # as tensor2tensor's datagen, for any problem
    if FLAGS.tmp_dir:
        path_flags.check_directory("tmp_dir", FLAGS.tmp_dir)
    logging.set_verbosity(logging.INFO)
    kwargs = {"tfds_data_dir": FLAGS.tfds_data_dir} if from_tfds else {}
    problem = problem_cls(download=FLAGS.download, num_workers=FLAGS.num_workers, **kwargs)
    problem.locate_data(FLAGS.data_dir, FLAGS.tmp_dir or "")
    problem.generate_data(FLAGS.data_dir, FLAGS.tmp_dir or "")
    print(f"{problem.name}: data in {FLAGS.data_dir}. Next, train on it: t2t-trainer "
          f"--problem={problem.name} --hparams_set=SET --data_dir={FLAGS.data_dir} "
          f"--output_dir=DIR (t2t-trainer --registry_help lists the sets).")
    return 0


def run() -> None:
    entry_point.run(main, prog=tensor2tensor_flags.DATAGEN)


if __name__ == "__main__":
    run()
