"""The serving export (SavedModel for TF Serving), t2t-exporter and t2t-query."""

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from conftest import ENV, one_line_error


def _cli(module, *args, **kw):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, env=ENV, timeout=900, **kw)


# ---- the warm-up records -----------------------------------------------------
def _parse_prediction_log(record: bytes):
    """PredictionLog bytes -> (model name, signature name, {input: ndarray}),
    read with TF Serving's own protos (tensorflow-serving-api)."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    log = prediction_log_pb2.PredictionLog.FromString(record)
    assert log.WhichOneof("log_type") == "predict_log"
    # Nothing the protos do not know: the record is exactly their encoding.
    assert log.SerializeToString(deterministic=True) == record
    request = log.predict_log.request
    inputs = {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}
    return request.model_spec.name, request.model_spec.signature_name, inputs


def test_prediction_log_bytes_round_trip():
    import tensorflow as tf

    from t2t_revival.export.warmup_requests import predict_log_bytes

    record = predict_log_bytes("t2t", "serving_default",
                               {"sentences": tf.constant(["Hallo Welt", ""])})
    name, signature, inputs = _parse_prediction_log(record)
    assert (name, signature) == ("t2t", "serving_default")
    assert list(inputs) == ["sentences"]
    assert inputs["sentences"].tolist() == [b"Hallo Welt", b""]
    # A payload of 300 bytes needs a two-byte length varint.
    long = predict_log_bytes("m" * 300, "s", {})
    assert _parse_prediction_log(long)[0] == "m" * 300


# ---- t2t-exporter user errors -------------------------------------------------
def test_exporter_user_errors_are_one_line(tmp_path):
    out = _cli("t2t_revival.cli.exporter", f"--output_dir={tmp_path / 'nope'}")
    one_line_error(out, "t2t-exporter", "does not exist", "Received: output_dir=")
    out = _cli("t2t_revival.cli.exporter")
    one_line_error(out, "t2t-exporter", "output_dir")


# ---- the exported model --------------------------------------------------------
SENTENCES = [
    "A man in an orange hat starring at something.",
    "",
    "Two dogs.",
    "A group of people stand in front of an igloo while a little girl in a pink "
    "jacket rides a sled down a small hill of snow near a frozen lake.",
    "   ",
    "Ein Hund.",
    "A child is splashing in the water!",
]

# Runs in a fresh interpreter with only TensorFlow and tensorflow-text.
LOAD_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
export, sentences, ids = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
model = tf.saved_model.load(export)
strings = model.signatures["serving_default"](sentences=tf.constant(sentences, tf.string))
by_ids = model.signatures["translate_ids"](ids=tf.constant(ids, tf.int32))
none = model.signatures["serving_default"](sentences=tf.constant([], tf.string))
assert none["outputs"].shape == [0] and none["scores"].shape == [0]
blank = model.signatures["serving_default"](sentences=tf.constant(["", " "]))
assert blank["outputs"].numpy().tolist() == [b"", b""], blank
# None of ours (the problems and hparam sets are t2t_revival.problems / .hparams_sets).
assert not [m for m in sys.modules if m.startswith(("t2t_revival", "t2t_trainer"))]
print(json.dumps({
    "outputs": [s.decode("utf-8") for s in strings["outputs"].numpy()],
    "scores": strings["scores"].numpy().tolist(),
    "id_outputs": by_ids["outputs"].numpy().tolist(),
    "id_scores": by_ids["scores"].numpy().tolist(),
}))
"""


@pytest.fixture(scope="module")
def exported(tiny_run, readme_run, tmp_path_factory):
    """The SavedModel that t2t-trainer --export_saved_model writes at the end of
    a run, made once for this file's slow tests: on a copy of the tiny_run
    (without its export/) already at its train_steps, so the trainer resumes,
    trains nothing and exports the best checkpoint (that run's only
    evaluation: its last step) with `export_saved_model`. Returns (the copy,
    its export folder, the version folder, the trainer's result)."""
    from conftest import run_cli
    from readme_workflow import TINY_RUN_STEPS

    out_dir, _ = tiny_run
    run_dir = tmp_path_factory.mktemp("export") / "run"
    shutil.copytree(out_dir, run_dir, ignore=shutil.ignore_patterns("export"))
    # (In this process: the trainer's output and files are the subject; the
    # data are the README run's own, which its main job made.)
    out = run_cli("trainer", "--problem=translate_ende_multi30k",
                  "--hparams_set=transformer_tiny", f"--data_dir={readme_run.data_dir()}",
                  f"--output_dir={run_dir}", f"--train_steps={TINY_RUN_STEPS}",
                  "--local_eval_frequency=0", "--eval_decode_sentences=0",
                  "--export_saved_model")
    assert out.returncode == 0, out.stderr[-3000:]
    base = run_dir / "export"
    return run_dir, base, str(base / str(TINY_RUN_STEPS)), out


