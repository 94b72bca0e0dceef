"""TFDS translation datasets as problems, on TFDS's mock data (never downloaded)."""

import os
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from conftest import ROOT
from t2t_revival import registry
from t2t_revival.data.data_error import DataError
from t2t_revival.data.tfds_translate_problem import TfdsTranslateProblem
from t2t_revival.problems.translate_tfds import TranslateEndeWmt14Tfds, TranslateEndeWmtT2tTfds

MOCK_PAIRS = 300
# The end-to-end run's mock splits: each dev pair is scored, each shape traced.
E2E_MOCK_PAIRS = 40


class _SmallMockWmt14(TranslateEndeWmt14Tfds):
    """wmt14_translate/de-en with a vocabulary mock text can fill (11 characters)."""
    vocab_size = 300
    num_shards = {"train": 3, "dev": 1}
    registered_name = "translate_ende_mock_tfds"


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def test_registered_beside_the_archive_problems():
    for name, tfds_name in (("translate_ende_wmt14_tfds", "wmt14_translate/de-en"),
                            ("translate_ende_wmt_t2t_tfds", "wmt_t2t_translate/de-en")):
        cls = registry.problems.get(name)
        assert issubclass(cls, TfdsTranslateProblem) and cls.tfds_name == tfds_name
        assert cls.vocab_size == 32768
        assert (cls.source_language, cls.target_language) == ("en", "de")
    assert TranslateEndeWmtT2tTfds().builder().info.full_name.startswith("wmt_t2t_translate/de-en")


def test_datagen_on_mock_data(tmp_path):
    with tfds.testing.mock_data(num_examples=MOCK_PAIRS):
        _SmallMockWmt14(num_workers=2).generate_data(str(tmp_path), "")
        expected = [(ex["en"].decode(), ex["de"].decode()) for ex in tfds.as_numpy(
            tfds.builder("wmt14_translate/de-en").as_dataset(split="test",
                                                              shuffle_files=False))]
    problem = _SmallMockWmt14()
    assert problem.has_data(str(tmp_path))
    # Mock text may start or end with a space; the readers strip like TextPairReader.
    expected = [(s.strip(), t.strip()) for s, t in expected if s.strip() and t.strip()]
    stats = problem.stats("train", str(tmp_path))
    assert stats["examples"] == len(expected) and stats["empty_dropped"] == MOCK_PAIRS - len(expected)
    src, tgt = problem.source_target_files("test", str(tmp_path))
    assert list(zip(_lines(src), _lines(tgt))) == expected
    vocab = problem.vocabulary(str(tmp_path))
    assert vocab.vocab_size == 300
    for s, _ in expected[:20]:
        assert vocab.decode(vocab.encode(s)) == s


def test_nothing_prepared_is_one_line_saying_how(tmp_path):
    with pytest.raises(DataError) as e:
        TranslateEndeWmt14Tfds(tfds_data_dir=str(tmp_path / "tfds")).generate_data(
            str(tmp_path / "d"), "")
    assert f"tfds build wmt14_translate/de-en --data_dir={tmp_path / 'tfds'}" in str(e.value)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.datagen",
         "--problem=translate_ende_wmt_t2t_tfds", f"--data_dir={tmp_path / 'd'}",
         f"--tfds_data_dir={tmp_path / 'tfds'}"],
        capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-datagen: error:")]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert (f"`tfds build wmt_t2t_translate/de-en --data_dir={tmp_path / 'tfds'}`"
            in lines[0])


def test_tfds_data_dir_is_refused_for_an_archive_problem(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.datagen", "--problem=translate_ende_wmt32k",
         f"--data_dir={tmp_path / 'd'}", f"--tmp_dir={tmp_path}",
         f"--tfds_data_dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(
        "t2t-datagen: error: --tfds_data_dir is for the TFDS problems")


@pytest.mark.slow
def test_mock_tfds_datagen_train_decode(tmp_path):
    """A registered TFDS problem end to end: datagen, 3 training steps, decoding.

    The decoder, loaded from the run's folder alone, scores the dev pairs read
    straight from TFDS to the trainer's own final dev loss: the run trained
    and evaluated on the TFDS pairs, source and target the right way round,
    and the decoder holds its trained weights and vocabulary.
    """
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.train.trainer import train

    data_dir, out_dir = tmp_path / "data", tmp_path / "run"
    with tfds.testing.mock_data(num_examples=E2E_MOCK_PAIRS):
        _SmallMockWmt14().generate_data(str(data_dir), "")
        dev = [(ex["en"].decode().strip(), ex["de"].decode().strip()) for ex in tfds.as_numpy(
            tfds.builder("wmt14_translate/de-en").as_dataset(split="validation",
                                                              shuffle_files=False))]
    dev = [(s, t) for s, t in dev if s and t]
    with registry.problems.registered(_SmallMockWmt14, _SmallMockWmt14.registered_name):
        result = train(resolve_train_config(
            problem=_SmallMockWmt14.registered_name, output_dir=str(out_dir),
            data_dir=str(data_dir), hparams_set="transformer_tiny", train_steps=3,
            local_eval_frequency=0, save_checkpoints_steps=3, log_step_count_steps=1,
            # Without XLA: compiling the step is not the subject.
            eval_decode_sentences=0, xla=False), log=lambda *a, **k: None)
    assert result.step == 3 and result.checkpoint == str(out_dir / "ckpt-3")
    assert result.evaluation.step == 3 and result.evaluation.loss > 0
    decoder = Decoder.load(str(out_dir), overrides=parse_decode_hparams(
        "beam_size=2,extra_length=5"))
    assert decoder.checkpoint_path == str(out_dir / "ckpt-3")
    assert decoder.run_record.problem == _SmallMockWmt14.registered_name
    # The dev loss: cross-entropy per target token, EOS included, over the dev pairs.
    log_probs = [log_prob for log_prob, _ in decoder.score(dev)]
    tokens = sum(len(decoder.vocab.encode(t)) + 1 for _, t in dev)
    assert -sum(log_probs) / tokens == pytest.approx(result.evaluation.loss, rel=1e-4)
    sources = _lines(_SmallMockWmt14().source_target_files("test", str(data_dir))[0])[:4]
    outputs = decoder.translate(sources)
    assert len(outputs) == 4 and all(isinstance(o, str) for o in outputs)
    assert os.path.isfile(out_dir / "checkpoint")
