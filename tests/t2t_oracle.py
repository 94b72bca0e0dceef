"""tensor2tensor 1.15.7's own Transformer on a T2T checkpoint: the test-only
oracle of the importer (t2t-import), run in a SUBPROCESS of the tests.

    python tests/t2t_oracle.py CHECKPOINT_PREFIX HPARAMS_SET IN.npz OUT.npz
    python tests/t2t_oracle.py --build HPARAMS_SET IN.npz OUT_DIR NAME=OVERRIDES...

IN.npz holds int32 `inputs` [batch, S] and `targets` [batch, T] (PAD = 0,
right-padded), int `target_space_id`, int `decode_length` and int
`beam_size` (0: logits only). OUT.npz gets float32 `logits` [batch, T, vocab]
(eval mode: no dropout), and with beam_size > 0 `greedy` and `beam`
[batch, L] int32 (T2T's `model.infer(beam_size=1)` and `model.infer(
beam_size=beam_size, alpha=0.6)` on each input alone, 0-padded).

T2T's code runs on TF 2.21 in graph mode (tf.compat.v1) with tf_keras
(TF_USE_LEGACY_KERAS=1), once the modules it imports but does not use here
are stubbed: the packages of `STUBS`, `tf.estimator` (only its ModeKeys are
read) and `tensor2tensor.models/__init__` (which imports every model). That is
why it runs in a process of its own: none of this setup reaches the tests.

`--build` writes tensor2tensor runs of its own: for each NAME, the hparam
set HPARAMS_SET with `hparams.parse(OVERRIDES)` (e.g.
"hidden_size=32,layer_postprocess_sequence=dan,symbol_modality_num_shards=11"),
its Transformer built in a graph of its own (graph seed 77) for IN.npz's
`vocab_size` (int; inputs and targets share it, as a T2T text problem),
randomly initialised (T2T's initializers; its layer norms' scales and
biases and its dense biases, which start at 1 and 0, drawn from a seeded
normal too, so that a misplaced one shows), saved as tensor2tensor's trainer
leaves its `output_dir`: OUT_DIR/NAME/ with `model.ckpt-1` (global_step
included), `checkpoint`, `hparams.json` (`hparams.to_json`, as
`t2t_trainer.save_metadata`) and `flags.txt`; and its EVAL logits on IN.npz's
`inputs`/`targets` (target_space_id 0) in OUT_DIR/NAME.logits.npy. One
process for every run: the T2T import and its stubs are paid once.

The EVAL model's `call` runs as T2T wrote it, graph-mode code, without
AutoGraph's conversion (which the legacy layers' `__call__` applies to it:
converting its ~800 functions took two thirds of this process's 30 CPU
seconds; on the test's inputs the logits and both decodings were bit for bit
the same with and without it).
"""

import importlib.abc
import importlib.machinery
import os
import pathlib
import sys
import types

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from t2t_reference import t2t_package  # noqa: E402  (tensor2tensor's wheel, unpacked once)

sys.path.insert(0, str(t2t_package()))

STUBS = ("tensorflow_addons", "tf_slim", "tensorflow_probability", "gin",
         "mesh_tensorflow", "tensorflow_gan", "tensorflow_estimator", "gym", "cv2",
         "scipy", "sympy", "dopamine", "kfac", "bz2file", "gevent")


