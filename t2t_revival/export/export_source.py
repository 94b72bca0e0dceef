"""What the exports are made from: a training directory's restored model and
the beam settings fixed in the export (which: `export_settings`'s `*_FIXES`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from t2t_revival.settings.decode_hparams import DecodeHParams, DecodeOverrides
from t2t_revival.decode.export_settings import (  # noqa: F401 (the exporters' names)
    CTRANSLATE2_FIXES, LITERT_FIXES, SAVED_MODEL_FIXES)
from t2t_revival.errors import UserError
from t2t_revival.run_dir.training_directory import TrainingDirectory, require_directory

if TYPE_CHECKING:
    from t2t_revival.models.trained_model import TrainedModel

def load_export_source(output_dir: str, checkpoint_path: str | None,
                       overrides: DecodeOverrides | None, fixes: Sequence[str], export: str
                       ) -> tuple[TrainingDirectory, TrainedModel, DecodeHParams]:
    """The training directory, its restored model and the export's beam settings.

    Args:
        output_dir: the training directory.
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        overrides: the parsed --decode_hparams, over the beam settings of
            hparams.json.
        fixes: the decode settings this export fixes (`SAVED_MODEL_FIXES`,
            `CTRANSLATE2_FIXES`, `LITERT_FIXES`); `overrides` may set no other, so that no
            setting is dropped silently (an export runs beam search, the best
            translation only, as its server batches).
        export: its name in messages ("SavedModel", "CTranslate2").

    Raises:
        UserError: no such directory, `overrides` that set what the export
            does not fix (before the model is loaded), or what
            `TrainedModel.load` refuses.
    """
    from t2t_revival.models.trained_model import TrainedModel   # (TensorFlow)

    require_directory(output_dir)
    overrides = dict(overrides or {})
    unfixed = [key for key in overrides if key not in fixes]
    if unfixed:
        raise UserError(f"the {export} export fixes only {', '.join(fixes)} of the decode "
                        f"settings (it returns the best translation of a beam search, "
                        f"in its server's batches); drop {', '.join(unfixed)} from "
                        f"--decode_hparams. Received: "
                        + ", ".join(f"{key}={overrides[key]!r}" for key in unfixed))
    directory = TrainingDirectory(output_dir)
    if checkpoint_path and directory.other_runs([checkpoint_path]):
        other = TrainingDirectory.holding(checkpoint_path, output_dir)
        raise UserError(f"the checkpoint {checkpoint_path} belongs to the training "
                        f"directory {other}, not to {output_dir}, whose hparams and "
                        f"vocabulary the export would pair with its weights; pass "
                        f"--output_dir={other}. Received: checkpoint_path={checkpoint_path!r}")
    trained = TrainedModel.load(directory, checkpoint_path)
    settings = DecodeHParams.from_hparams(trained.hparams, overrides)
    return directory, trained, settings
