"""Typed settings: what a run and a decode are configured with.

- `hparams.HParams`: the model and training hparams (registered sets,
  `--hparams "k=v,..."` overrides, hparams.json); `t2t_revival.hparams` is
  kept as a shim for users' modules that import it.
- `decode_hparams.DecodeHParams`: the decode settings (`--decode_hparams`).
- `typed_settings`: the shared parser of "k=v,..." strings into typed fields.
- `setting_ranges`: each numeric setting's allowed range, one owner.
- `t2t_hparam_names`: tensor2tensor's hparam names and how ours map to them.
- `train_config.TrainConfig`: a training run's frozen config, and
  `config_resolution`: the door, where command-line strings become these
  typed configs, once (`resolve_train_config`).

This `__init__` imports nothing (no TensorFlow, no Keras): import the modules.
"""
