"""`import_t2t_run`: a tensor2tensor run -> one of our training directories."""

from __future__ import annotations

import os
from typing import Callable

from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.errors import UserError
from t2t_revival.files.atomic_file import built_directory
from t2t_revival.run_dir.file_names import T2T_VOCAB_FILE, checkpoint_step
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.t2t_import.hparams_from_t2t import check_t2t_sizes, hparams_from_t2t, modality
from t2t_revival.t2t_import.t2t_run_dir import T2TRunDir
from t2t_revival.t2t_import.weight_map import NOT_MODEL, our_weights


IMPORTED_FLAGS = ("problem", "model", "hparams_set", "hparams")
"""The T2T run's flags.txt flags kept in run.json (`RunRecord.imported_flags`):
tensor2tensor's decode scripts pass them, and the decoder takes them as the run's."""


def read_t2t_vocabulary(vocab_file: str) -> T2TSubwordVocabulary:
    """The SubwordTextEncoder vocabulary `vocab_file`, checked as the decoder
    reads it (UTF-8, one quoted subtoken a line, `<pad>` and `<EOS>` first,
    every character spelled): a UserError naming the file and what is wrong,
    before any work (a SentencePiece `.vocab` of the right size would import,
    then fail every decode)."""
    try:
        return T2TSubwordVocabulary(vocab_file)
    except UserError as e:
        if not os.path.isfile(vocab_file):
            raise   # (missing, a folder: said as such)
        raise UserError(f"--vocab_file is not a tensor2tensor SubwordTextEncoder vocabulary "
                        f"(vocab.<problem>.<size>.subwords in the run's data_dir): {e}"
                        ) from None


def check_output_dir(output_dir: str) -> None:
    """A UserError unless `output_dir` is new or an empty folder, in a folder
    that is one (or can be made) and can be written (both importers')."""
    ancestor = os.path.dirname(os.path.abspath(output_dir))
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor) or not os.access(ancestor, os.W_OK | os.X_OK):
        why = "is a file" if not os.path.isdir(ancestor) else "cannot be written"
        raise UserError(f"{ancestor} {why}, so t2t-import cannot make {output_dir} there; "
                        f"pass an --output_dir in a writable folder. "
                        f"Received: output_dir={output_dir!r}")
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise UserError(f"{output_dir} already exists and is not empty (it may hold a run); "
                        f"t2t-import writes a new run directory: pass another --output_dir, "
                        f"or remove that one. Received: output_dir={output_dir!r}")


def _assign(model, weights: dict, prefix: str) -> None:
    """Set every variable of `model` from `weights` (our paths); a UserError
    naming the variable when T2T's shape differs from the one its
    hparams.json gives, or when a weight of ours has no T2T variable."""
    from t2t_revival.run_dir.checkpoint_variables import model_variables

    variables = model_variables(model)
    for name, variable in variables.items():
        if name not in weights:
            raise UserError(f"the tensor2tensor checkpoint {prefix} has no variable for our "
                            f"{name} {list(variable.shape)}; it was not written by the "
                            f"Transformer its hparams.json describes. Received: "
                            f"checkpoint={prefix!r}")
        if tuple(weights[name].shape) != tuple(variable.shape):
            raise UserError(f"hparams.json and the checkpoint {prefix} disagree: {name} is "
                            f"{list(weights[name].shape)} in the checkpoint, "
                            f"{list(variable.shape)} by hparams.json; pass the hparams.json "
                            f"of the run that wrote it. Received: variable={name!r}")
        variable.assign(weights[name])


def import_t2t_run(t2t_dir: str, vocab_file: str, output_dir: str,
                   checkpoint: str | None = None, target_space_id: int = 0,
                   log: Callable[[str], None] = print) -> list[str]:
    """Write `output_dir`, a training directory of ours, from the tensor2tensor
    run `t2t_dir` and its SubwordTextEncoder vocabulary `vocab_file`; return
    its checkpoint prefixes.

    It holds our checkpoints `ckpt-<T2T step>` of the T2T checkpoint(s)
    `checkpoint` means (`T2TRunDir.resolve`: the latest, "all", or one),
    hparams.json (`hparams_from_t2t`), the vocabulary as `T2T_VOCAB_FILE` and
    run.json saying where it came from. It is built in a temporary folder beside
    `output_dir` (`atomic_file.built_directory`: a stopped import's is removed as it
    stops, a killed one's by the next) and renamed into place: it appears whole or
    not at all. Every user error (an `output_dir` that exists, a vocabulary that is
    not a SubwordTextEncoder's or of another size, not a T2T run, a damaged
    `checkpoint` index, hparams.json without its sizes, a missing or truncated
    shard, hparams.json and the checkpoint disagreeing, an unsupported hparam or
    variable, a full disk) is a UserError before anything is left behind; those that
    need no checkpoint read come before TensorFlow's import. The T2T run's
    --problem, --model, --hparams_set and --hparams (flags.txt) are kept in run.json
    (`RunRecord.imported_flags`).
    """
    output_dir = os.path.abspath(output_dir)
    # What a user can get wrong is said before TensorFlow's import (seconds).
    check_output_dir(output_dir)
    vocabulary = read_t2t_vocabulary(vocab_file)
    run = T2TRunDir(t2t_dir)
    check_t2t_sizes(run.hparams, os.path.join(run.path, "hparams.json"))
    prefixes = run.resolve(checkpoint)

    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder
    from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    first = run.read_variables(prefixes[0])
    hparams = hparams_from_t2t(run.hparams, {k: v.shape for k, v in first.items()},
                               target_space_id)
    vocab_size = modality({k: v.shape for k, v in first.items()})[0]
    if vocabulary.vocab_size != vocab_size:
        raise UserError(f"the vocabulary {vocab_file} has {vocabulary.vocab_size} entries but "
                        f"the checkpoint's modality has {vocab_size}; pass the vocabulary the "
                        f"run was trained with. Received: vocab_file={vocab_file!r}")
    model = build_model(hparams)
    needed = len(prefixes) * sum(v.nbytes for k, v in first.items() if not NOT_MODEL.match(k))
    with built_directory(output_dir, needed) as temp:   # a killed import's folder goes first
        folder = CheckpointFolder(temp)
        saved = []
        for prefix in prefixes:
            variables = first if prefix == prefixes[0] else run.read_variables(prefix)
            _assign(model, our_weights(variables, hparams.shared_embedding,
                                         hparams.norm_type), prefix)
            saved.append(folder.save(make_checkpoint(model), checkpoint_step(prefix) or 0))
        record = RunRecord(problem="", hparams_set="", vocab_file=T2T_VOCAB_FILE,
                           vocab_source=os.path.abspath(vocab_file),
                           imported_from=", ".join(os.path.abspath(p) for p in prefixes),
                           imported_flags={k: run.flags[k] for k in IMPORTED_FLAGS
                                           if k in run.flags})
        TrainingDirectory(temp).write_run_files(hparams, record, vocab_file)
    log(f"imported {len(prefixes)} tensor2tensor checkpoint(s) of {run.path} into "
        f"{output_dir} with target_space_id={target_space_id} (--target_space_id; T2T 1.15 "
        f"text problems use 0); T2T's Adam slots (training/...) are not imported (not needed)")
    return [os.path.join(output_dir, os.path.basename(p)) for p in saved]
