"""`--warm_start_from`: a new run's model weights from another run's checkpoint.

Fine-tuning: only the model weights are read; the optimizer state and the
step start fresh, so the learning-rate schedule (warmup included) starts
again. The checkpoint must fit the new run: the same vocabulary (the source
run's vocabulary file, byte for byte, when its training directory is known),
the same architecture (the source run's hparams.json: `ARCHITECTURE`, so
that 4 heads are not loaded from a 2-head run whose shapes happen to fit),
and the same variables with the same shapes, every variable of the
checkpoint's model used (a 1-layer run does not silently drop a 2-layer
run's second layer); the first mismatch is a UserError naming it.

With `vocab=UPDATE` (`--warm_start_vocab=update`) the vocabularies may
differ: the rows of the pieces both have are kept, the others start as
`vocabulary_update` documents, and one line says how many rows were kept,
dropped and added; the vocabulary sizes may then differ, nothing else.
"""

from __future__ import annotations

import filecmp
import os

import tensorflow as tf

from t2t_revival.errors import UserError
from t2t_revival.run_dir.checkpoint_folder import (CORRUPT_RESTORE_ERRORS, quiet,
                                                   restore_model_weights)
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.checkpoint_variables import model_variables
from t2t_revival.settings.hparams import HParams
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.train.vocabulary_update import (PIECES, RANDOM, VOCAB_AXES, VOCAB_HPARAMS,
                                                 load_with_new_vocabulary)

SAME = "same"
"""`--warm_start_vocab=same`, the default: the source run's vocabulary, byte for byte."""
UPDATE = "update"
"""`--warm_start_vocab=update`: another vocabulary, the shared pieces' rows kept."""
UPDATE_RANDOM = "update_random"
"""`--warm_start_vocab=update_random`: as UPDATE, the new rows as a run from
scratch starts them (a lower dev loss after the same updates with UPDATE's
mean of pieces: benchmarks/RESULTS.md, vocabulary_update)."""
VOCAB_CHOICES = (SAME, UPDATE, UPDATE_RANDOM)

_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_MODEL = "model/"

# The hparams that make the model what it is: another value is another model,
# whether or not its variables' shapes fit.
ARCHITECTURE = ("num_hidden_layers", "num_encoder_layers", "num_decoder_layers", "num_heads",
                "d_model", "d_ff", "decoder_d_ff", "d_k", "d_v", "ffn_activation",
                "attention_bias", "final_logits_bias", "norm_type", "position_encoding",
                "shared_embedding", "tie_output_projection", "vocab_size",
                "target_vocab_size")


def _architecture(hparams: HParams) -> dict:
    """`ARCHITECTURE`'s values, those whose 0 means another's resolved (d_k and
    d_v: d_model / h; the stacks' depths, the decoder's FFN width, the target
    vocabulary)."""
    values = {name: getattr(hparams, name) for name in ARCHITECTURE}
    for name in ("d_k", "d_v"):
        values[name] = values[name] or hparams.d_model // hparams.num_heads
    values.update(num_encoder_layers=hparams.encoder_layers,
                  num_decoder_layers=hparams.decoder_layers,
                  decoder_d_ff=hparams.decoder_ffn_width,
                  target_vocab_size=hparams.output_vocab_size)
    if hparams.position_encoding == "learned":   # a learned position per row
        values["max_length"] = hparams.max_length
    return values


