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
import json
import math
import typing
from typing import Any, Callable

from t2t_revival.atomic_file import write_atomically
from t2t_revival.decode_length import MAX_EXTRA_LENGTH
from t2t_revival.errors import UserError
from t2t_revival.registry import closest
from t2t_revival.text_lines import read_record_text

# Choices for enumerated string fields.
_CHOICES = {
    "norm_type": ("post", "pre"),
    "position_encoding": ("sinusoid", "learned"),
    "mixed_precision": ("float32", "mixed_bfloat16", "mixed_float16"),
    "ffn_activation": ("relu",),
}


class HParamsError(UserError):
    """A malformed `--hparams` string, an unknown field, or a bad value."""


@dataclasses.dataclass(frozen=True)
class HParams:
    """Hyperparameters of the Transformer, its training and its decoding.

    Defaults are the paper's base model (Table 3, row "base").
    """

    # ---- Model (section 3, Table 3) ----
    num_hidden_layers: int = 6
    """N: identical layers in the encoder and in the decoder (section 3.1)."""
    d_model: int = 512
    """d_model: width of every sub-layer output and of the embeddings (3.1)."""
    d_ff: int = 2048
    """d_ff: inner width of the position-wise feed-forward network (3.3)."""
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
    """Activation of the feed-forward network: max(0, xW1 + b1)W2 + b2 (3.3)."""
    norm_type: str = "post"
    """'post': LayerNorm(x + Sublayer(x)) as in the paper (3.1); 'pre': x +
    Sublayer(LayerNorm(x)), with a final LayerNorm, as later practice."""
    layer_norm_epsilon: float = 1e-6
    """Epsilon of every LayerNormalization."""
    position_encoding: str = "sinusoid"
    """'sinusoid': the fixed sin/cos encodings of 3.5; 'learned': learned
    positional embeddings (Table 3 row E)."""
    shared_embedding: bool = True
    """One weight matrix for the source embedding, the target embedding and the
    pre-softmax projection, scaled by sqrt(d_model) on the way in (3.4).
    Needs a shared source/target vocabulary."""
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

    # ------------------------------------------------------------------
    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = _field_type(f)
            if not _type_ok(value, expected):
                raise HParamsError(
                    f"hparam '{f.name}' expects {_type_name(expected)}, got "
                    f"{type(value).__name__}. Received: {f.name}={value!r}"
                )
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise HParamsError(
                    f"hparam '{name}' must be one of {', '.join(choices)}. "
                    f"Received: {name}={value!r}"
                )
        _check_ranges(self)
        if (self.d_k == 0 or self.d_v == 0) and self.d_model % self.num_heads:
            raise HParamsError(
                "d_model must be divisible by num_heads when d_k or d_v is 0 "
                "(derived as d_model / num_heads); set d_k and d_v explicitly or "
                f"change num_heads. Received: d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        if list(self.bucket_boundaries) != sorted(set(self.bucket_boundaries)):
            raise HParamsError(
                "bucket_boundaries must be strictly increasing. "
                f"Received: bucket_boundaries={list(self.bucket_boundaries)}"
            )

    # ---- derived values -------------------------------------------------
    @property
    def key_size(self) -> int:
        """Per-head query/key size d_k (d_model / h unless set)."""
        return self.d_k or self.d_model // self.num_heads

    @property
    def value_size(self) -> int:
        """Per-head value size d_v (d_model / h unless set)."""
        return self.d_v or self.d_model // self.num_heads

    # ---- variants, overrides and serialization ----------------------------
    def replace(self, **changes: Any) -> "HParams":
        """A copy with `changes` applied (type-checked like every HParams)."""
        unknown = [k for k in changes if k not in _field_map()]
        if unknown:
            raise _unknown_field(unknown[0], changes[unknown[0]])
        return dataclasses.replace(self, **changes)

    def override_from_string(self, overrides: str) -> "HParams":
        """Apply `--hparams "k=v,k2=[1,2],flag=true"` overrides."""
        return self.replace(**parse_overrides(overrides))

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "HParams":
        fields = _field_map()
        unknown = [k for k in values if k not in fields]
        if unknown:
            raise _unknown_field(unknown[0], values[unknown[0]])
        converted = {}
        for key, value in values.items():
            if _field_type(fields[key]) in _TUPLES and isinstance(value, list):
                value = tuple(float(v) if _field_type(fields[key]) == tuple[float, ...]
                              and isinstance(v, int) else v for v in value)
            if _field_type(fields[key]) is float and isinstance(value, int) \
                    and not isinstance(value, bool):
                value = float(value)
            converted[key] = value
        return cls(**converted)

    @classmethod
    def from_json(cls, text: str) -> "HParams":
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise HParamsError(f"hparams JSON is malformed: {e}. Received: {text[:80]!r}")
        if not isinstance(values, dict):
            raise HParamsError(f"hparams JSON must be an object. Received: {text[:80]!r}")
        return cls.from_dict(values)

    def save(self, path: str) -> None:
        """Write JSON to `path` atomically (temp file, then rename), mode 0644."""
        write_atomically(path, self.to_json())

    @classmethod
    def load(cls, path: str) -> "HParams":
        """The hparams saved at `path`; a one-line HParamsError naming `path`
        when it is missing or corrupt (not UTF-8, not JSON, unknown fields)."""
        try:
            text = read_record_text(path, lambda why: cls._corrupt(path, why))
        except FileNotFoundError:
            raise HParamsError(
                f"No hparams file at {path}; point --output_dir at a training "
                f"directory that holds hparams.json. Received: path={path!r}"
            ) from None
        except IsADirectoryError as e:
            raise cls._corrupt(path, e.strerror) from None
        try:
            return cls.from_json(text)
        except HParamsError as e:
            raise cls._corrupt(path, str(e).split(". Received: ")[0]) from None

    @staticmethod
    def _corrupt(path: str, why: str) -> HParamsError:
        return HParamsError(
            f"{path} is corrupt ({why}); delete it and rerun t2t-trainer in that "
            f"directory with the run's --hparams_set and --hparams, which writes it "
            f"again. Received: path={path!r}")


# ---------------------------------------------------------------------------
# Valid ranges: settings that parse but make no sense are refused here
# ---------------------------------------------------------------------------

# The valid range of each numeric field, as (its text, a test).
_POSITIVE = ("must be positive (> 0)", lambda v: v > 0)
_NOT_NEGATIVE = ("must not be negative (>= 0)", lambda v: v >= 0)
_PROBABILITY = ("is a probability in [0, 1)", lambda v: 0 <= v < 1)
_RANGES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **{name: _POSITIVE for name in (
        "num_hidden_layers", "d_model", "d_ff", "num_heads", "max_length",
        "batch_size", "gradient_accumulation_steps", "beam_size",
        "learning_rate", "adam_epsilon", "layer_norm_epsilon")},
    **{name: _NOT_NEGATIVE for name in (
        "d_k", "d_v", "vocab_size", "learning_rate_warmup_steps",
        "learning_rate_cooldown_steps", "clip_grad_norm")},
    "extra_length": (f"must be in [0, {MAX_EXTRA_LENGTH}] (output tokens beyond the input; "
                     f"the paper uses 50, parsing 300)",
                     lambda v: 0 <= v <= MAX_EXTRA_LENGTH),
    **{name: _PROBABILITY for name in (
        "dropout", "attention_dropout", "relu_dropout", "label_smoothing")},
    "adam_beta1": ("must be in [0, 1) (Adam's decay rate)", lambda v: 0 <= v < 1),
    "adam_beta2": ("must be in [0, 1) (Adam's decay rate)", lambda v: 0 <= v < 1),
}


