"""Export a training directory as a CTranslate2 model directory.

    export_ctranslate2("t2t_train/tiny")  ->  "t2t_train/tiny/export/ctranslate2/<step>"

The same checkpoint `t2t-decoder` reads, converted into CTranslate2's
`TransformerSpec` (https://opennmt.net/CTranslate2), for fast CPU/GPU beam
search, int8 included. CTranslate2 is an optional extra
(`python -m pip install -e ".[ctranslate2]"` in the clone), imported only
here and in `CTranslate2Translator`.

The version directory holds:

    model.bin, config.json, shared_vocabulary.json   the CTranslate2 model
    vocab.model, vocab.subwords or vocab.marian.json   the vocabulary (SentencePiece,
                                                     tensor2tensor's SubwordTextEncoder,
                                                     or a Marian model's tokenizer)
    t2t_export.json                                  decode settings (beam,
                                                     alpha, extra length, ...)
    README.md                                        how to use it

How our architecture maps onto the spec, exactly:
- post-LN (`pre_norm=False`) or pre-LN with a final LayerNorm per stack
  (`pre_norm=True`), `hparams.layer_norm_epsilon`, an FFN with biases and
  the run's activation (ReLU; swish or GELU: Marian's), the encoder's and the
  decoder's own depths;
- attention projections without biases (the spec's biases left unset), or
  with them (`attention_bias`: Marian's); `final_logits_bias` as the
  projection's bias; the
  fused self-attention `[d_model, q|k|v]` kernel transposed into
  `linear[0]`, the cross-attention query and fused `k|v` kernels into
  `linear[0]` / `linear[1]`; per-head size `key_size` (queries scaled by
  key_size^-0.5 in both);
- token embeddings scaled by sqrt(d_model) (or not: multiply_embedding_mode
  "none"), one matrix shared by source, target and the output projection (or
  three, with shared_embedding=False; the target's as the projection with
  tie_output_projection; source and target vocabularies of their own with
  target_vocab_size); tensor2tensor's variants (t2t-import)
  folded into the tables: `zero_pad_embedding` zeroes the PAD row of the
  source and target tables (not of the projection), and the
  `target_space_embedding` row is added to every source row (divided by
  sqrt(d_model) when the embeddings are scaled);
- positions as an explicit table: the paper's interleaved sin/cos (which is
  not CTranslate2's built-in concatenated layout) or tensor2tensor's
  (`t2t_sinusoid`) for `max_length + extra_length` positions, or the learned
  `[max_length, d_model]` table, or Marian's (`marian_sinusoid`);
- tokens: the vocabulary's pieces in id order, so CTranslate2 ids equal
  ours (a tensor2tensor vocabulary has no UNK: its `<pad>` stands in as
  CTranslate2's unknown token, which our tokenization never produces). The
  decoder starts from PAD (`decoder_start_token="<pad>"`), and
  `add_source_eos` appends EOS to the source, as our encoder input has it.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np

from t2t_revival.settings.decode_hparams import DecodeOverrides
from t2t_revival.decode.decode_length import longest_decode_length
from t2t_revival.errors import UserError
from t2t_revival.decode.ctranslate2_translator import INSTALL_HINT
from t2t_revival.decode.export_settings import EXPORT_CONFIG
from t2t_revival.export.version_directory import checkpoint_version, write_version_directory
from t2t_revival.run_dir.file_names import MARIAN_VOCAB_FILE, VOCAB_FILE
from t2t_revival.special_ids import EOS_ID, PAD_ID

# Weight types CTranslate2 can store (ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES).
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                 "int16", "float16", "bfloat16")


def _import_ctranslate2():
    try:
        import ctranslate2
        from ctranslate2 import specs  # noqa: F401
    except ImportError as e:
        raise UserError(f"the CTranslate2 export needs the optional ctranslate2 package "
                        f"({e}); install it with {INSTALL_HINT}. "
                        f"Received: format='ctranslate2'") from None
    return ctranslate2


def _numpy(variable) -> np.ndarray:
    import keras

    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _sinusoid_table(layer, num_positions: int, d_model: int) -> np.ndarray:
    """The table `[num_positions, d_model]` of the model's sinusoid `layer` (3.5,
    or tensor2tensor's layout), computed by that layer's kind in float32."""
    from t2t_revival.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding

    float32 = SinusoidalPositionEncoding(max_wavelength=layer.max_wavelength,
                                         layout=layer.layout, dtype="float32")
    return _numpy(float32(np.zeros((1, num_positions, d_model), np.float32)))


POWER_PATIENCE = 8
"""CTranslate2's beam `patience` under length_penalty=power. That penalty
favours long hypotheses, so stopping once beam_size have finished (patience 1)
stops before t2t-decoder's search would: on the imported tiny Marian model
(alpha 1.0) the export agreed with the decoder on 950 of Multi30k's 1,000 test
sentences at patience 1, 984 at 2, 989 at 4, 990 at 8 (2026-12-02). Under
GNMT's penalty patience 1 agrees on 997 of 1,000."""
_ACTIVATIONS = {"relu": "RELU", "swish": "SWISH", "gelu": "GELU"}
"""Our ffn_activation -> CTranslate2's `specs.Activation` (GELU: the exact one)."""


