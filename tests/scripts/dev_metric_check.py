"""Run in a subprocess (the CPU must be split before TF starts): a trainer
mirrored over 2 logical CPU devices trains 3 steps, evaluates with dev BLEU
(decoding with its in-memory, mirrored weights) and keeps best/; then
t2t-decoder's `Decoder` reads best/ from disk and translates the same dev
sentences. Prints JSON.

    dev_metric_check.py DATA_DIR OUTPUT_DIR [HPARAMS]

(HPARAMS: overrides of transformer_tiny, e.g. a smaller model.)
"""

import json
import sys

from t2t_revival.settings.config_resolution import resolve_train_config
from t2t_revival.decode.decoder import Decoder
from t2t_revival.settings.decode_hparams import parse_decode_hparams
from t2t_revival.train import run_preparation
from t2t_revival.train.strategy import make_strategy
from t2t_revival.train.trainer import Trainer

data_dir, out_dir = sys.argv[1], sys.argv[2]
hparams = sys.argv[3] if len(sys.argv) > 3 else ""
# Short decodes: a 3-step model's translations would run to the input's length + 50.
# (No XLA either: the compiled train step is not the subject; replica_check.py's.)
SEARCH = "extra_length=5"
two = make_strategy(num_cpu_devices=2)
config = resolve_train_config(problem="translate_ende_multi30k", output_dir=out_dir,
                              data_dir=data_dir, hparams_set="transformer_tiny", hparams=hparams,
                              eval_steps=2,
                              eval_decode_sentences=12, eval_decode_hparams=SEARCH, seed=5,
                              xla=False)
trainer = Trainer(config, strategy=two, log=lambda line: print(line, file=sys.stderr))
run_preparation.write_run_files(config, trainer.problem, trainer.directory, "")
iterator = iter(trainer.train_dataset(0))
for _ in range(3):
    trainer.update_step.run(iterator)
evaluation = trainer.evaluator.evaluate(trainer.step)
evaluator = trainer.evaluator.dev_metric
in_memory = evaluator.decoder.translate(evaluator.sources)

decoder = Decoder.load(out_dir, f"{out_dir}/best", parse_decode_hparams(SEARCH))
from_disk = decoder.translate(evaluator.sources)
decoder_bleu = trainer.problem.score_predictions(from_disk, evaluator.references,
                                                 evaluator.sources).score
print(json.dumps({"replicas": two.num_replicas_in_sync, "in_memory": in_memory,
                  "from_disk": from_disk, "bleu": evaluation.figure("bleu"),
                  "decoder_bleu": decoder_bleu, "checkpoint": decoder.checkpoint_path}))
