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
