"""Run in a subprocess (the CPU must be split before TF starts): the same
fixed sequence of batches trained one update per call and N updates per call
(`UpdateStep.run_many`), under the default strategy and under MirroredStrategy
on 2 logical CPU devices; with one replica also the fused update (one XLA
call) against the unfused one. Prints JSON: per strategy, the largest difference
of the weights and of the optimizer's variables, the steps reached, and the
token counts of both ways."""

import json
import sys

import numpy as np
import tensorflow as tf

from t2t_revival.settings.config_resolution import resolve_train_config
from t2t_revival.train.strategy import make_strategy
from t2t_revival.train.trainer import Trainer
from t2t_revival.train.update_step import UpdateStep

out_dir, updates = sys.argv[1], int(sys.argv[2])
mirrored = make_strategy(num_cpu_devices=2)   # splits the CPU: before anything else
# One small layer: what is compared is how updates are grouped into calls, and
# each strategy's XLA compiles (five) take a fraction of transformer_tiny's.
config = resolve_train_config(problem="translate_ende_multi30k", output_dir=out_dir,
                              data_dir=out_dir, hparams_set="transformer_tiny", seed=5,
                              hparams="num_hidden_layers=1,d_model=32,d_ff=64,num_heads=2")

rng = np.random.RandomState(0)
batches = []
for i in range(updates):   # one bucket shape (fewer XLA compiles); padding varies
    length = 12
    inputs = rng.randint(3, 500, (4, length)).astype("int32")
    targets = rng.randint(3, 500, (4, length)).astype("int32")
    for row in range(4):
        n = rng.randint(2, length + 1)
        targets[row, n:] = 0
        targets[row, n - 1] = 1
    batches.append({"inputs": inputs, "targets": targets})


def iterator(trainer):
    def dataset_fn(ctx):
        ds = tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature={k: tf.TensorSpec([None, None], tf.int32) for k in batches[0]})
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id) \
            if ctx.num_input_pipelines > 1 else ds
    return iter(trainer.strategy.distribute_datasets_from_function(dataset_fn))


# One trainer a strategy, its every variable (the model's, its dropout seeds'
# and the optimizer's) put back as built before each training below: the
# trainings start from the same state, and the one-update call's XLA program
# serves the n-update call too (compiles take most of this script's time).
_trainers = {}


def _fresh_trainer(strategy):
    if strategy not in _trainers:
        trainer = Trainer(config, strategy=strategy, log=lambda *a: None)
        trainer.optimizer.build(trainer.model.trainable_variables)
        state = list(trainer.model.variables) + list(trainer.optimizer.variables)
        _trainers[strategy] = trainer, state, [v.numpy() for v in state]
    trainer, state, values = _trainers[strategy]
    for variable, value in zip(state, values):
        variable.assign(value)
    return trainer


def train(strategy, per_call, fused=True):
    trainer = _fresh_trainer(strategy)
    update = trainer.update_step if fused else UpdateStep(
        trainer.model, trainer.optimizer, strategy, config.hparams, xla=config.xla, fuse=False)
    initial = [v.numpy() for v in trainer.model.trainable_weights]
    it = iterator(trainer)
    tokens, losses = 0.0, []
    calls = updates // strategy.num_replicas_in_sync
    if per_call == 1:
        for _ in range(calls):
            loss, t, _ = update.run(it)
            tokens += float(t)
            losses.append(float(loss))
    else:
        loss, t, _ = update.run_many(it, tf.constant(calls))
        tokens, losses = float(t), [float(loss)]
    weights = [v.numpy() for v in trainer.model.weights]
    opt = [v.numpy() for v in trainer.optimizer.variables]
    moved = max(float(np.max(np.abs(a.numpy() - b)))
                for a, b in zip(trainer.model.trainable_weights, initial))
    return trainer.step, tokens, losses[-1], weights, opt, moved


result = {}
for name, strategy in (("default", tf.distribute.get_strategy()), ("mirrored", mirrored)):
    s1, tok1, loss1, w1, o1, moved = train(strategy, 1)
    sn, tokn, lossn, wn, on, _ = train(strategy, updates)
    result[name] = {
        "replicas": strategy.num_replicas_in_sync, "step1": s1, "stepn": sn,
        "tokens1": tok1, "tokensn": tokn, "loss1": loss1, "lossn": lossn,
        "w_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(w1, wn)),
        "w_moved": moved,
        "opt_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(o1, on)),
    }
    if name == "default":   # one replica: the fused update against the unfused one
        _, tok0, loss0, w0, _, _ = train(strategy, 1, fused=False)
        result[name].update(
            fused=_trainers[strategy][0].update_step.fused,
            unfused_tokens=tok0, unfused_loss=loss0,
            unfused_w_diff=max(float(np.max(np.abs(a - b))) for a, b in zip(w1, w0)))
print(json.dumps(result))