def _check_supported(model, hparams) -> None:
    """UserError for what CTranslate2's TransformerSpec cannot express."""
    from t2t_revival.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding

    problems = []
    if hparams.key_size != hparams.value_size:
        problems.append(f"key_size ({hparams.key_size}) != value_size "
                        f"({hparams.value_size}): CTranslate2 has one head size")
    if hparams.position_encoding in ("sinusoid", "t2t_sinusoid") and not (
            isinstance(model.encoder_position, SinusoidalPositionEncoding)
            and model.encoder_position.max_wavelength == 10000.0):
        problems.append("a sinusoid other than the paper's or tensor2tensor's "
                        "(max_wavelength 10000)")
    if problems:
        raise UserError(f"this model cannot be expressed as a CTranslate2 Transformer: "
                        f"{'; '.join(problems)}. Export it with --format=saved_model "
                        f"instead. Received: hparams={hparams.to_dict()!r}")


def _build_spec(model, hparams, pieces: tuple[list[str], list[str]], num_positions: int,
                unk_token: str):
    """A `ctranslate2.specs.TransformerSpec` holding `model`'s weights
    (`pieces`: the source's and the target's)."""
    from ctranslate2 import specs

    hp = hparams
    pre_norm = hp.norm_type == "pre"
    head_dim = hp.key_size if hp.key_size * hp.num_heads != hp.d_model else None
    activation = getattr(specs.Activation, _ACTIVATIONS[hp.ffn_activation])
    encoder = specs.TransformerEncoderSpec(hp.encoder_layers, hp.num_heads, pre_norm=pre_norm,
                                           activation=activation, head_dim=head_dim)
    decoder = specs.TransformerDecoderSpec(hp.decoder_layers, hp.num_heads, pre_norm=pre_norm,
                                           activation=activation, head_dim=head_dim)
    spec = specs.TransformerSpec(encoder, decoder)
    attention_bias = hp.attention_bias

    def linear(target, dense, bias=True):
        target.weight = _numpy(dense.kernel).T                  # [in, out] -> [out, in]
        if bias:
            target.bias = _numpy(dense.bias)

    def norm(target, layer):
        target.gamma = _numpy(layer.gamma)
        target.beta = _numpy(layer.beta)

    def self_attention(target, layer):
        linear(target.self_attention.linear[0], layer.self_attention.qkv_dense,
               bias=attention_bias)
        linear(target.self_attention.linear[1], layer.self_attention.output_dense,
               bias=attention_bias)
        norm(target.self_attention.layer_norm, layer.self_attention_norm)

    def ffn(target, layer):
        linear(target.linear_0, layer.ffn.inner_dense)
        linear(target.linear_1, layer.ffn.output_dense)
        norm(target.layer_norm, layer.ffn_norm)

    source_emb = _numpy(model.source_embedding.embeddings)      # (V, D)
    target_emb = _numpy(model.target_embedding.embeddings)
    softmax_emb = target_emb                                    # the shared projection
    scaled = hp.multiply_embedding_mode == "sqrt_depth"
    # tensor2tensor's variants (t2t-import), folded into the embedding tables:
    # the PAD row zeroed on the way in (not in the projection), and the target
    # space's row added to every source token (before the sqrt(d) scaling,
    # hence divided by it).
    if hp.zero_pad_embedding:
        source_emb, target_emb = source_emb.copy(), target_emb.copy()
        source_emb[PAD_ID] = target_emb[PAD_ID] = 0.0
    if model.target_space_embedding is not None:
        space = _numpy(model.target_space_embedding.embeddings)[hp.target_space_id]
        source_emb = source_emb + space / (np.sqrt(hp.d_model) if scaled else 1.0)
    if hp.position_encoding == "learned":
        encoder_positions = _numpy(model.encoder_position.position_embeddings)
        decoder_positions = _numpy(model.decoder_position.position_embeddings)
    else:
        encoder_positions = decoder_positions = _sinusoid_table(
            model.encoder_position, num_positions, hp.d_model)

    encoder.embeddings[0].weight = source_emb
    encoder.embeddings[0].multiply_by_sqrt_depth = scaled
    encoder.position_encodings.encodings = encoder_positions
    for target, layer in zip(encoder.layer, model.encoder_layers):
        self_attention(target, layer)
        ffn(target.ffn, layer)

    decoder.embeddings.weight = target_emb
    decoder.embeddings.multiply_by_sqrt_depth = scaled
    decoder.position_encodings.encodings = decoder_positions
    for target, layer in zip(decoder.layer, model.decoder_layers):
        self_attention(target, layer)
        cross = layer.cross_attention
        linear(target.attention.linear[0], cross.query_dense, bias=attention_bias)
        linear(target.attention.linear[1], cross.key_value_dense, bias=attention_bias)
        linear(target.attention.linear[2], cross.output_dense, bias=attention_bias)
        norm(target.attention.layer_norm, layer.cross_attention_norm)
        ffn(target.ffn, layer)
    if pre_norm:
        norm(encoder.layer_norm, model.encoder_final_norm)
        norm(decoder.layer_norm, model.decoder_final_norm)

    if model.output_projection is None:
        decoder.projection.weight = softmax_emb                 # (V, D): logits x E^T
    else:
        linear(decoder.projection, model.output_projection, bias=False)
    if model.logits_bias is not None:                           # Marian's final_logits_bias
        decoder.projection.bias = _numpy(model.logits_bias)

    source_pieces, target_pieces = pieces
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    config = spec.config
    config.unk_token = unk_token
    config.eos_token = target_pieces[EOS_ID]
    # There is no BOS: the decoder's start symbol is PAD (id 0).
    config.bos_token = target_pieces[PAD_ID]
    config.decoder_start_token = target_pieces[PAD_ID]
    config.add_source_bos = False
    config.layer_norm_epsilon = hp.layer_norm_epsilon
    config.add_source_eos = True
    config.layer_norm_epsilon = float(hp.layer_norm_epsilon)
    return spec


