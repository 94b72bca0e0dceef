"""`TrainConfig`: the run options of one training job, resolved and typed.

The command line (`t2t-trainer`, `config_resolution.resolve_train_config`)
resolves its flags into this object once; the trainer takes it as it is.
Each field is named after its t2t-trainer flag (tensor2tensor's names).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.settings.hparams import HParams

DEFAULT_TMP_DIR = os.path.join(tempfile.gettempdir(), "t2t_datagen")
"""Where datagen finds raw corpora without --tmp_dir (tensor2tensor's default)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Where to read and write, the model, how long to train, how often to save
    and evaluate."""

    problem: str
    """Registered problem name (--problem)."""
    output_dir: str
    """Checkpoints, hparams.json, vocabulary location, TensorBoard summaries."""
    data_dir: str
    """TFRecords and vocabulary; datagen runs first when they are missing."""
    hparams: HParams
    """The resolved hparams: defaults < --hparams_set < problem < --hparams."""
    hparams_set: str = "transformer_base"
    """Registered hparam set name (recorded in run.json)."""
    hparams_overrides: str = ""
    """The `--hparams` text as given (recorded in run.json; already in `hparams`)."""
    tmp_dir: str = DEFAULT_TMP_DIR
    """Raw corpora for datagen (tensor2tensor's /tmp/t2t_datagen by default)."""
    model: str = "transformer"
    """Registered model name."""
    train_steps: int = 250000
    """Optimizer updates to reach (the run resumes from the latest checkpoint)."""
    max_train_minutes: float = 0.0
    """Stop early, at a progress-line step, once training has run this many
    minutes (0 = no limit); the checkpoint and final evaluation still follow."""
    eval_steps: int = 0
    """Dev batches per evaluation (0 = the whole dev split)."""
    local_eval_frequency: int = 1000
    """Evaluate on the dev split every N updates (0 = only at the end)."""
    eval_decode_sentences: int = 200
    """At each evaluation, decode this many dev sentences (the first) with the
    decoder's beam search and score them with the problem's metric (BLEU or
    EVALB F1); 0 = no decoding (best/ and early stopping then follow the dev
    loss)."""
    eval_metric: str = ""
    """What those decodes are scored with, one of the problem's `eval_metrics`
    ("bleu", "chrf"); "" = the problem's own `eval_metric`. best/ and early
    stopping follow it (higher is better)."""
    eval_decode_hparams: DecodeHParams | None = None
    """The settings of those decodes (--eval_decode_hparams resolved); None =
    t2t-decoder's defaults for `hparams`."""
    eval_early_stopping_evals: int = 0
    """Stop after this many evaluations in a row without a better dev metric
    (0 = never)."""
    eval_early_stopping_delta: float = 0.0
    """What counts as better for that patience: more than this (best/ still
    takes every better figure)."""
    save_checkpoints_steps: int = 1000
    """Write a checkpoint every N updates (and always at the end)."""
    keep_checkpoint_max: int = 20
    """Keep the last K checkpoints (20 covers the paper's big-model averaging)."""
    log_step_count_steps: int = 50
    """Print a progress line and write summaries every N updates."""
    steps_per_execution: int = 1
    """Run up to N updates per compiled call, the host reading the loss and the
    token count back once per call (a call ends on each progress, save, eval
    and final step)."""
    seed: int = 1234
    """Seed for weights, dropout and shuffling."""
    xla: bool = True
    """XLA-compile each replica's forward and backward pass."""
    cpu_devices: int = 0
    """Split the CPU into N logical devices for MirroredStrategy (testing)."""
    worker_gpu: int = 0
    """Use the first N visible GPUs (0 = all)."""
    usr_dir: str = ""
    """The absolute `--t2t_usr_dir` imported for this run (recorded in run.json)."""
    warm_start_from: str = ""
    """A checkpoint prefix, or a training directory (its latest checkpoint), whose
    model weights initialize a new run (`--warm_start_from`); ignored on resume."""
    warm_start_vocab: str = "same"
    """`--warm_start_vocab`: "same" (the source run's vocabulary, byte for byte)
    or "update" (another vocabulary: the rows of the pieces both have kept,
    the others started anew; `train/vocabulary_update.py`), or "update_random"
    (the new rows as a run from scratch starts them)."""
    skip_corrupt_records: bool = False
    """Read each data shard up to a truncated or corrupted record and skip the
    rest of it (counted and named at the start) instead of stopping."""

    @property
    def dev_decoding(self) -> DecodeHParams:
        """The settings of the dev decodes (`eval_decode_hparams`, or the defaults)."""
        return self.eval_decode_hparams or DecodeHParams.from_hparams(self.hparams)
