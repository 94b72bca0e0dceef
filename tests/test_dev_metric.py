"""The trainer's dev metric at each evaluation: the problem's own metric on the
first dev sentences decoded by the model in memory, best/ following it, early
stopping, and the checks of issue #15's end-to-end run (check_dev_bleu_run; the
run itself is docs/your-own-data.md's usr_dir run in tests/test_usr_dir.py)."""

import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ENV, ROOT, run_cli
from t2t_revival.data.scored_predictions import ScoredPredictions


def _trainer(output_dir, data_dir, **options):
    import tensorflow as tf

    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    config = resolve_train_config(problem="translate_ende_multi30k", output_dir=str(output_dir),
                                  data_dir=str(data_dir), hparams_set="transformer_tiny",
                                  **options)
    lines = []
    trainer = Trainer(config, strategy=tf.distribute.MirroredStrategy(["/cpu:0"]),
                      log=lines.append)
    trainer.log_lines = lines
    return trainer


def _eval_at(trainer, step, evaluate_result, save=False):
    """One evaluation at `step` with the weights marked `step` and a given dev
    loss; `save`: a regular checkpoint first (--save_checkpoints_steps)."""
    from t2t_revival.train.evaluation import Evaluation

    trainer.optimizer.iterations.assign(step)
    if save:
        trainer.save()
    trainer.model.weights[0].assign(np.full(trainer.model.weights[0].shape, float(step)))
    trainer.evaluator.dev_loss = lambda at: Evaluation(step=at, loss=evaluate_result,
                                                       accuracy=0.5, perplexity=9.0)
    return trainer.evaluator.evaluate(step)


def _best_first_weight(output_dir):
    import tensorflow as tf

    from t2t_revival.run_dir.best_checkpoint import BestCheckpoint

    best = BestCheckpoint(str(output_dir))
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(best.path))
    # The model's first weight, transformer/shared_embedding/embeddings.
    key = next(k for k in reader.get_variable_to_shape_map() if k.startswith("model/")
               and "shared_embedding" in k and k.endswith("VARIABLE_VALUE"))
    return best.record(), float(reader.get_tensor(key).flat[0])


def test_without_decoding_best_follows_the_dev_loss_and_a_plateau_stops(tmp_path):
    trainer = _trainer(tmp_path / "run", tmp_path, eval_decode_sentences=0,
                       eval_early_stopping_evals=2, keep_checkpoint_max=1)
    news = []
    trainer.on_new_best = lambda path, record: news.append((path, record.step))
    leftover = tmp_path / "run" / ".best.incomplete"   # a kill mid-update, last run
    leftover.mkdir(parents=True)
    (leftover / "ckpt-9.index").write_bytes(b"half")
    for step, loss in [(1, 5.0), (2, 4.0), (3, 4.5), (4, 3.9), (5, 3.9)]:
        _eval_at(trainer, step, loss, save=step == 3)
        assert not trainer.evaluator.stop_reason
    _eval_at(trainer, 6, 4.2, save=True)   # keep_checkpoint_max=1 deletes ckpt-4
    assert trainer.evaluator.stop_reason == ("dev loss did not improve for 2 evaluations "
                                   "(--eval_early_stopping_evals=2); the best is dev loss "
                                   "3.9000 at step 4")
    record, weight = _best_first_weight(tmp_path / "run")
    assert (record.step, record.metric, record.value, record.higher_is_better) == \
        (4, "loss", 3.9, False)
    assert weight == 4.0                        # the weights of step 4, not the latest
    assert not os.path.exists(tmp_path / "run" / "ckpt-4.index")   # rotated away
    assert [s for _, s in news] == [1, 2, 4]
    assert not leftover.exists()
    assert news[-1][0] == str(tmp_path / "run" / "best" / "ckpt-4")
    assert "New best: dev loss 3.9000 at step 4, copied to" in "\n".join(trainer.log_lines)
    # The final evaluation at the step where it stopped is not run twice.
    trainer.evaluator.dev_loss = lambda at: pytest.fail("evaluated step 6 again")
    assert trainer.evaluator.evaluate(6).loss == 4.2


