"""Word alignments (`alignments=true`): the attention the model returns, the
merging of pieces into words, the Pharaoh lines of t2t-decoder and the
SavedModel, the heatmap, and their user errors.

Fast: tiny random-weight models (tests/random_run_dir.py); the alignments
are nonsense, their form and arithmetic are checked.
"""

import re

import numpy as np
import pytest

from conftest import one_line_error, run_cli
from random_run_dir import make_random_run_dir, make_vocab, piece_boost

SOURCES = ["A man is riding a bike .", "Two dogs play in the snow near a tall tree.", "",
           "Hello", "A woman in a red coat reads ."]
PHARAOH = re.compile(r"^(\d+-\d+( \d+-\d+)*)?$")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A random model that says "▁a" often and EOS less: outputs of several words."""
    root = tmp_path_factory.mktemp("word_alignment")
    vocab = make_vocab(root / "vocab.model")
    return make_random_run_dir(root / "a", vocab, seed=1,
                               boost=piece_boost(vocab, ("▁a",), 4.0, eos=0.5))


def _check_lines(sources, outputs, lines):
    """Every line is Pharaoh, one link per output word, indices in range."""
    assert len(lines) == len(sources)
    for source, output, line in zip(sources, outputs, lines):
        assert PHARAOH.match(line), line
        links = [tuple(map(int, link.split("-"))) for link in line.split()]
        if not source.split() or not output.split():
            assert line == ""
            continue
        assert [t for _, t in links] == list(range(len(output.split())))
        assert all(0 <= s < len(source.split()) for s, _ in links)


def _softmax_by_hand(query, key, masked):
    """softmax(QK^T/sqrt(dk)) of query [B, T, H, d], key [B, S, H, d]; 0 where `masked`."""
    scores = np.einsum("bthd,bshd->bhts", query, key) / np.sqrt(query.shape[-1])
    scores = np.where(masked, -1e9, scores)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    return expected / expected.sum(-1, keepdims=True)


def _split_qkv(layer, x, heads):
    """The fused projections of a self-attention layer: (q, k) [B, T, H, d]."""
    qkv = np.asarray(layer.qkv_dense(x))
    dk = layer.key_size
    b, t = qkv.shape[:2]
    return (qkv[..., :heads * dk].reshape(b, t, heads, dk),
            qkv[..., heads * dk:2 * heads * dk].reshape(b, t, heads, dk))


def test_attention_is_returned_without_changing_the_outputs(run):
    """encode and decode with return_attention=True: the same outputs, and
    each layer's weights (encoder self-attention, decoder self-attention,
    encoder-decoder attention) equal softmax(QK^T/sqrt(dk)) computed by hand
    from the first layer's projections; masked positions get 0."""
    from decoding import decoder_of

    model = decoder_of(run).model
    inputs = np.array([[5, 6, 7, 1], [8, 9, 1, 0]], np.int32)
    targets = np.array([[10, 11, 1], [12, 1, 0]], np.int32)
    encoder_output, padding = model.encode(inputs)
    again, _, encoder_attention = model.encode(inputs, return_attention=True)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(encoder_output))
    plain = model.decode(targets, encoder_output, padding)
    logits, attention = model.decode(targets, encoder_output, padding, return_attention=True)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(logits))
    cross, decoder = np.asarray(attention["cross"]), np.asarray(attention["decoder"])
    assert cross.shape == (2, 2, 2, 3, 4)   # (B, layers, H, T, S)
    assert decoder.shape == (2, 2, 2, 3, 3) and tuple(encoder_attention.shape) == (2, 2, 2, 4, 4)
    for weights in (cross, decoder, np.asarray(encoder_attention)):
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[1, :, :, :, 3] == 0.0)   # PAD
    causal = ~np.tril(np.ones((3, 3), bool))[None, None]
    assert np.all(decoder[:, :, :, causal[0, 0]] == 0.0)   # the future
    # By hand, the encoder's first layer: over the embedded source.
    embedded = model.source_embedding(inputs)
    x = np.asarray(embedded + model.encoder_position(embedded))
    encoder_layer = model.encoder_layers[0]
    q, k = _split_qkv(encoder_layer.self_attention, x, 2)
    np.testing.assert_allclose(np.asarray(encoder_attention)[:, 0], _softmax_by_hand(
        q, k, np.asarray(padding)[:, None, None, :] > 0.5), atol=1e-5)
    # The decoder's first layer: its input is the embedded, shifted targets
    # plus positions; its causal self-attention, then the cross-attention.
    layer = model.decoder_layers[0]
    attention_layer = layer.cross_attention
    embedded = model.target_embedding(np.pad(targets[:, :-1], ((0, 0), (1, 0))))
    x = np.asarray(embedded + model.decoder_position(embedded))
    q, k = _split_qkv(layer.self_attention, x, 2)
    np.testing.assert_allclose(decoder[:, 0], _softmax_by_hand(q, k, causal), atol=1e-5)
    x = np.asarray(layer.self_attention_norm(x + layer.self_attention(
        x, attention_mask=np.tril(np.ones((3, 3), bool))[None, None])))
    query = np.asarray(attention_layer.query_dense(x)).reshape(2, 3, 2, -1)
    key, _ = attention_layer.compute_key_value(encoder_output)
    np.testing.assert_allclose(cross[:, 0], _softmax_by_hand(
        query, np.asarray(key), np.asarray(padding)[:, None, None, :] > 0.5), atol=1e-5)