def _vocabulary_pieces(vocab, vocab_size: int, target: bool) -> list[str]:
    """The piece of every id 0 .. vocab_size-1 of the source side or the
    `target` side (CTranslate2 tokens are strings)."""
    count = vocab.target_vocab_size if target else vocab.vocab_size
    if count > vocab_size:
        raise UserError(f"the vocabulary has {count} pieces but the model only "
                        f"{vocab_size} embedding rows; the training directory is "
                        f"inconsistent. Received: vocab_size={vocab_size}")
    piece = vocab.id_to_piece if target else vocab.source_id_to_piece
    pieces = [piece(i) for i in range(count)]
    # Embedding rows past the vocabulary (a rounded-up vocab_size) get unused names.
    pieces += [f"<t2t_unused_{i}>" for i in range(count, vocab_size)]
    if len(set(pieces)) != len(pieces):
        raise UserError("the vocabulary has duplicate pieces, so its ids "
                        "cannot map 1:1 onto CTranslate2 tokens; regenerate it with "
                        f"t2t-datagen. Received: model_file={vocab.model_file!r}")
    reserved = list(vocab.RESERVED_PIECES)
    if pieces[:len(reserved)] != reserved:
        raise UserError(f"the vocabulary's first pieces are not {', '.join(reserved)} "
                        "(PAD=0, EOS=1, UNK=2); regenerate it with t2t-datagen. "
                        f"Received: pieces={pieces[:len(reserved)]!r}")
    return pieces


