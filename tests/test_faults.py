"""Faults, not only typos (issue 20): each case ends in ONE line `prog: error: ...`,
a non-zero exit, no traceback, never a hang, and the files written before are
byte-identical afterwards.

The CLIs run on a tiny synthetic corpus (multi30k's file names, 250 pairs of
a 15-word language, `tiny_runs`) made in tmp_path: in this process
(`run_cli`) where their output is the subject, as subprocesses where the
process is (a hang cut short, a closed pipe, a server) or where the output
checked is a log line this process would not capture.
"""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, one_line_error, run_cli
from t2t_revival.cli import path_flags
from t2t_revival.data.data_error import DataError
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams, HParamsError, resolve
from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k
from tiny_runs import (PROBLEM, TINY_HPARAMS, TinyMulti30k, cli_subprocess, digests, trainer_args,
                       write_corpus)


@pytest.fixture
def raw_dir(tiny_data):
    """The tiny corpus datagen made `tiny_data` from (the session's, read-only)."""
    return tiny_data.parent / "raw"


@pytest.fixture
def data_dir(tiny_data):
    """The session's `tiny_data` (read-only: the tests that change it copy it)."""
    return tiny_data


@pytest.fixture
def run_dir(tiny_trained):
    """A training directory (hparams.json, vocab, checkpoints): the session's
    `tiny_trained` (read-only: the tests that change it copy it)."""
    return tiny_trained


@pytest.fixture
def unwritable_dir(tmp_path):
    """A directory in which no file can be created (root ignores modes: /sys then)."""
    if os.geteuid() != 0:
        d = tmp_path / "read_only"
        d.mkdir()
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    d = "/sys"  # sysfs: even root cannot create files here
    try:
        open(os.path.join(d, "t2t_probe"), "w").close()
    except OSError:
        yield d
        return
    pytest.skip("no unwritable directory on this machine")


# ---------------------------------------------------------------------------
# Settings that parse but make no sense
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    ("learning_rate=nan", "'learning_rate' must be a finite number"),
    ("learning_rate=inf", "'learning_rate' must be a finite number"),
    ("attention_dropout=nan", "'attention_dropout' must be a finite number"),
    ("learning_rate=0", "'learning_rate' must be in (0, inf) (the multiplier of the schedule). "
                        "Received: learning_rate=0.0"),
    ("adam_beta1=1.5", "'adam_beta1' must be in [0, 1)"),
    ("adam_beta2=-3", "'adam_beta2' must be in [0, 1)"),
    ("adam_beta2=1.0", "'adam_beta2' must be in [0, 1)"),
    ("adam_epsilon=0", "'adam_epsilon' must be in (0, inf)"),
    ("dropout=1.0", "'dropout' must be in [0, 1) (a probability)"),
    ("label_smoothing=-0.1", "'label_smoothing' must be in [0, 1) (a probability)"),
    ("d_model=0", "'d_model' must be in [1, inf)"),
    ("num_heads=-2", "'num_heads' must be in [1, inf)"),
    ("batch_size=0", "'batch_size' must be in [1, inf)"),
    ("max_length=0", "'max_length' must be in [1, inf)"),
    ("num_hidden_layers=0", "'num_hidden_layers' must be in [1, inf)"),
    ("learning_rate_warmup_steps=-1", "'learning_rate_warmup_steps' must be in [0, inf)"),
    ("clip_grad_norm=-1", "'clip_grad_norm' must be in [0, inf) (0 turns clipping off)"),
    ("learning_rate_cooldown_steps=-1", "'learning_rate_cooldown_steps' must be in [0, inf)"),
    ("alpha=-1", "'alpha' must be in [0, inf) (the length penalty exponent"),
    ("beam_size=0", "'beam_size' must be in [1, inf) (the beam width; 1 is greedy search)"),
    ("extra_length=-1", "'extra_length' must be in [0, 1024]"),
    ("extra_length=1025", "'extra_length' must be in [0, 1024]"),
    ("d_model=100,num_heads=8", "divisible by num_heads"),
    ("d_model=129,num_heads=1", "d_model must be even with position_encoding=sinusoid"),
    ("bucket_boundaries=[0,8]", "bucket_boundaries must all be positive"),
    ("vocab_size=5", "at least the size of the vocabulary of problem translate_ende_multi30k "
                     "(8192 pieces"),
])
def test_resolve_refuses_settings_that_make_no_sense(overrides, message):
    problem = TranslateEndeMulti30k()
    with pytest.raises(HParamsError) as error:
        resolve("transformer_tiny", overrides, problem)
    assert message in str(error.value)
    assert "Received: " in str(error.value)