def test_a_best_ranked_by_another_metric_is_replaced_and_the_run_says_so(tmp_path):
    """best/ holds a dev BLEU; a resume without dev decoding ranks by dev loss,
    which cannot be compared with it: the run says so before replacing it."""
    from t2t_revival.run_dir.best_record import BestRecord

    best = tmp_path / "run" / "best"
    best.mkdir(parents=True)
    (best / "best.json").write_text(BestRecord(
        step=100, metric="bleu", value=1.94, higher_is_better=True, checkpoint="ckpt-100",
        sentences=200).to_json())
    trainer = _trainer(tmp_path / "run", tmp_path, eval_decode_sentences=0)
    _eval_at(trainer, 101, 9.5)
    log = "\n".join(trainer.log_lines)
    assert ("best/ was ranked by dev bleu on 200 sentences; this run ranks by dev loss, so "
            "its first evaluation replaces best/") in log, log
    assert log.index("was ranked by") < log.index("New best: dev loss 9.5000 at step 101")
    # The same ranking says nothing.
    again = _trainer(tmp_path / "run", tmp_path, eval_decode_sentences=0)
    _eval_at(again, 102, 9.0)
    assert "was ranked by" not in "\n".join(again.log_lines)
    assert "New best: dev loss 9.0000 at step 102" in "\n".join(again.log_lines)


def test_the_trainer_ranks_by_the_problem_s_own_metric(multi30k_data_dir, tmp_path,
                                                       monkeypatch):
    """BLEU for translation, F1 when the problem says evalb: the trainer reads
    the metric from the problem, decodes the first N dev sentences and passes
    them with their references to the problem's scorer."""
    data_dir, _ = multi30k_data_dir
    trainer = _trainer(tmp_path / "run", data_dir, eval_decode_sentences=5)
    seen = []

    def score(predictions, references, sources, language="de", metric=""):
        seen.append((list(predictions), list(references), list(sources)))
        return ScoredPredictions(metric="evalb", score=[40.0, 35.0][len(seen) - 1],
                                 text="", json_text="{}")

    monkeypatch.setattr(trainer.problem, "eval_metric", "evalb")
    monkeypatch.setattr(trainer.problem, "score_predictions", score)
    evaluation = _eval_at(trainer, 1, 5.0)
    assert evaluation.scalars()["f1"] == 40.0 and "bleu" not in evaluation.scalars()
    assert (evaluation.metric, evaluation.figure("f1")) == ("f1", 40.0)
    source, target = trainer.problem.source_target_files("dev", str(data_dir))
    first = [open(p, encoding="utf-8").read().splitlines()[:5] for p in (source, target)]
    assert seen[0][2] == first[0] and seen[0][1] == first[1]
    assert len(seen[0][0]) == 5 and all(isinstance(p, str) for p in seen[0][0])
    assert re.search(r"eval at step 1: loss 5\.0000 .* f1 40\.00 \(5 dev sentences, \d+ s\)",
                     "\n".join(trainer.log_lines))
    # A sign of life before the first evaluation's wait (issue 61), once. The
    # dev loss runs uncompiled, and the dev decoding of 5 sentences too
    # (xla=auto: compiling would not pay off), so nothing compiles.
    compiling = [l for l in trainer.log_lines if l.startswith(("compiling the dev",
                                                               "tracing the dev"))]
    assert compiling == ["tracing the dev loss..."], trainer.log_lines
    assert not trainer.evaluator.dev_metric.decoder.compiled
    assert any(re.fullmatch(r"traced the dev loss in \d+\.\d s \(its first evaluation "
                            r"included\)", l) for l in trainer.log_lines), trainer.log_lines
    _eval_at(trainer, 2, 1.0)   # dev loss better, F1 worse: best/ follows F1
    assert [l for l in trainer.log_lines if l.startswith(("compiling the dev",
                                                          "tracing the dev"))] == compiling
    record, weight = _best_first_weight(tmp_path / "run")
    assert (record.metric, record.step, record.value, record.sentences) == ("f1", 1, 40.0, 5)
    assert weight == 1.0


