"""Target prefixes and lexical constraints through the decoder, t2t-decoder and
the SavedModel module, on a tiny random-weight model (tests/random_run_dir.py):
the search itself is proven on toy steps in test_constrained_search.py."""

import pytest

from conftest import one_line_error, run_cli
from random_run_dir import make_random_run_dir, make_vocab

SOURCES = ["A man is riding a bike.", "Two dogs play in the snow near a tall tree.",
           "A woman in a red coat is reading a newspaper on a bench.", "Hello"]
PHRASES = [["Hund"], ["Schnee", "ein Mann"], [], ["Frau"]]
PREFIXES = ["Ein Mann", "", "Zwei", "Die"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("decode_guides")
    return make_random_run_dir(root / "run", make_vocab(root / "vocab.model"), seed=1)


@pytest.fixture(scope="module")
def plain(run):
    """The uncompiled search's decoder (one, so that its traces are shared)."""
    from decoding import decoder_of

    return decoder_of(run, settings="batch_size=4,xla=false,max_constraint_tokens=24")


def test_outputs_meet_the_constraints_and_prefixes(plain):
    # (The compiled search equals the uncompiled one on toy steps,
    # test_constrained_search.py; through the decoder's XLA programs, in
    # benchmarks/constrained_decoding.py's xla_equal_uncompiled: an XLA
    # compile of the guided search is too slow for a fast test.)
    vocab = plain.vocab
    outputs = plain.translate(SOURCES, prefixes=PREFIXES, constraints=PHRASES)
    assert plain.skipped == {}
    for output, phrases, prefix in zip(outputs, PHRASES, PREFIXES):
        ids = vocab.encode(output)
        assert ids[:len(vocab.encode(prefix))] == vocab.encode(prefix), (output, prefix)
        for phrase in phrases:
            assert phrase in output, (output, phrase)


def test_a_line_whose_constraints_cannot_be_met_is_skipped_alone(plain):
    long_phrase = " ".join(["Schnee Hund Mann"] * 12)
    outputs = plain.translate(SOURCES[:3], constraints=[["Hund"], [long_phrase], ["", "x"]],
                              prefixes=[""] * 3)
    assert outputs[1:] == ["", ""] and "Hund" in outputs[0]
    assert set(plain.skipped) == {1, 2}
    assert "more than max_constraint_tokens=24" in plain.skipped[1]
    assert "constraint phrase 1 is empty" in plain.skipped[2]
    long_prefix = " ".join(["Hund"] * 40)
    plain.translate(["Hello"], prefixes=[long_prefix], constraints=[[]])
    assert "before EOS; shorten them or raise extra_length" in plain.skipped[0]


def test_decoder_cli_reads_tab_separated_guides_and_reports_skipped_lines(run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text(f"{SOURCES[0]}\tHund\n{SOURCES[1]}\t\tSchnee\n{SOURCES[2]}\n",
                      encoding="utf-8")
    out_file = tmp_path / "out.txt"
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                  f"--decode_to_file={out_file}", "--decode_hparams=constraints=true,xla=false")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out_file.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and "Hund" in lines[0] and lines[1] == ""
    assert "t2t-decoder: line 2 skipped (an empty output): constraint phrase 1 is empty" \
        in out.stderr
    assert "skipped 1 of 3 lines" in out.stderr
    source.write_text(f"{SOURCES[0]}\tEin Mann\n{SOURCES[3]}\tDie\tKatze\n", encoding="utf-8")
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                  f"--decode_to_file={out_file}", "--decode_hparams=prefix=true,xla=false")
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out_file.read_text(encoding="utf-8").split("\n")[:2]
    assert first.startswith("Ein Mann") and second == ""
    assert "line 2 skipped" in out.stderr and "has 3 tab-separated fields" in out.stderr
    source.write_bytes(b"A dog.\tHund\n\xff\xfe\tx\n")
    one_line_error(run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                           f"--decode_to_file={out_file}", "--decode_hparams=constraints=true"),
                   "t2t-decoder", "line 2")
    one_line_error(run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                           "--decode_hparams=constraints=true,sampling=true"),
                   "t2t-decoder", "'constraints' and 'prefix' are for beam search")


@pytest.fixture(scope="module")
def module(run):
    """The SavedModel's TranslationModule, in process (its signatures traced once)."""
    from t2t_revival.export.export_source import SAVED_MODEL_FIXES, load_export_source
    from t2t_revival.export.translation_module import TranslationModule

    _, trained, settings = load_export_source(run, None, {"max_constraint_tokens": 24},
                                              SAVED_MODEL_FIXES, "SavedModel")
    return TranslationModule(trained.model, trained.hparams, settings, trained.vocab)


def constrained(module, sentences, prefixes, phrases):
    """translate_constrained's outputs, as text."""
    import tensorflow as tf

    out = module.translate_constrained(
        tf.constant(sentences, tf.string), tf.constant(prefixes, tf.string),
        tf.constant(["\t".join(p) for p in phrases], tf.string))
    return [t.decode("utf-8") for t in out["outputs"].numpy()]


def test_saved_model_module_translates_with_prefixes_and_constraints(module, plain):
    """The SavedModel's translate_constrained signature, in process: the
    decoder's outputs (both search uncompiled, one padded length)."""
    import tensorflow as tf

    got = constrained(module, SOURCES, PREFIXES, PHRASES)
    assert got == plain.translate(SOURCES, prefixes=PREFIXES, constraints=PHRASES)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_constraint_tokens=24"):
        constrained(module, ["A dog."], [""], [[" ".join(["Schnee Hund Mann"] * 12)]])


def test_saved_model_constraints_alone_and_blank_prefixes_are_the_decoders(module, plain):
    """No prefix in the whole request (the documented constraints-only use),
    and prefixes of only spaces: the decoder's outputs, which treats a blank
    prefix as none (the graph once forced it as a piece)."""
    got = constrained(module, SOURCES, [""] * 4, PHRASES)
    assert got == plain.translate(SOURCES, prefixes=[""] * 4, constraints=PHRASES)
    blank = ["  ", "", " ", "Die"]
    assert constrained(module, SOURCES, blank, PHRASES) == plain.translate(
        SOURCES, prefixes=blank, constraints=PHRASES)
    assert constrained(module, SOURCES, blank, PHRASES) == constrained(
        module, SOURCES, ["", "", "", "Die"], PHRASES)


def test_saved_model_refuses_mismatched_rows_and_unmeetable_prefixes(module, plain):
    """One prefix for several sentences (once broadcast silently), constraints
    of another length (once an internal shape error), and a prefix longer than
    the row's outputs may be (once cut silently; t2t-decoder refuses the line):
    InvalidArgument saying which."""
    import tensorflow as tf

    for prefixes, phrases in (([""], PHRASES), (PREFIXES, PHRASES[:2]), (PREFIXES[:3], [])):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="one prefix and one constraints string per sentence"):
            constrained(module, SOURCES, prefixes, phrases)
    long_prefix = " ".join(["Hund"] * 40)
    plain.translate(["Hello"], prefixes=[long_prefix], constraints=[[]])
    assert "before EOS" in plain.skipped[0]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="prefix and constraints take more subword tokens than its outputs"):
        constrained(module, ["Hello", "A dog."], [long_prefix, ""], [[], []])
    # A prefix that just fits is forced whole: the decoder's output.
    fits = " ".join(["Hund"] * 4)   # 20 of the 27 subwords "Hello" may have
    assert constrained(module, ["Hello"], [fits], [[]]) == plain.translate(
        ["Hello"], prefixes=[fits], constraints=[[]])