def test_resolve_keeps_the_edges_of_each_range():
    problem = TranslateEndeMulti30k()
    hp = resolve("transformer_tiny", "adam_beta1=0,dropout=0,learning_rate_warmup_steps=0,"
                 "vocab_size=8200,d_model=129,num_heads=1,position_encoding=learned,"
                 "extra_length=1024", problem)
    assert (hp.adam_beta1, hp.dropout, hp.vocab_size, hp.d_model, hp.extra_length) == \
        (0.0, 0.0, 8200, 129, 1024)
    # A NaN in a saved hparams.json is refused when it is read back.
    with pytest.raises(HParamsError, match="'learning_rate' must be a finite number"):
        HParams.from_json('{"learning_rate": NaN}')


@pytest.mark.parametrize("overrides, message", [
    ("learning_rate=nan", "'learning_rate' must be a finite number"),
    ("adam_beta1=1.5,adam_beta2=-3", "'adam_beta1' must be in [0, 1)"),
    ("dropout=1.5", "'dropout' must be in [0, 1) (a probability)"),
    ("batch_size=0", "'batch_size' must be in [1, inf)"),
    ("vocab_size=5", "Received: vocab_size=5"),
])
def test_trainer_refuses_settings_that_make_no_sense(overrides, message, tmp_path):
    out = tmp_path / "run"
    result = run_cli("trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
                     f"--hparams={overrides}", f"--data_dir={tmp_path / 'data'}",
                     f"--output_dir={out}", "--train_steps=1")
    one_line_error(result, "t2t-trainer", message)
    assert not out.exists()  # refused before anything was written


# ---------------------------------------------------------------------------
# Never hang: an input pipeline that keeps nothing
# ---------------------------------------------------------------------------

def test_every_pair_filtered_by_max_length_ends_promptly(data_dir, tmp_path):
    before = digests(data_dir)
    result = cli_subprocess("trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
                            "--hparams=max_length=2,batch_size=64", f"--data_dir={data_dir}",
                            f"--output_dir={tmp_path / 'run'}", "--train_steps=2", "--noxla",
                            timeout=120)  # it hung forever before
    one_line_error(result, "t2t-trainer", "Every one of the 200 train pairs",
                   "longer than max_length=2", "raise max_length to at least")
    assert digests(data_dir) == before


def test_an_empty_split_or_a_dev_split_filtered_away_is_refused_before_reading(
        data_dir, tmp_path):
    import json

    problem = TinyMulti30k()
    hp = resolve("transformer_tiny", TINY_HPARAMS, problem)
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    dev_stats = problem.stats_file("dev", str(copy))
    with open(dev_stats) as f:
        stats = json.load(f)
    # Training keeps pairs; the dev split (read only after training) keeps none.
    stats["length_histogram"] = {"40": stats["examples"]}
    with open(dev_stats, "w") as f:
        json.dump(stats, f)
    with pytest.raises(DataError, match="Every one of the 40 dev pairs .* nothing is left "
                                        "to evaluate on"):
        problem.dataset("train", str(copy), hp)
    stats.update(examples=0, length_histogram={})
    with open(dev_stats, "w") as f:
        json.dump(stats, f)
    with pytest.raises(DataError, match="The dev split of translate_ende_multi30k .* holds "
                                        "no pairs"):
        problem.dataset("eval", str(copy), hp)


# ---------------------------------------------------------------------------
# Data faults
# ---------------------------------------------------------------------------

def test_truncated_train_shard_is_named_with_what_to_do(data_dir, tmp_path, fake_updates):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    shard = TinyMulti30k().data_files("train", str(copy))[3]
    os.truncate(shard, os.path.getsize(shard) - 7)
    before = digests(copy)
    result = run_cli("trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
                     f"--hparams={TINY_HPARAMS}", f"--data_dir={copy}",
                     f"--output_dir={tmp_path / 'run'}", "--train_steps=2", "--noxla")
    one_line_error(result, "t2t-trainer", f"first {shard} (truncated record at",
                   f"rerun t2t-datagen --problem={PROBLEM} --data_dir={copy}")
    assert digests(copy) == before


