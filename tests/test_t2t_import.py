"""t2t-import (issue 59): a tensor2tensor run becomes a run directory of ours.

The real T2T checkpoint is ../shared/data/t2t_legacy/transformer_test_ckpt
(written by tensor2tensor's release). Its bad variants (a missing or
truncated shard, a changed hparams.json, an extra variable) are made from a
copy in tmp_path. The slow tests compare the imported model with
tensor2tensor's own Transformer (tests/t2t_oracle.py, run in a subprocess).
"""

import errno
import json
import os
import re
import signal
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ENV, one_line_error, run_cli
from t2t_revival.files.atomic_file import TEMPORARY_PREFIX

T2T_RUN = "t2t_legacy/transformer_test_ckpt"
VOCAB_8K = "t2t_legacy/vocab.translate_ende_wmt8k.8192.subwords"
VOCAB_32K = "t2t_legacy/vocab.translate_ende_wmt32k.32768.subwords"


@pytest.fixture
def t2t_copy(shared_data, tmp_path):
    """A writable copy of the T2T run."""
    path = tmp_path / "t2t"
    shutil.copytree(shared_data / T2T_RUN, path)
    for name in os.listdir(path):
        os.chmod(path / name, 0o644)
    return path


def _import(t2t_dir, vocab, output_dir, *more):
    return run_cli("t2t_import", f"--t2t_dir={t2t_dir}", f"--vocab_file={vocab}",
                   f"--output_dir={output_dir}", *more)


def _refused(out, output_dir, *needles):
    """One line, exit 2, and nothing written: no output_dir, no temporary beside it."""
    line = one_line_error(out, "t2t-import", *needles)
    assert not os.path.exists(output_dir)
    assert not [n for n in os.listdir(os.path.dirname(output_dir))
                if n.startswith(TEMPORARY_PREFIX)]
    return line


# t2t-import in a fresh process, then whether TensorFlow was imported.
_FRESH = ("import sys\n"
          "from t2t_revival.cli.t2t_import import run\n"
          "sys.argv = ['t2t-import'] + sys.argv[1:]\n"
          "try:\n"
          "    run()\n"
          "finally:\n"
          "    print('tensorflow imported:', 'tensorflow' in sys.modules, file=sys.stderr)\n")


def _import_fresh(t2t_dir, vocab, output_dir):
    return subprocess.run([sys.executable, "-c", _FRESH, f"--t2t_dir={t2t_dir}",
                           f"--vocab_file={vocab}", f"--output_dir={output_dir}"],
                          capture_output=True, text=True, env=ENV, timeout=300)


