"""The SavedModel's n-best signature (`translate_nbest`): each sentence's n
best hypotheses and scores, as t2t-decoder gives them with
return_beams=true,write_beam_scores=true, from a clean process that has only
TensorFlow and tensorflow-text; a number of hypotheses outside [1, beam]
fails the request with one clear message. Random-weight runs
(tests/random_run_dir.py): fast."""

import json
import subprocess
import sys

import pytest

from conftest import ENV, run_cli
from random_run_dir import saying_run_dir

SENTENCES = ["A man is riding a bike .", "Two dogs play in the snow .", "", "Hello",
             "A woman in a red coat reads a book near the old tower .", "   ",
             "Three children run on the beach .", "A cat .", "The street is busy today .",
             "Two men are playing guitar on a stage .", "A girl jumps .",
             "People walk in the park .", "A dog runs after a ball .", "Snow .",
             "An old man sits on a bench and reads a newspaper .", "Look !",
             "A boy in a blue shirt climbs a tree .", "Four people eat dinner .",
             "A red car drives down the road .", "Birds fly over the lake ."]

LOAD_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
model = tf.saved_model.load(sys.argv[1])
sentences, ns = json.loads(sys.argv[2]), json.loads(sys.argv[3])
nbest = model.signatures["translate_nbest"]
outs = [nbest(sentences=tf.constant(sentences), num_hypotheses=tf.constant(n)) for n in ns]
errors = []
for bad in (0, -1, 104):
    try:
        nbest(sentences=tf.constant(sentences[:1]), num_hypotheses=tf.constant(bad))
    except tf.errors.InvalidArgumentError as e:
        errors.append(" ".join(e.message.split()))
assert not [m for m in sys.modules if m.startswith(("t2t_revival", "t2t_trainer"))]
print(json.dumps({"lists": [{"outputs": [[t.decode("utf-8") for t in row]
                                          for row in out["outputs"].numpy()],
                              "scores": out["scores"].numpy().tolist()} for out in outs],
                  "errors": errors}))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return saying_run_dir(tmp_path_factory.mktemp("nbest_export"), 5, ("▁a", "▁ein"), 2.5,
                          eos=1.0)


def _decoder_nbest(run, tmp_path):
    source = tmp_path / "in.en"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                  f"--decode_to_file={tmp_path / 'out.de'}",
                  "--decode_hparams=return_beams=true,write_beam_scores=true")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = (tmp_path / "out.de").read_text(encoding="utf-8").split("\n")[:len(SENTENCES)]
    return [(line.split("\t")[::2], [float(s) for s in line.split("\t")[1::2]])
            for line in lines]


def test_the_nbest_signature_gives_t2t_decoders_nbest_lists(run, tmp_path):
    expected = _decoder_nbest(run, tmp_path)
    out = run_cli("exporter", f"--output_dir={run}", f"--export_dir={tmp_path / 'export'}")
    assert out.returncode == 0, out.stderr[-2000:]
    [version] = (tmp_path / "export").iterdir()
    loaded = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(version),
                             json.dumps(SENTENCES), json.dumps([4, 2])],
                            capture_output=True, text=True, env=ENV, timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    answer = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert len(answer["errors"]) == 3
    assert all("num_hypotheses must be in [1, 4]" in e for e in answer["errors"]), answer
    for n, got in zip((4, 2), answer["lists"]):
        for i, (texts, scores) in enumerate(expected):
            if not SENTENCES[i].strip():
                assert got["outputs"][i] == [""] * n and got["scores"][i] == [0.0] * n
                continue
            assert got["outputs"][i] == texts[:n], i
            assert [f"{s:.2f}" for s in got["scores"][i]] == [f"{s:.2f}" for s in scores[:n]]


def test_the_nbest_signature_aligns_each_hypothesis(run):
    """With alignments=true: a Pharaoh line per hypothesis, one link per
    output word; the best one's is translate_with_alignments' line."""
    import re

    import tensorflow as tf

    from t2t_revival.export.export_source import SAVED_MODEL_FIXES, load_export_source
    from t2t_revival.export.translation_module import TranslationModule

    _, trained, settings = load_export_source(run, None, {"alignments": True},
                                              SAVED_MODEL_FIXES, "SavedModel")
    module = TranslationModule(trained.model, trained.hparams, settings, trained.vocab)
    sources = tf.constant(SENTENCES[:4])
    out = module.translate_nbest(sources, tf.constant(3))
    best = module.translate_with_alignments(sources)
    assert out["alignments"].shape == (4, 3)
    for i, (outputs, lines) in enumerate(zip(out["outputs"].numpy(), out["alignments"].numpy())):
        for text, line in zip(outputs, lines):
            links = line.decode().split()
            assert all(re.fullmatch(r"\d+-\d+", link) for link in links)
            words = len(text.decode("utf-8").split()) if SENTENCES[i].strip() else 0
            assert [int(link.split("-")[1]) for link in links] == list(range(words))
        if outputs[0] == best["outputs"].numpy()[i]:
            assert lines[0] == best["alignments"].numpy()[i]
