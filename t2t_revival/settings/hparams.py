"""The typed, frozen hyperparameter config, `HParams`.

One object, resolved once: defaults < registered hparam set < problem <
command line (`--hparams "k=v,..."`). The resolved object is written to
`output_dir/hparams.json` and read back by the decoder and exporter.
Variants (train/eval/predict) are made with `dataclasses.replace` (or
`HParams.replace`), never by mutating.

Every field's meaning refers to Vaswani et al. 2017, "Attention Is All You
Need" (section and table numbers below are the paper's).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, ClassVar

from t2t_revival.errors import UserError
from t2t_revival.files.json_record import JsonRecord
from t2t_revival.registry import closest
from t2t_revival.settings.decode_choices import LENGTH_PENALTIES
from t2t_revival.settings.t2t_hparam_names import T2T_NAMES, is_t2t_name, to_ours, value_type
from t2t_revival.settings.typed_settings import check_settings, from_json_value, parse_typed_pairs

# Choices for enumerated string fields.
_CHOICES = {
    "norm_type": ("post", "pre"),
    "position_encoding": ("sinusoid", "learned", "t2t_sinusoid", "marian_sinusoid"),
    "multiply_embedding_mode": ("sqrt_depth", "none"),
    "mixed_precision": ("float32", "mixed_bfloat16", "mixed_float16"),
    "ffn_activation": ("relu", "swish", "gelu"),
    "length_penalty": LENGTH_PENALTIES,
}


class HParamsError(UserError):
    """A malformed `--hparams` string, an unknown field, or a bad value."""


@dataclasses.dataclass(frozen=True)
class HParams(JsonRecord):
    """Hyperparameters of the Transformer, its training and its decoding.

    Defaults are the paper's base model (Table 3, row "base"). Saved as
    `output_dir/hparams.json` (`JsonRecord`). Valid ranges:
    `setting_ranges.RANGES`.
    """

    REPAIR: ClassVar[str] = ("delete it and rerun t2t-trainer in that directory with the run's "
                             "--hparams_set and --hparams, which writes it again")
    ERROR: ClassVar[type[UserError]] = HParamsError

    # ---- Model (section 3, Table 3) ----
    num_hidden_layers: int = 6
    """N: identical layers in the encoder and in the decoder (section 3.1)."""
    num_encoder_layers: int = 0
    """Layers of the encoder; 0 means num_hidden_layers (tensor2tensor's and
    Marian's `encoder_layers`)."""
    num_decoder_layers: int = 0
    """Layers of the decoder; 0 means num_hidden_layers."""
    d_model: int = 512
    """d_model: width of every sub-layer output and of the embeddings (3.1)."""
    d_ff: int = 2048
    """d_ff: inner width of the position-wise feed-forward network (3.3)."""
    decoder_d_ff: int = 0
    """Inner FFN width of the decoder's layers; 0 means d_ff (Marian's
    `decoder_ffn_dim` where it differs from `encoder_ffn_dim`)."""
    num_heads: int = 8
    """h: parallel attention heads (3.2.2)."""
    d_k: int = 0
    """d_k: per-head query/key size; 0 means d_model / h (3.2.2, Table 3 rows A, B)."""
    d_v: int = 0
    """d_v: per-head value size; 0 means d_model / h (3.2.2, Table 3 row A)."""
    dropout: float = 0.1
    """P_drop: residual dropout on each sub-layer output before the residual add,
    and on the sums of embeddings and positional encodings (5.4)."""
    attention_dropout: float = 0.1
    """Dropout on the attention weights (after softmax); tensor2tensor's default."""
    relu_dropout: float = 0.1
    """Dropout on the ReLU activations inside the feed-forward network."""
    ffn_activation: str = "relu"
    """Activation of the feed-forward network: 'relu', max(0, xW1 + b1)W2 + b2
    (3.3); 'swish' (x sigmoid(x): OPUS-MT's Marian models) or 'gelu' (exact)."""
    attention_bias: bool = False
    """Biases in the attention's query, key, value and output projections
    (Marian and Hugging Face models have them; tensor2tensor's have none)."""
    final_logits_bias: bool = False
    """A bias vector added to the output logits (Marian's `final_logits_bias`)."""
    norm_type: str = "post"
    """'post': LayerNorm(x + Sublayer(x)) as in the paper (3.1); 'pre': x +
    Sublayer(LayerNorm(x)), with a final LayerNorm, as later practice."""
    layer_norm_epsilon: float = 1e-6
    """Epsilon of every LayerNormalization."""
    position_encoding: str = "sinusoid"
    """'sinusoid': the fixed sin/cos encodings of 3.5; 'learned': learned
    positional embeddings (Table 3 row E); 't2t_sinusoid': tensor2tensor's
    timing signal (all sines, then all cosines, timescales 1 .. 10000 spread
    over d_model/2 - 1 steps), which T2T checkpoints were trained with;
    'marian_sinusoid': the paper's frequencies with all sines, then all
    cosines (Marian's layout), positions limited to max_length (its table's rows)."""
    shared_embedding: bool = True
    """One weight matrix for the source embedding, the target embedding and the
    pre-softmax projection, scaled by sqrt(d_model) on the way in (3.4).
    Needs a shared source/target vocabulary."""
    tie_output_projection: bool = False
    """With shared_embedding false: the pre-softmax projection is the target
    embedding's matrix (transposed), the source embedding one of its own
    (Marian's separate vocabularies with tied target weights)."""
    target_vocab_size: int = 0
    """Rows of the target embedding and output projection when they differ
    from the source's (separate vocabularies, shared_embedding false); 0
    means vocab_size."""
    multiply_embedding_mode: str = "sqrt_depth"
    """'sqrt_depth': embeddings are multiplied by sqrt(d_model) on the way in
    (3.4); 'none': taken as they are (tensor2tensor's hparam of that name)."""
    zero_pad_embedding: bool = False
    """The PAD id's embedding is zero on the way in, whatever its row holds (so
    the decoder's start symbol is the zero vector): tensor2tensor's symbol
    modality does this; t2t-import sets it."""
    target_space_embedding: bool = False
    """A table of 32 rows of d_model, one per tensor2tensor target space (a
    T2T checkpoint's `target_space_embedding`); row `target_space_id` is added
    to every encoder input."""
    target_space_id: int = 0
    """The row of the target space embedding the encoder adds (T2T 1.15's
    text problems: 0, GENERIC; early translate_ende_* problems: DE_TOK);
    without target_space_embedding it is not read."""
    vocab_size: int = 0
    """Size of the shared subword vocabulary; 0 until the problem sets it (the
    paper: about 37000 BPE tokens for En-De, 32000 word-pieces for En-Fr)."""
    max_length: int = 256
    """Longest source or target sequence in tokens: longer training pairs are
    dropped, and learned positions have this many rows."""

    # ---- Training (section 5) ----
    batch_size: int = 4096
    """Tokens per replica per step, padding included, counted on the longer side
    of each pair (tensor2tensor's meaning), NOT sentences. The paper's global
    batch held about 25000 source and 25000 target tokens (5.1): 8 GPUs x 4096."""
    gradient_accumulation_steps: int = 1
    """Micro-batches whose gradients are summed before one optimizer update, so
    one GPU can reach the paper's global batch."""
    learning_rate: float = 1.0
    """Multiplier of the paper's schedule (5.3, equation 3):
    lrate = learning_rate * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    learning_rate_warmup_steps: int = 4000
    """warmup_steps of equation 3 (5.3)."""
    learning_rate_cooldown_steps: int = 0
    """Over the last this many updates before --train_steps, the learning rate
    falls linearly from equation 3's value to 0 (a warmup-stable-decay tail, as
    tensor2tensor's linear_decay); 0 keeps the paper's schedule. Training must
    run to --train_steps for the tail to finish: raising --train_steps on resume
    moves the tail (the rate rises again)."""
    adam_beta1: float = 0.9
    """Adam beta_1 (5.3)."""
    adam_beta2: float = 0.98
    """Adam beta_2 (5.3)."""
    adam_epsilon: float = 1e-9
    """Adam epsilon (5.3)."""
    label_smoothing: float = 0.1
    """epsilon_ls of label smoothing (5.4)."""
    clip_grad_norm: float = 0.0
    """Clip gradients to this global norm; 0 turns clipping off (the paper does not clip)."""
    mixed_precision: str = "float32"
    """Keras dtype policy: 'float32', 'mixed_bfloat16' or 'mixed_float16' (with
    loss scaling). Softmax and output logits always stay float32."""

    # ---- Input pipeline ----
    bucket_boundaries: tuple[int, ...] = ()
    """Padded lengths of the token-bucketed batches (a small fixed set, so XLA
    compiles once per bucket); empty means a geometric series from 8 to
    max_length chosen by the input pipeline. With `packing`, they shape the
    dev (eval) batches only."""
    packing: bool = False
    """Sequence packing of training batches (tensor2tensor's pack_dataset):
    several pairs share a row of max_length slots, with segment ids and
    per-segment positions, attention kept inside each pair; batches are
    [batch_size // max_length, max_length], so little of batch_size is padding.
    Per-token losses are those of the pairs unpacked. Eval batches stay
    token-bucketed."""
    source_sampling_alpha: float = 0.0
    """Subword regularization of the training sources: 0 (the default) reads
    datagen's ids; above 0, every epoch segments each source anew with the
    SentencePiece vocabulary, sampled (BPE: BPE-dropout, each merge skipped
    with this probability, 0.1 is usual; unigram: Kudo 2018's smoothing
    alpha); the same samples for the same seed. Dev batches are not sampled."""
    source_sampling_nbest_size: int = -1
    """Unigram vocabularies: segmentations a source is sampled from, -1 all
    (the lattice), n > 1 the n best; a BPE vocabulary has no n-best (-1 only)."""
    target_sampling_alpha: float = 0.0
    """`source_sampling_alpha` for the training targets."""
    target_sampling_nbest_size: int = -1
    """`source_sampling_nbest_size` for the training targets."""

    corpus_weights: tuple[float, ...] = ()
    """Sampling weights of the training corpora of a multi-corpus problem
    (translate_plain_text: one per "train" corpus of corpora.json, which sets
    them); e.g. [3,1] draws three examples of the first corpus for one of the
    second. Empty for single-corpus problems."""

    # ---- Decoding (section 6.1, 6.3) ----
    beam_size: int = 4
    """Beam width at decode time (6.1: 4; parsing 6.3: 21)."""
    alpha: float = 0.6
    """Length penalty alpha of ((5 + len) / 6) ** alpha (6.1: 0.6; parsing 0.3)."""
    extra_length: int = 50
    """Maximum output length = input length + extra_length (6.1: 50; parsing 300)."""
    length_penalty: str = "gnmt"
    """How a finished hypothesis's log-probability is divided: 'gnmt',
    ((5 + length) / 6) ** alpha (Wu et al. 2016, tensor2tensor); 'power',
    length ** alpha (Hugging Face transformers' `length_penalty` is this alpha)."""
    emit_pad: bool = True
    """Whether a search may choose PAD as a token (tensor2tensor's searches
    may); false bans it, as transformers' `bad_words_ids` does for Marian models."""

    # ------------------------------------------------------------------
    def __post_init__(self):
        check_settings(self, "hparam", HParamsError)
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise HParamsError(
                    f"hparam '{name}' must be one of {', '.join(choices)}. "
                    f"Received: {name}={value!r}"
                )
        _check_combinations(self)

    # ---- derived values -------------------------------------------------
    @property
    def key_size(self) -> int:
        """Per-head query/key size d_k (d_model / h unless set)."""
        return self.d_k or self.d_model // self.num_heads

    @property
    def value_size(self) -> int:
        """Per-head value size d_v (d_model / h unless set)."""
        return self.d_v or self.d_model // self.num_heads

    @property
    def encoder_layers(self) -> int:
        """Layers of the encoder (num_hidden_layers unless set)."""
        return self.num_encoder_layers or self.num_hidden_layers

    @property
    def decoder_layers(self) -> int:
        """Layers of the decoder (num_hidden_layers unless set)."""
        return self.num_decoder_layers or self.num_hidden_layers

    @property
    def decoder_ffn_width(self) -> int:
        """Inner FFN width of the decoder (d_ff unless set)."""
        return self.decoder_d_ff or self.d_ff

    @property
    def output_vocab_size(self) -> int:
        """Rows of the target embedding and the logits (vocab_size unless set)."""
        return self.target_vocab_size or self.vocab_size

    # ---- variants, overrides and serialization ----------------------------
    def for_inference(self) -> "HParams":
        """These hparams for decoding and exporting: float32 compute.

        Mixed precision is a training setting (as in OpenNMT-tf and fairseq):
        the checkpoint's weights are float32 under every policy, and a model
        trained in bfloat16 or float16 decodes in float32 as it would have
        with a float32 run, its beam scores at full precision (XLA's CPU dots
        are no faster in bfloat16 either, benchmarks/RESULTS.md).
        """
        return self.replace(mixed_precision="float32")

    def replace(self, **changes: Any) -> "HParams":
        """A copy with `changes` applied (type-checked like every HParams).

        tensor2tensor's names are taken too (`hidden_size=1024` sets d_model:
        `t2t_hparam_names`), so a set written with them works; the copy holds
        our names."""
        ours: dict[str, Any] = {}
        for key, value in changes.items():
            if key not in _TYPES and not is_t2t_name(key):
                raise _unknown_field(key, value)
            name, value = (key, value) if key in _TYPES else to_ours(key, value, HParamsError)
            if name in ours and ours[name] != value:
                raise HParamsError(f"hparam '{name}' is given twice with different values. "
                                   f"Received: {key}={value!r}, {name}={ours[name]!r}")
            ours[name] = value
        return dataclasses.replace(self, **ours)

    def override_from_string(self, overrides: str) -> "HParams":
        """Apply `--hparams "k=v,k2=[1,2],flag=true"` overrides."""
        return self.replace(**parse_overrides(overrides))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "HParams":
        unknown = [k for k in values if k not in _TYPES]
        if unknown:
            raise _unknown_field(unknown[0], values[unknown[0]])
        return cls(**{k: from_json_value(v, _TYPES[k]) for k, v in values.items()})

    @classmethod
    def from_json(cls, text: str, path: str = "the hparams JSON") -> "HParams":
        return super().from_json(text, path)

    @classmethod
    def load(cls, path: str) -> "HParams":
        """The hparams saved at `path`; a one-line HParamsError naming `path`
        when it is missing or corrupt (not UTF-8, not JSON, unknown fields)."""
        try:
            return super().load(path)
        except FileNotFoundError:
            raise HParamsError(
                f"No hparams file at {path}; point --output_dir at a training "
                f"directory that holds hparams.json. Received: path={path!r}"
            ) from None


# The type of every field, for the parser and for JSON values.
_TYPES: dict[str, Any] = {f.name: typing.get_type_hints(HParams)[f.name]
                          for f in dataclasses.fields(HParams)}


def _check_combinations(hp: HParams) -> None:
    """Refuse values that are each in range but do not go together."""
    if (hp.d_k == 0 or hp.d_v == 0) and hp.d_model % hp.num_heads:
        raise HParamsError(
            "d_model must be divisible by num_heads when d_k or d_v is 0 "
            "(derived as d_model / num_heads); set d_k and d_v explicitly or "
            f"change num_heads. Received: d_model={hp.d_model}, "
            f"num_heads={hp.num_heads}"
        )
    if list(hp.bucket_boundaries) != sorted(set(hp.bucket_boundaries)):
        raise HParamsError(
            "bucket_boundaries must be strictly increasing. "
            f"Received: bucket_boundaries={list(hp.bucket_boundaries)}"
        )
    if any(not (math.isfinite(w) and w > 0) for w in hp.corpus_weights):
        raise HParamsError("corpus_weights must all be positive numbers (a corpus's share "
                           f"of the training examples). Received: corpus_weights="
                           f"{list(hp.corpus_weights)}")
    if any(b <= 0 for b in hp.bucket_boundaries):
        raise HParamsError("bucket_boundaries must all be positive (> 0). "
                           f"Received: bucket_boundaries={list(hp.bucket_boundaries)}")
    if hp.packing and hp.batch_size < hp.max_length:
        raise HParamsError(
            "packing=true fills batches of batch_size // max_length rows of "
            "max_length tokens, so batch_size must be at least max_length; raise "
            "batch_size or lower max_length. "
            f"Received: batch_size={hp.batch_size}, max_length={hp.max_length}")
    for side in ("source", "target"):
        if getattr(hp, f"{side}_sampling_nbest_size") in (0, 1):
            raise HParamsError(
                f"{side}_sampling_nbest_size 0 or 1 samples nothing; use -1 (all "
                f"segmentations) or n > 1, or {side}_sampling_alpha=0 for no sampling. "
                f"Received: {side}_sampling_nbest_size="
                f"{getattr(hp, f'{side}_sampling_nbest_size')}")
    if hp.shared_embedding and (hp.tie_output_projection or hp.target_vocab_size
                                not in (0, hp.vocab_size)):
        raise HParamsError(
            "tie_output_projection and a target_vocab_size of its own need "
            "shared_embedding=false (a shared embedding is already the target's and "
            f"the projection's). Received: shared_embedding=true, tie_output_projection="
            f"{str(hp.tie_output_projection).lower()}, target_vocab_size={hp.target_vocab_size}")
    if hp.position_encoding != "learned" and hp.d_model % 2:
        raise HParamsError(
            f"d_model must be even with position_encoding={hp.position_encoding} (sin/cos pairs, "
            "section 3.5); use an even d_model or position_encoding=learned. "
            f"Received: d_model={hp.d_model}")


# ---------------------------------------------------------------------------
# Override parsing
# ---------------------------------------------------------------------------


# tensor2tensor's names, each resolved once to ours by the parser.
_ALIASES = {name: (value_type(name, _TYPES[ours]),
                   lambda name, value: to_ours(name, value, HParamsError))
            for name, ours in T2T_NAMES.items()}


def _unknown_field(key: str, value: Any) -> HParamsError:
    if is_t2t_name(key):
        to_ours(key, value, HParamsError)  # refuses it, with the reason
    near = closest(key, [*_TYPES, *T2T_NAMES])
    hint = f" Did you mean '{near}'?" if near else ""
    return HParamsError(
        f"Unknown hparam '{key}'.{hint} `t2t-trainer --registry_help` lists the "
        f"fields with their types and defaults. Received: {key}={value}"
    )


def field_docs() -> dict[str, str]:
    """{field name: its docstring, on one line}, read from this module's source
    (the string under each field of `HParams`), in the order of the fields."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(HParams)).body[0].body
    docs = {}
    for field, after in zip(body, body[1:]):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[field.target.id] = " ".join(after.value.value.split())
    return {name: docs.get(name, "") for name in _TYPES}


def fields_help() -> str:
    """Every HParams field with its `--hparams` type, default and meaning
    (`t2t-trainer --registry_help` prints it)."""
    def text(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return "[" + ",".join(str(v) for v in value) + "]"
        return str(value)

    kinds = {int: "int", float: "float", bool: "bool", str: "str"}
    defaults = HParams()
    rows = [(name, kinds.get(_TYPES[name], "list"), text(getattr(defaults, name)), doc)
            for name, doc in field_docs().items()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ['Hparam fields (--hparams "name=value,..."; a set changes some defaults, '
             'the problem others; choices and ranges are checked):']
    lines += [f"  {n.ljust(widths[0])}  {k.ljust(widths[1])}  {d.ljust(widths[2])}  {doc}"
              for n, k, d, doc in rows]
    return "\n".join(lines)


def parse_overrides(overrides: str) -> dict[str, Any]:
    """Parse `"k=v,k2=[1,2,3],flag=false"` into typed values for HParams.

    tensor2tensor's names (`hidden_size=1024`) are resolved to ours
    (`d_model`): the result holds our names only (`t2t_hparam_names`).
    Raises HParamsError naming the field, the expected type and the closest
    field name on an unknown key, a malformed pair or a bad value.
    """
    return parse_typed_pairs(overrides, _TYPES, flag="--hparams", what="hparam",
                             error=HParamsError, unknown=_unknown_field, aliases=_ALIASES)


# ---------------------------------------------------------------------------
# Resolution: defaults < hparam set < problem < command line
# ---------------------------------------------------------------------------


def resolve(hparams_set: str, overrides: str = "", problem: Any = None,
            base: HParams | None = None) -> HParams:
    """The one resolved config for a run.

    Args:
        hparams_set: a registered hparam set name (e.g. "transformer_base").
        overrides: the `--hparams "k=v,..."` string; applied last.
        problem: an optional Problem; its `hparams_overrides(hparams)` dict
            (vocab_size, decode defaults, ...) is applied before `overrides`.
        base: hparams that take the set's place (a run's own hparams.json,
            when fine-tuning it); `hparams_set` is then not read.
    """
    from t2t_revival.registry import hparams_sets

    parsed = parse_overrides(overrides)  # fail fast on a malformed string
    hp = base if base is not None else hparams_sets.get(hparams_set)()
    if problem is not None:
        hp = hp.replace(**problem.hparams_overrides(hp))
    hp = hp.replace(**parsed)
    known = getattr(problem, "vocab_size", 0)
    if known and hp.vocab_size < known:
        raise HParamsError(
            f"hparam 'vocab_size' must be at least the size of the vocabulary of "
            f"problem {getattr(problem, 'name', '')} ({known} pieces: larger ids "
            f"would have no embedding row); leave it unset, or round it up. "
            f"Received: vocab_size={hp.vocab_size}")
    return hp
