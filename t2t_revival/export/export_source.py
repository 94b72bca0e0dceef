"""What both exports are made from: a training directory's restored model and
the beam settings fixed in the export."""

from __future__ import annotations

import os

from t2t_revival.decode.decode_hparams import DecodeHParams, parse_decode_hparams
from t2t_revival.errors import UserError
from t2t_revival.run_dir.trained_model import TrainedModel
from t2t_revival.run_dir.training_directory import TrainingDirectory


def require_directory(output_dir: str) -> None:
    """A UserError when the training directory `output_dir` does not exist."""
    if not os.path.isdir(output_dir):
        raise UserError(f"the training directory {output_dir} does not exist; pass the "
                        f"--output_dir of t2t-trainer. Received: output_dir={output_dir!r}")


def load_export_source(output_dir: str, checkpoint_path: str | None,
                       decode_hparams: str) -> tuple[TrainingDirectory, TrainedModel,
                                                     DecodeHParams]:
    """The training directory, its restored model and the export's beam settings.

    Args:
        output_dir: the training directory.
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        decode_hparams: overrides of the beam settings of hparams.json.

    Raises:
        UserError: no such directory, a malformed `decode_hparams` (before the
            model is loaded), what `TrainingDirectory.load` refuses, or
            return_beams (an export returns the best translation only).
    """
    require_directory(output_dir)
    parse_decode_hparams(decode_hparams)
    directory = TrainingDirectory(output_dir)
    trained = directory.load(checkpoint_path)
    settings = DecodeHParams.from_hparams(trained.hparams, decode_hparams)
    if settings.return_beams:
        raise UserError("the export returns the best translation only; drop "
                        "return_beams from --decode_hparams. "
                        f"Received: decode_hparams={decode_hparams!r}")
    return directory, trained, settings