def test_eval_metric_chrf_ranks_best_and_early_stopping_by_chrf(multi30k_data_dir, tmp_path):
    """--eval_metric=chrf: the dev translations are scored with sacreBLEU's
    chrF2, which best/ and early stopping follow (higher is better), here
    against the dev loss and BLEU. The decodes are given: at step 1 each
    reference's words reversed (characters kept, word n-grams lost), at step 2
    the first half of its words (word n-grams kept, characters lost)."""
    import sacrebleu

    from t2t_revival.run_dir.best_record import BestRecord

    data_dir, _ = multi30k_data_dir
    trainer = _trainer(tmp_path / "run", data_dir, eval_decode_sentences=5,
                       eval_metric="chrf", eval_early_stopping_evals=1)
    trainer.evaluator.start()
    dev = trainer.evaluator.dev_metric
    words = [reference.split() for reference in dev.references]
    outputs = {1: [" ".join(w[::-1]) for w in words],
               2: [" ".join(w[:len(w) // 2 + 1]) for w in words]}
    chrf = {step: sacrebleu.corpus_chrf(out, [dev.references]).score
            for step, out in outputs.items()}
    bleu = {step: sacrebleu.corpus_bleu(out, [dev.references]).score
            for step, out in outputs.items()}
    assert chrf[1] > chrf[2] and bleu[2] > bleu[1] + 10   # the metrics disagree
    for step, loss in ((1, 5.0), (2, 1.0)):   # and the dev loss prefers step 2
        dev.decoder.translate = lambda sources, compiling=None, out=outputs[step]: list(out)
        evaluation = _eval_at(trainer, step, loss)
        assert (evaluation.metric, evaluation.figure("chrf")) == ("chrf", chrf[step])
        assert evaluation.scalars()["chrf"] == chrf[step] and "bleu" not in evaluation.scalars()
    record, weight = _best_first_weight(tmp_path / "run")
    assert record == BestRecord(step=1, metric="chrf", value=chrf[1], higher_is_better=True,
                                checkpoint="ckpt-1", sentences=5)
    assert weight == 1.0
    log = "\n".join(trainer.log_lines)
    assert re.search(rf"eval at step 2: loss 1\.0000 .* chrf {chrf[2]:.2f} \(5 dev sentences",
                     log), log
    assert trainer.evaluator.stop_reason == (
        f"dev chrf did not improve for 1 evaluation (--eval_early_stopping_evals=1); the "
        f"best is dev chrf {chrf[1]:.2f} at step 1")


def test_eval_metric_is_one_the_problem_can_score_with(tmp_path):
    from t2t_revival.errors import UserError

    with pytest.raises(UserError, match=r"problem translate_ende_multi30k scores its "
                                        r"predictions with bleu or chrf; choose one of them "
                                        r".* Received: eval_metric='ter'"):
        _trainer(tmp_path / "run", tmp_path, eval_metric="ter")
    from t2t_revival import registry

    # A translation problem scores with chrF on request (its own eval_metric
    # may be "chrf" too): the headline, reported beside the two BLEU figures.
    import sacrebleu

    from t2t_revival.data.problem import Problem

    hyps, refs = ["Ein Hund läuft über die grüne Wiese."], ["Ein Hund rennt über die Wiese."]
    scored = Problem().score_predictions(hyps, refs, ["A dog runs."], metric="chrf")
    assert (scored.metric, scored.score_name) == ("chrf", "chrf")
    assert scored.score == sacrebleu.corpus_chrf(hyps, [refs]).score
    assert [line.split(":")[0] for line in scored.text.splitlines()] == [
        "sacreBLEU (cased, 13a)", "tokenized BLEU (Moses tokenizer -l de + compound "
        "splitting, multi-bleu; as the paper / t2t get_ende_bleu.sh)", "chrF2 (sacreBLEU)"]
    assert set(json.loads(scored.json_text)) == {"sacrebleu", "tokenized_bleu", "chrf"}
    assert Problem().score_predictions(hyps, refs, [""]).metric == "bleu"
    parsing = registry.problems.get("parsing_english_ptb16k")()
    assert parsing.check_eval_metric() == "evalb"
    with pytest.raises(UserError, match="scores its predictions with evalb; "):
        parsing.check_eval_metric("chrf")


def test_the_trainer_cli_takes_eval_metric_chrf_and_best_json_records_it(tiny_data, tmp_path,
                                                                         fake_updates):
    """t2t-trainer --eval_metric=chrf: the eval line, TensorBoard's eval/chrf
    and best/best.json name chrF (a tiny run, 2 updates: fake ones, the dev
    decoding and its score are the subject)."""
    from tiny_runs import trainer_args

    out_dir = tmp_path / "run"
    run = run_cli("trainer", *trainer_args(
        tiny_data, out_dir, 2, "--eval_metric=chrf", "--eval_decode_sentences=3",
        "--eval_decode_hparams=extra_length=3"))
    assert run.returncode == 0, run.stderr[-3000:]
    printed = re.search(r"eval at step 2: .* chrf ([\d.]+) \(3 dev sentences", run.stdout)
    assert printed, run.stdout[-3000:]
    record = json.loads((out_dir / "best" / "best.json").read_text())
    assert (record["metric"], record["step"], record["sentences"], record["higher_is_better"]) \
        == ("chrf", 2, 3, True)
    assert f"{record['value']:.2f}" == printed.group(1)
    assert _events(out_dir / "eval")["chrf"] == [(2, pytest.approx(record["value"], abs=1e-4))]
    assert [sum(fake.calls) for fake in fake_updates] == [2]


@pytest.mark.slow
def test_dev_decoding_on_two_replicas_equals_t2t_decoder_on_the_saved_weights(
        multi30k_data_dir, tmp_path):
    """Mirrored over 2 logical CPUs, the trainer's dev translations (in-memory
    weights) are t2t-decoder's translations of the same weights from disk.
    (On Multi30k, whose untrained translations are words: the tiny run's
    vocabulary gives mostly empty ones, which would compare little. A model
    of 1 narrow layer: half the time of transformer_tiny's 2, the same path.)"""
    data_dir, _ = multi30k_data_dir
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "dev_metric_check.py"),
                          str(data_dir), str(tmp_path / "run"),
                          "num_hidden_layers=1,d_model=32,d_ff=64,num_heads=2,batch_size=1024"],
                         capture_output=True, text=True, env=ENV, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["in_memory"] == result["from_disk"]
    assert len(result["in_memory"]) == 12 and any(result["in_memory"])
    assert result["bleu"] == pytest.approx(result["decoder_bleu"])


def _free_ports(n):
    import socket

    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_multi_worker_only_the_chief_decodes_and_both_stop_together(tiny_data, tmp_path):
    """Two MultiWorkerMirroredStrategy workers on this machine: the chief
    decodes, scores and writes best/; the other skips decoding, follows the
    chief's decisions (save, stop) and nobody waits forever (the tiny run's
    data and model)."""
    from tiny_runs import TINY_HPARAMS

    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
    procs = []
    for index in range(2):
        env = dict(ENV, TF_CONFIG=json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "scripts" / "multi_worker_check.py"),
             str(tiny_data), str(tmp_path / "run"), TINY_HPARAMS],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=1500)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, output in zip(procs, outputs):
        assert proc.returncode == 0, output[-3000:]
    # The result is each worker's last JSON line: gRPC may log a line after it
    # as the other worker shuts down ("failed to connect ... Connection refused").
    chief, other = (json.loads(next(l for l in reversed(o.strip().splitlines())
                                    if l.startswith("{"))) for o in outputs)
    assert chief["chief"] and not other["chief"]
    assert chief["step"] == other["step"] == 4
    assert chief["stop_reason"].startswith("dev bleu did not improve for 1 evaluation ")
    assert other["stop_reason"] == "the chief's dev metric stopped improving"
    assert re.findall(r"bleu [\d.]+ \(4 dev sentences", outputs[0]) != []
    assert "bleu" not in "".join(re.findall(r"eval at step .*", outputs[1]))
    assert json.loads((tmp_path / "run" / "best" / "best.json").read_text())["step"] == 2


