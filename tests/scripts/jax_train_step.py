"""Run under KERAS_BACKEND=jax by tests/test_transformer.py (a subprocess).

Builds a tiny Transformer, runs one Keras training step on the JAX backend,
checks the weights moved and the loss is finite, and that decoding through the
cache equals the teacher-forced pass, for post-LN and pre-LN. Prints one JSON
line per norm type.
"""
import json

import keras
import numpy as np

from t2t_revival.hparams_sets.transformer import transformer_tiny
from t2t_revival.models.transformer import Transformer

assert keras.backend.backend() == "jax", keras.backend.backend()
for norm_type in ("post", "pre"):
    hp = transformer_tiny().replace(vocab_size=40, num_hidden_layers=1, d_model=32,
                                    d_ff=64, num_heads=2, norm_type=norm_type)
    model = Transformer(hp)
    rng = np.random.default_rng(0)
    src = rng.integers(2, 40, (2, 6)).astype("int32")
    src[0, 4:] = 0
    tgt = rng.integers(2, 40, (2, 5)).astype("int32")
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.build()
    before = [np.array(w) for w in model.trainable_weights]
    loss = float(model.train_on_batch({"inputs": src, "targets": tgt}, tgt))
    moved = sum(not np.allclose(a, np.array(w)) for a, w in zip(before, model.trainable_weights))

    full = np.asarray(model({"inputs": src, "targets": tgt}))
    enc, pad = model.encode(src)
    cache = model.init_cache(enc, pad, 5)
    ids, steps = np.zeros((2,), "int32"), []
    for i in range(5):
        logits, cache = model.decode_step(ids, cache, np.int32(i))
        steps.append(np.asarray(logits))
        ids = tgt[:, i]
    diff = float(np.abs(np.stack(steps, 1) - full).max())
    print(json.dumps({"norm_type": norm_type, "backend": keras.backend.backend(), "loss": loss, "moved": int(moved),
                      "weights": len(before), "cache_diff": diff,
                      "dtype": str(full.dtype)}))