def _rewrite_checkpoint(prefix, change):
    """Write the T2T checkpoint `prefix` again with `change(variables)` applied."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    variables = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}
    change(variables)
    for path in prefix.parent.glob(prefix.name + ".*"):
        path.unlink()
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(variables[k]) for k in names])


def test_a_directory_that_is_not_a_t2t_run_is_refused(shared_data, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    out = _import(tmp_path, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "is not a tensor2tensor run", "hparams.json")


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_missing_or_truncated_shard_is_refused(t2t_copy, shared_data, tmp_path, damage):
    shard = t2t_copy / "model.ckpt-1.data-00001-of-00002"
    if damage == "missing":
        shard.unlink()
    else:
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "model.ckpt-1 cannot be read", "missing or truncated")


@pytest.mark.parametrize("key, value, variable, shapes", [
    ("hidden_size", 32, "shared_embedding.embeddings", "[8190, 16] in the checkpoint, "
                                                       "[8190, 32] by hparams.json"),
    ("filter_size", 4, "encoder_layer_0.ffn.inner.kernel", "[16, 8] in the checkpoint, "
                                                           "[16, 4] by hparams.json"),
])
def test_hparams_and_checkpoint_that_disagree_are_refused(t2t_copy, shared_data, tmp_path,
                                                          key, value, variable, shapes):
    hparams = json.loads((t2t_copy / "hparams.json").read_text())
    hparams[key] = value
    (t2t_copy / "hparams.json").write_text(json.dumps(hparams))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "disagree", variable, shapes)


def test_a_vocabulary_of_another_size_is_refused(shared_data, tmp_path):
    out = _import(shared_data / T2T_RUN, shared_data / VOCAB_32K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "33708 entries", "modality has 8190")


def test_an_output_dir_that_holds_a_run_is_refused(shared_data, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "hparams.json").write_text("{}")
    out = _import(shared_data / T2T_RUN, shared_data / VOCAB_8K, run)
    one_line_error(out, "t2t-import", "already exists and is not empty")
    assert os.listdir(run) == ["hparams.json"]
    assert (run / "hparams.json").read_text() == "{}"


@pytest.mark.parametrize("key, value", [("ffn_layer", "local_moe_tpu"),
                                        ("self_attention_type", "dot_product_relative"),
                                        ("max_relative_position", 20),
                                        ("layer_postprocess_sequence", "dna")])
def test_an_unsupported_t2t_hparam_is_refused_naming_it(t2t_copy, shared_data, tmp_path,
                                                         key, value):
    hparams = json.loads((t2t_copy / "hparams.json").read_text())
    hparams[key] = value
    (t2t_copy / "hparams.json").write_text(json.dumps(hparams))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), key, repr(value), "cannot be imported")


def test_a_variable_left_over_is_refused_naming_it(t2t_copy, shared_data, tmp_path):
    name = "transformer/body/encoder/layer_0/ffn/experts/kernel"
    _rewrite_checkpoint(t2t_copy / "model.ckpt-1",
                        lambda v: v.update({name: np.zeros((16, 4), np.float32)}))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), name, "[16, 4]", "no variable is dropped")


MODALITY = "transformer/symbol_modality_8190_16"
FINAL_NORM = re.compile(r"^transformer/body/(encoder|decoder)/layer_prepostprocess/")


def _set_hparams(t2t_dir, **values):
    hparams = json.loads((t2t_dir / "hparams.json").read_text())
    hparams.update(values)
    (t2t_dir / "hparams.json").write_text(json.dumps(hparams))


def _as_post_norm(variables):
    """The pre-norm checkpoint's variables as a post-norm one's: each sublayer's
    norm under `layer_postprocess` (T2T's "dan"), no final norms."""
    for name in list(variables):
        if FINAL_NORM.match(name):
            del variables[name]
        elif "/layer_prepostprocess/layer_norm/" in name:
            variables[name.replace("/layer_prepostprocess/", "/layer_postprocess/")] = \
                variables.pop(name)


def _our_variable(reader, *parts):
    """The value of our checkpoint's one variable whose name holds all `parts`."""
    key, = [k for k in reader.get_variable_to_shape_map() if all(p in k for p in parts)
            and "OPTIMIZER" not in k]
    return reader.get_tensor(key)


def test_a_post_norm_checkpoint_is_imported(t2t_copy, shared_data, tmp_path):
    import tensorflow as tf

    from t2t_revival.settings.hparams import HParams

    original = tf.train.load_checkpoint(str(shared_data / T2T_RUN / "model.ckpt-1"))
    _rewrite_checkpoint(t2t_copy / "model.ckpt-1", _as_post_norm)
    _set_hparams(t2t_copy, layer_preprocess_sequence="none", layer_postprocess_sequence="dan")
    run = tmp_path / "run"
    out = _import(t2t_copy, shared_data / VOCAB_8K, run)
    assert out.returncode == 0, out.stderr[-3000:]
    assert HParams.load(str(run / "hparams.json")).norm_type == "post"
    ours = tf.train.load_checkpoint(str(run / "ckpt-1"))
    assert not [k for k in ours.get_variable_to_shape_map() if "final_norm" in k]
    for stack, layer, sublayer, norm in [("encoder", 1, "ffn", "ffn_norm"),
                                         ("decoder", 0, "encdec_attention",
                                          "cross_attention_norm")]:
        theirs = f"transformer/body/{stack}/layer_{layer}/{sublayer}/layer_prepostprocess/" \
                 f"layer_norm/layer_norm_"
        for t2t_name, our_name in (("scale", "gamma"), ("bias", "beta")):
            np.testing.assert_array_equal(
                _our_variable(ours, f"{stack}_layer_{layer}", norm, our_name),
                original.get_tensor(theirs + t2t_name))


@pytest.mark.parametrize("post_norm_variables", [True, False])
def test_norms_placed_otherwise_than_hparams_json_says_are_refused(
        t2t_copy, shared_data, tmp_path, post_norm_variables):
    if post_norm_variables:   # post-norm variables, hparams.json's pre-norm sequences
        _rewrite_checkpoint(t2t_copy / "model.ckpt-1", _as_post_norm)
        needles = ("a norm of a post-norm Transformer", "describes a pre-norm one")
    else:
        _set_hparams(t2t_copy, layer_preprocess_sequence="none",
                     layer_postprocess_sequence="dan")
        needles = ("a norm of a pre-norm Transformer", "describes a post-norm one")
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "hparams.json and the checkpoint disagree", *needles)


