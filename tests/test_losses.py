"""The trainer's losses against a plain NumPy reference: the smoothed target
written out in full, its cross-entropy, and its entropy subtracted."""

import numpy as np
import pytest

from t2t_revival.train.losses import smoothed_cross_entropy_sum, token_metrics_sums


def _log_softmax(z):
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def _reference(logits, targets, eps):
    vocab = logits.shape[-1]
    q = np.full(logits.shape, eps / (vocab - 1))
    np.put_along_axis(q, targets[..., None], 1.0 - eps, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(q > 0, q * np.log(q), 0.0).sum(-1)
    xent = -(q * _log_softmax(logits)).sum(-1) - entropy
    weights = (targets != 0).astype(np.float64)
    return (xent * weights).sum(), weights.sum()


def _batch(scale, vocab=37, seed=0):
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((3, 5, vocab)) * scale).astype("float32")
    targets = rng.integers(1, vocab, (3, 5)).astype("int32")
    targets[0, 3:] = 0      # padding
    targets[2, 1:] = 0
    return logits, targets


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_smoothed_cross_entropy_equals_the_written_out_target(eps, scale):
    logits, targets = _batch(scale)
    loss, tokens = smoothed_cross_entropy_sum(logits, targets, eps)
    want, want_tokens = _reference(logits, targets, eps)
    assert float(tokens) == want_tokens == 9
    np.testing.assert_allclose(float(loss), want, rtol=1e-5, atol=1e-3)


def test_huge_logits_give_a_finite_loss_and_a_perfect_model_scores_zero():
    logits, targets = _batch(1.0)
    perfect = np.full(logits.shape, -1e4, "float32")       # all mass on the gold token
    np.put_along_axis(perfect, targets[..., None], 1e4, axis=-1)
    loss, _ = smoothed_cross_entropy_sum(perfect, targets, 0.0)
    assert abs(float(loss)) < 1e-3
    loss, _ = smoothed_cross_entropy_sum(logits * 1e4, targets, 0.1)
    assert np.isfinite(float(loss)) and float(loss) > 0


def test_token_metrics_are_the_unsmoothed_cross_entropy_and_the_argmax_hits():
    logits, targets = _batch(3.0)
    xent, correct, tokens = token_metrics_sums(logits, targets)
    weights = targets != 0
    gold = np.take_along_axis(_log_softmax(logits), targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(float(xent), -(gold * weights).sum(), rtol=1e-5)
    assert float(correct) == ((logits.argmax(-1) == targets) & weights).sum()
    assert float(tokens) == weights.sum()
