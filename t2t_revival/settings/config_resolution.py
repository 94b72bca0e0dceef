"""The door: command-line strings resolved, once, into the typed configs.

The library takes typed objects (`HParams`, `DecodeHParams`, `TrainConfig`)
and parses no flag string. `t2t-trainer` (and a test or benchmark that
starts a run as it would) resolves its flags here, in one place, in
tensor2tensor's precedence: defaults < --hparams_set < problem < --hparams
(and `--mixed_precision`, which overrides the hparam of that name).

    config = resolve_train_config(problem="translate_ende_multi30k",
                                  output_dir="t2t_train/tiny", data_dir="t2t_data",
                                  hparams_set="transformer_tiny",
                                  hparams="num_hidden_layers=2", train_steps=2000)
"""

from __future__ import annotations

import os
from typing import Any

from t2t_revival import registry
from t2t_revival.settings.decode_hparams import DecodeHParams, parse_decode_hparams
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams, resolve
from t2t_revival.run_dir.file_names import HPARAMS_FILE
from t2t_revival.settings.train_config import DEFAULT_TMP_DIR, TrainConfig


def problem_for(name: str, data_dir: str, tmp_dir: str = ""):
    """The registered problem `name`, its data located (`Problem.locate_data`:
    a problem of your own corpora reads their corpora.json here); an unknown
    name is a UserError listing the registered ones."""
    problem = registry.problems.get(name)()
    problem.locate_data(data_dir, tmp_dir or DEFAULT_TMP_DIR)
    return problem


def warm_start_hparams(source: str) -> HParams:
    """The hparams.json of the run `source` names: a training directory, or
    a checkpoint prefix in it, its `averaged/` or its `best/` (what
    --warm_start_from takes; `TrainingDirectory.of_checkpoint`). A UserError
    when there is none."""
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    source = os.path.abspath(os.path.expanduser(source))
    directory = TrainingDirectory.of_checkpoint(source)
    if directory is not None and os.path.isfile(directory.hparams_file):
        return directory.read_hparams()
    raise UserError(f"--warm_start_from {source} has no {HPARAMS_FILE} beside it to take the "
                    f"model's hparams from; give --hparams_set (and --hparams) of the model "
                    f"it holds. Received: warm_start_from={source!r}")


def resolve_train_config(*, problem: str, output_dir: str, data_dir: str,
                         hparams_set: str = "transformer_base", hparams: str = "",
                         hparams_from: str = "",
                         mixed_precision: str = "", eval_decode_hparams: str = "",
                         model: str = "transformer", tmp_dir: str = "",
                         **options: Any) -> TrainConfig:
    """The `TrainConfig` of t2t-trainer's flags.

    Args:
        problem, output_dir, data_dir, hparams_set, model, tmp_dir: the flags.
        hparams_from: a run (directory or checkpoint prefix) whose
            hparams.json takes the hparam set's place (fine-tuning it);
            `hparams_set` is then recorded as "". With
            `warm_start_vocab` "update" its target_vocab_size is dropped (the
            new vocabulary's size, the problem's, serves both sides).
        hparams: the `--hparams` overrides text.
        mixed_precision: `--mixed_precision` ("" keeps the set's).
        eval_decode_hparams: the `--eval_decode_hparams` overrides text.
        options: the other `TrainConfig` fields, typed.

    Raises:
        UserError: an unknown problem, model or hparam set; an `eval_metric`
            the problem cannot score with; a malformed or out-of-range
            `hparams` or `eval_decode_hparams`.
    """
    located = problem_for(problem, data_dir, tmp_dir)
    located.check_eval_metric(options.get("eval_metric", ""))   # a UserError naming the choices
    registry.models.check(model)   # an unknown name is a UserError here, before Keras loads
    overrides = ",".join(p for p in (hparams, mixed_precision and
                                     f"mixed_precision={mixed_precision}") if p)
    base = warm_start_hparams(hparams_from) if hparams_from else None
    if base is not None:
        hparams_set = ""
        if options.get("warm_start_vocab", "same") != "same":
            # The new vocabulary's sizes (the problem's vocab_size), one for both
            # sides: a source run's own target size is its old vocabulary's.
            base = base.replace(target_vocab_size=0)
    resolved = resolve(hparams_set, overrides, located, base=base)
    decode = DecodeHParams.from_hparams(resolved, parse_decode_hparams(eval_decode_hparams)) \
        if eval_decode_hparams else None
    return TrainConfig(problem=problem, output_dir=output_dir, data_dir=data_dir,
                       hparams=resolved, hparams_set=hparams_set, hparams_overrides=overrides,
                       eval_decode_hparams=decode, model=model,
                       tmp_dir=tmp_dir or DEFAULT_TMP_DIR, **options)