def _split_modality(roles):
    """Change the checkpoint's shared modality into `roles`, each a distinct
    matrix (the shared one times 1, 2, 3), in its 16 shards."""
    def change(variables):
        shards = {n: variables.pop(n) for n in list(variables)
                  if n.startswith(f"{MODALITY}/shared/")}
        for factor, role in enumerate(roles, 1):
            for name, value in shards.items():
                variables[name.replace("/shared/", f"/{role}/")] = value * factor
    return change


@pytest.mark.parametrize("roles, sharing", [
    (("input_emb", "target_emb", "softmax"), dict(shared_embedding=False)),
    (("shared", "softmax"), dict(shared_embedding=True)),
])
def test_separate_embeddings_and_softmax_are_imported(t2t_copy, shared_data, tmp_path,
                                                      roles, sharing):
    import tensorflow as tf

    from t2t_revival.settings.hparams import HParams

    original = tf.train.load_checkpoint(str(shared_data / T2T_RUN / "model.ckpt-1"))
    shared = np.concatenate([original.get_tensor(f"{MODALITY}/shared/weights_{i}")
                             for i in range(16)])
    _rewrite_checkpoint(t2t_copy / "model.ckpt-1", _split_modality(roles))
    _set_hparams(t2t_copy, shared_embedding_and_softmax_weights=False, **sharing)
    run = tmp_path / "run"
    out = _import(t2t_copy, shared_data / VOCAB_8K, run)
    assert out.returncode == 0, out.stderr[-3000:]
    assert HParams.load(str(run / "hparams.json")).shared_embedding is False
    ours = tf.train.load_checkpoint(str(run / "ckpt-1"))
    target = 2 if roles[0] == "input_emb" else 1
    np.testing.assert_array_equal(_our_variable(ours, "source_embedding"), shared)
    np.testing.assert_array_equal(_our_variable(ours, "target_embedding"), shared * target)
    np.testing.assert_array_equal(_our_variable(ours, "output_projection"), (shared * 3 if
                                  roles[0] == "input_emb" else shared * 2).T)


def test_sharing_hparams_that_disagree_with_the_modality_are_refused(t2t_copy, shared_data,
                                                                     tmp_path):
    _rewrite_checkpoint(t2t_copy / "model.ckpt-1",
                        _split_modality(("input_emb", "target_emb", "softmax")))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "hparams.json and the checkpoint disagree",
             "shared_embedding_and_softmax_weights=True", "['shared']",
             "['input_emb', 'softmax', 'target_emb']")


def test_a_modality_without_inputs_is_refused(t2t_copy, shared_data, tmp_path):
    _rewrite_checkpoint(t2t_copy / "model.ckpt-1", _split_modality(("target_emb", "softmax")))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "symbol modality holds ['softmax', 'target_emb']")


