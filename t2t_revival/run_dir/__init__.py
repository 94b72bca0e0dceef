"""The training directory (`--output_dir`): what a run writes and every tool reads.

- `training_directory.TrainingDirectory`: the one owner of the directory's
  layout: its files, the run record, the checkpoints (save, list, restore,
  average) and building the model they hold. The trainer, decoder,
  exporters and t2t-avg-checkpoints go through it.
- `run_record.RunRecord`: the typed contents of `run.json`.
- `trained_model.TrainedModel`: a restored model with its hparams, run
  record and vocabulary (`TrainingDirectory.load`), for decoding and export.
- `checkpoint_variables`: which variables a checkpoint holds, by name.
- `file_names`: the names of the files, and of a checkpoint's step. Imports
  nothing heavy (no TensorFlow), for readers such as `CTranslate2Translator`.

This `__init__` imports nothing, so that importing `file_names` stays cheap;
import the modules themselves.
"""
