"""`import_marian_run`: a Marian model in Hugging Face's format -> one of our
training directories (`t2t-import --marian_dir`)."""

from __future__ import annotations

import os
from typing import Callable

from t2t_revival.errors import UserError
from t2t_revival.files.atomic_file import built_directory
from t2t_revival.marian_import.marian_dir import MarianDir
from t2t_revival.marian_import.marian_hparams import marian_hparams
from t2t_revival.marian_import.marian_weights import id_order, our_weights
from t2t_revival.run_dir.file_names import MARIAN_VOCAB_FILE
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.t2t_import.importer import check_output_dir

STEP = 0
"""The step of the imported checkpoint (`ckpt-0`): a pretrained model has no
step of ours; fine-tuning it counts from there."""


def import_marian_run(marian_dir: str, output_dir: str,
                      log: Callable[[str], None] = print) -> str:
    """Write `output_dir` from the Marian model in `marian_dir`; return its
    checkpoint prefix.

    It holds `ckpt-0` (every weight, the ids reordered: `marian_weights`),
    hparams.json (`marian_hparams`: the model's switches and the decode
    defaults of generation_config.json), the tokenizer as `MARIAN_VOCAB_FILE`
    (`MarianVocabulary`) and run.json saying where it came from. Built in a
    temporary folder beside `output_dir` and renamed into place (a killed
    import's folder is removed by the next): it appears whole or not at all.
    """
    from t2t_revival.data.marian_vocabulary import MarianVocabulary

    output_dir = os.path.abspath(output_dir)
    check_output_dir(output_dir)
    model_dir = MarianDir(marian_dir)
    source_pieces = model_dir.vocabulary()
    target_pieces = model_dir.vocabulary(target=True)
    for pieces, name in ((source_pieces, "vocab.json"), (target_pieces, "target_vocab.json")):
        missing = [p for p in ("<pad>", "</s>", "<unk>") if p not in pieces]
        if missing:
            raise UserError(f"{model_dir.file(name)} has no {', '.join(missing)}, which "
                            f"MarianTokenizer needs; copy the vocabulary of this model. "
                            f"Received: marian_dir={marian_dir!r}")
    hparams = marian_hparams(model_dir.config, model_dir.generation, len(source_pieces),
                             len(target_pieces), model_dir.path, log)
    _check_special_ids(model_dir, target_pieces)
    source_order, target_order = id_order(source_pieces), id_order(target_pieces)
    weights = our_weights(model_dir.weights(), hparams, source_order, target_order,
                          model_dir.path)
    spm = (model_dir.spm_bytes("source"), model_dir.spm_bytes("target"))
    # Every check above reads the folder alone; TensorFlow (seconds) from here.
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder
    from t2t_revival.run_dir.checkpoint_variables import make_checkpoint, model_variables
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    model = build_model(hparams)
    for name, variable in model_variables(model).items():
        value = weights.pop(name)   # every one: `our_weights` follows the hparams
        if tuple(value.shape) != tuple(variable.shape):
            raise UserError(f"config.json and the weights of {model_dir.path} disagree: "
                            f"{name} is {list(value.shape)} in the weights, "
                            f"{list(variable.shape)} by config.json. Received: "
                            f"marian_dir={marian_dir!r}")
        variable.assign(value)
    with built_directory(output_dir) as temp:   # a killed import's folder goes first
        prefix = CheckpointFolder(temp).save(make_checkpoint(model), STEP)
        vocabulary = os.path.join(temp, ".source." + MARIAN_VOCAB_FILE)
        MarianVocabulary.write(
            vocabulary, *spm, [source_pieces[i] for i in source_order],
            [target_pieces[i] for i in target_order] if model_dir.separate_vocabs else None,
            model_dir.tokenizer.get("source_lang"), model_dir.tokenizer.get("target_lang"))
        MarianVocabulary(vocabulary)   # it reads back
        record = RunRecord(problem="", hparams_set="", vocab_file=MARIAN_VOCAB_FILE,
                           vocab_source=model_dir.path, imported_from=model_dir.path)
        TrainingDirectory(temp).write_run_files(hparams, record, vocabulary)
        os.remove(vocabulary)
    log(f"imported the Marian model of {model_dir.path} into {output_dir} (beam "
        f"{hparams.beam_size}, length_penalty={hparams.length_penalty} with alpha "
        f"{hparams.alpha}, up to {hparams.extra_length} output tokens beyond the input, "
        f"from its generation_config.json)")
    return os.path.join(output_dir, os.path.basename(prefix))


def _check_special_ids(model_dir: MarianDir, target_pieces: list[str]) -> None:
    """config.json's pad and eos ids must be the target vocabulary's `<pad>`
    and `</s>` (the ones MarianTokenizer writes)."""
    for field, piece in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>")):
        value = model_dir.config.get(field)
        if value != target_pieces.index(piece):
            raise UserError(f"config.json of {model_dir.path} has {field}={value!r}, but its "
                            f"vocabulary puts {piece} at {target_pieces.index(piece)}; copy "
                            f"the config and vocabulary of one model. Received: {field}={value!r}")