def resolve_checkpoint(source: str, log=print) -> tuple[str, TrainingDirectory | None]:
    """(checkpoint prefix, the training directory that wrote it or None).

    `source` is a checkpoint prefix (`run/ckpt-300`, `run/averaged/ckpt-300`)
    or a training directory, meaning its newest intact checkpoint (the run
    directory's choice, `checkpoint_to_restore`; each one skipped said
    through `log`). The run is the one `TrainingDirectory.of_checkpoint`
    names, where it has its run.json (else only the shapes can be checked).
    """
    source = os.path.abspath(os.path.expanduser(source))
    if os.path.isdir(source):
        directory = TrainingDirectory(source)
        if not directory.checkpoints.intact(quiet) and directory.checkpoints.none_intact() is None:
            raise UserError(f"--warm_start_from names {source}, which holds no checkpoint; "
                            f"name a training directory with checkpoints or a checkpoint "
                            f"prefix (DIR/ckpt-N). Received: warm_start_from={source!r}")
        return directory.checkpoint_to_restore(None, log), directory
    if not os.path.isfile(source + ".index"):
        raise UserError(f"--warm_start_from names no checkpoint ({source}.index is missing); "
                        f"pass a checkpoint prefix (DIR/ckpt-N) or a training directory. "
                        f"Received: warm_start_from={source!r}")
    directory = TrainingDirectory.of_checkpoint(source)
    return source, directory if directory and os.path.isfile(directory.run_file) else None


def check_vocabulary(source: TrainingDirectory, vocab_file: str, vocab: str = SAME) -> str:
    """The source run's vocabulary must be this run's (the same ids for the
    same pieces), unless `vocab` is UPDATE; returns its path where it
    differs (UPDATE), else ""."""
    theirs = source.vocabulary_path(source.read_run_record())
    if not os.path.isfile(theirs):
        raise UserError(f"the vocabulary {theirs} of the --warm_start_from run is missing, "
                        f"so its ids cannot be checked against this run's. "
                        f"Received: warm_start_from={source.path!r}")
    if filecmp.cmp(theirs, vocab_file, shallow=False):
        return ""
    if vocab != SAME:
        return theirs
    raise UserError(
        f"the --warm_start_from run's vocabulary {theirs} differs from this run's "
        f"{vocab_file}, so its embeddings would mean other pieces; generate the new "
        f"data with the same vocabulary (translate_plain_text: \"vocab\": \"{theirs}\" "
        f"in corpora.json), or pass --warm_start_vocab=update to keep the rows of the "
        f"pieces both vocabularies have and start the others anew. "
        f"Received: warm_start_from={source.path!r}")


def check_architecture(source: TrainingDirectory, hparams: HParams,
                       vocabulary_update: bool = False) -> None:
    """The source run's hparams.json describes the model `hparams` do (but
    for the vocabulary sizes in a `vocabulary_update`)."""
    if not os.path.isfile(source.hparams_file):
        return   # the variables alone are compared (`check_shapes`)
    theirs, ours = _architecture(source.read_hparams()), _architecture(hparams)
    free = VOCAB_HPARAMS if vocabulary_update else ()
    differences = [f"{name} {theirs.get(name)} there and {ours.get(name)} here"
                   for name in ours if theirs.get(name) != ours.get(name) and name not in free]
    if differences:
        raise UserError(
            f"the --warm_start_from run {source.path} has another architecture: "
            f"{', '.join(differences)} ({source.hparams_file}); warm-start only from a "
            f"run of the same model shape: pass its values in --hparams, or train "
            f"without --warm_start_from. Received: warm_start_from={source.path!r}")