def _readme(version_dir_name: str, settings: dict, vocab_file: str) -> str:
    sentencepiece = vocab_file == VOCAB_FILE
    marian = vocab_file == MARIAN_VOCAB_FILE
    eos = "</s>" if sentencepiece or marian else "<EOS>"
    return f"""# CTranslate2 export of a t2t-revival model

Checkpoint: `{settings['checkpoint']}` (step {settings['step']}), weights stored as
`{settings['quantization']}`. Tokens are the pieces of `{vocab_file}`
(ids equal t2t-revival's); the model appends `{eos}` to the source itself.

With t2t-revival (same beam settings as t2t-decoder: beam {settings['beam_size']},
alpha {settings['alpha']}, extra length {settings['extra_length']}):

```python
from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator
translator = CTranslate2Translator("{version_dir_name}", compute_type="int8")
print(translator.translate(["A man is riding a bike."]))
```
{_sentencepiece_only(version_dir_name, settings) if sentencepiece else
 _marian_tokens() if marian else _t2t_tokens()}
CTranslate2 normalizes scores by length ** length_penalty, not by GNMT's
((5 + length) / 6) ** alpha; `CTranslate2Translator` re-ranks CTranslate2's
n-best list with the GNMT penalty, as t2t-decoder ranks (see t2t_export.json).
"""


def _marian_tokens() -> str:
    return """
The tokens are a Marian model's pieces, as transformers' MarianTokenizer makes
them: `t2t_revival.data.marian_vocabulary.MarianVocabulary(path).encode_pieces(text)`
(the source side; `encode_target_pieces` for a target prefix) gives them, and its
`decode_pieces` turns output pieces back into text. `<pad>` is never chosen (pass
`suppress_sequences=[["<pad>"]]` to CTranslate2 yourself).
"""


def _t2t_tokens() -> str:
    return """
The tokens are tensor2tensor SubwordTextEncoder subtokens:
`t2t_revival.data.t2t_subword_vocabulary.T2TSubwordVocabulary(path).encode_pieces(text)`
(pure Python, no TensorFlow) gives them, and its `decode_pieces` turns them back into text.
"""


def _sentencepiece_only(version_dir_name: str, settings: dict) -> str:
    return f"""
With CTranslate2 and SentencePiece only:

```python
import ctranslate2, sentencepiece
sp = sentencepiece.SentencePieceProcessor(model_file="{version_dir_name}/vocab.model")
translator = ctranslate2.Translator("{version_dir_name}", compute_type="int8")
tokens = sp.encode(["A man is riding a bike."], out_type=str)
results = translator.translate_batch(tokens, beam_size={settings['beam_size']},
                                     length_penalty={settings['alpha']},
                                     max_input_length={settings['max_input_length']})
print(sp.decode(results[0].hypotheses[0]))
```
"""


