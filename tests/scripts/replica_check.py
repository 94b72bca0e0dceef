"""Run in a subprocess (the CPU must be split before TF starts): compares one
update on 2 logical CPU replicas with the same global batch on 1 device, and
trains a few steps so the XLA dump shows what was compiled. Prints JSON."""

import json
import sys

import numpy as np
import tensorflow as tf

from t2t_revival.settings.config_resolution import resolve_train_config
from t2t_revival.train.strategy import make_strategy
from t2t_revival.train.trainer import Trainer

out_dir = sys.argv[1]
two = make_strategy(num_cpu_devices=2)
one = tf.distribute.MirroredStrategy(["/cpu:0"])
# One small layer: what is compared is how the replicas split the batch and
# reduce, which any size shows; the XLA compiles take a fraction of
# transformer_tiny's (2 layers of d_model 128).
config = resolve_train_config(problem="translate_ende_multi30k", output_dir=out_dir,
                              data_dir=out_dir, hparams_set="transformer_tiny",
                              hparams="num_hidden_layers=1,d_model=32,d_ff=64,num_heads=2,"
                                      "dropout=0.0,attention_dropout=0.0,relu_dropout=0.0",
                              seed=3)


def global_gradients(trainer, batch):
    """The reduced gradients, loss and tokens of one distributed batch, not applied.

    `batch` is a per-replica value (from
    `strategy.experimental_distribute_values_from_function`): the same
    computation as one update's, without the update.
    """
    @tf.function(autograph=False)
    def compute(batch):
        def replica(b):
            update = trainer.update_step
            grads, loss, tokens, _ = update.reduce(*update.first_micro(b))
            return grads, loss, tokens
        grads, loss, tokens = trainer.strategy.run(replica, (batch,))
        first = trainer.strategy.experimental_local_results
        return [first(g)[0] for g in grads], first(loss)[0], first(tokens)[0]
    return compute(batch)


t1 = Trainer(config, strategy=one, log=lambda *a: None)
t2 = Trainer(config, strategy=two, log=lambda *a: None)
for a, b in zip(t2.model.weights, t1.model.weights):
    a.assign(b.numpy())

rng = np.random.RandomState(0)
length = 12
inputs = rng.randint(3, 500, (4, length)).astype("int32")
targets = rng.randint(3, 500, (4, length)).astype("int32")
# Replica 0 gets long targets, replica 1 short ones: a mean of per-replica
# means would weigh their tokens differently from the global token mean.
for row, n in enumerate([12, 11, 3, 2]):
    targets[row, n:] = 0
    targets[row, n - 1] = 1
full = {"inputs": inputs, "targets": targets}
halves = [{k: v[:2] for k, v in full.items()}, {k: v[2:] for k, v in full.items()}]

g1, loss1, tok1 = global_gradients(
    t1, one.experimental_distribute_values_from_function(lambda ctx: full))
g2, loss2, tok2 = global_gradients(
    t2, two.experimental_distribute_values_from_function(
        lambda ctx: halves[ctx.replica_id_in_sync_group]))
grad_diff = max(float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in zip(g1, g2))
grad_scale = max(float(np.max(np.abs(a.numpy()))) for a in g1)


def one_update(trainer, strategy, per_replica):
    # One input pipeline on one worker: its successive elements go to the
    # replicas in turn.
    def dataset_fn(ctx):
        ds = tf.data.Dataset.from_tensors(per_replica[0])
        for batch in per_replica[1:]:
            ds = ds.concatenate(tf.data.Dataset.from_tensors(batch))
        return ds.repeat()
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    return [float(x) for x in trainer.update_step.run(iterator)]


step1 = one_update(t1, one, [full])
step2 = one_update(t2, two, halves)
# Adam's first moment after one update is (1 - beta1) * gradient: it shows a
# gradient summed twice, which the (scale-invariant) first Adam step hides.
def momentums(trainer):
    """Adam's first moments (its variables named `..._momentum`), by position."""
    return [v for v in trainer.optimizer.variables if v.path.endswith("_momentum")]


assert len(momentums(t1)) == len(t1.model.trainable_variables)
m_diff = max(float(np.max(np.abs(a.numpy() - b.numpy())))
             for a, b in zip(momentums(t1), momentums(t2)))
w_diff = max(float(np.max(np.abs(a.numpy() - b.numpy())))
             for a, b in zip(t1.model.weights, t2.model.weights))
# Replicas must hold identical copies after the update.
replica_copies_diff = max(
    float(np.max(np.abs(v.value.values[0].numpy() - v.value.values[1].numpy())))
    for v in t2.model.trainable_variables)

# A few more updates on two bucket shapes, to see one compile per shape.
shapes = [(4, 8), (2, 16)]


def bucketed(ctx):
    ds = [tf.data.Dataset.from_tensors({"inputs": tf.fill(s, 5), "targets": tf.fill(s, 7)})
          for s in shapes]
    return ds[0].concatenate(ds[1]).repeat()


iterator = iter(two.distribute_datasets_from_function(bucketed))
for _ in range(6):
    t2.update_step.run(iterator)

print(json.dumps({
    "loss1": loss1.numpy().item(), "loss2": loss2.numpy().item(),
    "tokens1": tok1.numpy().item(), "tokens2": tok2.numpy().item(),
    "grad_diff": grad_diff, "grad_scale": grad_scale,
    "step1": step1, "step2": step2, "m_diff": m_diff, "w_diff": w_diff,
    "replica_copies_diff": replica_copies_diff,
    "replicas": two.num_replicas_in_sync, "step": t2.step}))
