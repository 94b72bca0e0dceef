"""The `Translator` contract (issue 72): every engine takes the same inputs,
applies the one input rule, refuses what it does not serve in one line; the
decode settings are resolved once per t2t-decoder run; the rules are written
once."""

import ast
import pathlib

import pytest

from conftest import run_cli
from random_run_dir import make_random_run_dir, make_vocab

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "t2t_revival"


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    return make_random_run_dir(root / "run", make_vocab(root / "vocab.model"), seed=3,
                               max_length=8, extra_length=4)


def _python_files():
    return [p for p in LIBRARY.rglob("*.py") if "__pycache__" not in p.parts]


def test_the_input_rule_cuts_counts_and_refuses_the_same_way_for_ids_and_pieces():
    from t2t_revival.decode.decode_length import fit_inputs
    from t2t_revival.errors import UserError

    sentences = ["a b c d e f", "", "a b", "   "]
    ids, cut = fit_inputs(sentences, lambda s: [len(w) + 10 for w in s.split()], 1,
                          max_length=4)
    assert ids == [[11, 11, 11, 1], [], [11, 11, 1], []] and cut == 1
    pieces, cut = fit_inputs(sentences, str.split, "</s>", max_length=4)
    assert pieces == [["a", "b", "c", "</s>"], [], ["a", "b", "</s>"], []] and cut == 1
    # tensor2tensor's max_input_size cuts first, uncounted.
    assert fit_inputs(["a b c d e f"], str.split, "</s>", 10, max_input_size=3) == \
        ([["a", "b", "</s>"]], 0)
    with pytest.raises(UserError, match=r"input line 1 has 7 tokens.*long_inputs=cut"):
        fit_inputs(sentences, str.split, "</s>", 4, long_inputs="refuse")


def test_every_engine_checks_long_inputs_with_the_one_check(random_run, tmp_path):
    from t2t_revival.decode.litert_translator import LiteRTTranslator
    from t2t_revival.errors import UserError
    from t2t_revival.settings.decode_hparams import DecodeHParams

    with pytest.raises(UserError, match="LiteRTTranslator: long_inputs must be one of cut, "
                                        "refuse. Received: long_inputs='drop'"):
        LiteRTTranslator(str(tmp_path), long_inputs="drop")
    with pytest.raises(UserError, match="decode hparam 'long_inputs' must be one of cut, "
                                        "refuse. Received: long_inputs='drop'"):
        DecodeHParams(long_inputs="drop")


def test_an_engine_refuses_what_it_does_not_serve_in_one_line():
    from t2t_revival.decode.translator import Translator
    from t2t_revival.errors import UserError

    class Echo(Translator):
        engine, serves, max_length = "Echo", frozenset({"prefixes"}), 4

        def translate(self, sentences, progress=None, compiling=None, on_batch=None,
                      prefixes=None, constraints=None):
            self.refuse(prefixes=prefixes, constraints=constraints)
            return list(sentences)

    echo = Echo()
    assert echo.translate(["x"], prefixes=["y"]) == ["x"]
    with pytest.raises(UserError, match="the Echo engine does not serve constraints .it "
                                        "serves prefixes."):
        echo.translate(["x"], constraints=[["z"]])


def test_decode_settings_are_resolved_once_per_run(random_run, tmp_path, monkeypatch):
    from t2t_revival.settings.decode_hparams import DecodeHParams

    source = tmp_path / "in.en"
    source.write_text("a b c\nd e\n", encoding="utf-8")
    resolved = []
    original = DecodeHParams.from_hparams.__func__

    def counted(cls, hparams, overrides=None):
        resolved.append(overrides)
        return original(cls, hparams, overrides)

    monkeypatch.setattr(DecodeHParams, "from_hparams", classmethod(counted))
    monkeypatch.setenv("T2T_COMPILE_CACHE", "off")
    for engine in ("litert=false,beam_size=2", "litert=false,xla=false"):
        resolved.clear()
        out = run_cli("decoder", f"--output_dir={random_run}", f"--decode_from_file={source}",
                      f"--decode_to_file={tmp_path / 'out.de'}", f"--decode_hparams={engine}")
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(resolved) == 1, resolved
        assert len((tmp_path / "out.de").read_text(encoding="utf-8").split("\n")) == 3


def test_no_code_asks_which_engine_it_holds():
    """The CLI and the library call the contract; none tells engines apart
    by their attributes (hasattr of a decoder, translator or engine) or their
    class (isinstance of an engine). (What a model can do, e.g. whether it
    has one decoder's attention to align with, is the model's question.)"""
    engines = {"Decoder", "LiteRTTranslator", "CTranslate2Translator", "Ensemble"}
    asked = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "hasattr" \
                    and any(word in ast.unparse(node.args[0]).lower()
                            for word in ("decoder", "translator", "engine")):
                asked.append(f"{path.relative_to(ROOT)}:{node.lineno} hasattr")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" \
                    and any(getattr(n, "id", "") in engines for n in ast.walk(node.args[1])):
                asked.append(f"{path.relative_to(ROOT)}:{node.lineno} isinstance")
    assert not asked, "\n".join(asked)


@pytest.mark.parametrize("rule, owner", [
    ("fit_inputs", "t2t_revival/decode/decode_length.py"),         # the input cut
    ("check_long_inputs", "t2t_revival/settings/decode_choices.py"),  # long_inputs values
    ("other_runs", "t2t_revival/run_dir/training_directory.py"),   # ensemble or another run
])
def test_each_rule_is_defined_once_and_called_where_it_applies(rule, owner):
    defined = [str(p.relative_to(ROOT)) for p in _python_files()
               for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(node, ast.FunctionDef) and node.name == rule]
    assert defined == [owner]
    # Nobody writes the rule again: no other cut of ids past max_length,
    # no other test of LONG_INPUTS, no other "is_other_run" decision.
    again = {"fit_inputs": "cut_line(", "check_long_inputs": "LONG_INPUTS",
             "other_runs": "is_other_run("}[rule]
    writers = sorted(str(p.relative_to(ROOT)) for p in _python_files()
                     if again in p.read_text(encoding="utf-8"))
    allowed = {"fit_inputs": {owner, "t2t_revival/decode/word_alignment.py"},
               "check_long_inputs": {owner},
               "other_runs": {owner}}[rule]
    assert set(writers) <= allowed, writers
