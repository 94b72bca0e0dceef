"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017).

Mixed precision: the model's dtype policy is the `dtype` kwarg when given,
else `hparams.mixed_precision` ("float32", "mixed_bfloat16" or
"mixed_float16"); the global Keras policy is NOT consulted. Attention
softmax and the output logits are float32 under every policy. (Loss scaling
for mixed_float16 is the trainer's job: wrap the optimizer in
`keras.optimizers.LossScaleOptimizer`.)

Parameter counts, with a 37,000-token shared vocabulary (tests print them):
transformer_base has 63,045,632 parameters (paper: 65M, -3.0%) and
transformer_big 214,171,648 (paper: 213M, +0.6%) (Table 3). Of these,
37000 x d_model are the one shared embedding (18,944,000 base, 37,888,000
big); the rest is 6 encoder layers (4 d_model^2 attention + 2 d_model d_ff
+ d_ff + d_model FFN + 2 LayerNorms: 3,150,336 base, 12,592,128 big) and
6 decoder layers (two attentions, FFN, 3 LayerNorms: 4,199,936 base,
16,788,480 big). The differences from the paper: the
attention projections have no biases (tensor2tensor's choice; biases
would add 4 d_model per attention, about 0.1M); the paper's En-De vocabulary
is "about 37000" BPE tokens, and its exact size (so the embedding's share)
is not given; and the paper does not say how it counted (e.g. whether the
shared matrix is counted once or three times; we count it once).

The variants of tensor2tensor checkpoints (t2t-import):
`multiply_embedding_mode`, `zero_pad_embedding`, `target_space_embedding` and
the `t2t_sinusoid` positions; of Marian's (OPUS-MT, t2t-import --marian_dir):
`ffn_activation`, `attention_bias`, `final_logits_bias`, the `marian_sinusoid`
positions, encoder and decoder depths and FFN widths of their own, separate
vocabularies (`target_vocab_size`) with a tied or untied projection, and
`emit_pad` (searches never choose PAD).
"""

from __future__ import annotations

import keras
from keras import ops

from t2t_revival.settings.hparams import HParams
from t2t_revival.layers.attention_masks import segment_mask
from t2t_revival.layers.decoder_layer import DecoderLayer
from t2t_revival.layers.dropout import Dropout
from t2t_revival.layers.encoder_layer import EncoderLayer
from t2t_revival.layers.position_embedding import PositionEmbedding
from t2t_revival.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from t2t_revival.layers.token_embedding import TokenEmbedding
from t2t_revival.registry import register_model
from t2t_revival.layers.sentence_cache import PER_SENTENCE
from t2t_revival.special_ids import PAD_ID


@register_model("transformer")
@keras.saving.register_keras_serializable(package="t2t_revival")
class Transformer(keras.Model):
    """The paper's encoder-decoder Transformer, built from an `HParams`.

    Encoder and decoder stacks of `num_hidden_layers` layers (3.1); multi-head
    attention with per-head sizes `hparams.key_size` / `value_size` (3.2);
    position-wise FFN (3.3); one embedding matrix shared by source, target and
    the pre-softmax projection, scaled by sqrt(d_model) on the way in (3.4;
    `shared_embedding=False` gives a source embedding, a target embedding and
    an output projection of their own); sinusoidal or learned positions (3.5,
    Table 3 row E); residual dropout on every sub-layer output and on the sums
    of embeddings and positions (5.4); post-LN as the paper or pre-LN with a
    final LayerNorm (`norm_type`); the variants of tensor2tensor's and
    Marian's checkpoints (the module docstring).

    Token ids: PAD = 0, EOS = 1. `encoder_padding` is float32 `[batch, S]`
    with 1.0 at PAD positions of the source and 0.0 elsewhere
    (tensor2tensor's "padding" convention).

    Mixed precision and parameter counts: the module docstring.

    Args:
        hparams: the resolved `HParams` (or its dict form, as `from_config` sees).
        **kwargs: `keras.Model` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: dict `{"inputs": int32 [batch, S], "targets": int32 [batch, T]}`;
            targets end with EOS, right-padded with PAD. They are shifted right
            inside (PAD as the start symbol), so `logits[:, i]` predicts
            `targets[:, i]`. A packed batch (several pairs per row, see
            `t2t_revival/data/input_pipeline.py`) adds int32
            `"inputs_segmentation"`, `"inputs_position"` `[batch, S]` and
            `"targets_segmentation"`, `"targets_position"` `[batch, T]`:
            segment ids 1..n per row (0 at PAD) and positions restarting at 0
            in each segment; attention then stays inside a segment (encoder
            self, decoder causal self, and target segment k over source
            segment k), positions encode per segment, and each segment's
            decoder input starts with PAD, so every pair's logits equal those
            of the pair alone in its own row.
        training: enables dropout.

    Returns:
        float32 logits `[batch, T, vocab_size]`.
    """

    def __init__(self, hparams: HParams, **kwargs):
        if isinstance(hparams, dict):
            hparams = HParams.from_dict(hparams)
        if hparams.vocab_size <= 0:
            raise ValueError(
                "The Transformer needs hparams.vocab_size > 0 (the problem sets it; "
                "or pass --hparams vocab_size=N). "
                f"Received: vocab_size={hparams.vocab_size}")
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = hparams.mixed_precision
        super().__init__(**kwargs)
        self.hparams = hparams
        hp, policy = hparams, self.dtype_policy

        (self.shared_embedding, self.source_embedding, self.target_embedding,
         self.output_projection, self.target_space_embedding) = _embeddings(hp, policy)
        self.encoder_position, self.decoder_position = _positions(hp, policy)

        layer_args = dict(
            num_heads=hp.num_heads, key_size=hp.key_size, value_size=hp.value_size,
            dropout=hp.dropout, attention_dropout=hp.attention_dropout,
            relu_dropout=hp.relu_dropout, norm_type=hp.norm_type,
            layer_norm_epsilon=hp.layer_norm_epsilon, ffn_activation=hp.ffn_activation,
            attention_bias=hp.attention_bias, dtype=policy)
        self.encoder_layers = [EncoderLayer(name=f"encoder_layer_{i}", d_ff=hp.d_ff, **layer_args)
                               for i in range(hp.encoder_layers)]
        self.decoder_layers = [DecoderLayer(name=f"decoder_layer_{i}", d_ff=hp.decoder_ffn_width,
                                            **layer_args) for i in range(hp.decoder_layers)]
        self.logits_bias = self.add_weight(
            name="final_logits_bias", shape=(hp.output_vocab_size,), initializer="zeros",
            dtype="float32") if hp.final_logits_bias else None
        self.encoder_final_norm, self.decoder_final_norm = (
            keras.layers.LayerNormalization(epsilon=hp.layer_norm_epsilon, name=name,
                                            dtype=policy)
            if hp.norm_type == "pre" else None
            for name in ("encoder_final_norm", "decoder_final_norm"))
        self.embedding_dropout = Dropout(hp.dropout, dtype=policy)

    # ---- building and serialization ---------------------------------------
    def build(self, input_shape=None):
        """Create every weight by running the model once on a `[1, 2]` batch."""
        if self.built:
            return
        ids = ops.ones((1, 2), dtype="int32")
        encoder_output, padding = self.encode(ids)
        self.decode(ids, encoder_output, padding)
        self.built = True

    def get_build_config(self):
        # Non-empty, so that loading a .keras file calls build_from_config
        # (the weights' shapes all follow from hparams).
        return {"built": self.built}

    def build_from_config(self, config):
        if config.get("built"):
            self.build()

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "hparams": self.hparams.to_dict(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        hparams = HParams.from_dict(config.pop("hparams"))
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(hparams, **config)

    # ---- the three stages -------------------------------------------------
    def _embed(self, embedding, position, ids, start_index=0, positions=None,
               training=False, source=False):
        x = _embedded(self, embedding, position, ids, start_index, positions, source)
        return self.embedding_dropout(x, training=training)

    def _logits(self, x):
        """`[batch, T, d_model]` -> float32 logits `[batch, T, vocab_size]`."""
        if self.output_projection is None:
            logits = (self.shared_embedding or self.target_embedding).project(x)
        else:
            logits = ops.cast(self.output_projection(x), "float32")
        if self.logits_bias is not None:
            logits = logits + self.logits_bias
        return logits

    def encode(self, inputs, training=False, segmentation=None, position=None,
               return_attention=False):
        """Encode the source.

        Args:
            inputs: int32 `[batch, S]` source ids, PAD = 0.
            segmentation: optional int32 `[batch, S]` segment ids of a packed
                batch (1..n per row, 0 at PAD); attention stays in a segment.
            position: optional int32 `[batch, S]` per-segment positions
                (0, 1, ... in each segment); default 0 .. S-1 in every row.
            return_attention: also return every layer's self-attention
                weights, float32 `[batch, layers, heads, S, S]` (T2T Insights).
        Returns:
            `(encoder_output [batch, S, d_model], encoder_padding float32 [batch, S])`
            with `encoder_padding` 1.0 at PAD positions (and the weights).
        """
        inputs = ops.cast(inputs, "int32")
        encoder_padding = ops.cast(ops.equal(inputs, PAD_ID), "float32")  # (B, S)
        if segmentation is None:
            mask = cross_mask(encoder_padding)  # (B, 1, 1, S)
        else:
            mask = segment_mask(segmentation, segmentation)  # (B, 1, S, S)
        x = self._embed(self.source_embedding, self.encoder_position, inputs,
                        positions=position, training=training, source=True)
        attention = []
        for layer in self.encoder_layers:
            x = layer(x, attention_mask=mask, training=training,
                      return_attention=return_attention)
            if return_attention:
                x, weights = x
                attention.append(weights)  # (B, H, S, S)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        if return_attention:
            return x, encoder_padding, ops.stack(attention, axis=1)  # (B, layers, H, S, S)
        return x, encoder_padding

    def decode(self, targets, encoder_output, encoder_padding, training=False,
               segmentation=None, position=None, encoder_segmentation=None,
               return_attention=False):
        """Teacher-forced decoding.

        Args:
            targets: int32 `[batch, T]` (shifted right inside, PAD as start).
            encoder_output: `[batch, S, d_model]`.
            encoder_padding: float `[batch, S]`, 1.0 at source PAD positions.
            segmentation: optional int32 `[batch, T]` target segment ids of a
                packed batch (1..n per row, 0 at PAD); needs
                `encoder_segmentation` `[batch, S]`, the source's. Target
                segment k attends (causally) only to itself and to source
                segment k, and starts with PAD as its own start symbol.
            position: optional int32 `[batch, T]` per-segment target positions.
            encoder_segmentation: int32 `[batch, S]`, with `segmentation`.
            return_attention: also return every decoder layer's attention
                weights (word alignments, T2T Insights).
        Returns:
            float32 logits `[batch, T, vocab_size]`; `logits[:, i]` predicts `targets[:, i]`.
            With `return_attention`, `(logits, {"cross": float32 [batch, layers,
            heads, T, S], "decoder": [batch, layers, heads, T, T]})`: row i the
            attention that predicts `targets[:, i]` (decoder: over the inputs,
            the start symbol first).
        """
        targets = ops.cast(targets, "int32")
        decoder_input = ops.pad(targets[:, :-1], [[0, 0], [1, 0]],
                                constant_values=PAD_ID)  # (B, T)
        decoder_input, mask, self_mask = _decoder_masks(
            decoder_input, encoder_padding, segmentation, encoder_segmentation)
        x = self._embed(self.target_embedding, self.decoder_position, decoder_input,
                        positions=position, training=training)
        attention = []
        for layer in self.decoder_layers:
            x = layer(x, encoder_output=encoder_output, cross_attention_mask=mask,
                      self_attention_mask=self_mask, training=training,
                      return_attention=return_attention)
            if return_attention:
                x, weights = x
                attention.append(weights)  # {"self": (B, H, T, T), "cross": (B, H, T, S)}
        if self.decoder_final_norm is not None:
            x = self.decoder_final_norm(x)
        if return_attention:  # each (B, layers, H, T, S or T)
            return self._logits(x), {
                "cross": ops.stack([w["cross"] for w in attention], axis=1),
                "decoder": ops.stack([w["self"] for w in attention], axis=1)}
        return self._logits(x)

    def call(self, inputs, training=False):
        # A packed batch's extra features (absent: None, the unpacked model).
        source_segmentation = inputs.get("inputs_segmentation")  # (B, S) or None
        encoder_output, encoder_padding = self.encode(
            inputs["inputs"], training=training, segmentation=source_segmentation,
            position=inputs.get("inputs_position"))
        return self.decode(inputs["targets"], encoder_output, encoder_padding,
                           training=training,
                           segmentation=inputs.get("targets_segmentation"),
                           position=inputs.get("targets_position"),
                           encoder_segmentation=source_segmentation)

    # ---- incremental decoding ----------------------------------------------
    def init_cache(self, encoder_output, encoder_padding, max_decode_length):
        """The decoding state for `decode_step`; every leaf is batch-first, static-shape.

        Args:
            encoder_output: `[batch, S, d_model]` from `encode`.
            encoder_padding: float `[batch, S]` from `encode`.
            max_decode_length: static int, the most positions `decode_step` will
                be called for (with learned positions, at most hparams.max_length).
        Returns:
            `{PER_SENTENCE: {"encoder_padding": [batch, S]},
              "layer_i": {"self": {"key": [batch, h, L, d_k], "value": [batch, h, L, d_v]},
                          PER_SENTENCE: {"cross": {"key": [batch, h, S, d_k],
                                                   "value": [batch, h, S, d_v]}}}}`
            for i in 0 .. num_hidden_layers-1 (L = max_decode_length; the
            self-attention buffers start as zeros, the cross-attention keys and
            values are computed here, once per source). A search tiles the
            self-attention buffers for its beams; the `PER_SENTENCE` parts
            stay one per sentence (`t2t_revival.layers.sentence_cache`).
        """
        cache = {PER_SENTENCE: {"encoder_padding": ops.cast(encoder_padding, "float32")}}
        for i, layer in enumerate(self.decoder_layers):
            cache[f"layer_{i}"] = layer.init_cache(encoder_output, max_decode_length)
        return cache

    def resize_cache(self, cache, length):
        """`cache` (from `init_cache`) with self-attention buffers of `length`
        positions: zeros appended, or unwritten positions dropped. The other
        leaves are the same tensors. `length` is a Python int or an int32
        scalar tensor.

        Beam search starts with short buffers and lengthens them as it goes
        (`beam_search`'s `resize_cache`): a step reads, and a beam reorder
        copies, only that many positions.
        """
        new_cache = {PER_SENTENCE: cache[PER_SENTENCE]}
        for i, layer in enumerate(self.decoder_layers):
            new_cache[f"layer_{i}"] = layer.resize_cache(cache[f"layer_{i}"], length)
        return new_cache

    def decode_step(self, ids, cache, index):
        """One step of incremental decoding.

        Args:
            ids: int32 `[batch]`, the decoder input at position `index` (0 = PAD
                as the start symbol at index 0, else the token chosen for
                position `index - 1`).
            cache: from `init_cache` or the previous step; `batch` may be a
                multiple of the sentences of its `PER_SENTENCE` parts, rows
                sentence-major (a search's beams).
            index: int32 scalar, the position being predicted.
        Returns:
            `(logits float32 [batch, vocab_size] for position index, new cache)`.
        """
        ids = ops.cast(ids, "int32")[:, None]  # (B, 1)
        mask = cross_mask(cache[PER_SENTENCE]["encoder_padding"])  # (sentences, 1, 1, S)
        x = self._embed(self.target_embedding, self.decoder_position, ids,
                        start_index=index)  # (B, 1, D)
        new_cache = {PER_SENTENCE: cache[PER_SENTENCE]}
        for i, layer in enumerate(self.decoder_layers):
            x, new_cache[f"layer_{i}"] = layer(
                x, cross_attention_mask=mask, cache=cache[f"layer_{i}"],
                cache_index=index)
        if self.decoder_final_norm is not None:
            x = self.decoder_final_norm(x)
        logits = self._logits(x)[:, 0]  # (B, V)
        return logits if self.hparams.emit_pad else _without_pad(logits), new_cache


def _decoder_masks(decoder_input, encoder_padding, segmentation, encoder_segmentation):
    """(decoder_input, cross-attention mask, self-attention mask or None) of
    `Transformer.decode`: without segmentation the source padding's mask
    (B, 1, 1, S) and the decoder layers' causal mask alone; with it (a packed
    batch) the segments' masks (B, 1, T, S) and (B, 1, T, T)."""
    if segmentation is None:
        return decoder_input, cross_mask(encoder_padding), None
    if encoder_segmentation is None:
        raise ValueError(
            "Transformer.decode got target segmentation without the "
            "source's; pass encoder_segmentation [batch, S] too (a packed "
            "batch has both). Received: encoder_segmentation=None")
    segmentation = ops.cast(segmentation, "int32")
    # Each segment's first decoder input is PAD, not the previous segment's
    # last token: keep the shifted token only where it comes from the same segment.
    shifted = ops.pad(segmentation[:, :-1], [[0, 0], [1, 0]])  # (B, T)
    decoder_input = ops.where(ops.equal(shifted, segmentation), decoder_input, PAD_ID)
    return (decoder_input, segment_mask(segmentation, encoder_segmentation),
            segment_mask(segmentation, segmentation))


def cross_mask(encoder_padding):
    """float `[batch, S]` (1.0 at PAD) -> bool `[batch, 1, 1, S]`, True = attend."""
    return (encoder_padding < 0.5)[:, None, None, :]


_BANNED_LOGIT = -1e9
"""The logit of PAD in `decode_step` with `emit_pad` false (what the attention
masks with too: far below any real logit, finite in float32)."""


def _without_pad(logits):
    """float32 `[B, V]` logits with PAD's set to `_BANNED_LOGIT`."""
    return ops.where(ops.arange(ops.shape(logits)[-1]) == PAD_ID,
                     ops.cast(_BANNED_LOGIT, logits.dtype), logits)


def _embedded(model, embedding, position, ids, start_index, positions, source):
    """Token embeddings plus positions (and, on the source side, tensor2tensor's
    target space row) of `ids` int32 `[B, T]`: `[B, T, D]`, before dropout."""
    x = embedding(ids)  # (B, T, D)
    if source and model.target_space_embedding is not None:
        x = x + model.target_space_embedding(  # T2T's row of the target space: (1, D)
            ops.full((1,), model.hparams.target_space_id, "int32"))
    # (T, D), or (B, T, D) for per-segment `positions` [B, T]
    return x + position(x, start_index=start_index, positions=positions)
_SINUSOID_LAYOUTS = {"sinusoid": "paper", "t2t_sinusoid": "t2t", "marian_sinusoid": "marian"}


def _positions(hp: HParams, policy):
    """(encoder, decoder) positions: learned tables of max_length rows each,
    or one sinusoid (the paper's layout, tensor2tensor's or Marian's) for both."""
    if hp.position_encoding == "learned":
        return tuple(PositionEmbedding(hp.max_length, name=name, dtype=policy)
                     for name in ("encoder_position", "decoder_position"))
    sinusoid = SinusoidalPositionEncoding(
        layout=_SINUSOID_LAYOUTS[hp.position_encoding], name="position_encoding",
        dtype=policy)
    return sinusoid, sinusoid


def _embeddings(hp: HParams, policy):
    """(shared, source, target, output projection, target space) embedding
    layers of `hp`: shared is None unless `hp.shared_embedding` (then source
    and target are it and the projection None); the projection None too with
    `hp.tie_output_projection` (the target embedding's matrix projects); the
    target side has `hp.output_vocab_size` rows; target space None unless
    `hp.target_space_embedding` (32 rows: tensor2tensor's target spaces)."""
    args = dict(scale=hp.multiply_embedding_mode == "sqrt_depth",
                zero_pad=hp.zero_pad_embedding, pad_id=PAD_ID, dtype=policy)
    space = keras.layers.Embedding(32, hp.d_model, name="target_space_embedding",
                                   dtype=policy) if hp.target_space_embedding else None
    if hp.shared_embedding:
        shared = TokenEmbedding(hp.vocab_size, hp.d_model, name="shared_embedding", **args)
        return shared, shared, shared, None, space
    projection = None if hp.tie_output_projection else keras.layers.Dense(
        hp.output_vocab_size, use_bias=False, name="output_projection", dtype=policy)
    return (None, TokenEmbedding(hp.vocab_size, hp.d_model, name="source_embedding", **args),
            TokenEmbedding(hp.output_vocab_size, hp.d_model, name="target_embedding", **args),
            projection, space)