@pytest.mark.slow
def test_export_layout_and_warmup(exported):
    import tensorflow as tf

    out_dir, base, path, _ = exported
    step = int(tf.train.latest_checkpoint(str(out_dir)).rsplit("-", 1)[1])
    assert sorted(os.listdir(base)) == [str(step)]       # only the version, no temp dirs
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
    warmup = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    records = [r.numpy() for r in tf.data.TFRecordDataset(warmup)]
    assert len(records) >= 2
    model = tf.saved_model.load(path)
    for record in records:
        name, signature, inputs = _parse_prediction_log(record)
        assert signature == "serving_default" and list(inputs) == ["sentences"]
        result = model.signatures[signature](sentences=tf.constant(inputs["sentences"]))
        assert result["outputs"].shape == inputs["sentences"].shape


@pytest.mark.slow
def test_saved_model_matches_decoder_in_a_clean_process(exported, tmp_path):
    from t2t_revival.special_ids import EOS_ID
    from decoding import decoder_of

    out_dir, _, path, _ = exported
    decoder = decoder_of(str(out_dir), settings="batch_size=64")
    expected = decoder.translate(SENTENCES)
    assert expected[1] == "" and expected[4] == ""
    assert sum(1 for e in expected if e) == 5

    encoded = [decoder.vocab.encode(s) + [EOS_ID] if s.strip() else [] for s in SENTENCES]
    width = max(len(e) for e in encoded)
    ids = [e + [0] * (width - len(e)) for e in encoded]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    out = subprocess.run([sys.executable, "-I", "-c", LOAD_SCRIPT, path,
                          json.dumps(SENTENCES), json.dumps(ids)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])

    assert got["outputs"] == expected
    assert got["scores"][1] == 0.0 and got["scores"][4] == 0.0
    assert all(s < 0 for i, s in enumerate(got["scores"]) if i not in (1, 4))
    # translate_ids: the same search on ids; its output ids decode to the same text.
    assert [decoder.vocab.decode(row) for row in got["id_outputs"]] == expected
    assert got["id_scores"] == pytest.approx(got["scores"], abs=1e-5)
    for row, sentence in zip(got["id_outputs"], SENTENCES):
        if not sentence.strip():
            assert not any(row)
        else:
            assert EOS_ID in row or all(row)           # EOS-terminated or cut at the limit