def test_pieces_map_to_the_whitespace_words(run):
    from decoding import decoder_of
    from t2t_revival.decode.word_alignment import piece_words

    vocab = decoder_of(run).vocab
    text = "Skateboarding dogs ."
    ids = vocab.encode(text)
    pieces = [vocab.id_to_piece(i) for i in ids]
    words = piece_words(vocab, ids, 3)
    first_word_pieces = next(k for k, p in enumerate(pieces) if p.startswith("▁") and k)
    assert first_word_pieces >= 3, pieces   # a word of 3 or more pieces ...
    assert words[:first_word_pieces] == [0] * first_word_pieces   # ... is one word
    assert words[-1] == 2 and sorted(words) == words and set(words) == {0, 1, 2}
    assert piece_words(vocab, ids, 0) == []
    assert max(piece_words(vocab, ids, 2)) == 1   # clamped to the line's words


def test_word_attention_sums_source_pieces_and_averages_target_pieces():
    from t2t_revival.decode.word_alignment import pharaoh, word_attention

    attention = np.array([[[0.1, 0.2, 0.3, 0.4],
                           [0.4, 0.3, 0.2, 0.1],
                           [0.0, 0.0, 0.5, 0.5]]], np.float32)   # (1, T=3, S=4)
    source_words = np.array([[0, 0, 1, -1]], np.int32)   # 2 pieces, 1, EOS
    target_words = np.array([[0, 0, -1]], np.int32)   # one word of 2 pieces, EOS
    merged = np.asarray(word_attention(attention, source_words, target_words))[0]
    np.testing.assert_allclose(merged[0, :2], [(0.3 + 0.7) / 2, (0.3 + 0.2) / 2])
    assert np.all(merged[1:] == 0) and np.all(merged[:, 2:] == 0)
    assert pharaoh([2, 0, 1]) == "2-0 0-1 1-2" and pharaoh([]) == ""


def test_aligner_lines_are_well_formed_for_every_output(run):
    from decoding import decoder_of
    from t2t_revival.decode.word_alignment import WordAligner

    decoder = decoder_of(run, settings="batch_size=2,alignments=true")
    # an empty output of a non-empty source; an output of an empty source
    outputs = ["Ein Mann fährt Fahrrad .", "", "Hallo", "Hallo Welt", "Eine Frau liest ."]
    lines = WordAligner(decoder).align(SOURCES, outputs)
    _check_lines(SOURCES, outputs, lines)
    assert lines[1] == "" and any(lines)
    # Alone or in a batch, the same lines; each head choice and layer its own.
    assert WordAligner(decoder).align(SOURCES[:1], outputs[:1]) == lines[:1]
    other = WordAligner(decoder, layer=0, heads="1").align(SOURCES, outputs)
    _check_lines(SOURCES, outputs, other)
    assert other != lines


