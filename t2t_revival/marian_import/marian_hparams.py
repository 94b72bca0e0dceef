"""A Marian model's config.json and generation_config.json -> our `HParams`.

Each MarianConfig field has its hparam (the Transformer's Marian switches:
`HParams`' docstrings); a field this Transformer cannot express is refused
in one line naming it, and so are the ids it could not keep (our decoder
starts with PAD: Marian's `decoder_start_token_id` is its pad id). The
decode defaults come from generation_config.json, so that a user moving from
transformers keeps their translations: `num_beams`, `length_penalty`
(transformers' `score / length ** length_penalty`: our `length_penalty=power`
with that alpha), `max_length` (the output's tokens, the decoder's start
not counted, at most the model's `max_position_embeddings`) and the pad id
among `bad_words_ids` (`emit_pad=false`).
"""

from __future__ import annotations

from typing import Callable

from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.settings.setting_ranges import MAX_EXTRA_LENGTH

ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
"""transformers' `activation_function` -> our `ffn_activation`."""
LAYER_NORM_EPSILON = 1e-5
"""torch.nn.LayerNorm's default, which every Marian layer norm uses."""
# config fields whose other values this Transformer cannot express: (name,
# transformers' default, why).
_FIXED = (("normalize_before", False, "pre-norm Marian layers"),
          ("add_final_layer_norm", False, "a final layer norm after each stack"),
          ("normalize_embedding", False, "a layer norm over the embeddings"),
          ("static_position_embeddings", True, "learned positions"),
          ("add_bias_logits", False, "a bias inside the output projection"),
          ("scale_attention", None, "another attention scaling"))
# generation_config.json fields taken (the others are said, not applied).
_TAKEN = {"num_beams", "length_penalty", "max_length", "bad_words_ids", "bos_token_id",
          "decoder_start_token_id", "eos_token_id", "forced_eos_token_id", "pad_token_id",
          "transformers_version", "early_stopping", "_from_model_config", "renormalize_logits"}


def marian_hparams(config: dict, generation: dict, source_size: int, target_size: int,
                   folder: str, log: Callable[[str], None] = print) -> HParams:
    """The HParams of the model `config` describes (its vocabularies of
    `source_size` and `target_size` pieces), decode defaults from `generation`."""
    def refuse(name, value, why):
        return UserError(f"the Marian model in {folder} has {name}={value!r} in config.json "
                         f"({why}), which this Transformer cannot express; it cannot be "
                         f"imported. Received: {name}={value!r}")

    for name, default, why in _FIXED:
        if config.get(name, default) != default:
            raise refuse(name, config[name], why)
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise refuse("activation_function", activation,
                     f"not one of {', '.join(ACTIVATIONS)}")
    heads = config.get("encoder_attention_heads", 16)
    if config.get("decoder_attention_heads", heads) != heads:
        raise refuse("decoder_attention_heads", config["decoder_attention_heads"],
                     f"the encoder has {heads}: one head count serves both stacks here")
    if config.get("decoder_start_token_id") != config.get("pad_token_id"):
        raise refuse("decoder_start_token_id", config.get("decoder_start_token_id"),
                     f"not the pad id {config.get('pad_token_id')}: the decoder starts "
                     f"with PAD here")
    share = config.get("share_encoder_decoder_embeddings", True)
    tie = config.get("tie_word_embeddings", True)
    sizes = (config.get("vocab_size"), config.get("decoder_vocab_size") or config.get("vocab_size"))
    if sizes != (source_size, target_size):
        raise UserError(f"the Marian model in {folder} has vocab_size {sizes[0]} (decoder "
                        f"{sizes[1]}) in config.json, but its vocabulary files have "
                        f"{source_size} (target {target_size}) pieces; copy the vocabulary "
                        f"of this model. Received: vocab_size={sizes[0]}")
    if share and source_size != target_size:
        raise refuse("share_encoder_decoder_embeddings", share,
                     "with vocabularies of different sizes")
    encoder_layers = config.get("encoder_layers", 12)
    decoder_layers = config.get("decoder_layers", 12)
    d_ff = config.get("encoder_ffn_dim", 4096)
    max_positions = config.get("max_position_embeddings", 1024)
    hparams = HParams(
        num_hidden_layers=encoder_layers,
        num_decoder_layers=0 if decoder_layers == encoder_layers else decoder_layers,
        d_model=config.get("d_model", 1024), d_ff=d_ff,
        decoder_d_ff=0 if config.get("decoder_ffn_dim", d_ff) == d_ff
        else config["decoder_ffn_dim"],
        num_heads=heads, dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        relu_dropout=float(config.get("activation_dropout", 0.0)),
        ffn_activation=ACTIVATIONS[activation], attention_bias=True, final_logits_bias=True,
        norm_type="post", layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_encoding="marian_sinusoid", max_length=max_positions,
        multiply_embedding_mode="sqrt_depth" if config.get("scale_embedding", False)
        else "none",
        shared_embedding=bool(share and tie), tie_output_projection=bool(tie and not share),
        vocab_size=source_size, target_vocab_size=0 if target_size == source_size
        else target_size,
        **decode_defaults(config, generation, max_positions, folder, log))
    return hparams


def decode_defaults(config: dict, generation: dict, max_positions: int, folder: str,
                    log: Callable[[str], None] = print) -> dict:
    """{beam_size, alpha, length_penalty, extra_length, emit_pad} of
    generation_config.json (config.json's own where the file has none)."""
    settings = generation or config
    pad = config.get("pad_token_id")
    ignored = sorted(set(generation) - _TAKEN)
    if ignored:
        log(f"t2t-import: generation_config.json's {', '.join(ignored)} are not applied "
            f"here (the decode settings taken: num_beams, length_penalty, max_length, the "
            f"pad id among bad_words_ids)")
    # transformers' max_length counts the decoder's start token; ours the output's.
    longest = min(int(settings.get("max_length", 20)), max_positions) - 1
    return dict(beam_size=max(int(settings.get("num_beams", 1)), 1),
                alpha=float(settings.get("length_penalty", 1.0)), length_penalty="power",
                extra_length=max(min(longest, MAX_EXTRA_LENGTH), 1),
                emit_pad=[pad] not in (settings.get("bad_words_ids") or []))
