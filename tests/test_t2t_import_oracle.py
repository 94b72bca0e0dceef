"""The imported T2T checkpoint against tensor2tensor's own Transformer
(issue 59's acceptance): teacher-forced logits within 1e-4, greedy decoding
the same ids, beam search (beam 4, alpha 0.6) the same on at least 95%.
And every layout t2t-import takes (issue 77, part 1): post-norm and pre-norm,
embeddings and softmax shared, separate, or inputs and targets shared with a
softmax of their own, in one modality shard or 11 (uneven, past 10), each a
run tensor2tensor itself wrote (`t2t_oracle.py --build`, all in one
process), imported with logits within 1e-4 of its own on 20 pairs.

tensor2tensor 1.15.7 runs in a subprocess (tests/t2t_oracle.py: TF graph
mode, tf_keras, stubbed imports), on the same checkpoint and token ids; ours
is the run directory t2t-import wrote, decoded with our Decoder (beam_search)
with T2T's infer settings: max length = input length + decode_length (50).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

T2T_RUN = "t2t_legacy/transformer_test_ckpt"
VOCAB_8K = "t2t_legacy/vocab.translate_ende_wmt8k.8192.subwords"
PAIRS = 24
DECODE_LENGTH = 50   # T2T's infer default, our extra_length


def _random_pairs(vocab_size, seed=59, pairs=PAIRS):
    """`pairs` (inputs, targets) of random ids 2..V-1 ending with EOS (1),
    of 3..14 tokens, right-padded with PAD (0)."""
    rng = np.random.default_rng(seed)

    def batch():
        lengths = rng.integers(3, 15, pairs)
        ids = np.zeros((pairs, lengths.max()), np.int32)
        for row, length in enumerate(lengths):
            ids[row, :length - 1] = rng.integers(2, vocab_size, length - 1)
            ids[row, length - 1] = 1
        return ids
    return batch(), batch()


def _until_eos(ids):
    """The ids up to and including the first EOS (all of them without one)."""
    ids = [int(i) for i in ids]
    return ids[:ids.index(1) + 1] if 1 in ids else ids


@pytest.fixture(scope="module")
def compared(shared_data, tmp_path_factory):
    """(our imported model, our decoder factory, inputs, targets, T2T's outputs)."""
    from t2t_revival.models.build_model import build_model
    from t2t_revival.models.trained_model import TrainedModel
    from t2t_revival.run_dir.checkpoint_folder import quiet, restore_model_weights
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    from t2t_revival.t2t_import.importer import import_t2t_run

    tmp = tmp_path_factory.mktemp("t2t_oracle")
    run = tmp / "run"
    prefix, = import_t2t_run(str(shared_data / T2T_RUN), str(shared_data / VOCAB_8K),
                             str(run), log=quiet)
    directory = TrainingDirectory(str(run))
    hparams = directory.read_hparams().for_inference()
    model = build_model(hparams)
    restore_model_weights(model, prefix)
    inputs, targets = _random_pairs(hparams.vocab_size)
    np.savez(tmp / "in.npz", inputs=inputs, targets=targets, target_space_id=0,
             decode_length=DECODE_LENGTH, beam_size=4)
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "t2t_oracle.py"),
         str(shared_data / T2T_RUN / "model.ckpt-1"), "transformer_test",
         str(tmp / "in.npz"), str(tmp / "out.npz")],
        capture_output=True, text=True, timeout=1200, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-4000:]
    t2t = dict(np.load(tmp / "out.npz"))
    trained = TrainedModel(hparams=hparams, run_record=directory.read_run_record(),
                           vocab=None, checkpoint_path=prefix, model=model)
    return model, trained, inputs, targets, t2t


def _t2t_ids(decoded, inputs):
    """T2T's `infer` outputs, each cut to its input's limit and at its first EOS."""
    return [_until_eos(row[:int((inputs[i] != 0).sum()) + DECODE_LENGTH])
            for i, row in enumerate(decoded)]


def _our_search(trained, inputs, beam_size):
    """Our search of each input alone, as T2T's infer got it: the decoder's
    uncompiled search, traced once for all input lengths (`search` with a
    Python int limit traced once per length: seconds each), its limit the
    input's length + extra_length (DECODE_LENGTH; the imported run's
    sinusoids set no cap)."""
    import tensorflow as tf

    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import DecodeHParams

    assert trained.hparams.position_encoding == "t2t_sinusoid"
    decoder = Decoder(trained, DecodeHParams(beam_size=beam_size, alpha=0.6,
                                             extra_length=DECODE_LENGTH, xla=False))
    results = []
    for row in inputs:
        source = row[:int((row != 0).sum())][None, :]   # alone, as T2T's infer got it
        sequences, _ = decoder.uncompiled_search(tf.constant(source))
        sequences = np.asarray(sequences)[0]
        assert len(sequences) == source.shape[1] + DECODE_LENGTH
        results.append(_until_eos(sequences))
    return results