def test_decoder_writes_one_alignment_line_per_input(run, tmp_path):
    source = tmp_path / "in.en"
    source.write_text("\n".join(SOURCES) + "\n")
    out = tmp_path / "out.de"
    result = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                     f"--decode_to_file={out}",
                     "--decode_hparams=alignments=true,return_beams=true,beam_size=2,xla=false,"
                     "write_beam_scores=true,alignment_heatmap=1")
    assert result.returncode == 0, result.stderr[-2000:]
    outputs = out.read_text().splitlines()
    lines = (tmp_path / "out.de.align").read_text().splitlines()
    assert len(lines) == len(outputs) == len(SOURCES)
    for source, output, line in zip(SOURCES, outputs, lines):
        beams, aligned = output.split("\t")[::2], line.split("\t")
        assert len(aligned) == len(beams)   # a beam, its alignment
        _check_lines([source] * len(beams), beams, aligned)
    assert (tmp_path / "out.de.align1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_interactive_prints_the_alignment_after_a_tab(run):
    result = run_cli("decoder", f"--output_dir={run}", "--decode_interactive",
                     "--decode_hparams=alignments=true,xla=false", stdin="A dog runs .\n\n")
    assert result.returncode == 0, result.stderr[-2000:]
    first, empty = result.stdout.splitlines()
    output, line = first.split("\t")
    _check_lines(["A dog runs ."], [output], [line])
    assert empty == "\t"


@pytest.mark.parametrize("settings, needle", [
    ("alignments=true,alignment_layer=2", "alignment_layer' must be in [-2, 2)"),
    ("alignments=true,alignment_heads=2", "alignment_heads' must be mean, max or a head"),
    ("alignments=true,alignment_heads=avg", "alignment_heads' must be mean, max"),
    ("alignment_heatmap=1", "add alignments=true"),
    ("alignments=true,alignment_heatmap=9", "names input line 9"),
])
def test_bad_alignment_settings_are_one_line(run, tmp_path, settings, needle):
    source = tmp_path / "in.en"
    source.write_text("A dog .\n")
    result = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                     f"--decode_to_file={tmp_path / 'out'}", f"--decode_hparams={settings}")
    one_line_error(result, "t2t-decoder", needle)
    assert not (tmp_path / "out").exists()


def test_saved_model_signature_gives_the_decoder_s_alignments(run):
    """`translate_with_alignments` (exported with alignments=true): in the
    graph, the same Pharaoh lines as `WordAligner` in Python. (Its outputs
    are `serve`'s: one `_translate` makes both, and the export tests check
    `serve`.)"""
    import tensorflow as tf

    from decoding import decoder_of
    from t2t_revival.decode.word_alignment import WordAligner
    from t2t_revival.export.translation_module import TranslationModule

    decoder = decoder_of(run, settings="xla=false,alignments=true,alignment_heads=mean,"
                                       "beam_size=1,extra_length=4")
    module = TranslationModule(decoder.model, decoder.hparams, decoder.decode_hparams,
                               decoder.vocab)
    result = module.translate_with_alignments(tf.constant(SOURCES))
    outputs = [t.decode("utf-8") for t in result["outputs"].numpy()]
    lines = [a.decode("utf-8") for a in result["alignments"].numpy()]
    assert max(len(o.split()) for o in outputs) > 1, outputs
    _check_lines(SOURCES, outputs, lines)
    assert lines == WordAligner(decoder).align(SOURCES, outputs)


def test_an_ensemble_has_no_alignments(run, tmp_path):
    source = tmp_path / "in.en"
    source.write_text("A dog .\n")
    result = run_cli("decoder", f"--output_dir={run}", f"--checkpoint_path={run},{run}",
                     f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'out'}",
                     "--decode_hparams=alignments=true")
    one_line_error(result, "t2t-decoder", "alignments need one model")
    assert not (tmp_path / "out").exists()
