"""The training directory (`--output_dir`): what a run writes and every tool reads.

- `training_directory.TrainingDirectory`: the directory's layout, its run
  files (hparams.json, run.json, the vocabulary copy) and its checkpoint
  folders. The trainer, decoder, exporters and t2t-avg-checkpoints go through it.
- `checkpoint_files.CheckpointFiles`: which checkpoint of a folder to
  restore (the `checkpoint` index, the integrity check, what is skipped
  said), read without TensorFlow: the one chooser, for every engine
  (`TrainingDirectory.checkpoint_to_restore`).
- `checkpoint_folder.CheckpointFolder`: the one owner of a folder of
  checkpoints (the run's, best/, averaged/): `CheckpointFiles`'s reading,
  plus save and average (TensorFlow).
- `best_checkpoint.BestCheckpoint`: best/, swapped in whole.
- `run_record.RunRecord`, `best_record.BestRecord`: run.json and best.json
  (`json_record.JsonRecord`, as `HParams` for hparams.json).
- `checkpoint_variables`: which variables a checkpoint holds, by name.
- `file_names`: the names of the files, and of a checkpoint's step. Imports
  nothing heavy (no TensorFlow), for readers such as `CTranslate2Translator`.

Building a model from a directory is `models.TrainedModel.load`'s: run_dir
builds no model. This `__init__` imports nothing, so that importing
`file_names` stays cheap; import the modules themselves.
"""