@pytest.mark.slow
def test_teacher_forced_logits_equal_tensor2tensors(compared):
    model, _, inputs, targets, t2t = compared
    ours = np.asarray(model({"inputs": inputs, "targets": targets}, training=False))
    assert ours.shape == t2t["logits"].shape == (PAIRS, targets.shape[1], 8190)
    real = targets != 0   # every target position of each pair, its EOS included
    difference = np.abs(ours - t2t["logits"])[real]
    print(f"max |ours - T2T| over {real.sum()} target positions of {PAIRS} pairs: "
          f"{difference.max():.2e} (logits up to {np.abs(t2t['logits']).max():.2f})")
    assert difference.max() < 1e-4


@pytest.mark.slow
def test_greedy_decoding_equals_tensor2tensors(compared):
    _, trained, inputs, _, t2t = compared
    ours = _our_search(trained, inputs, beam_size=1)
    theirs = _t2t_ids(t2t["greedy"], inputs)
    print(f"greedy: {sum(a == b for a, b in zip(ours, theirs))} of {PAIRS} the same as T2T's "
          f"({sum(1 in t for t in theirs)} end with EOS, the others run to the length limit)")
    assert ours == theirs


@pytest.mark.slow
def test_beam_search_equals_tensor2tensors(compared):
    _, trained, inputs, _, t2t = compared
    ours = _our_search(trained, inputs, beam_size=4)
    theirs = _t2t_ids(t2t["beam"], inputs)
    same = [a == b for a, b in zip(ours, theirs)]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            print(f"input {i}: ours {a}\n          T2T  {b}")
    print(f"beam 4, alpha 0.6: {sum(same)} of {PAIRS} the same as T2T's")
    assert sum(same) >= 0.95 * PAIRS


# tensor2tensor runs of every layout: transformer_base_v1 (post-norm) made
# tiny, with these overrides; {name: (overrides, our norm_type, our shared_embedding)}.
_NORMS = {"post": ("layer_preprocess_sequence=none,layer_postprocess_sequence=dan", "post"),
          "pre": ("layer_preprocess_sequence=n,layer_postprocess_sequence=da", "pre")}
_EMBEDDINGS = {
    "shared": ("shared_embedding_and_softmax_weights=True", True),
    "separate": ("shared_embedding_and_softmax_weights=False,shared_embedding=False", False),
    "inputs_targets_shared": ("shared_embedding_and_softmax_weights=False,"
                              "shared_embedding=True", False),
}
LAYOUTS = {f"{norm}_{embedding}_{shards}shard": (
    f"num_hidden_layers=2,hidden_size=32,filter_size=64,num_heads=4,{n_over},{e_over},"
    f"symbol_modality_num_shards={shards}", norm_type, shared)
    for norm, (n_over, norm_type) in _NORMS.items()
    for embedding, (e_over, shared) in _EMBEDDINGS.items() for shards in (1, 11)}
LAYOUT_PAIRS = 20


@pytest.fixture(scope="module")
def t2t_layouts(shared_data, tmp_path_factory):
    """(folder of the T2T runs `LAYOUTS` and their `NAME.logits.npy`, inputs,
    targets): one oracle process writes them all."""
    tmp = tmp_path_factory.mktemp("t2t_layouts")
    inputs, targets = _random_pairs(8190, seed=77, pairs=LAYOUT_PAIRS)
    np.savez(tmp / "in.npz", inputs=inputs, targets=targets, vocab_size=8190)
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "t2t_oracle.py"), "--build",
         "transformer_base_v1", str(tmp / "in.npz"), str(tmp / "runs"),
         *(f"{name}={overrides}" for name, (overrides, *_) in LAYOUTS.items())],
        capture_output=True, text=True, timeout=1200, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-4000:]
    return tmp / "runs", inputs, targets


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_imports_with_tensor2tensors_logits(t2t_layouts, shared_data, tmp_path,
                                                         layout):
    import tensorflow as tf

    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_folder import quiet, restore_model_weights
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    from t2t_revival.t2t_import.importer import import_t2t_run

    runs, inputs, targets = t2t_layouts
    _, norm_type, shared = LAYOUTS[layout]
    t2t_run = runs / layout
    names = tf.train.load_checkpoint(str(t2t_run / "model.ckpt-1")).get_variable_to_shape_map()
    shards = {n for n in names if "/symbol_modality_8190_32/" in n}
    assert len(shards) == int(layout.split("_")[-1][:-5]) * (1 if shared else 3 if
                                                             "separate" in layout else 2)
    assert any("/layer_postprocess/layer_norm/" in n for n in names) == (norm_type == "post")
    prefix, = import_t2t_run(str(t2t_run), str(shared_data / VOCAB_8K), str(tmp_path / "run"),
                             log=quiet)
    hparams = TrainingDirectory(str(tmp_path / "run")).read_hparams().for_inference()
    assert (hparams.norm_type, hparams.shared_embedding) == (norm_type, shared)
    model = build_model(hparams)
    restore_model_weights(model, prefix)
    ours = np.asarray(model({"inputs": inputs, "targets": targets}, training=False))
    theirs = np.load(runs / f"{layout}.logits.npy")
    assert ours.shape == theirs.shape == (LAYOUT_PAIRS, targets.shape[1], 8190)
    real = targets != 0
    difference = np.abs(ours - theirs)[real]
    print(f"{layout}: max |ours - T2T| over {real.sum()} target positions: "
          f"{difference.max():.2e} (logits up to {np.abs(theirs).max():.2f})")
    assert difference.max() < 1e-4