def test_the_import_writes_a_whole_run_directory(shared_data, tmp_path):
    from t2t_revival.settings.hparams import HParams
    from t2t_revival.run_dir.run_record import RunRecord

    run = tmp_path / "run"
    out = _import(shared_data / T2T_RUN, shared_data / VOCAB_8K, run, "--target_space_id=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "target_space_id=3" in out.stdout
    assert "Adam slots (training/...) are not imported" in out.stdout
    assert sorted(os.listdir(run)) == ["checkpoint", "ckpt-1.data-00000-of-00001",
                                       "ckpt-1.index", "hparams.json", "run.json",
                                       "vocab.subwords"]
    hparams = HParams.load(str(run / "hparams.json"))
    assert (hparams.d_model, hparams.d_ff, hparams.num_heads, hparams.vocab_size) == \
        (16, 8, 2, 8190)
    assert (hparams.norm_type, hparams.position_encoding, hparams.shared_embedding,
            hparams.target_space_embedding, hparams.target_space_id,
            hparams.zero_pad_embedding) == ("pre", "t2t_sinusoid", True, True, 3, True)
    record = RunRecord.load(str(run / "run.json"))
    assert record.imported_from == str((shared_data / T2T_RUN / "model.ckpt-1").resolve()) \
        or record.imported_from.endswith("transformer_test_ckpt/model.ckpt-1")
    assert (run / "vocab.subwords").read_bytes() == (shared_data / VOCAB_8K).read_bytes()


def test_all_checkpoints_are_imported_with_their_steps(t2t_copy, shared_data, tmp_path):
    import tensorflow as tf

    for name in os.listdir(t2t_copy):
        if name.startswith("model.ckpt-1."):
            shutil.copy(t2t_copy / name, t2t_copy / name.replace("ckpt-1", "ckpt-7"))
    scale = "transformer/body/encoder/layer_prepostprocess/layer_norm/layer_norm_scale"
    _rewrite_checkpoint(t2t_copy / "model.ckpt-7",
                        lambda v: v.update({scale: np.full((16,), 2.0, np.float32)}))
    run = tmp_path / "run"
    out = _import(t2t_copy, shared_data / VOCAB_8K, run, "--checkpoint=all")
    assert out.returncode == 0, out.stderr[-3000:]
    one = tf.train.load_checkpoint(str(run / "ckpt-1"))
    seven = tf.train.load_checkpoint(str(run / "ckpt-7"))
    key = next(k for k in one.get_variable_to_shape_map() if "encoder_final_norm" in k and "gamma" in k)
    assert not np.allclose(one.get_tensor(key), 2.0)
    np.testing.assert_array_equal(seven.get_tensor(key), np.full((16,), 2.0, np.float32))
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-7")


def test_t2t_timing_signal_is_tensor2tensors_get_timing_signal_1d():
    from t2t_revival.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding

    length, channels = 7, 16
    # common_attention.get_timing_signal_1d, written out in numpy.
    timescales = channels // 2
    increment = np.log(1e4) / max(timescales - 1, 1)
    inv = np.exp(np.arange(timescales) * -increment)
    scaled = (np.arange(length) + 3)[:, None] * inv[None, :]
    expected = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    layer = SinusoidalPositionEncoding(layout="t2t")
    got = np.asarray(layer(np.zeros((1, length, channels), np.float32), start_index=3))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    paper = np.asarray(SinusoidalPositionEncoding()(np.zeros((1, length, channels), np.float32),
                                                    start_index=3))
    assert np.abs(paper - expected).max() > 0.1   # the paper's interleaved layout differs


def test_zero_pad_embedding_and_target_space_change_what_the_encoder_sees():
    from t2t_revival.settings.hparams import HParams
    from t2t_revival.models.build_model import build_model

    hp = HParams(num_hidden_layers=1, d_model=8, d_ff=8, num_heads=2, vocab_size=12,
                 norm_type="pre", position_encoding="t2t_sinusoid", zero_pad_embedding=True,
                 target_space_embedding=True, dropout=0.0)
    model = build_model(hp)
    embedded = np.asarray(model.target_embedding(np.array([[0, 5]])))
    np.testing.assert_array_equal(embedded[0, 0], np.zeros(8))   # PAD: the zero vector
    np.testing.assert_allclose(embedded[0, 1], np.asarray(model.target_embedding.embeddings)[5]
                               * 8 ** 0.5, rtol=1e-6)
    other = build_model(hp.replace(target_space_id=4))
    other.set_weights(model.get_weights())
    ids = np.array([[3, 4, 1]])
    assert np.abs(np.asarray(model.encode(ids)[0]) - np.asarray(other.encode(ids)[0])).max() > 1e-3


# Issue 77 part 4 ---------------------------------------------------------


def _sentencepiece_vocab(path, lines):
    """A SentencePiece `.vocab` (piece<TAB>score) of `lines` lines."""
    path.write_text("<unk>\t0\n<s>\t0\n</s>\t0\n" +
                    "".join(f"\u2581w{i}\t-{i}.5\n" for i in range(lines - 3)), encoding="utf-8")


@pytest.mark.parametrize("kind, needles", [
    ("sentencepiece", [":1: not a quoted subtoken", "Received: line='<unk>\\t0'"]),
    ("not_utf8", [":7: not UTF-8"]),
    ("pad_eos_swapped", [":1: the vocabulary does not start with '<pad>' and '<EOS>'"]),
])
def test_a_vocabulary_that_is_not_a_subword_text_encoders_is_refused_before_tensorflow(
        shared_data, tmp_path, kind, needles):
    """Any file of 8,190 lines was taken: the import "succeeded", every decode failed."""
    vocab = tmp_path / "vocab.subwords"
    lines = (shared_data / VOCAB_8K).read_bytes().split(b"\n")
    if kind == "sentencepiece":
        _sentencepiece_vocab(vocab, 8190)
    elif kind == "not_utf8":
        vocab.write_bytes(b"\n".join(lines[:6] + [b"'\xff\xfe_'"] + lines[7:]))
    else:
        vocab.write_bytes(b"\n".join([lines[1], lines[0]] + lines[2:]))
    out = _import_fresh(shared_data / T2T_RUN, vocab, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), "--vocab_file is not a tensor2tensor "
             "SubwordTextEncoder vocabulary", str(vocab), *needles)
    assert "tensorflow imported: False" in out.stderr