def _events(folder):
    """{tag: [(step, value), ...]} of the TensorBoard event files in `folder`."""
    import tensorflow as tf

    values = {}
    for path in sorted(glob.glob(os.path.join(str(folder), "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = value.simple_value if value.HasField("simple_value") else \
                    float(tf.make_ndarray(value.tensor))
                values.setdefault(value.tag, []).append((event.step, number))
    return values


E2E_STEPS, E2E_EVERY, E2E_SENTENCES = 6, 2, 4
# The dev search of such a run, and of t2t-decoder's check of it: short (an
# untrained model's translations would run to the input's length + 50).
E2E_SEARCH = "extra_length=5"


# The trainer flags of such a run: transformer_tiny trained E2E_STEPS steps
# with dev BLEU on the first E2E_SENTENCES dev sentences every E2E_EVERY steps,
# keeping 1 checkpoint (tests/test_usr_dir.py adds them to the docs' command).
# Without XLA: it would compile each of the many bucket shapes of max_length
# 256 (the dev decoding is the same either way). A few updates prove the
# plumbing; what 150 of them reach (dev BLEU above 0 at the best evaluation)
# is benchmarks/usr_dir_dev_bleu.py's ("best_dev_bleu").
DEV_BLEU_FLAGS = (f"--train_steps={E2E_STEPS}", f"--local_eval_frequency={E2E_EVERY}",
                  "--eval_steps=1", f"--save_checkpoints_steps={E2E_EVERY}",
                  "--keep_checkpoint_max=1", "--log_step_count_steps=1",
                  f"--eval_decode_sentences={E2E_SENTENCES}",
                  f"--eval_decode_hparams={E2E_SEARCH}", "--noxla")


def check_dev_bleu_run(run, out_dir, dev_source, dev_target, tmp_path, *decoder_flags):
    """What issue #15 asks of such a run: eval/bleu in TensorBoard at each
    evaluation, as printed; best/ holds the checkpoint of the highest (best.json
    says which); t2t-decoder of the directory runs on --checkpoint_path=.../best
    and gets the same BLEU on the same sentences."""
    steps = list(range(E2E_EVERY, E2E_STEPS + 1, E2E_EVERY))
    printed = {int(s): float(b) for s, b in re.findall(
        rf"eval at step (\d+): .* bleu ([\d.]+) \({E2E_SENTENCES} dev sentences", run.stdout)}
    assert sorted(printed) == steps, run.stdout[-3000:]
    bleu = dict(_events(out_dir / "eval")["bleu"])
    assert sorted(bleu) == steps
    for step, value in printed.items():
        assert bleu[step] == pytest.approx(value, abs=0.006)
    best_step = max(steps, key=lambda s: (bleu[s], -s))   # the first of the highest
    # (That the model learned something by then, its dev BLEU above 0, takes
    # 150 updates, not a test's few: benchmarks/usr_dir_dev_bleu.py's
    # "best_dev_bleu" and "learned".)
    record = json.loads((out_dir / "best" / "best.json").read_text())
    assert (record["step"], record["metric"], record["checkpoint"]) == \
        (best_step, "bleu", f"ckpt-{best_step}"), (record, bleu)
    assert record["value"] == pytest.approx(bleu[best_step], abs=1e-4)
    assert f"The best: dev bleu {record['value']:.2f} at step {best_step}" in run.stdout
    # The decoder of that directory, with the best/ folder as its checkpoint.
    lines = [open(p, encoding="utf-8").read().splitlines()[:E2E_SENTENCES]
             for p in (dev_source, dev_target)]
    for path, text in zip((tmp_path / "src", tmp_path / "ref"), lines):
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
    decode = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.decoder", f"--output_dir={out_dir}",
         f"--checkpoint_path={out_dir / 'best'}", f"--decode_from_file={tmp_path / 'src'}",
         f"--decode_reference={tmp_path / 'ref'}", f"--decode_to_file={tmp_path / 'hyp'}",
         f"--decode_hparams={E2E_SEARCH}", "--json", *decoder_flags],
        capture_output=True, text=True, env=ENV, timeout=900)
    assert decode.returncode == 0, decode.stderr[-3000:]
    assert f"Decoding with {out_dir}/best/ckpt-{best_step}" in decode.stderr
    # The same sentences, the same search: the figure the trainer recorded.
    assert json.loads(decode.stdout)["sacrebleu"]["score"] == \
        pytest.approx(record["value"], abs=1e-3), decode.stdout


@pytest.mark.slow
def test_a_run_whose_dev_bleu_stalls_stops_early_and_says_so(tiny_data, tmp_path):
    """learning_rate tiny: the weights barely move, the dev translations and
    their BLEU stay the same, so the run stops after 2 evaluations without
    improvement, saves, and exits 0 saying why (the tiny run's data and
    model, without XLA: the stop and the export are the subject)."""
    from tiny_runs import PROBLEM, TINY_HPARAMS

    out_dir = tmp_path / "run"
    run = run_cli(
        "trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
        f"--hparams={TINY_HPARAMS},learning_rate=1e-9",
        f"--data_dir={tiny_data}", f"--output_dir={out_dir}", "--train_steps=1000",
        "--local_eval_frequency=2", "--eval_steps=2", "--eval_decode_sentences=10",
        # The weights barely move: short decodes (the untrained model's
        # translations would run to the input's length + 50).
        "--eval_decode_hparams=extra_length=5", "--noxla",
        "--eval_early_stopping_evals=2", "--save_checkpoints_steps=1000",
        "--log_step_count_steps=1", "--export_saved_model", "--export_on_best")
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.findall(r"eval at step (\d+):", run.stdout) == ["2", "4", "6"], run.stdout
    reason = ("dev bleu did not improve for 2 evaluations (--eval_early_stopping_evals=2); "
              "the best is dev bleu ")
    assert f"Stopping at step 6: {reason}" in run.stdout
    assert re.search(rf"Stopped early at step 6: {re.escape(reason)}[\d.]+ at step 2\.",
                     run.stdout), run.stdout[-2000:]
    assert os.path.exists(out_dir / "ckpt-6.index")   # saved before exiting
    assert json.loads((out_dir / "best" / "best.json").read_text())["step"] == 2
    # --export_on_best exported the best when it was found; the end of the run
    # keeps that export of the best (not the last checkpoint), not exporting it again.
    exported = f"Exported the SavedModel to {out_dir}/export/2 (from {out_dir}/best/ckpt-2)."
    assert run.stdout.count(exported) == 1, run.stdout[-2000:]
    assert (f"The SavedModel of {out_dir}/best/ckpt-2 is {out_dir}/export/2, exported when "
            f"it was found (--export_on_best).") in run.stdout, run.stdout[-2000:]
    assert os.listdir(out_dir / "export") == ["2"]
    assert (out_dir / "export" / "2" / "saved_model.pb").is_file()


# Issue #15's acceptance run (a usr_dir problem on the WMT14 sample, dev BLEU at
# each evaluation, t2t-decoder on best/ without the flag) is docs/your-own-data.md's usr_dir
# run: tests/test_usr_dir.py::test_readme_usr_dir_problem_end_to_end_with_dev_bleu,
# which checks it with check_dev_bleu_run above.
