"""benchmarks/multi30k_recipe.py, the command of docs/reproducing.md's "Multi30k
recipe": every stage runs, progress goes to the log, and the last line is the
JSON with both BLEU figures. The real recipe takes 100 minutes; here a tiny
model trains 6 steps without XLA and decodes 10 lines: the plumbing of every
stage is the subject, not the figures (benchmarks/RESULTS.md has those)."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import multi30k_recipe as recipe
from conftest import ROOT, stop_signals_at_their_defaults

# The recipe's decodes here: short, and uncompiled (xla=false, the same
# translations): each of the 6 decodes of 1,000 sentences would otherwise
# compile 3-4 XLA programs of 10-20 s for a few seconds of search.
_DECODE = "beam_size=2,alpha=0.6,extra_length=5,xla=false"
# The end-to-end test's model: transformer_tiny cut to 1 narrow layer (each
# stage's trace and search take half the time; the stages are the same).
_SMALL = "num_hidden_layers=1,d_model=32,d_ff=64,num_heads=2,batch_size=1024"
# The end-to-end test decodes the first lines of test_2016_flickr and val:
# the stages, the files and the figures are the subject, not the count (each
# decode is a t2t-decoder process: its start and trace, not its lines, cost).
_LINES = {"test_2016_flickr": 10, "val": 10}


def _cut_raw_dir(shared_data, tmp_path):
    """A --raw_dir of Multi30k's train files as they are and its test and val
    files cut to their first _LINES lines; (the folder, {file: lines})."""
    import gzip

    raw = tmp_path / "raw"
    raw.mkdir()
    kept = {}
    for path in sorted((shared_data / "multi30k").iterdir()):
        cut = next((n for name, n in _LINES.items() if path.name.startswith(name + ".")), None)
        if cut is None:
            (raw / path.name).symlink_to(path)
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()[:cut]
        with gzip.open(raw / path.name, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        kept[path.name] = lines
    return raw, kept


def _recipe(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "benchmarks.multi30k_recipe", *args],
                          capture_output=True, text=True, env=env, timeout=1800)


@pytest.mark.slow
def test_recipe_trains_averages_decodes_and_scores(multi30k_data_dir, shared_data, tmp_path):
    data_dir, _ = multi30k_data_dir
    raw, kept = _cut_raw_dir(shared_data, tmp_path)
    test_lines = len(kept["test_2016_flickr.de.gz"])
    out_dir = tmp_path / "recipe"
    out = _recipe(f"--raw_dir={raw}", f"--data_dir={data_dir}",
                  f"--output_dir={out_dir}", "--hparams_set=transformer_tiny",
                  f"--hparams={_SMALL}",
                  # Without XLA: compiling the step (about 40 s) is not the subject.
                  "--noxla", "--train_steps=6", "--cooldown_steps=2",
                  "--save_checkpoints_steps=2", "--local_eval_frequency=3",
                  "--eval_decode_sentences=4", "--average=3",
                  "--decode_hparams=" + _DECODE, "--tune_on_val=", "--seed=7")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert result["final_step"] == 6
    assert result["hparams"] == f"learning_rate_cooldown_steps=2,{_SMALL}"
    assert result["xla"] is False
    assert result["seed"] == 7
    assert result["final_dev"].startswith("eval at step 6: loss ")
    assert "(4 dev sentences" in result["final_dev"]   # --eval_decode_sentences passed on
    assert result["averaged_checkpoints"] == 3
    assert result["machine"].startswith(f"{os.uname().machine} {os.cpu_count()} cores, ")
    assert set(result["host_matmul_tflops"]) == {"start", "end"}
    assert all(v > 0 for v in result["host_matmul_tflops"].values())
    assert set(result["stage_minutes"]) == {"train", "average", "decode"}
    assert result["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    with open(result["hypotheses"], encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    assert len(hypotheses) == test_lines
    assert result["test_set"] == f"test_2016_flickr ({test_lines:,} sentences)"
    # Both figures are those of the written translations against test_2016's
    # German: sacreBLEU recomputed with sacrebleu itself, the tokenized BLEU with
    # t2t-bleu's function (checked against the paper's perl in test_bleu.py).
    import sacrebleu

    from t2t_revival.metrics.bleu import bleu_files

    references = kept["test_2016_flickr.de.gz"]
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert result["sacrebleu"] == pytest.approx(expected, abs=0.005)
    plain_reference = tmp_path / "test_2016_flickr.de"
    plain_reference.write_text("\n".join(references) + "\n", encoding="utf-8")
    _, tokenized = bleu_files(result["hypotheses"], str(plain_reference))
    assert result["tokenized_bleu"] == pytest.approx(tokenized.score, abs=0.005)
    log = "\n".join(lines)
    assert "train: step 6/6" in log
    assert "average: Averaged 3 checkpoints" in log
    assert f"decode: Wrote {test_lines} translations" in log

    # Again on the same run, without training: the averaging and the length
    # penalty are chosen on val (one decode per pair), then test is decoded once.
    # Two pairs (each a t2t-decoder process): both averagings, and an alpha
    # that is not --decode_hparams' own, so the test decode shows it took the
    # tuned one. (The order of a grid of several values on every axis, one
    # val decode each: test_every_combination_of_the_grid_is_decoded_on_val.)
    out = _recipe(f"--raw_dir={raw}", f"--data_dir={data_dir}",
                  f"--output_dir={out_dir}", "--skip_train",
                  "--tune_on_val=average=3,1;alpha=1.5", "--decode_hparams=" + _DECODE)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    tuned = json.loads(lines[-1])
    rows = tuned["tuned_on_val"]
    assert [(r["average"], r["alpha"]) for r in rows] == [(3, 1.5), (1, 1.5)]
    best = max(rows, key=lambda r: r["val_sacrebleu"])
    assert tuned["averaged_checkpoints"] == best["average"]
    assert tuned["decode_hparams"] == "beam_size=2,alpha=1.5,extra_length=5,xla=false"
    assert tuned["decode_hparams"] == best["decode_hparams"]
    assert set(tuned["stage_minutes"]) >= {"val", "decode"}
    assert "train" not in tuned["stage_minutes"]
    log = "\n".join(lines)
    # The test decode searched with the tuned length penalty.
    assert any("decode: Decoding with " in l and "alpha=1.5," in l for l in lines), log[-3000:]
    assert f"val: Wrote {len(kept['val.de.gz'])} translations" in log
    assert "train: " not in log
    # Each val figure is that decode's sacreBLEU against val's German: the last
    # pair's translations are left in val.de.decodes.
    val_references = kept["val.de.gz"]
    with open(out_dir / "val.de.decodes", encoding="utf-8") as f:
        val_hypotheses = f.read().splitlines()
    assert rows[-1]["val_sacrebleu"] == pytest.approx(
        sacrebleu.corpus_bleu(val_hypotheses, [val_references]).score, abs=0.005)


def test_tuning_grid_and_alpha_override():
    assert recipe.parse_tuning("") is None
    assert recipe.parse_tuning(recipe.DEFAULT_TUNING) == {
        "average": [5, 10], "alpha": [0.6, 1.0]}
    assert recipe.parse_tuning("alpha=1") == {"alpha": [1.0]}
    assert recipe.parse_tuning("beam=4,8;average=10") == {"beam": [4, 8], "average": [10]}
    for bad in ("width=4", "average=", "average=five", "beam=4.5", "average=5;alpha"):
        with pytest.raises(ValueError):
            recipe.parse_tuning(bad)
    set_ = recipe.with_decode_hparam
    assert set_("beam_size=4,alpha=0.6", "alpha", 1.0) == "beam_size=4,alpha=1.0"
    assert set_("beam_size=4,alpha=0.6", "beam_size", 8) == "beam_size=8,alpha=0.6"
    assert set_("", "alpha", 0.8) == "alpha=0.8"
    assert set_("alpha=1,beam_size=2,alpha=3", "alpha", 5) == "alpha=5,beam_size=2"


def test_a_malformed_tuning_grid_is_one_line(tmp_path):
    out = _recipe(f"--output_dir={tmp_path / 'run'}", "--tune_on_val=width=4")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "multi30k_recipe: error: --tune_on_val: expected "
        "'average=N,...;alpha=A,...;beam=B,...', got 'width=4'")


def test_a_failing_stage_stops_the_recipe_with_its_error(tmp_path):
    out = _recipe(f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'run'}",
                  "--hparams_set=nope")
    assert out.returncode == 2
    assert "train: t2t-trainer: error: Unknown hparam set 'nope'" in out.stdout
    assert out.stdout.strip().splitlines()[-1].endswith("train: failed with exit code 2")
    assert "Traceback" not in out.stdout + out.stderr


def test_missing_raw_data_is_one_line(tmp_path):
    out = _recipe(f"--raw_dir={tmp_path}", f"--output_dir={tmp_path / 'run'}")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"multi30k_recipe: error: test_2016_flickr.en.gz is not in --raw_dir={tmp_path}; "
        "download Multi30k (github.com/multi30k/dataset, data/task1/raw) there."]


def test_tuning_only_the_averaging_keeps_the_decode_hparams_as_given(monkeypatch):
    # A grid without alpha must not invent one (a decode_hparams without
    # alpha stays without it); the best val figure picks the averaging.
    import argparse

    calls = []
    monkeypatch.setattr(recipe, "average_checkpoints", lambda stages, stage, out, n: ([f"--ckpt={n}"], n))

    def fake_decode(stages, stage, args, checkpoint, source, reference, hyp, dhp):
        calls.append((stage, checkpoint, source, dhp))
        return {"sacrebleu": {"score": {"--ckpt=5": 30.0, "--ckpt=10": 31.5}[checkpoint[0]]}}

    monkeypatch.setattr(recipe, "decode", fake_decode)
    stages = argparse.Namespace(log=lambda *a: None)
    args = argparse.Namespace(tune_on_val=recipe.parse_tuning("average=5,10"), average=5,
                              decode_hparams="beam_size=4", output_dir="out")
    rows = recipe.tune_on_val(stages, args)
    assert rows == [
        {"average": 5, "alpha": None, "beam": None, "decode_hparams": "beam_size=4",
         "val_sacrebleu": 30.0},
        {"average": 10, "alpha": None, "beam": None, "decode_hparams": "beam_size=4",
         "val_sacrebleu": 31.5}]
    assert calls == [("val", ["--ckpt=5"], "val.en.gz", "beam_size=4"),
                     ("val", ["--ckpt=10"], "val.en.gz", "beam_size=4")]


def test_every_combination_of_the_grid_is_decoded_on_val(monkeypatch):
    """average x alpha x beam: one val decode each, with those decode hparams,
    and one row each with its val figure."""
    import argparse

    calls = []
    monkeypatch.setattr(recipe, "average_checkpoints", lambda stages, stage, out, n: ([f"--ckpt={n}"], n))
    scores = {("--ckpt=5", "beam_size=4,alpha=1.4"): 40.1,
              ("--ckpt=5", "beam_size=8,alpha=1.4"): 40.3}

    def fake_decode(stages, stage, args, checkpoint, source, reference, hyp, dhp):
        calls.append((checkpoint[0], dhp))
        return {"sacrebleu": {"score": scores.get((checkpoint[0], dhp), 39.0)}}

    monkeypatch.setattr(recipe, "decode", fake_decode)
    stages = argparse.Namespace(log=lambda *a: None)
    grid = recipe.parse_tuning("average=5,10;alpha=1.0,1.4;beam=4,8")
    args = argparse.Namespace(tune_on_val=grid, average=5,
                              decode_hparams="beam_size=4,alpha=0.6", output_dir="out")
    rows = recipe.tune_on_val(stages, args)
    assert calls == [(f"--ckpt={n}", f"beam_size={b},alpha={a}")
                     for n in (5, 10) for a in (1.0, 1.4) for b in (4, 8)]
    assert [(r["average"], r["alpha"], r["beam"]) for r in rows] == [
        (n, a, b) for n in (5, 10) for a in (1.0, 1.4) for b in (4, 8)]
    assert [r["val_sacrebleu"] for r in rows if r["val_sacrebleu"] != 39.0] == [40.1, 40.3]
    assert rows[3]["decode_hparams"] == "beam_size=8,alpha=1.4"


def test_the_averaged_count_is_what_the_averaging_read():
    """A run with fewer checkpoints than --average averages those it has; the
    result then reports that many, not the number asked for."""
    import argparse

    lines = ["Only 3 checkpoints in out; averaging all of them.",
             "Averaged 3 checkpoints into out/averaged/ckpt-600"]
    stages = argparse.Namespace(run=lambda stage, module, *args: lines)
    assert recipe.average_checkpoints(stages, "average", "out", 4) == (
        ["--checkpoint_path=out/averaged/ckpt-600"], 3)
    assert recipe.average_checkpoints(stages, "average", "out", 1) == ([], 1)
    lines[:] = ["Only 1 checkpoint in out; averaging it.",
                "Averaged 1 checkpoint into out/averaged/ckpt-200"]
    assert recipe.average_checkpoints(stages, "average", "out", 4) == (
        ["--checkpoint_path=out/averaged/ckpt-200"], 1)


def test_the_trainer_gets_the_recipe_s_flags():
    """--noxla (the bfloat16 step's setting on avx512_bf16 CPUs) reaches
    t2t-trainer, as do the budget and the checkpoints kept for averaging."""
    for flags, xla in (([], "--xla"), (["--noxla"], "--noxla"), (["--noxla", "--xla"], "--xla")):
        args = recipe.parse_args(["--max_train_minutes=110",
                                  "--hparams=mixed_precision=mixed_bfloat16", *flags])
        command = recipe.trainer_args(args)
        assert [f for f in command if f in ("--xla", "--noxla")] == [xla]
        assert "--max_train_minutes=110.0" in command
        assert "--hparams=learning_rate_cooldown_steps=2500,mixed_precision=mixed_bfloat16" \
            in command                                  # the cooldown ends at --train_steps
        assert "--train_steps=9600" in command
        assert "--keep_checkpoint_max=10" in command   # the default tuning averages 10


@pytest.mark.parametrize("flags, message", [
    (["--train_steps=100", "--cooldown_steps=101"],
     "--cooldown_steps must be in [0, --train_steps=100]. Received: --cooldown_steps=101"),
    (["--cooldown_steps=-1"], "--cooldown_steps must be in [0, --train_steps=9600]"),
    (["--hparams=learning_rate_cooldown_steps=5"],
     "set the cooldown with --cooldown_steps, not in --hparams"),
])
def test_a_cooldown_the_trainer_would_refuse_is_refused_at_once(capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        recipe.parse_args(flags)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_no_cooldown_passes_the_hparams_as_given():
    args = recipe.parse_args(["--cooldown_steps=0", "--hparams=dropout=0.2"])
    assert "--hparams=dropout=0.2" in recipe.trainer_args(args)


def test_the_seed_goes_to_the_trainer_only_when_given():
    assert "--seed=7" in recipe.trainer_args(recipe.parse_args(["--seed=7"]))
    args = recipe.parse_args([])
    assert args.seed is None
    assert not any(arg.startswith("--seed") for arg in recipe.trainer_args(args))


_STAGE = r"""
import sys
from benchmarks.multi30k_recipe import Stages
Stages().run("train", "trainer", *sys.argv[1:])
"""


@pytest.mark.parametrize("name, status", [("SIGTERM", 143), ("SIGINT", 130),
                                          ("SIGHUP", 129)])
def test_a_signal_to_the_recipe_stops_its_trainer_with_a_checkpoint(tiny_data, tmp_path,
                                                                     name, status):
    """A SIGTERM, Ctrl-C or SIGHUP to the recipe reaches the stage's trainer, which
    saves and stops; the recipe says so and exits 128 + the signal. (A SIGTERM
    used to kill the recipe alone, the trainer going on without its output
    until its next progress line killed it, unsaved; a Ctrl-C gave a traceback.)"""
    import signal
    import time

    from tiny_runs import trainer_args

    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    with stop_signals_at_their_defaults():   # as from a terminal
        proc = subprocess.Popen([sys.executable, "-c", _STAGE,
                                 *trainer_args(tiny_data, out, 100000,
                                               "--log_step_count_steps=1")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env)
    try:
        lines = []
        for line in proc.stdout:   # wait until training runs
            lines.append(line)
            if "train: step 2/" in line:
                break
        proc.send_signal(getattr(signal, name))
        started = time.time()
        rest, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    output = "".join(lines) + rest
    assert proc.returncode == status, output[-3000:]
    assert time.time() - started < 60
    assert f"train: t2t-trainer: stopped by {name} at step" in output
    assert output.strip().splitlines()[-1].endswith(
        f"train: stopped by {name} (exit code {status}); rerun the same command to resume "
        "training from its last checkpoint")
    assert list(out.glob("ckpt-*.index"))
    assert "Traceback" not in output


def test_an_ignored_sigint_stays_ignored_while_a_stage_runs():
    """A background job's SIGINT is ignored, and so is its stage's (inherited):
    passing one on would report a stop that never comes."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with recipe.PassSignals(proc=None) as passing:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == passing.handle
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