@pytest.mark.parametrize("where", ["not_empty", "under_a_file"])
def test_an_output_dir_that_cannot_be_one_is_refused_before_tensorflow(shared_data, tmp_path,
                                                                       where):
    """It came after TensorFlow's import (20 s on a slow disk; measured here:
    5.4 s before, 0.3 s after)."""
    if where == "not_empty":
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "notes.txt").write_text("mine\n")
        output_dir, needle = tmp_path / "run", "already exists and is not empty"
    else:
        (tmp_path / "a_file").write_text("")
        output_dir, needle = tmp_path / "a_file" / "run", "is a file, so t2t-import cannot make"
    out = _import_fresh(shared_data / T2T_RUN, shared_data / VOCAB_8K, output_dir)
    one_line_error(out, "t2t-import", needle)
    assert "tensorflow imported: False" in out.stderr


@pytest.mark.parametrize("index, needles", [
    (b"", ["is empty", 'no model_checkpoint_path: "model.ckpt-N" line']),
    (b"\xff\xfe model_checkpoint_path", ["is not UTF-8 (invalid start byte at byte 0)"]),
    (b"garbage\n", ["is not the text tensor2tensor writes"]),
])
def test_a_damaged_checkpoint_index_is_one_line(t2t_copy, shared_data, tmp_path, index,
                                                needles):
    (t2t_copy / "checkpoint").write_bytes(index)
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), f"the checkpoint index {t2t_copy / 'checkpoint'}",
             *needles, "--checkpoint=model.ckpt-N (it has model.ckpt-1)")


def test_an_index_naming_a_checkpoint_elsewhere_means_the_one_here(t2t_copy, shared_data,
                                                                   tmp_path):
    """A run copied from its machine: the index names the old absolute path."""
    (t2t_copy / "checkpoint").write_text('model_checkpoint_path: "/gone/oss_train/model.ckpt-1"\n'
                                         'all_model_checkpoint_paths: "/gone/model.ckpt-1"\n')
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "run" / "ckpt-1.index").is_file()


@pytest.mark.parametrize("key, value, needle", [
    ("num_hidden_layers", "missing", "has no num_hidden_layers"),
    ("num_heads", 0, "has num_heads=0"),
    ("num_heads", None, "has num_heads=null"),
    ("hidden_size", "16", 'has hidden_size="16"'),
    ("filter_size", 2.5, "has filter_size=2.5"),
    ("num_heads", 3, "hidden_size=16, which num_heads=3 does not divide"),
])
def test_hparams_json_without_its_sizes_is_one_line(t2t_copy, shared_data, tmp_path, key,
                                                    value, needle):
    hparams = json.loads((t2t_copy / "hparams.json").read_text())
    if value == "missing":
        del hparams[key]
    else:
        hparams[key] = value
    (t2t_copy / "hparams.json").write_text(json.dumps(hparams))
    out = _import(t2t_copy, shared_data / VOCAB_8K, tmp_path / "run")
    _refused(out, str(tmp_path / "run"), str(t2t_copy / "hparams.json"), needle)


