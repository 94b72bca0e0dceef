"""Importing tensor2tensor runs: a T2T `output_dir` (its checkpoints,
hparams.json, flags.txt) and its SubwordTextEncoder vocabulary become one of
our training directories (`t2t-import`)."""
