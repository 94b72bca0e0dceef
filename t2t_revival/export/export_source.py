"""What both exports are made from: a training directory's restored model and
the beam settings fixed in the export."""

from __future__ import annotations

import os
from typing import Sequence

from t2t_revival.decode.decode_hparams import DecodeHParams, parse_decode_hparams
from t2t_revival.errors import UserError
from t2t_revival.run_dir.trained_model import TrainedModel
from t2t_revival.run_dir.training_directory import TrainingDirectory


# The decode settings each export fixes (t2t-exporter --decode_hparams).
SAVED_MODEL_FIXES = ("beam_size", "alpha", "extra_length", "early_stop")
CTRANSLATE2_FIXES = ("beam_size", "alpha", "extra_length", "batch_size")


def require_directory(output_dir: str) -> None:
    """A UserError when the training directory `output_dir` does not exist."""
    if not os.path.isdir(output_dir):
        raise UserError(f"the training directory {output_dir} does not exist; pass the "
                        f"--output_dir of t2t-trainer. Received: output_dir={output_dir!r}")


def load_export_source(output_dir: str, checkpoint_path: str | None,
                       decode_hparams: str, fixes: Sequence[str], export: str
                       ) -> tuple[TrainingDirectory, TrainedModel, DecodeHParams]:
    """The training directory, its restored model and the export's beam settings.

    Args:
        output_dir: the training directory.
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        decode_hparams: overrides of the beam settings of hparams.json.
        fixes: the decode settings this export fixes (`SAVED_MODEL_FIXES`,
            `CTRANSLATE2_FIXES`); `decode_hparams` may set no other, so that no
            setting is dropped silently (an export runs beam search, the best
            translation only, as its server batches).
        export: its name in messages ("SavedModel", "CTranslate2").

    Raises:
        UserError: no such directory, a malformed `decode_hparams` or one that
            sets what the export does not fix (before the model is loaded), or
            what `TrainingDirectory.load` refuses.
    """
    require_directory(output_dir)
    unfixed = [key for key in parse_decode_hparams(decode_hparams) if key not in fixes]
    if unfixed:
        raise UserError(f"the {export} export fixes only {', '.join(fixes)} of the decode "
                        f"settings (it returns the best translation of a beam search, "
                        f"in its server's batches); drop {', '.join(unfixed)} from "
                        f"--decode_hparams. Received: decode_hparams={decode_hparams!r}")
    directory = TrainingDirectory(output_dir)
    if directory.is_other_run(checkpoint_path):
        other = TrainingDirectory.holding(checkpoint_path, output_dir)
        raise UserError(f"the checkpoint {checkpoint_path} belongs to the training "
                        f"directory {other}, not to {output_dir}, whose hparams and "
                        f"vocabulary the export would pair with its weights; pass "
                        f"--output_dir={other}. Received: checkpoint_path={checkpoint_path!r}")
    trained = directory.load(checkpoint_path)
    settings = DecodeHParams.from_hparams(trained.hparams, decode_hparams)
    return directory, trained, settings
