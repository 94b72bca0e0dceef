"""`Ensemble`: several trained models decoding as one.

At every step each model gives its log-probabilities for the next token, and
the ensemble's are the log of their MEAN PROBABILITY:

    log p(y) = logsumexp_i(log p_i(y)) - log(n)

as tensor2tensor, fairseq (`EnsembleModel`, `logsumexp(log_probs) -
log(n)`) and Marian (with equal weights) combine them. Not the mean of the
log-probabilities (a geometric mean, which does not sum to one).

An `Ensemble` has the decoding interface of a model (`encode`, `decode`,
`init_cache`, `decode_step`), so beam search, sampling and forced scoring use
it unchanged: its `decode_step` returns the combined log-probabilities as the
"logits" (log_softmax leaves them as they are), its `decode` the combined
teacher-forced log-probabilities.
"""

from __future__ import annotations

import math
import os
from typing import Sequence

from keras import ops

from t2t_revival.decode.decode_length import position_limit
from t2t_revival.decode.device_pool import copy_to_device, copy_weights
from t2t_revival.errors import UserError
from t2t_revival.models.build_model import build_model
from t2t_revival.models.trained_model import TrainedModel
from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder, restore_model_weights
from t2t_revival.run_dir.training_directory import TrainingDirectory


class Ensemble:
    """Models that share a vocabulary, combined per step by mean probability.

    Args:
        models: built models with `encode`, `decode`, `init_cache` and
            `decode_step` (e.g. `Transformer`), one vocabulary for all.
    """

    def __init__(self, models: Sequence):
        if not models:
            raise ValueError("an Ensemble needs at least one model. Received: models=[]")
        self.models = list(models)

    def _combine(self, logits):
        """float [n] x [..., V] logits -> float32 [..., V] log of the mean probability."""
        log_probs = [ops.log_softmax(ops.cast(x, "float32"), axis=-1) for x in logits]
        if len(log_probs) == 1:
            return log_probs[0]
        return ops.logsumexp(ops.stack(log_probs, axis=0), axis=0) - math.log(len(log_probs))

    def encode(self, inputs, training=False):
        """inputs int32 [B, S] -> ([n] x [B, S, d_model_i], [n] x float32 [B, S])."""
        encoded = [model.encode(inputs, training=training) for model in self.models]
        return [output for output, _ in encoded], [padding for _, padding in encoded]

    def decode(self, targets, encoder_output, encoder_padding, training=False):
        """Teacher-forced: float32 [B, T, V] log-probabilities (the mean probability)."""
        return self._combine([
            model.decode(targets, output, padding, training=training)
            for model, output, padding in zip(self.models, encoder_output, encoder_padding)])

    def init_cache(self, encoder_output, encoder_padding, max_decode_length):
        """{"model_<i>": model i's cache}; every leaf is batch-first."""
        return {f"model_{i}": model.init_cache(output, padding, max_decode_length)
                for i, (model, output, padding) in enumerate(
                    zip(self.models, encoder_output, encoder_padding))}

    def resize_cache(self, cache, length):
        """Each model's cache with self-attention buffers of `length` positions."""
        return {f"model_{i}": model.resize_cache(cache[f"model_{i}"], length)
                for i, model in enumerate(self.models)}

    def decode_step(self, ids, cache, index):
        """ids int32 [B] -> (float32 [B, V] log of the mean probability, new cache)."""
        logits, new_cache = [], {}
        for i, model in enumerate(self.models):
            step_logits, new_cache[f"model_{i}"] = model.decode_step(
                ids, cache[f"model_{i}"], index)
            logits.append(step_logits)
        return self._combine(logits), new_cache

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, output_dir: str, checkpoint_paths: Sequence[str]) -> TrainedModel:
        """Restore the models of `checkpoint_paths` into one ensemble.

        Each entry is a checkpoint prefix (`DIR/ckpt-N`, `DIR/averaged/ckpt-N`)
        or a directory (its latest checkpoint). A checkpoint's model is built
        from the hparams.json of the training directory it lies in (its own
        folder or the one above, for averaged/), so models of different runs
        and shapes can be combined, provided that their vocabulary files have
        the same contents and their vocab_size is the same as `output_dir`'s.
        The vocabulary, hparams and run record returned are `output_dir`'s;
        every model computes in float32 (`HParams.for_inference`).
        """
        main = TrainingDirectory(output_dir)
        hparams, record = main.read_hparams().for_inference(), main.read_run_record()
        vocab = main.vocabulary(record)
        with open(vocab.model_file, "rb") as f:
            vocab_bytes = f.read()
        models, resolved = [], []
        for entry in checkpoint_paths:
            run_dir = TrainingDirectory(TrainingDirectory.holding(entry, output_dir))
            checkpoint = run_dir.checkpoints.find(
                _latest_in(entry) if os.path.isdir(entry) else entry)
            member_hparams = run_dir.read_hparams().for_inference()
            member_record = run_dir.read_run_record()
            member_vocab = run_dir.vocabulary(member_record)
            with open(member_vocab.model_file, "rb") as f:
                if f.read() != vocab_bytes:
                    raise UserError(
                        f"the checkpoint {checkpoint} was trained with the vocabulary "
                        f"{member_vocab.model_file}, which differs from "
                        f"{vocab.model_file}; an ensemble needs models trained on one "
                        f"vocabulary. Received: checkpoint_path={entry!r}")
            if member_hparams.vocab_size != hparams.vocab_size:
                raise UserError(
                    f"the model of {checkpoint} has vocab_size {member_hparams.vocab_size}, "
                    f"the model of {output_dir} {hparams.vocab_size}; an ensemble needs "
                    f"one output vocabulary. Received: checkpoint_path={entry!r}")
            limit = position_limit(hparams.position_encoding, hparams.max_length)
            member_limit = position_limit(member_hparams.position_encoding,
                                          member_hparams.max_length)
            if member_limit is not None and (limit is None or member_limit < limit):
                raise UserError(
                    f"the model of {checkpoint} has learned positions for "
                    f"{member_limit} tokens, fewer than the {limit or 'unlimited'} of "
                    f"{output_dir}'s model; pass the model with the fewest positions "
                    f"as --output_dir. Received: checkpoint_path={entry!r}")
            model = build_model(member_hparams, member_record.model)
            restore_model_weights(model, checkpoint)
            models.append(model)
            resolved.append(checkpoint)
        return TrainedModel(hparams=hparams, run_record=record, vocab=vocab,
                            checkpoint_path=",".join(resolved), model=cls(models))


def _latest_in(folder: str) -> str:
    """The latest checkpoint of a folder (a training directory, or its averaged/)."""
    path = CheckpointFolder(folder).latest()
    if not path:
        raise UserError(f"no checkpoint in {folder}; name a checkpoint prefix such as "
                        f"{folder}/ckpt-N. Received: checkpoint_path={folder!r}")
    return path


@copy_to_device.register
def _ensemble_on_device(model: Ensemble, device: str) -> Ensemble:
    """An ensemble's copy on `device`: each model's (`DevicePool`)."""
    return Ensemble([copy_to_device(member, device) for member in model.models])


@copy_weights.register
def _ensemble_weights(model: Ensemble, copy: Ensemble) -> None:
    for member, member_copy in zip(model.models, copy.models):
        copy_weights(member, member_copy)
