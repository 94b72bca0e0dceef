"""One worker of a 2-worker MultiWorkerMirroredStrategy run on this machine
(TF_CONFIG is set by the caller): trains transformer_tiny with a learning rate
so small that the dev BLEU cannot change, evaluating every 2 steps with dev
decoding and early stopping after 1 evaluation without improvement. Only the
chief decodes; both workers must stop at the same step (no deadlock).

    multi_worker_check.py DATA_DIR OUTPUT_DIR [HPARAMS]

(HPARAMS: overrides of transformer_tiny, before the tiny learning rate.)
"""

import json
import sys

from t2t_revival.settings.config_resolution import resolve_train_config
from t2t_revival.train.trainer import train

data_dir, out_dir = sys.argv[1], sys.argv[2]
hparams = ",".join(h for h in (sys.argv[3] if len(sys.argv) > 3 else "", "learning_rate=1e-9")
                   if h)
config = resolve_train_config(
    problem="translate_ende_multi30k", output_dir=out_dir, data_dir=data_dir,
    hparams_set="transformer_tiny", hparams=hparams, train_steps=100,
    local_eval_frequency=2, eval_steps=1, eval_decode_sentences=4,
    eval_decode_hparams="extra_length=5",   # short decodes: barely trained
    eval_early_stopping_evals=1, save_checkpoints_steps=100, log_step_count_steps=1,
    xla=False)
result = train(config, log=lambda line: print(line, flush=True))
print(json.dumps({"step": result.step, "stop_reason": result.stop_reason,
                  "chief": result.chief}), flush=True)