@pytest.mark.slow
def test_saved_model_cli_shows_both_signatures(exported):
    _, _, path, _ = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    command = [cli] if os.path.exists(cli) else [
        sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    out = subprocess.run([*command, "show", "--all", "--dir", path], capture_output=True,
                         text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    sections = {}
    for block in text.split("signature_def['")[1:]:
        sections[block.split("'", 1)[0]] = " ".join(block.split())
    assert {"serving_default", "translate_ids"} <= set(sections), text[:3000]
    serving, ids = sections["serving_default"], sections["translate_ids"]
    assert ("inputs['sentences'] tensor_info: dtype: DT_STRING shape: (-1)" in serving), serving
    assert "outputs['outputs'] tensor_info: dtype: DT_STRING shape: (-1)" in serving, serving
    assert "outputs['scores'] tensor_info: dtype: DT_FLOAT shape: (-1)" in serving, serving
    assert "inputs['ids'] tensor_info: dtype: DT_INT32 shape: (-1, -1)" in ids, ids
    assert "outputs['outputs'] tensor_info: dtype: DT_INT32 shape: (-1, -1)" in ids, ids
    assert "outputs['scores'] tensor_info: dtype: DT_FLOAT shape: (-1)" in ids, ids
    assert "XlaLaunch" not in text and "jit_compile" not in text


@pytest.mark.slow
def test_exporter_cli_no_checkpoint_is_one_line(tiny_run, tmp_path):
    from conftest import run_cli

    out_dir, _ = tiny_run
    for name in ("hparams.json", "run.json", "vocab.model"):
        shutil.copy(out_dir / name, tmp_path / name)
    # (In this process: the exporter's one-line error is the subject.)
    out = run_cli("exporter", f"--output_dir={tmp_path}")
    one_line_error(out, "t2t-exporter", "no checkpoint", "Received: output_dir=")
    assert not (tmp_path / "export").exists() or not os.listdir(tmp_path / "export")


@pytest.mark.slow
def test_trainer_export_saved_model_flag(exported):
    """Already at train_steps, t2t-trainer --export_saved_model resumes, trains
    nothing, and exports (the `exported` fixture's run)."""
    from readme_workflow import TINY_RUN_STEPS

    run_dir, _, _, out = exported
    version = run_dir / "export" / str(TINY_RUN_STEPS)
    assert (version / "saved_model.pb").is_file(), out.stdout
    assert (version / "assets.extra" / "tf_serving_warmup_requests").is_file()
    assert f"Exported the SavedModel to {version}" in out.stdout


# ---- t2t-query against a fake TF Serving REST server ---------------------------
class _FakeServing(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        if self.path != "/v1/models/t2t:predict":
            self._answer(404, {"error": "Servable not found for request: Latest(nope)"})
            return
        if body["signature_name"] == "translate_nbest":   # the columnar form
            n, sentences = body["inputs"]["num_hypotheses"], body["inputs"]["sentences"]
            if not 1 <= n <= 4:
                self._answer(400, {"error": "num_hypotheses must be in [1, 4]"})
                return
            self._answer(200, {"outputs": {
                "outputs": [[s.upper()[::-1] + "!" * i for i in range(n)] for s in sentences],
                "scores": [[-float(len(s) + i) for i in range(n)] for s in sentences]}})
            return
        assert body["signature_name"] == "serving_default"
        predictions = [{"outputs": s.upper()[::-1], "scores": -float(len(s))}
                       for s in body["instances"]]
        self._answer(200, {"predictions": predictions})

    def _answer(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    _FakeServing.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeServing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_query_server_speaks_the_rest_predict_format(fake_server):
    from t2t_revival.errors import UserError
    from t2t_revival.export.serving_query import query_server

    got = query_server(fake_server, "t2t", ["ab c", "", "Grüße"])
    assert got == [("C BA", -4.0), ("", -0.0), ("ESSÜRG", -5.0)]
    path, body = _FakeServing.requests[0]
    assert path == "/v1/models/t2t:predict"
    assert body == {"signature_name": "serving_default", "instances": ["ab c", "", "Grüße"]}
    with pytest.raises(UserError, match="HTTP 404: Servable not found"):
        query_server(fake_server, "nope", ["x"])


def test_query_cli(fake_server, tmp_path):
    out = _cli("t2t_revival.cli.query", f"--server={fake_server}", "--model_name=t2t",
               "--sentences=one|two words", "--batch_size=1", "--scores")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["-3.0000\tENO", "-9.0000\tSDROW OWT"]
    assert len(_FakeServing.requests) == 2          # one request per batch
    source = tmp_path / "in.en"
    source.write_text("a\nbc\n", encoding="utf-8")
    out = _cli("t2t_revival.cli.query", f"--server={fake_server}", f"--input_file={source}")
    assert out.returncode == 0 and out.stdout.splitlines() == ["A", "CB"], out.stderr
    out = _cli("t2t_revival.cli.query", f"--server={fake_server}", input="x y\n")
    assert out.returncode == 0 and out.stdout.splitlines() == ["Y X"], out.stderr


def test_query_cli_prints_nbest_lists(fake_server):
    from t2t_revival.export.serving_query import query_nbest

    assert query_nbest(fake_server, "t2t", ["ab", "c"], 2) == [
        [("BA", -2.0), ("BA!", -3.0)], [("C", -1.0), ("C!", -2.0)]]
    path, body = _FakeServing.requests[-1]
    assert body == {"signature_name": "translate_nbest",
                    "inputs": {"sentences": ["ab", "c"], "num_hypotheses": 2}}
    out = _cli("t2t_revival.cli.query", f"--server={fake_server}", "--sentences=ab|c",
               "--num_hypotheses=3", "--scores")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["BA\t-2.0000\tBA!\t-3.0000\tBA!!\t-4.0000",
                                       "C\t-1.0000\tC!\t-2.0000\tC!!\t-3.0000"]
    out = _cli("t2t_revival.cli.query", f"--server={fake_server}", "--sentences=ab",
               "--num_hypotheses=9")
    one_line_error(out, "t2t-query", "HTTP 400", "num_hypotheses must be in [1, 4]")


def test_query_sends_a_non_ascii_model_name_percent_encoded(fake_server):
    """Issue 77, part 6: a non-ASCII --model_name was a traceback (an HTTP
    request's path is ASCII); it is sent percent-encoded, and this server has
    no such model."""
    from conftest import run_cli

    out = run_cli("query", f"--server={fake_server}", "--model_name=modèle", "--sentences=ab")
    one_line_error(out, "t2t-query", "the server answered HTTP 404: Servable not found",
                   "/v1/models/mod%C3%A8le:predict")
    assert _FakeServing.requests[-1][0] == "/v1/models/mod%C3%A8le:predict"


def test_query_goes_through_the_proxy_http_proxy_names(fake_server, monkeypatch):
    """As urllib did before the whole-request deadline: `http_proxy` gets the
    request with the absolute URL, and `no_proxy` hosts are asked directly."""
    from t2t_revival.export.serving_query import ServingError, query_server

    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", fake_server)
    with pytest.raises(ServingError, match="HTTP 404"):   # the fake answers 404 to such paths
        query_server("http://serving.invalid:8501", "t2t", ["ab"])
    assert _FakeServing.requests[-1][0] == "http://serving.invalid:8501/v1/models/t2t:predict"
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")   # nothing listens there
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert query_server(fake_server, "t2t", ["ab"]) == [("BA", -2.0)]


def test_query_cli_connection_error_is_one_line():
    import socket

    with socket.socket() as s:                       # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _cli("t2t_revival.cli.query", f"--server=http://127.0.0.1:{port}",
               "--sentences=hello")
    one_line_error(out, "t2t-query", "cannot reach", f"127.0.0.1:{port}")