def _check_ranges(hp: "HParams") -> None:
    """Refuse NaN/inf and out-of-range values, naming the valid range."""
    for f in dataclasses.fields(hp):
        value = getattr(hp, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise HParamsError(f"hparam '{f.name}' must be a finite number, not "
                               f"NaN or infinity. Received: {f.name}={value!r}")
    for name, (valid, test) in _RANGES.items():
        value = getattr(hp, name)
        if not test(value):
            raise HParamsError(f"hparam '{name}' {valid}. Received: {name}={value!r}")
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
    if hp.position_encoding == "sinusoid" and hp.d_model % 2:
        raise HParamsError(
            "d_model must be even with position_encoding=sinusoid (sin/cos pairs, "
            "section 3.5); use an even d_model or position_encoding=learned. "
            f"Received: d_model={hp.d_model}")


# ---------------------------------------------------------------------------
# Override parsing
# ---------------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _field_map() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(HParams)}


_HINTS: dict[str, Any] = {}


def _field_type(field: dataclasses.Field) -> Any:
    if not _HINTS:
        _HINTS.update(typing.get_type_hints(HParams))
    return _HINTS[field.name]


_TUPLES = (tuple[int, ...], tuple[float, ...])


def _type_name(tp: Any) -> str:
    if tp == tuple[int, ...]:
        return "a list of int, e.g. [8,16,32]"
    if tp == tuple[float, ...]:
        return "a list of numbers, e.g. [3,1]"
    return {int: "int", float: "float", bool: "bool (true/false)", str: "str"}[tp]


def _type_ok(value: Any, tp: Any) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, float)
    if tp is str:
        return isinstance(value, str)
    if tp == tuple[int, ...]:
        return isinstance(value, tuple) and all(_type_ok(v, int) for v in value)
    if tp == tuple[float, ...]:
        return isinstance(value, tuple) and all(_type_ok(v, float) for v in value)
    raise TypeError(f"unsupported hparam type {tp}")


