"""T2T Insights' JSON API over random-weight runs (tests/random_run_dir.py):
its translation and n-best list are the decoder's, its beam graph agrees
with its history, its attention is what the model's layers compute, its
alignment is t2t-decoder's; bad input is a 4xx of one line and the server
goes on; sixteen concurrent requests are all answered correctly; nothing
outside the page's files is served; the configuration and the CLI's faults
are one line."""

import concurrent.futures
import http.client
import json

import numpy as np
import pytest

from conftest import one_line_error, run_cli
from insights_serving import call, serving
from random_run_dir import make_random_run_dir, make_vocab, piece_boost

SENTENCES = ["A man is riding a bike .", "Two dogs play in the snow .", "Hello",
             "A woman in a red coat reads a book near the old tower ."]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two random runs of one vocabulary ("a", "b"), served by one server: (runs, url)."""
    from t2t_revival.insights.run_insights import RunInsights

    root = tmp_path_factory.mktemp("insights_api")
    vocab = make_vocab(root / "vocab.model")
    boost = piece_boost(vocab, ("▁a", "▁the"), 4.0, eos=0.5)
    dirs = {"a": make_random_run_dir(root / "a", vocab, seed=1, boost=boost),
            "b": make_random_run_dir(root / "b", vocab, seed=2, boost=boost)}
    served = {label: RunInsights(label, path) for label, path in dirs.items()}
    with serving(served) as url:
        yield served, dirs, url


def _translate(url, run, sentence, **fields):
    return call(f"{url}/api/translate", {"run": run, "sentence": sentence, **fields})


def test_the_runs_are_listed_with_their_defaults(runs):
    _, dirs, url = runs
    status, body = call(f"{url}/api/runs")
    assert status == 200
    listed = {run["label"]: run for run in body["runs"]}
    assert set(listed) == {"a", "b"} and listed["a"]["output_dir"] == dirs["a"]
    assert listed["a"]["settings"]["beam_size"] == 4 and listed["a"]["heads"] == 2
    assert listed["a"]["layers"] == {"encoder": 2, "decoder": 2}
    assert listed["a"]["vocabulary"] == "SentencePiece"
    assert (listed["a"]["source_language"], listed["a"]["target_language"]) == ("en", "de")
    status, models = call(f"{url}/api/list_models/")   # tensor2tensor's
    assert status == 200 and [m["id"] for m in models["configuration"]] == ["a", "b"]
    assert models["configuration"][0]["target_language"] == {"code": "de", "name": "German"}


def test_the_translation_and_nbest_list_are_the_decoders(runs):
    from decoding import decoder_of

    _, dirs, url = runs
    # One sentence at a time (a batch's length limit follows its longest input).
    best = [decoder_of(dirs["a"]).translate([s])[0] for s in SENTENCES]
    beams = [decoder_of(dirs["a"], settings="return_beams=true,write_beam_scores=true"
                        ).translate([s])[0] for s in SENTENCES]
    for sentence, expected, line in zip(SENTENCES, best, beams):
        status, result = _translate(url, "a", sentence)
        assert status == 200, result
        assert result["translation"] == expected and expected.strip()
        fields = line.split("\t")
        assert [e["text"] for e in result["nbest"]] == fields[::2]
        assert [f"{e['score']:.2f}" for e in result["nbest"]] == fields[1::2]
        assert result["seconds"] > 0
        assert result["settings"]["beam_size"] == 4


def test_the_beam_graph_agrees_with_the_history(runs):
    _, _, url = runs
    status, result = _translate(url, "a", SENTENCES[3], beam_size="3", alpha="1.0")
    assert status == 200
    graph, history = result["beam_graph"], result["history"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert len(nodes) == len(graph["nodes"]) and graph["beam_size"] == 3
    assert len(history) == graph["steps"] and graph["stopped"] in (
        "early stop", "length limit", "no live hypotheses")
    for entry in history:
        assert len(entry["live"]) <= 3 and len(entry["finished"]) <= 3
        for slot in entry["live"]:
            node = nodes[slot["node"]]
            assert node["step"] == entry["step"] and node["log_prob"] == slot["log_prob"]
            assert node["state"] == "live"
        for slot in entry["finished"]:
            node = nodes[slot["node"]]
            assert node["state"] == "finished" and node["score"] == slot["score"]
            assert node["token"] == 1 and node["step"] <= entry["step"]
    for entry in result["nbest"]:
        assert nodes[entry["node"]]["rank"] == entry["rank"]
        assert nodes[entry["node"]]["log_prob"] == entry["log_prob"]
    winner = [nodes[result["nbest"][0]["node"]]]
    while winner[-1]["parent"] is not None:
        winner.append(nodes[winner[-1]["parent"]])
    assert {n["id"] for n in winner} == {n["id"] for n in graph["nodes"] if n["winner"]}
    assert [n["token"] for n in winner[::-1][1:]] == result["target"]["ids"]
    assert any(n["state"] == "pruned" and n["reason"] == "beam full" for n in graph["nodes"])


def test_the_attention_is_what_the_layers_compute(runs):
    """The API's weights equal, within 1e-6, those of the model's own
    layers on (source, best output): encoder self-attention, decoder
    self-attention and encoder-decoder attention, every layer and head."""
    served, _, url = runs
    status, result = _translate(url, "b", SENTENCES[0])
    assert status == 200
    model = served["b"].trained.model
    source, target = result["source"]["ids"], result["target"]["ids"]
    output, padding, encoder = model.encode(np.array([source], np.int32), return_attention=True)
    _, weights = model.decode(np.array([target], np.int32), output, padding,
                              return_attention=True)
    expected = {"encoder": encoder, "decoder": weights["decoder"], "cross": weights["cross"]}
    for kind, value in expected.items():
        got = np.array(result["attention"][kind])
        assert got.shape == np.asarray(value).shape[1:]   # [layers, heads, rows, columns]
        np.testing.assert_allclose(got, np.asarray(value)[0], atol=1e-6, rtol=0)
    assert len(result["source"]["pieces"]) == len(source) == got.shape[3]
    assert len(result["target"]["decoder_inputs"]) == len(target) == got.shape[2]
    assert result["target"]["decoder_inputs"][0] == "<start>"
    assert result["source"]["piece_words"][-1] == -1


def test_the_alignment_is_t2t_decoders(runs, tmp_path):
    _, dirs, url = runs
    source = tmp_path / "in.en"
    lines = []
    for sentence in SENTENCES[:2]:   # one a run: a batch's length limit is its longest's
        source.write_text(sentence + "\n", encoding="utf-8")
        out = run_cli("decoder", f"--output_dir={dirs['a']}", f"--decode_from_file={source}",
                      f"--decode_to_file={tmp_path / 'out.de'}",
                      "--decode_hparams=alignments=true")
        assert out.returncode == 0, out.stderr[-2000:]
        lines += (tmp_path / "out.de.align").read_text(encoding="utf-8").splitlines()
    for sentence, line in zip(SENTENCES, lines):
        status, result = _translate(url, "a", sentence)
        assert result["alignment"]["pharaoh"] == line
        assert result["alignment"]["links"] == [list(map(int, link.split("-")))
                                                for link in line.split()]


def test_the_settings_go_through_the_decode_hparams_checks(runs):
    _, _, url = runs
    status, result = _translate(url, "a", SENTENCES[0], beam_size="2", alpha="0",
                                prefix="Ein", constraints=["Hund"],
                                decode_hparams="extra_length=20")
    assert status == 200, result
    assert result["settings"] == {"beam_size": 2, "alpha": 0.0, "extra_length": 20,
                                  "early_stop": "exact", "prefix": "Ein",
                                  "constraints": ["Hund"],
                                  "max_decode_length": result["settings"]["max_decode_length"]}
    assert result["translation"].startswith("Ein") and "Hund" in result["translation"]
    assert result["beam_graph"]["beam_size"] == 2
    status, greedy = _translate(url, "a", SENTENCES[0], beam_size="1")
    assert status == 200 and len(greedy["nbest"]) == 1
    assert all(n["state"] != "pruned" for n in greedy["beam_graph"]["nodes"])


@pytest.mark.parametrize("fields,status,needle", [
    ({"sentence": ""}, 400, "empty"),
    ({"sentence": "   "}, 400, "empty"),
    ({"sentence": "a " * 3000}, 400, "characters"),
    ({"sentence": "Hello . " * 40}, 400, "max_length"),
    ({"sentence": "two\nlines"}, 400, "one line"),
    ({"run": "nope"}, 404, "no run labelled 'nope'"),
    ({"beam_size": "many"}, 400, "beam_size"),
    ({"beam_size": "0"}, 400, "beam_size"),
    ({"beam_size": "4,alpha=2"}, 400, "one value"),
    ({"alpha": "-1"}, 400, "alpha"),
    ({"decode_hparams": "beam_sise=4"}, 400, "beam_sise"),
    ({"decode_hparams": "sampling=true"}, 400, "sampling"),
    ({"constraints": ["Hund " * 40]}, 400, "max_constraint_tokens"),
    ({"constraints": "not a list"}, 200, None),   # text: one phrase a line
    ({"constraints": [3]}, 400, "constraints"),
    ({"sentence": ["a list"]}, 400, "sentence"),
])
def test_bad_input_is_a_4xx_of_one_line_and_the_server_goes_on(runs, fields, status, needle):
    _, _, url = runs
    got, body = call(f"{url}/api/translate", {"run": "a", "sentence": SENTENCES[2], **fields})
    assert got == status, body
    if needle:
        assert needle in body["error"] and "\n" not in body["error"]
        assert "Traceback" not in body["error"]
    assert _translate(url, "a", SENTENCES[2])[0] == 200


@pytest.mark.parametrize("raw,needle", [
    (b'{"run": "a", "sentence": "caf\xe9"}', "not valid UTF-8 (byte 0xe9"),
    (b'{"run": "a", "sentence": ', "not JSON"),
    (b'["a", "b"]', "JSON object"),
    (b'x' * (1 << 20 + 1), "bytes"),
])
def test_bad_bodies_are_refused_in_one_line(runs, raw, needle):
    _, _, url = runs
    status, body = call(f"{url}/api/translate", raw=raw)
    assert 400 <= status < 500 and needle in body["error"], body
    status, body = call(f"{url}/debug?source=caf%E9&id=a")
    assert status == 400 and "UTF-8" in body["error"]
    status, body = call(f"{url}/debug?source=Hello&id=a")   # tensor2tensor's query URL
    assert status == 200 and body["translation"] == _translate(url, "a", "Hello")[1][
        "translation"]


def test_sixteen_concurrent_requests_are_all_answered_correctly(runs):
    _, _, url = runs
    expected = {(run, s): _translate(url, run, s)[1]["translation"]
                for run in ("a", "b") for s in SENTENCES}
    queries = [(("a", "b")[i % 2], SENTENCES[i % len(SENTENCES)]) for i in range(16)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda q: _translate(url, *q), queries, timeout=300))
    for (run, sentence), (status, result) in zip(queries, answers):
        assert status == 200, result
        assert (result["run"], result["sentence"]) == (run, sentence)
        assert result["translation"] == expected[(run, sentence)]


@pytest.mark.parametrize("path", ["/static/../insights_app.py", "/static/%2e%2e/insights_app.py",
                                  "/static/..%2finsights_app.py", "/../../etc/passwd",
                                  "/static//etc/passwd", "/etc/passwd", "/static/"])
def test_nothing_outside_the_pages_files_is_served(runs, path):
    _, _, url = runs
    host, port = url.rsplit("/", 1)[-1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", path)   # sent as written, not normalized
    answer = connection.getresponse()
    body = answer.read()
    assert answer.status in (404, 400), (path, answer.status)
    assert b"import" not in body and b"root:" not in body
    connection.request("GET", "/static/insights.js")
    answer = connection.getresponse()
    assert answer.status == 200 and b"function" in answer.read()
    connection.close()


def test_the_page_is_served_from_the_package(runs):
    import urllib.request

    _, _, url = runs
    with urllib.request.urlopen(f"{url}/", timeout=30) as answer:
        page = answer.read().decode("utf-8")
    assert "T2T Insights" in page and "/static/insights.js" in page
    # Nothing comes from the network: no address but the SVG namespace's.
    for name in ("insights.js", "insights.css"):
        with urllib.request.urlopen(f"{url}/static/{name}", timeout=30) as answer:
            page += answer.read().decode("utf-8")
    assert "https://" not in page and "@import" not in page
    assert page.replace("http://www.w3.org/2000/svg", "").count("http://") == 0


def test_tensor2tensors_configuration_is_read(runs, tmp_path):
    from t2t_revival.errors import UserError
    from t2t_revival.insights.insights_configuration import InsightsConfiguration

    _, dirs, _ = runs
    config = {"configuration": [{"source_language": "en", "target_language": "de",
                                 "label": "random_a",
                                 "transformer": {"model": "transformer", "model_dir": dirs["a"],
                                                 "data_dir": "/nowhere", "hparams": "",
                                                 "hparams_set": "random_tiny",
                                                 "problem": "translate_ende_multi30k",
                                                 "checkpoint_path": dirs["a"] + "/ckpt-1"}}],
              "language": [{"code": "en", "name": "English"}, {"code": "de", "name": "Deutsch"}]}
    path = tmp_path / "configuration.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    read = InsightsConfiguration.from_file(str(path))
    assert [(r.label, r.output_dir, r.target_language, r.checkpoint_path)
            for r in read.runs] == [("random_a", dirs["a"], "de", dirs["a"] + "/ckpt-1")]
    assert read.language_name("de") == "Deutsch"
    for change, needle in ((("problem", "translate_enfr_wmt32k"), "translate_enfr_wmt32k"),
                           (("hparams", "num_heads=4"), "hparams"),
                           (("model_dir", str(tmp_path / "missing")), "missing")):
        bad = json.loads(json.dumps(config))
        bad["configuration"][0]["transformer"][change[0]] = change[1]
        path.write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(UserError, match=needle):
            InsightsConfiguration.from_file(str(path))
    path.write_bytes(b"\xff{")
    with pytest.raises(UserError, match="not JSON"):
        InsightsConfiguration.from_file(str(path))
    with pytest.raises(UserError, match="two runs are labelled"):
        InsightsConfiguration.from_output_dirs([dirs["a"], dirs["b"]], ["x", "x"])


@pytest.mark.parametrize("args,needle", [
    ((), "--configuration=FILE or --output_dir"),
    (("--configuration=/nowhere.json",), "no file /nowhere.json"),
    (("--output_dir=/nowhere",), "/nowhere"),
    (("--output_dir=RUN_A", "--label=x", "--label=y"), "one --label for each"),
    (("--output_dir=RUN_A", "--port=70000"), "port"),
    (("--output_dir=RUN_A", "--static_path=/tmp"), "index.html"),
    (("--output_dir=RUN_A", "--decode_hparams=beam_size=zero"), "beam_size"),
])
def test_the_servers_faults_are_one_line(runs, args, needle):
    _, dirs, _ = runs
    args = [a.replace("RUN_A", dirs["a"]) for a in args]
    one_line_error(run_cli("insights_server", *args), "t2t-insights-server", needle)


def test_a_port_in_use_is_one_line(runs):
    import socket

    _, dirs, _ = runs
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("insights_server", f"--output_dir={dirs['a']}", f"--port={port}")
    one_line_error(out, "t2t-insights-server", f"cannot serve on 127.0.0.1:{port}")


def test_a_tensor2tensor_vocabulary_shows_its_subword_pieces(shared_data, tmp_path):
    """A run with tensor2tensor's SubwordTextEncoder vocabulary (an imported
    run's): its pieces are the .subwords file's tokens, underscore-ended."""
    from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
    from t2t_revival.insights.run_insights import RunInsights

    vocab_file = str(shared_data / "t2t_legacy" / "vocab.translate_ende_wmt8k.8192.subwords")
    run = RunInsights("t2t", make_random_run_dir(tmp_path / "t2t", vocab_file, seed=4))
    assert run.describe()["vocabulary"] == "SubwordTextEncoder"
    result = run.query("A man is riding a bike .")
    vocab = T2TSubwordVocabulary(vocab_file)
    assert result["source"]["ids"] == vocab.encode("A man is riding a bike .") + [1]
    assert result["source"]["pieces"][:-1] == [vocab.id_to_piece(i)
                                               for i in result["source"]["ids"][:-1]]
    assert "man_" in result["source"]["pieces"]
    assert result["translation"] == result["nbest"][0]["text"]