def check_shapes(model, checkpoint_path: str, vocabulary_update: bool = False) -> None:
    """Every weight of `model` is in the checkpoint with the same shape (but
    along the vocabulary axis of `VOCAB_AXES` in a `vocabulary_update`), and
    every model variable of the checkpoint is one of them."""
    stored = dict(tf.train.list_variables(checkpoint_path))
    names = set()
    for key, var in model_variables(model).items():
        # tf.train.Checkpoint escapes "." in a dict key as "..".
        name = f"{_MODEL}{key.replace('.', '..')}{_SUFFIX}"
        names.add(name)
        if name not in stored:
            raise UserError(
                f"the --warm_start_from checkpoint {checkpoint_path} has no variable {key} "
                f"(this run's shape {list(var.shape)}); it was trained with another model "
                f"or hparams: warm-start from a run of the same --hparams_set/--hparams "
                f"shape. Received: warm_start_from={checkpoint_path!r}")
        theirs, ours = list(stored[name]), list(var.shape)
        if vocabulary_update and key in VOCAB_AXES and len(theirs) == len(ours):
            axis = VOCAB_AXES[key][1]
            theirs[axis] = ours[axis]
        if theirs != ours:
            raise UserError(
                f"the --warm_start_from checkpoint {checkpoint_path} does not fit this run: "
                f"variable {key} has shape {list(stored[name])} there and "
                f"{list(var.shape)} here; use the source run's model shape (its "
                f"hparams.json) and vocabulary. Received: warm_start_from={checkpoint_path!r}")
    unused = sorted(name[len(_MODEL):-len(_SUFFIX)].replace("..", ".") for name in stored
                    if name.startswith(_MODEL) and name.endswith(_SUFFIX) and name not in names)
    if unused:
        raise UserError(
            f"the --warm_start_from checkpoint {checkpoint_path} holds {len(unused)} model "
            f"variable(s) this run has no place for (first: {unused[0]}); it was trained "
            f"with a larger model (more layers?), whose weights would be dropped: use "
            f"the source run's model shape (its hparams.json). "
            f"Received: warm_start_from={checkpoint_path!r}")


def _unreadable(checkpoint_path: str, reason: str) -> UserError:
    return UserError(f"the --warm_start_from checkpoint {checkpoint_path} cannot be read: "
                     f"{reason}; name another checkpoint of that run (DIR/ckpt-N), or its "
                     f"training directory for its newest intact checkpoint. "
                     f"Received: warm_start_from={checkpoint_path!r}")


def warm_start(model, source: str, vocab_file: str, log=print, vocab: str = SAME) -> str:
    """Load `source`'s model weights into `model` after checking that they fit.

    Args:
        model: the new run's built model.
        source: a checkpoint prefix or a training directory (`--warm_start_from`).
        vocab_file: this run's vocabulary file.
        log: a print-like callable.
        vocab: SAME (the source run's vocabulary is required), UPDATE
            (another one is carried over piece by piece: `vocabulary_update`)
            or UPDATE_RANDOM (the same, new rows as a fresh run has them).

    Returns the checkpoint prefix read.
    """
    checkpoint_path, directory = resolve_checkpoint(source, log)
    theirs = ""
    if directory is not None:
        theirs = check_vocabulary(directory, vocab_file, vocab)
        check_architecture(directory, model.hparams, vocabulary_update=bool(theirs))
    elif vocab != SAME:
        raise UserError(
            f"--warm_start_vocab={vocab} needs the vocabulary of the run warm-started from, "
            f"and {checkpoint_path} has no run.json beside it to name it; warm-start from "
            f"a checkpoint in its training directory. "
            f"Received: warm_start_from={checkpoint_path!r}")
    else:
        log(f"Warning: no run.json beside {checkpoint_path}, so its vocabulary cannot be "
            f"checked against {vocab_file}; only the shapes are.")
    if vocab != SAME and not theirs:
        log(f"--warm_start_vocab={vocab}: {vocab_file} is the vocabulary of the run "
            f"warm-started from, so every row is kept.")
    try:
        check_shapes(model, checkpoint_path, vocabulary_update=bool(theirs))
        if theirs:
            init = RANDOM if vocab == UPDATE_RANDOM else PIECES
            load_with_new_vocabulary(model, checkpoint_path, theirs, vocab_file, init, log)
        else:
            restore_model_weights(model, checkpoint_path)
    except CORRUPT_RESTORE_ERRORS as e:   # listing the variables of a damaged index
        raise _unreadable(checkpoint_path, CorruptCheckpointError.on_restore(
            checkpoint_path, e).reason) from None
    except CorruptCheckpointError as e:
        raise _unreadable(checkpoint_path, e.reason) from None
    log(f"Warm-started the model weights from {checkpoint_path} (the optimizer, the step "
        f"and the learning-rate schedule start fresh).")
    return checkpoint_path