# t2t-import in a fresh process whose first checkpoint save imports
# `stopping_import`, which sends the process a stop signal: it lands inside an
# import, where the controller ends the process at once (os._exit, no unwinding).
_STOPPED = ("import os, sys\n"
            "sys.path.insert(0, sys.argv.pop(1))\n"
            "from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder\n"
            "def save(self, *args, **kwargs):\n"
            "    import stopping_import\n"
            "CheckpointFolder.save = save\n"
            "from t2t_revival.cli.t2t_import import run\n"
            "sys.argv = ['t2t-import'] + sys.argv[1:]\n"
            "run()\n")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_import_leaves_no_half_built_folder(shared_data, tmp_path, signum):
    """A kill that cannot unwind (a signal inside an import, or a long native
    call: the watchdog's os._exit) left the hidden folder, a partial checkpoint."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "stopping_import.py").write_text(
        f"import os, time\nos.kill(os.getpid(), {int(signum)})\ntime.sleep(30)\n")
    output_dir = tmp_path / "out" / "run"
    out = subprocess.run([sys.executable, "-c", _STOPPED, str(modules),
                          f"--t2t_dir={shared_data / T2T_RUN}",
                          f"--vocab_file={shared_data / VOCAB_8K}", f"--output_dir={output_dir}"],
                         capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 128 + signum, out.stderr[-3000:]
    assert f"t2t-import: stopped by {signal.Signals(signum).name}" in out.stderr
    assert os.listdir(tmp_path / "out") == []


def test_a_rerun_removes_what_a_killed_import_left(shared_data, tmp_path):
    """A SIGKILL's folder (named after its process) goes at the next import of
    that --output_dir; a live process's stays."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"{TEMPORARY_PREFIX}{dead.pid}-1-run"
    live = tmp_path / f"{TEMPORARY_PREFIX}{os.getpid()}-1-run"
    for folder in (left, live):
        folder.mkdir()
        (folder / "ckpt-1.data-00000-of-00001").write_bytes(b"x" * 100)
    out = _import(shared_data / T2T_RUN, shared_data / VOCAB_8K, tmp_path / "run")
    assert out.returncode == 0, out.stderr[-3000:]
    assert not left.exists() and live.is_dir()


class _FullDiskManager:
    """A CheckpointManager whose save writes part of a checkpoint, then finds the disk full."""

    def __init__(self, checkpoint, directory, **kwargs):
        self.directory, self.latest_checkpoint = str(directory), None

    def save(self, checkpoint_number):
        with open(os.path.join(self.directory, f"ckpt-{checkpoint_number}.index"), "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_says_nothing_was_written_and_what_to_free(shared_data, tmp_path,
                                                               monkeypatch):
    """It gave the trainer's advice: lower --keep_checkpoint_max, rerun to resume."""
    import tensorflow as tf

    monkeypatch.setattr(tf.train, "CheckpointManager", _FullDiskManager)
    output_dir = tmp_path / "run"
    out = _import(shared_data / T2T_RUN, shared_data / VOCAB_8K, output_dir)
    line = _refused(out, str(output_dir), f"could not write {output_dir} "
                    f"({os.strerror(errno.ENOSPC)}); nothing was written",
                    "half-built folder beside it is removed", "free some space on that disk",
                    "MB)", "then rerun the same command")
    assert "keep_checkpoint_max" not in line and "resume" not in line


def test_the_decoder_takes_the_flags_of_the_imported_runs_flags_txt(shared_data, tmp_path):
    """tensor2tensor's decode scripts pass --problem --model --hparams_set
    --hparams --data_dir as the run trained with them (its flags.txt)."""
    from t2t_revival.run_dir.run_record import RunRecord

    run = tmp_path / "run"
    assert _import(shared_data / T2T_RUN, shared_data / VOCAB_8K, run).returncode == 0
    assert RunRecord.load(str(run / "run.json")).imported_flags == {
        "problem": "translate_ende_wmt8k", "model": "transformer",
        "hparams_set": "transformer_test", "hparams": ""}
    source = tmp_path / "source.en"
    source.write_text("A dog runs.\n")
    t2t_flags = ["--problem=translate_ende_wmt8k", "--model=transformer",
                 "--hparams_set=transformer_test", "--hparams=", "--data_dir=~/t2t/data"]
    to = tmp_path / "out.de"
    out = run_cli("decoder", f"--output_dir={run}", *t2t_flags, f"--decode_from_file={source}",
                  f"--decode_to_file={to}", "--decode_hparams=beam_size=4,alpha=0.6")
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(to.read_text(encoding="utf-8").splitlines()) == 1
    out = run_cli("decoder", f"--output_dir={run}", "--problem=translate_ende_wmt32k",
                  f"--decode_from_file={source}", f"--decode_to_file={to}")
    one_line_error(out, "t2t-decoder", "--problem=translate_ende_wmt32k disagrees",
                   "tensor2tensor's flags.txt: problem='translate_ende_wmt8k'")
