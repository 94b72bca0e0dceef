"""Gradient accumulation (`gradient_accumulation_steps`, which the
`*_single_gpu` hparam sets use to reach the paper's batch on one device): one
update over N micro-batches is one update over one batch holding them all."""

import numpy as np
import pytest

ACCUMULATION = 3
NO_DROPOUT = "dropout=0.0,attention_dropout=0.0,relu_dropout=0.0"
SMALL = "num_hidden_layers=1,d_model=16,d_ff=32,num_heads=2"


def _micro_batches():
    """ACCUMULATION micro-batches [2, 12] whose target token counts differ
    (a mean of the micro-batches' own token means would weigh their tokens
    differently from the update's token mean)."""
    rng = np.random.RandomState(0)
    batches = []
    for lengths in ([12, 11], [3, 2], [7, 5]):
        inputs = rng.randint(3, 500, (2, 12)).astype("int32")
        targets = rng.randint(3, 500, (2, 12)).astype("int32")
        for row, n in enumerate(lengths):
            targets[row, n:] = 0
            targets[row, n - 1] = 1
        batches.append({"inputs": inputs, "targets": targets})
    assert len(batches) == ACCUMULATION
    return batches


def _one_update(trainer, batches):
    """One `UpdateStep.run` on an input pipeline of `batches` (repeated);
    returns (loss, target tokens, gradient norm)."""
    import tensorflow as tf

    def dataset_fn(ctx):
        ds = tf.data.Dataset.from_tensors(batches[0])
        for batch in batches[1:]:
            ds = ds.concatenate(tf.data.Dataset.from_tensors(batch))
        return ds.repeat()

    iterator = iter(trainer.strategy.distribute_datasets_from_function(dataset_fn))
    return [float(x) for x in trainer.update_step.run(iterator)]


def test_an_update_over_n_micro_batches_equals_one_over_their_concatenation(tmp_path):
    """The same Adam moments, weights, loss, token count and gradient norm
    after one update; one replica, dropout off, a small model. (Adam's first
    step is nearly sign(gradient) * learning rate: its first moment,
    (1 - beta1) * gradient, and the gradient norm show a gradient summed
    wrongly, which the weights hide.) Without XLA, which would only compile
    each micro-batch's pass: the sum over micro-batches and the reduction run
    outside it, the same code either way (XLA costs 30 s of compiling here)."""
    import tensorflow as tf

    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    def trainer(accumulation):
        config = resolve_train_config(
            problem="translate_ende_multi30k", output_dir=str(tmp_path / f"run{accumulation}"),
            data_dir=str(tmp_path), hparams_set="transformer_tiny", seed=3, xla=False,
            hparams=f"{SMALL},{NO_DROPOUT},gradient_accumulation_steps={accumulation}")
        assert config.hparams.gradient_accumulation_steps == accumulation
        return Trainer(config, strategy=tf.distribute.get_strategy(), log=lambda *a: None)

    micro, whole = trainer(ACCUMULATION), trainer(1)
    assert not micro.update_step.fused and not whole.update_step.fused
    for a, b in zip(micro.model.weights, whole.model.weights):
        a.assign(b.numpy())
    initial = [w.numpy() for w in whole.model.trainable_weights]
    batches = _micro_batches()
    concatenated = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}

    loss_n, tokens_n, norm_n = _one_update(micro, batches)
    loss_1, tokens_1, norm_1 = _one_update(whole, [concatenated])

    assert micro.step == whole.step == 1      # N micro-batches make ONE update
    assert tokens_n == tokens_1 == 12 + 11 + 3 + 2 + 7 + 5
    assert loss_n == pytest.approx(loss_1, rel=1e-5)
    assert norm_n == pytest.approx(norm_1, rel=1e-4)

    def momentums(t):
        """Adam's first moments (its variables named `..._momentum`), by position."""
        return [v.numpy() for v in t.optimizer.variables if v.path.endswith("_momentum")]

    m_micro, m_whole = momentums(micro), momentums(whole)
    assert len(m_whole) == len(whole.model.trainable_weights)
    m_scale = max(float(np.max(np.abs(m))) for m in m_whole)
    m_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(m_micro, m_whole))
    assert m_diff <= 1e-5 * m_scale, (m_diff, m_scale)
    # The weights, where the gradient is above float round-off (Adam's first
    # step, lr * g / (|g| + epsilon), turns a gradient of round-off, summed in
    # another order, into a step of either sign), to 2 float32 ulps.
    moved = max(float(np.max(np.abs(w.numpy() - i)))
                for w, i in zip(whole.model.trainable_weights, initial))
    assert moved > 0
    for a, b, m in zip(micro.model.trainable_weights, whole.model.trainable_weights, m_whole):
        kept = np.abs(m) > 1e-5 * m_scale
        np.testing.assert_allclose(a.numpy()[kept], b.numpy()[kept], rtol=2.4e-7,
                                   atol=1e-3 * moved, err_msg=a.path)