def test_corrupt_dev_record_is_named_after_training_keeping_the_checkpoint(
        data_dir, tmp_path, fake_updates):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    shard = TinyMulti30k().data_files("dev", str(copy))[0]
    with open(shard, "r+b") as f:  # flip a byte inside a record's data
        f.seek(os.path.getsize(shard) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    out = tmp_path / "run"
    result = run_cli("trainer", f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
                     f"--hparams={TINY_HPARAMS}", f"--data_dir={copy}",
                     f"--output_dir={out}", "--train_steps=1", "--noxla",
                     "--local_eval_frequency=0", "--eval_decode_sentences=0")
    one_line_error(result, "t2t-trainer", f"first {shard} (corrupted record at",
                   "rerun t2t-datagen")
    assert (out / "ckpt-1.index").is_file()  # the step trained is saved


def test_datagen_names_a_truncated_gz_corpus(raw_dir, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(raw_dir, raw)
    corpus = raw / "train.de.gz"
    data = corpus.read_bytes()
    corpus.write_bytes(data[:len(data) // 2])
    before = digests(raw)
    result = run_cli("datagen", f"--problem={PROBLEM}", f"--data_dir={tmp_path / 'data'}",
                     f"--tmp_dir={raw}", "--nodownload")
    one_line_error(result, "t2t-datagen", f"The corpus file {corpus} is truncated or "
                                          f"corrupt (EOFError")
    assert digests(raw) == before


def test_datagen_names_the_sizes_when_the_corpus_is_too_small_for_the_vocabulary(
        raw_dir, tmp_path):
    data = tmp_path / "data"
    result = run_cli("datagen", f"--problem={PROBLEM}", f"--data_dir={data}",
                     f"--tmp_dir={raw_dir}", "--nodownload")
    one_line_error(result, "t2t-datagen", "too small for a 8192-piece vocabulary: its "
                                          "400 sentences give at most")
    assert not os.path.exists(TinyMulti30k().vocab_file(str(data)))


def test_corrupt_vocabulary_file_is_one_clear_error(tmp_path):
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    path = tmp_path / "vocab.model"
    path.write_bytes(b"not a SentencePiece model")
    with pytest.raises(DataError, match=f"The vocabulary {path} is corrupt"):
        SubwordVocabulary(str(path))


def test_invalid_utf8_reaches_the_in_graph_tokenizer_as_replacement_characters(data_dir):
    """What the SavedModel's `serve` does with bytes that are not UTF-8.

    tensorflow_text's SentencePiece op does not fail: each invalid byte becomes
    U+FFFD, the ids of `bytes.decode("utf-8", "replace")` in Python, so the
    export translates the readable rest (no garbage ids, no error).
    """
    import tensorflow as tf

    vocab = TinyMulti30k().vocabulary(str(data_dir))
    raw = [b"ein \xff\xfe mann", b"der \xc3", b"ein mann"]
    ids = vocab.tf_tokenizer().tokenize(tf.constant(raw)).to_list()
    assert ids == [vocab.encode(r.decode("utf-8", "replace")) for r in raw]
    assert ids[0] != ids[2] and "\ufffd" in vocab.decode(ids[0])


def test_ids_past_the_vocabulary_decode_to_nothing_instead_of_failing(data_dir):
    """A model with a rounded-up vocab_size can emit ids no piece owns."""
    vocab = TinyMulti30k().vocabulary(str(data_dir))
    ids = vocab.encode("ein mann")
    assert vocab.vocab_size == 300
    assert vocab.decode(ids[:1] + [300, 8191] + ids[1:] + [1, 7]) == "ein mann"


# ---------------------------------------------------------------------------
# The CLIs: directories and files
# ---------------------------------------------------------------------------

def test_directory_flags_refuse_empty_values_files_and_unwritable_places(tmp_path,
                                                                         unwritable_dir):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(UserError, match=r"--output_dir must name a directory. "
                                        r"Received: --output_dir=''"):
        path_flags.check_directory("output_dir", "")
    with pytest.raises(UserError, match="--data_dir names a file, not a directory"):
        path_flags.check_directory("data_dir", str(a_file))
    with pytest.raises(UserError, match="lies under .*a_file, which is a file"):
        path_flags.check_directory("data_dir", str(a_file / "sub"))
    with pytest.raises(UserError, match=f"cannot write in {unwritable_dir}"):
        path_flags.check_directory("data_dir", os.path.join(unwritable_dir, "new", "deeper"),
                                   writable=True)
    assert path_flags.check_directory("data_dir", str(tmp_path / "new" / "d"),
                                      writable=True) == str(tmp_path / "new" / "d")
    assert not (tmp_path / "new").exists()  # checking creates nothing
    with pytest.raises(UserError, match="--decode_to_file must name a file, and .* is a "
                                        "directory"):
        path_flags.check_output_file("decode_to_file", str(tmp_path))
    with pytest.raises(UserError, match=f"cannot write in {unwritable_dir}"):
        path_flags.check_output_file("decode_to_file", os.path.join(unwritable_dir, "x.txt"))


@pytest.mark.parametrize("module, prog, args, message", [
    ("trainer", "t2t-trainer", ["--output_dir="], "--output_dir must name a directory"),
    ("trainer", "t2t-trainer", ["--output_dir={f}"], "--output_dir names a file"),
    ("trainer", "t2t-trainer", ["--output_dir={d}/run", "--data_dir={f}"],
     "--data_dir names a file"),
    ("decoder", "t2t-decoder", ["--output_dir={f}", "--decode_interactive"],
     "--output_dir names a file"),
    ("exporter", "t2t-exporter", ["--output_dir="], "--output_dir must name a directory"),
    ("avg_checkpoints", "t2t-avg-checkpoints", ["--output_dir={f}"],
     "--output_dir names a file"),
    ("datagen", "t2t-datagen", ["--data_dir={f}", "--tmp_dir={d}"], "--data_dir names a file"),
])
def test_every_cli_refuses_a_directory_flag_that_is_empty_or_a_file(module, prog, args,
                                                                    message, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    args = [a.format(f=a_file, d=tmp_path) for a in args]
    one_line_error(run_cli(module, *args), prog, message)
    assert a_file.read_text() == "kept"


def test_datagen_of_an_all_blank_corpus_names_its_files_and_key(tmp_path):
    """Issue 60 item 8: not "No training text ...; check the corpus files"."""
    import json

    own = tmp_path / "own"
    own.mkdir()
    (own / "blank.en").write_text("  \n\n \n")
    (own / "blank.de").write_text("\n \n\n")
    pair = {"source": "blank.en", "target": "blank.de"}
    (own / "corpora.json").write_text(json.dumps(
        {"train": [pair], "dev": pair, "test": pair, "vocab_size": 300}))
    result = run_cli("datagen", "--problem=translate_plain_text", f"--tmp_dir={own}",
                     f"--data_dir={tmp_path / 'data'}")
    one_line_error(result, "t2t-datagen", f"{own / 'blank.en'} / {own / 'blank.de'}",
                   '"train"', "all 3 pairs", "empty side")


def test_bleu_refuses_an_unwritable_event_dir_before_scoring(tmp_path, unwritable_dir):
    """Issue 77, part 6: t2t-bleu --translations_dir scored, then its event
    write was a traceback; the folder is checked first, in one line."""
    folder = tmp_path / "translations"
    folder.mkdir()
    (folder / "test.de-1000").write_text("ein Hund\n", encoding="utf-8")
    (tmp_path / "ref.de").write_text("ein Hund\n", encoding="utf-8")
    result = run_cli("bleu", f"--translations_dir={folder}", f"--reference={tmp_path / 'ref.de'}",
                     f"--event_dir={unwritable_dir}")
    one_line_error(result, "t2t-bleu", f"cannot write in {unwritable_dir}", "--event_dir")
    assert "step 1000" not in result.stdout


@pytest.mark.parametrize("cli, flag", [("bleu", "--wait_minutes=nan"), ("bleu", "--wait_minutes=-1"),
                                       ("query", "--timeout=nan"), ("query", "--timeout=inf")])
def test_a_float_flag_refuses_what_is_no_number_of_its_kind(tmp_path, cli, flag):
    """absl's bounds let NaN by: t2t-bleu waited NaN minutes, t2t-query took
    NaN as its deadline (float_flags.require_finite)."""
    result = run_cli(cli, flag, *(
            [f"--translations_dir={tmp_path}", f"--reference={tmp_path / 'r'}"] if cli == "bleu"
            else ["--server=http://127.0.0.1:9", "--sentences=ein mann"]))
    line = one_line_error(result, f"t2t-{cli}", f"flag {flag}:")
    assert "-1" in flag or "must be a finite number (NaN and infinities are not)" in line


def test_datagen_refuses_an_unwritable_data_dir_before_any_work(raw_dir, unwritable_dir):
    result = cli_subprocess("datagen", f"--problem={PROBLEM}",
                            f"--data_dir={os.path.join(unwritable_dir, 't2t_data')}",
                            f"--tmp_dir={raw_dir}", "--nodownload")
    line = one_line_error(result, "t2t-datagen", f"cannot write in {unwritable_dir}")
    assert "training a" not in result.stderr.decode()  # no vocabulary work began
    assert line


@pytest.mark.parametrize("body,needle", [
    ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    ("import argparse\nargparse.ArgumentParser().parse_args()\n",
     "unrecognized arguments"),
])
def test_a_usr_dir_that_exits_while_imported_is_one_line_naming_it(tmp_path, body, needle):
    """Issue 60, item 3: a usr_dir module that calls sys.exit or parses the
    command line at import made the trainer and the exporter end with exit
    status 0, saying and doing nothing."""
    usr_dir = tmp_path / "usr"
    usr_dir.mkdir()
    module = usr_dir / f"exits_on_import_{len(body)}.py"
    module.write_text(body)
    out = tmp_path / "out"
    out.mkdir()
    for cli, args in (("trainer", ["--hparams_set=transformer_tiny", f"--output_dir={out}",
                                   f"--data_dir={tmp_path}"]),
                      ("exporter", [f"--output_dir={out}"])):
        result = run_cli(cli, f"--t2t_usr_dir={usr_dir}", *args)
        one_line_error(result, f"t2t-{cli}", f"{module}:", needle, "while importing")
        assert os.listdir(out) == []


def test_bleu_refuses_an_unknown_language_listing_the_known(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("ein Hund .\n")
    result = run_cli("bleu", f"--translation={text}", f"--reference={text}",
                     "--language=klingon")
    one_line_error(result, "t2t-bleu", "no rules for language 'klingon'",
                   "use one of", " de, ", " en, ", " fr, ")


# ---------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------

def test_interactive_decoder_reports_a_non_utf8_line_and_goes_on(run_dir):
    result = run_cli("decoder", f"--output_dir={run_dir}", "--decode_interactive",
                     stdin=b"ein mann\n\xff\xfe kaputt\nder hund\n")
    line = one_line_error(result, "t2t-decoder", "input line 2 is not valid UTF-8",
                          status=0)
    assert "\\xff\\xfe" in line
    assert len(result.stdout.splitlines()) == 2  # lines 1 and 3


@pytest.mark.parametrize("target", ["directory", "unwritable"])
def test_decode_to_file_that_cannot_be_written_is_refused_before_decoding(
        target, run_dir, tmp_path, unwritable_dir):
    sources = tmp_path / "src.txt"
    sources.write_text("ein mann\nder hund\n")
    out = tmp_path if target == "directory" else os.path.join(unwritable_dir, "out.txt")
    before = digests(run_dir)
    result = run_cli("decoder", f"--output_dir={run_dir}", f"--decode_from_file={sources}",
                     f"--decode_to_file={out}")
    one_line_error(result, "t2t-decoder", "--decode_to_file")
    assert "Decoding with" not in result.stderr  # refused before loading, so before decoding
    assert digests(run_dir) == before


# ---------------------------------------------------------------------------
# t2t-query against a server that does not speak HTTP, or cuts its answer
# ---------------------------------------------------------------------------

def _serve_once(answer):
    """A one-connection TCP server on 127.0.0.1 answering the request with
    `answer`: bytes, or a function of the connection that sends them;
    returns (url, server, thread)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(60)

    def handle():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            answer(conn) if callable(answer) else conn.sendall(answer)
        server.close()

    thread = threading.Thread(target=handle, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", server, thread


@pytest.mark.parametrize("answer, kind", [
    (b"SSH-2.0-OpenSSH_9.6\r\nnot http at all\r\n", "BadStatusLine"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
     b'{"predictions": [', "IncompleteRead"),
])
def test_query_turns_a_malformed_answer_into_one_line(answer, kind):
    url, server, thread = _serve_once(answer)
    try:
        result = cli_subprocess("query", f"--server={url}", "--sentences=ein mann", "--timeout=20",
                                timeout=60)
    finally:
        server.close()
        thread.join(timeout=10)
    one_line_error(result, "t2t-query", "not a complete HTTP response", kind)


@pytest.mark.parametrize("args, message", [
    (["--server=http://[::1"], "--server is not a valid URL (Invalid IPv6 URL); e.g. "
                               "http://localhost:8501 or http://[::1]:8501"),
    (["--server=http://127.0.0.1:99999"], "the port of --server, 99999, is out of range: "
                                          "ports are 1 to 65535"),
    (["--server=http://local host:8501"], "--server holds a space or a control character"),
    (["--server=http://127.0.0.1:9", "--model_name=my model"],
     "--model_name holds a space or a control character: give the served model's name"),
])
def test_query_refuses_a_server_or_model_name_it_cannot_send_in_one_line(args, message):
    """Issue 77, part 6: an IPv6 URL without its bracket was a traceback, port
    99999 "connection refused", a space "not a complete HTTP response"."""
    result = run_cli("query", *args, "--sentences=ein mann", "--timeout=5")
    one_line_error(result, "t2t-query", message)


def test_query_reports_an_http_error_whose_body_is_cut_in_one_line():
    """Issue 77, part 6: the error's body, cut short, was a traceback (IncompleteRead)."""
    url, server, thread = _serve_once(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
        b'Content-Length: 500\r\n\r\n{"error": "Tens')
    try:
        result = run_cli("query", f"--server={url}", "--sentences=ein mann", "--timeout=20")
    finally:
        server.close()
        thread.join(timeout=10)
    one_line_error(result, "t2t-query", "the server answered HTTP 500: its body cut short")


def test_query_timeout_is_a_deadline_for_the_whole_request():
    """Issue 77, part 6: --timeout was per socket read, so a server sending a
    byte a second held a --timeout=3 client for 88 s. This one trickles its
    answer a byte every 0.2 s for 20 s; the client gives up at its deadline."""
    done = threading.Event()

    def trickle(conn):
        answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n" + b" " * 1000)
        for byte in answer[:100]:   # 20 s
            if done.wait(0.2):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return

    url, server, thread = _serve_once(trickle)
    start = time.monotonic()
    try:
        result = run_cli("query", f"--server={url}", "--sentences=ein mann", "--timeout=2")
        took = time.monotonic() - start
    finally:
        done.set()
        server.close()
        thread.join(timeout=10)
    one_line_error(result, "t2t-query", "no complete answer from the server within "
                                        "--timeout=2 seconds (the whole request)")
    assert took < 2 + 2, took


def test_query_reports_standard_input_that_is_not_utf8_before_any_request():
    result = cli_subprocess("query", "--server=http://127.0.0.1:9", "--timeout=5",
                            stdin=b"A dog.\ncaf\xe9 au lait\n", timeout=60)
    one_line_error(result, "t2t-query", "the standard input is not UTF-8 text: byte 0xe9 "
                                        "at line 2")


def test_output_to_a_closed_pipe_ends_quietly_as_a_shell_tool_does(tmp_path):
    """`t2t-bleu ... | head -0`: the reader is gone before the figures are
    printed. Exit 141 (128 + SIGPIPE), as a shell tool's, and no traceback."""
    (tmp_path / "h").write_text("ein Hund\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, "-m", "t2t_revival.cli.bleu",
                             f"--translation={tmp_path / 'h'}", f"--reference={tmp_path / 'h'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()   # before the CLI has even imported its modules
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr


def test_a_damaged_best_json_stops_a_resume_before_it_trains(run_dir, data_dir, tmp_path):
    """best/best.json is read when the run starts, not at its first evaluation
    hours later: not UTF-8, it is one line naming it, and no update ran."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "best").mkdir(exist_ok=True)
    (run / "best" / "best.json").write_bytes(b"\xff\xfe{")
    result = run_cli("trainer", *trainer_args(data_dir, run, 4))   # the run is at step 3
    one_line_error(result, "t2t-trainer", f"{run / 'best' / 'best.json'} is corrupt ('utf-8'",
                   "delete the folder holding it")
    assert not list(run.glob("ckpt-4.*"))
