"""The strict registry: names, duplicates, unknown names, help text."""

import pytest

from conftest import ISSUE_HPARAMS_SETS
from t2t_revival import registry
from t2t_revival.registry import Registry, RegistryError, snake_case


def test_default_name_is_snake_case_of_class_or_function():
    reg = Registry("thing")

    @reg.register
    class TranslateEndeWmt32k:
        """A problem."""

    @reg.register
    def transformer_base():
        """A set."""

    assert reg.names() == ["transformer_base", "translate_ende_wmt32k"]
    assert reg.get("translate_ende_wmt32k") is TranslateEndeWmt32k
    assert snake_case("ParsingEnglishPtb16k") == "parsing_english_ptb16k"
    assert snake_case("HTTPServer") == "http_server"


def test_explicit_name_positional_and_keyword():
    reg = Registry("thing")

    @reg.register("custom")
    def a():
        pass

    @reg.register(name="other")
    def b():
        pass

    assert reg.get("custom") is a and reg.get("other") is b
    assert "a" not in reg and len(reg) == 2


def test_duplicate_name_is_an_error():
    reg = Registry("model")

    @reg.register
    def transformer():
        pass

    with pytest.raises(RegistryError, match="already registered"):
        @reg.register("transformer")
        def another():
            pass
    assert reg.get("transformer") is transformer


def test_a_name_registered_for_a_block_is_free_after_it():
    reg = Registry("problem")

    class TinyProblem:
        """A problem."""

    with reg.registered(TinyProblem, "tiny") as registered:
        assert registered is TinyProblem and reg.get("tiny") is TinyProblem
        assert TinyProblem.registered_name == "tiny"
        with pytest.raises(RegistryError, match="already registered"):
            with reg.registered(TinyProblem, "tiny"):
                pass
        assert reg.get("tiny") is TinyProblem   # the refused one took nothing away
    assert "tiny" not in reg and len(reg) == 0
    with pytest.raises(ZeroDivisionError):
        with reg.registered(TinyProblem):
            assert reg.names() == ["tiny_problem"]
            1 / 0
    assert len(reg) == 0   # free again after an error too


def test_unknown_name_lists_registered_and_closest():
    reg = Registry("hparam set")
    for name in ("transformer_base", "transformer_big", "transformer_tiny"):
        reg.register(name=name)(lambda: None)
    with pytest.raises(RegistryError) as e:
        reg.get("transformer_bsae")
    msg = str(e.value)
    assert "Unknown hparam set 'transformer_bsae'" in msg
    assert "Closest match: 'transformer_base'" in msg
    assert "transformer_base, transformer_big, transformer_tiny" in msg
    assert "Received: hparam set='transformer_bsae'" in msg


def test_check_refuses_an_unknown_name_as_get_does_and_imports_nothing():
    reg = Registry("model")
    reg.register_lazy("transformer", "t2t_revival_no_such_module:Transformer")
    reg.check("transformer")   # known: its module (which does not exist) is not imported
    with pytest.raises(RegistryError) as checked:
        reg.check("transformr")
    with pytest.raises(RegistryError) as got:
        reg.get("transformr")
    assert str(checked.value) == str(got.value)
    assert "Closest match: 'transformer'" in str(checked.value)
    with pytest.raises(ModuleNotFoundError):   # `get` does import it
        reg.get("transformer")


def test_help_text_lists_every_registered_set_with_description():
    text = registry.help_text()
    for name in ISSUE_HPARAMS_SETS:
        line = next(l for l in text.splitlines() if l.strip().startswith(name + " "))
        assert len(line.split(None, 1)[1]) > 10  # a real one-line description
    assert text.startswith("Problems:")
    assert "Models:" in text and "Hparam sets:" in text


def _built_in_set():
    """A built-in hparam set of the lazy-loading tests."""


def _users_set():
    """A user's hparam set of the same name."""


def test_a_registry_loads_its_built_in_names_on_first_use_once():
    """No caller loads the built-in names first: any lookup, listing or
    registration does, once."""
    loads = []

    def load():
        loads.append(1)
        reg.register("transformer_tiny")(_built_in_set)

    reg = Registry("hparam set", load=load)
    assert loads == []
    assert "transformer_tiny" in reg and loads == [1]
    assert reg.get("transformer_tiny") is _built_in_set
    assert reg.names() == ["transformer_tiny"] and len(reg) == 1 and loads == [1]
    # A user's registration comes after the built-in names: the clash names it.
    other = Registry("hparam set", load=lambda: other.register("transformer_tiny")(_built_in_set))
    with pytest.raises(RegistryError, match=r"already registered \(by test_registry\._built_in_set"
                                            r"\); pick another name\. Received: hparam "
                                            r"set=test_registry\._users_set"):
        other.register("transformer_tiny")(_users_set)


def test_a_failed_load_is_loud_at_every_use():
    def load():
        raise ImportError("a built-in module is broken")

    reg = Registry("problem", load=load)
    for _ in range(2):
        with pytest.raises(ImportError, match="is broken"):
            reg.get("anything")


def test_a_fresh_process_finds_every_built_in_name_without_tensorflow():
    """The registries load themselves (no `load_all` first), listing names
    imports no TensorFlow, and the models package does not import the
    registry (the registry reads it: no circle)."""
    import subprocess
    import sys

    from conftest import ENV, ROOT

    code = ("import sys\n"
            "import t2t_revival.models\n"
            "print('t2t_revival.registry' in sys.modules)\n"
            "from t2t_revival import registry\n"
            "print(registry.problems.get('translate_ende_multi30k').__name__,\n"
            "      'transformer_tiny' in registry.hparams_sets, registry.models.names())\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["False", "TranslateEndeMulti30k True ['transformer']",
                                       "[]"]


def test_no_caller_loads_the_registries_by_hand():
    """`registry.load_all` is called from at most one place (today none): the
    registries load their built-in names themselves when asked."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    calls = []
    for folder in ("t2t_revival", "benchmarks", "problems", "hparams", "tests"):
        for path in (root / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "load_all"
                                                   or getattr(node.func, "id", None) == "load_all"):
                    calls.append(f"{path.relative_to(root)}:{node.lineno}")
    assert len(calls) <= 1, calls
