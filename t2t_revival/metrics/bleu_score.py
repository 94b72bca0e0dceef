"""`BleuScore`: one labelled BLEU figure."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BleuScore:
    """A BLEU figure with the name of the recipe that produced it.

    Attributes:
        label: what was measured, e.g. "sacreBLEU (cased, 13a)".
        score: BLEU on a 0-100 scale.
        precisions: the 1- to 4-gram precisions, 0-100.
        brevity_penalty: BP, in (0, 1].
        hyp_len, ref_len: corpus lengths in tokens of the recipe.
        signature: sacreBLEU's signature string (how to reproduce it).
    """

    label: str
    score: float
    precisions: tuple[float, ...]
    brevity_penalty: float
    hyp_len: int
    ref_len: int
    signature: str

    def format(self) -> str:
        """`label: 27.31 (58.1/33.0/20.9/13.6, BP 0.992, 1020/1028 tokens) | signature`."""
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        return (f"{self.label}: {self.score:.2f} ({precisions}, BP {self.brevity_penalty:.3f}, "
                f"hyp_len {self.hyp_len}, ref_len {self.ref_len}) | {self.signature}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