class _Anything(types.ModuleType):
    """A stub module: every attribute is another stub, callable."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        module = _Anything(f"{self.__name__}.{name}")
        module.__path__ = []
        setattr(self, name, module)
        return module

    def __call__(self, *args, **kwargs):
        return _Anything(f"{self.__name__}()")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Anything(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _import_t2t():
    sys.meta_path.insert(0, _StubFinder())
    import tensorflow
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    estimator = types.SimpleNamespace(ModeKeys=types.SimpleNamespace(
        TRAIN="train", EVAL="eval", PREDICT="infer"))
    tf.estimator = tensorflow.estimator = estimator
    import tensor2tensor
    models = types.ModuleType("tensor2tensor.models")
    models.__path__ = [os.path.join(os.path.dirname(tensor2tensor.__file__), "models")]
    sys.modules["tensor2tensor.models"] = models
    from tensor2tensor.data_generators import problem_hparams
    from tensor2tensor.models import transformer
    return tf, transformer, problem_hparams


def main(checkpoint, hparams_set, in_path, out_path):
    import numpy as np
    tf, transformer, problem_hparams = _import_t2t()
    data = np.load(in_path)
    inputs, targets = data["inputs"], data["targets"]
    space, beam_size = int(data["target_space_id"]), int(data["beam_size"])
    reader = tf.train.load_checkpoint(checkpoint)
    shapes = reader.get_variable_to_shape_map()
    vocab_size = sum(shape[0] for name, shape in shapes.items()
                     if "symbol_modality_" in name and "/training/" not in name
                     and "/softmax/" not in name and "/target_emb/" not in name
                     and "Adam" not in name and "/input_emb/" not in name)

    hparams = getattr(transformer, hparams_set)()
    hparams.problem_hparams = problem_hparams.test_problem_hparams(
        vocab_size, vocab_size, hparams)
    for key in ("layer_prepostprocess_dropout", "attention_dropout", "relu_dropout"):
        hparams.set_hparam(key, 0.0)
    out = {}
    with tf.Graph().as_default():
        def features(x, y=None):
            f = {"inputs": x[:, :, None, None],
                 "target_space_id": tf.constant(space, tf.int32)}
            if y is not None:
                f["targets"] = y[:, :, None, None]
            return f
        x_all = tf.constant(inputs, tf.int32)
        y_all = tf.constant(targets, tf.int32)
        with tf.variable_scope(tf.get_variable_scope(), reuse=tf.AUTO_REUSE):
            model = transformer.Transformer(hparams, tf.estimator.ModeKeys.EVAL)
            model.call = tf.autograph.experimental.do_not_convert(model.call)
            logits, _ = model(features(x_all, y_all))
            one = tf.placeholder(tf.int32, [1, None])
            decoded = {}
            if beam_size:
                infer = transformer.Transformer(hparams, tf.estimator.ModeKeys.PREDICT)
                decode_length = int(data["decode_length"])
                decoded["greedy"] = infer.infer(features(one), decode_length=decode_length,
                                                beam_size=1)["outputs"]
                decoded["beam"] = infer.infer(features(one), decode_length=decode_length,
                                              beam_size=beam_size, alpha=0.6)["outputs"]
        saver = tf.train.Saver([v for v in tf.global_variables()
                                if v.op.name in shapes])
        with tf.Session() as session:
            saver.restore(session, checkpoint)
            out["logits"] = session.run(logits)[:, :, 0, 0, :]
            for key, tensor in decoded.items():
                rows = []
                for row in inputs:
                    length = int((row != 0).sum())
                    ids = session.run(tensor, {one: row[None, :length]})
                    rows.append(np.asarray(ids).reshape(-1))
                width = max(len(r) for r in rows)
                out[key] = np.stack([np.pad(r, (0, width - len(r))) for r in rows])
    np.savez(out_path, **out)


def _eval_logits(tf, transformer, hparams, inputs, targets, space):
    """T2T's EVAL Transformer of `hparams` on the pairs: its logits tensor
    [batch, T, vocab] (variables made in the current graph and scope)."""
    features = {"inputs": tf.constant(inputs, tf.int32)[:, :, None, None],
                "targets": tf.constant(targets, tf.int32)[:, :, None, None],
                "target_space_id": tf.constant(space, tf.int32)}
    model = transformer.Transformer(hparams, tf.estimator.ModeKeys.EVAL)
    model.call = tf.autograph.experimental.do_not_convert(model.call)
    logits, _ = model(features)
    return logits[:, :, 0, 0, :]


def build(hparams_set, in_path, out_dir, *runs):
    """`--build` (the module's docstring): one T2T run and its logits per
    NAME=OVERRIDES of `runs`."""
    import json

    import numpy as np
    tf, transformer, problem_hparams = _import_t2t()
    data = np.load(in_path)
    vocab_size = int(data["vocab_size"])
    for run in runs:
        name, _, overrides = run.partition("=")
        folder = os.path.join(out_dir, name)
        os.makedirs(folder)
        hparams = getattr(transformer, hparams_set)()
        hparams.parse(overrides)
        metadata = hparams.to_json(indent=0, sort_keys=True)   # before eval's dropouts of 0
        hparams.problem_hparams = problem_hparams.test_problem_hparams(
            vocab_size, vocab_size, hparams)
        for key in ("layer_prepostprocess_dropout", "attention_dropout", "relu_dropout"):
            hparams.set_hparam(key, 0.0)
        with tf.Graph().as_default():
            tf.set_random_seed(77)
            step = tf.train.get_or_create_global_step()
            logits = _eval_logits(tf, transformer, hparams, data["inputs"], data["targets"], 0)
            rng = np.random.default_rng(77)
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                for variable in tf.trainable_variables():
                    if "layer_norm" in variable.op.name or variable.op.name.endswith("/bias"):
                        start = 1.0 if variable.op.name.endswith("_scale") else 0.0
                        variable.load(start + 0.3 * rng.standard_normal(
                            variable.shape.as_list()).astype(np.float32), session)
                step.load(1, session)
                np.save(os.path.join(out_dir, f"{name}.logits.npy"), session.run(logits))
                tf.train.Saver(save_relative_paths=True).save(
                    session, os.path.join(folder, "model.ckpt"), global_step=1)
        with open(os.path.join(folder, "hparams.json"), "w") as f:
            f.write(metadata)
        with open(os.path.join(folder, "flags.txt"), "w") as f:
            f.write("\n".join([f"--model=transformer", f"--hparams_set={hparams_set}",
                               f"--hparams={overrides}", "--problem=translate_ende_wmt8k",
                               "--train_steps=1", f"--output_dir={folder}"]))


if __name__ == "__main__":
    if sys.argv[1] == "--build":
        build(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