def check_quantization(quantization: str) -> None:
    """A UserError when CTranslate2 does not store weights as `quantization`."""
    if quantization not in QUANTIZATIONS:
        raise UserError(f"unknown quantization; use one of {', '.join(QUANTIZATIONS)}. "
                        f"Received: quantization={quantization!r}")


def export_ctranslate2(output_dir: str, checkpoint_path: str | None = None,
                       decode_overrides: DecodeOverrides | None = None,
                       export_dir: str | None = None,
                       version: int | None = None, quantization: str = "float32") -> str:
    """Write a CTranslate2 model directory; return it.

    Args:
        output_dir: the training directory (hparams.json, run.json, vocab.model
            or vocab.subwords, checkpoints).
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        decode_overrides: the parsed --decode_hparams, over the beam settings
            of hparams.json (beam_size, alpha, extra_length, batch_size; no
            other), written to t2t_export.json for `CTranslate2Translator`.
        export_dir: where to write `<version>/`; default
            `output_dir/export/ctranslate2`.
        version: the version number; default the checkpoint's step.
        quantization: the stored weight type, one of `QUANTIZATIONS`
            ("int8" is the usual choice for CPUs). Any model can still be
            loaded with another `compute_type`.

    Returns:
        The version directory.
    """
    check_quantization(quantization)
    from t2t_revival.export.export_source import CTRANSLATE2_FIXES, load_export_source
    from t2t_revival.run_dir.training_directory import require_directory

    require_directory(output_dir)
    ctranslate2 = _import_ctranslate2()

    directory, trained, dhp = load_export_source(output_dir, checkpoint_path, decode_overrides,
                                                 CTRANSLATE2_FIXES, "CTranslate2")
    hparams = trained.hparams
    _check_supported(trained.model, hparams)
    pieces = (_vocabulary_pieces(trained.vocab, hparams.vocab_size, target=False),
              _vocabulary_pieces(trained.vocab, hparams.output_vocab_size, target=True))
    num_positions = longest_decode_length(hparams.max_length, dhp.extra_length,
                                          hparams.position_encoding)
    spec = _build_spec(trained.model, hparams, pieces, num_positions,
                       trained.vocab.UNKNOWN_PIECE)
    spec.validate()
    spec.optimize(quantization=quantization)

    step = checkpoint_version(trained.checkpoint_path)
    version = step if version is None else int(version)
    export_dir = export_dir or directory.ctranslate2_export_dir
    final = os.path.join(export_dir, str(version))
    settings = {
        "format": "ctranslate2",
        "ctranslate2_version": ctranslate2.__version__,
        "checkpoint": os.path.abspath(trained.checkpoint_path),
        "step": step,
        "quantization": quantization,
        "beam_size": dhp.beam_size,
        "alpha": dhp.alpha,
        # How CTranslate2Translator ranks (CTranslate2's own is "power").
        "length_penalty": dhp.length_penalty,
        # CTranslate2's beam stops after patience x beam_size finished hypotheses.
        "patience": POWER_PATIENCE if dhp.length_penalty == "power" else 1,
        "extra_length": dhp.extra_length,
        "batch_size": dhp.batch_size,
        # False: PAD is never chosen (CTranslate2's suppress_sequences).
        "emit_pad": hparams.emit_pad,
        # Inputs longer than this (EOS included) are cut to it, as by t2t-decoder.
        "max_input_length": hparams.max_length,
        # The longest output the position table allows.
        "max_decode_length": num_positions,
        "position_encoding": hparams.position_encoding,
        "problem": trained.run_record.problem,
    }

    def write(tmp: str) -> None:
        os.makedirs(tmp)
        spec.save(tmp)
        vocab_file = trained.vocab.RUN_FILE_NAME
        shutil.copyfile(trained.vocab.model_file, os.path.join(tmp, vocab_file))
        with open(os.path.join(tmp, EXPORT_CONFIG), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, sort_keys=True)
            f.write("\n")
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write(_readme(final, settings, vocab_file))

    return write_version_directory(export_dir, version, write)