def _unknown_field(key: str, value: Any) -> HParamsError:
    near = closest(key, _field_map())
    hint = f" Did you mean '{near}'?" if near else ""
    return HParamsError(
        f"Unknown hparam '{key}'.{hint} Run with --registry_help or see "
        f"t2t_revival/hparams.py for the fields. Received: {key}={value}"
    )


def _split_top_level(text: str, flag: str = "--hparams",
                     error: type[UserError] = HParamsError) -> list[str]:
    """Split on commas that are not inside [...]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise error(f"Unbalanced ']' in {flag}. Received: {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise error(f"Unbalanced '[' in {flag}. Received: {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _convert(key: str, raw: str, tp: Any, names=None, what: str = "hparam",
             error: type[UserError] = HParamsError) -> Any:
    def bad() -> UserError:
        near = closest(key, names if names is not None else _field_map())
        return error(
            f"{what} '{key}' expects {_type_name(tp)}, and '{raw}' is not one. "
            f"Received: {key}={raw}"
            + (f" (closest field: '{near}')" if near and near != key else "")
        )

    text = raw.strip()
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise bad()
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise bad() from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise bad() from None
    if tp is str:
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        return text
    if tp in _TUPLES:
        if not (text.startswith("[") and text.endswith("]")):
            raise bad()
        inner = text[1:-1].strip()
        if not inner:
            return ()
        try:
            return tuple((int if tp == tuple[int, ...] else float)(v)
                         for v in inner.split(","))
        except ValueError:
            raise bad() from None
    raise TypeError(f"unsupported hparam type {tp}")


def parse_typed_pairs(text: str, types: dict[str, Any], *, flag: str,
                      what: str, error: type[UserError],
                      unknown: Callable[[str, str], UserError]) -> dict[str, Any]:
    """Parse `"k=v,k2=[1,2,3],flag=false"` against `types` (name -> type).

    The one parser behind `--hparams` and `--decode_hparams`. Supported types:
    int, float, bool, str and tuple[int, ...]. `unknown(key, raw)` builds the
    error for a key not in `types`; other problems raise `error` naming `flag`.
    """
    result: dict[str, Any] = {}
    for pair in _split_top_level(text or "", flag, error):
        if "=" not in pair:
            raise error(
                f"{flag} entries are key=value pairs separated by commas; "
                f"'{pair}' has no '='. Received: {text!r}"
            )
        key, raw = (s.strip() for s in pair.split("=", 1))
        if key not in types:
            raise unknown(key, raw)
        if key in result:
            raise error(f"{what} '{key}' is set twice in {flag}. "
                        f"Received: {text!r}")
        result[key] = _convert(key, raw, types[key], types, what, error)
    return result


def parse_overrides(overrides: str) -> dict[str, Any]:
    """Parse `"k=v,k2=[1,2,3],flag=false"` into typed values for HParams.

    Raises HParamsError naming the field, the expected type and the closest
    field name on an unknown key, a malformed pair or a bad value.
    """
    types = {name: _field_type(f) for name, f in _field_map().items()}
    return parse_typed_pairs(overrides, types, flag="--hparams", what="hparam",
                             error=HParamsError, unknown=_unknown_field)


# ---------------------------------------------------------------------------
# Resolution: defaults < hparam set < problem < command line
# ---------------------------------------------------------------------------


def resolve(hparams_set: str, overrides: str = "", problem: Any = None) -> HParams:
    """The one resolved config for a run.

    Args:
        hparams_set: a registered hparam set name (e.g. "transformer_base").
        overrides: the `--hparams "k=v,..."` string; applied last.
        problem: an optional Problem; its `hparams_overrides(hparams)` dict
            (vocab_size, decode defaults, ...) is applied before `overrides`.
    """
    from t2t_revival.registry import hparams_sets

    parsed = parse_overrides(overrides)  # fail fast on a malformed string
    hp = hparams_sets.get(hparams_set)()
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
