"""--warm_start_from: the checks that a checkpoint fits, and the weights it loads."""

import numpy as np
import pytest

from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import resolve
from t2t_revival.models.build_model import build_model
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.train.warm_start import warm_start


def _model(**overrides):
    text = ",".join(f"{k}={v}" for k, v in {"vocab_size": 64, **overrides}.items())
    return build_model(resolve("transformer_tiny", text))


def _source_run(tmp_path, model, vocab_bytes=b"vocab A"):
    run = tmp_path / "source"
    run.mkdir()
    (run / "vocab.model").write_bytes(vocab_bytes)
    (run / "run.json").write_text(RunRecord(problem="p").to_json())
    return run, TrainingDirectory(run, keep=3).checkpoints.save(make_checkpoint(model), 7)


def test_warm_start_loads_the_weights_from_a_directory_or_a_prefix(tmp_path):
    source = _model()
    run, prefix = _source_run(tmp_path, source)
    vocab = tmp_path / "mine.model"
    vocab.write_bytes(b"vocab A")
    for given in (str(run), prefix):
        target = _model()
        assert not np.allclose(target.weights[0].numpy(), source.weights[0].numpy())
        lines = []
        assert warm_start(target, given, str(vocab), log=lines.append) == prefix
        for a, b in zip(source.weights, target.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert "Warm-started" in lines[-1]


def test_shape_mismatch_names_the_variable_and_both_shapes(tmp_path):
    run, prefix = _source_run(tmp_path, _model())
    vocab = tmp_path / "mine.model"
    vocab.write_bytes(b"vocab A")
    with pytest.raises(UserError) as e:
        warm_start(_model(d_ff=256), str(run), str(vocab), log=lambda _: None)
    message = str(e.value)
    assert "[128, 512] there and [128, 256] here" in message, message
    assert "feed_forward" in message or "ffn" in message, message


def test_missing_layer_and_other_vocabulary_are_refused(tmp_path):
    run, prefix = _source_run(tmp_path, _model(num_hidden_layers=1))
    vocab = tmp_path / "mine.model"
    vocab.write_bytes(b"vocab A")
    with pytest.raises(UserError, match="has no variable"):
        warm_start(_model(num_hidden_layers=2), prefix, str(vocab), log=lambda _: None)
    vocab.write_bytes(b"vocab B")
    with pytest.raises(UserError, match="vocabulary .* differs from this run's"):
        warm_start(_model(num_hidden_layers=1), prefix, str(vocab), log=lambda _: None)


def test_fewer_layers_or_other_heads_than_the_source_run_are_refused(tmp_path):
    """Issue 60 item 4: a 1-layer run from a 2-layer run's checkpoint would
    silently drop the second layer; 4 heads from a 2-head run fit the shapes.
    The source run's hparams.json names the difference."""
    source = _model(num_hidden_layers=2)
    run, prefix = _source_run(tmp_path, source)
    source.hparams.save(str(run / "hparams.json"))
    vocab = tmp_path / "mine.model"
    vocab.write_bytes(b"vocab A")
    with pytest.raises(UserError) as e:
        warm_start(_model(num_hidden_layers=1), str(run), str(vocab), log=lambda _: None)
    assert "another architecture" in str(e.value)
    assert "num_hidden_layers 2 there and 1 here" in str(e.value), str(e.value)
    heads = source.hparams.num_heads
    with pytest.raises(UserError, match=f"num_heads {heads} there and {heads * 2} here"):
        warm_start(_model(num_hidden_layers=2, num_heads=heads * 2), prefix, str(vocab),
                   log=lambda _: None)


def test_a_checkpoint_without_its_run_must_have_every_variable_used(tmp_path):
    """A bare checkpoint prefix (no hparams.json beside it): a variable of the
    checkpoint the new model has no place for is refused by name."""
    source = _model(num_hidden_layers=2)
    bare = tmp_path / "bare"
    bare.mkdir()
    prefix = TrainingDirectory(bare, keep=3).checkpoints.save(make_checkpoint(source), 7)
    vocab = tmp_path / "mine.model"
    vocab.write_bytes(b"vocab A")
    with pytest.raises(UserError) as e:
        warm_start(_model(num_hidden_layers=1), prefix, str(vocab), log=lambda _: None)
    assert "variable(s) this run has no place for" in str(e.value), str(e.value)
    assert "layer" in str(e.value), str(e.value)


def test_no_checkpoint_is_refused(tmp_path):
    with pytest.raises(UserError, match="holds no checkpoint"):
        warm_start(_model(), str(tmp_path), "v", log=lambda _: None)
    with pytest.raises(UserError, match="names no checkpoint"):
        warm_start(_model(), str(tmp_path / "ckpt-5"), "v", log=lambda _: None)


@pytest.mark.slow
def test_warm_start_on_multi30k_starts_near_the_source_loss(tiny_run, readme_run, tmp_path):
    """One fresh-optimizer update after a warm start leaves the dev loss near
    the source run's; the same update from random weights does not. A
    checkpoint of another shape is one line and exit 2."""
    import json
    import re

    from conftest import one_line_error, run_cli
    from readme_workflow import TINY_RUN_STEPS

    source_dir, source_stdout = tiny_run
    data_dir = readme_run.data_dir()   # the source run's Multi30k datagen
    source_loss = float(re.search(r"Done: step \d+, dev loss ([\d.]+)", source_stdout).group(1))

    def train(name, *flags):
        """t2t-trainer in this process: its dev loss line and files are the
        subject. The update is not XLA-compiled (--noxla): compiling it takes
        longer than the one or two updates of each run, and the loss of an
        update is the same either way."""
        return run_cli("trainer", "--problem=translate_ende_multi30k",
                       "--hparams_set=transformer_tiny", f"--data_dir={data_dir}",
                       f"--output_dir={tmp_path / name}", "--train_steps=1",
                       "--local_eval_frequency=0", "--eval_decode_sentences=0", "--noxla",
                       *flags)

    def dev_loss(out):
        assert out.returncode == 0, out.stderr[-3000:]
        return float(re.search(r"Done: step 1, dev loss ([\d.]+)", out.stdout).group(1))

    warm = train("warm", f"--warm_start_from={source_dir}")
    warm_loss = dev_loss(warm)
    cold_loss = dev_loss(train("cold"))
    print(f"source {source_loss:.4f}  warm-started {warm_loss:.4f}  random init {cold_loss:.4f}")
    assert abs(warm_loss - source_loss) <= 0.05 * source_loss, (warm_loss, source_loss)
    assert cold_loss > source_loss + 1.0, (cold_loss, source_loss)
    assert "Warm-started the model weights from" in warm.stdout
    record = json.loads((tmp_path / "warm" / "run.json").read_text())
    assert record["warm_start_from"] == str(source_dir / f"ckpt-{TINY_RUN_STEPS}")
    # Resuming the warm-started directory continues it; the flag is ignored, the record kept.
    again = train("warm", f"--warm_start_from={source_dir}", "--train_steps=2",
                  "--eval_steps=1")   # (its dev loss is not compared: one batch will do)
    assert again.returncode == 0 and "is ignored" in again.stdout, again.stderr[-2000:]
    assert json.loads((tmp_path / "warm" / "run.json").read_text()) == record
    bad = train("bad", f"--warm_start_from={source_dir}", "--hparams=d_ff=256")
    one_line_error(bad, "t2t-trainer", "has another architecture: d_ff 512 there and 256 here")
