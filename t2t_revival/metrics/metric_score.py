"""`MetricScore`: one labelled figure of a sacreBLEU metric other than BLEU."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class MetricScore:
    """A chrF or TER figure, as sacreBLEU computes and signs it.

    Attributes:
        label: what was measured, as t2t-bleu prints it, e.g. "chrF2 (sacreBLEU)".
        name: sacreBLEU's name of the figure: "chrF2", "chrF2++" or "TER".
        score: on a 0-100 scale (TER can exceed 100); higher is better, except TER.
        signature: sacreBLEU's signature string (how to reproduce it).
    """

    label: str
    name: str
    score: float
    signature: str

    def format(self) -> str:
        """`chrF2 (sacreBLEU): 98.38 | nrefs:2|case:mixed|eff:yes|nc:6|nw:0|...`."""
        return f"{self.label}: {self.score:.2f} | {self.signature}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
