"""The run options of one training job (everything that is not an hparam)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Where to read and write, how long to train, how often to save and evaluate."""

    problem: str
    """Registered problem name."""
    output_dir: str
    """Checkpoints, hparams.json, vocabulary location, TensorBoard summaries."""
    data_dir: str
    """TFRecords and vocabulary; datagen runs first when they are missing."""
    tmp_dir: str = ""
    """Raw corpora for datagen ('' = the problem's default)."""
    model: str = "transformer"
    """Registered model name."""
    hparams_set: str = "transformer_base"
    """Registered hparam set name."""
    hparams: str = ""
    """`k=v,...` overrides of the hparam set."""
    train_steps: int = 250000
    """Optimizer updates to reach (the run resumes from the latest checkpoint)."""
    max_train_minutes: float = 0.0
    """Stop early, at a progress-line step, once training has run this many
    minutes (0 = no limit); the checkpoint and final evaluation still follow."""
    eval_steps: int = 0
    """Dev batches per evaluation (0 = the whole dev split)."""
    eval_every: int = 1000
    """Evaluate on the dev split every N updates (0 = only at the end)."""
    eval_decode_sentences: int = 200
    """At each evaluation, decode this many dev sentences (the first) with the
    decoder's beam search and score them with the problem's metric (BLEU or
    EVALB F1); 0 = no decoding (best/ and early stopping then follow the dev
    loss)."""
    eval_decode_hparams: str = ""
    """Overrides of the decode settings for those decodes (as t2t-decoder's
    --decode_hparams; "" = the same defaults as t2t-decoder)."""
    eval_early_stopping_evals: int = 0
    """Stop after this many evaluations in a row without a better dev metric
    (0 = never)."""
    save_every: int = 1000
    """Write a checkpoint every N updates (and always at the end)."""
    keep_checkpoint_max: int = 20
    """Keep the last K checkpoints (20 covers the paper's big-model averaging)."""
    log_every: int = 50
    """Print a progress line and write summaries every N updates."""
    steps_per_execution: int = 1
    """Run up to N updates per compiled call, the host reading the loss and the
    token count back once per call (a call ends on each progress, save, eval
    and final step)."""
    seed: int = 1234
    """Seed for weights, dropout and shuffling."""
    xla: bool = True
    """XLA-compile each replica's forward and backward pass."""
    num_cpu_devices: int = 0
    """Split the CPU into N logical devices for MirroredStrategy (testing)."""
    worker_gpu: int = 0
    """Use the first N visible GPUs (0 = all)."""
    usr_dir: str = ""
    """The absolute `--t2t_usr_dir` imported for this run (recorded in run.json)."""
    warm_start_from: str = ""
    """A checkpoint prefix, or a training directory (its latest checkpoint), whose
    model weights initialize a new run (`--warm_start_from`); ignored on resume."""
    skip_corrupt_records: bool = False
    """Read each data shard up to a truncated or corrupted record and skip the
    rest of it (counted and named at the start) instead of stopping."""
