"""Corpus-level labelled bracketing scores, as EVALB's summary reports them."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EvalbScore:
    """Counts over a corpus and the EVALB figures computed from them.

    Attributes:
        sentences: sentences read (EVALB "Number of sentence").
        matched: brackets of the test trees that match a gold bracket.
        gold_brackets: brackets of the gold trees of scored sentences.
        test_brackets: brackets of the test trees of scored sentences.
        length_mismatch: sentences not scored because gold and test have a
            different number of words once deleted labels are removed (EVALB's
            "Length unmatch" error).
        word_mismatch: sentences not scored because a word differs (EVALB's
            "Words unmatch" error).
        empty_test: sentences not scored because the test tree has no word
            (EVALB's "skip" sentences).
        complete_match: scored sentences whose brackets all match both ways.
        repaired: predicted trees that were malformed and repaired before
            scoring (set by `evaluate_files`, 0 otherwise).
        flat: of those, predictions with nothing usable, scored as a flat tree
            with no brackets (their gold brackets count against recall).
    """

    sentences: int = 0
    matched: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    length_mismatch: int = 0
    word_mismatch: int = 0
    empty_test: int = 0
    complete_match: int = 0
    repaired: int = 0
    flat: int = 0

    @property
    def skipped(self) -> int:
        """Sentences not scored (EVALB's error plus skip sentences)."""
        return self.length_mismatch + self.word_mismatch + self.empty_test

    @property
    def scored(self) -> int:
        """Sentences scored (EVALB "Number of Valid sentence")."""
        return self.sentences - self.skipped

    @property
    def precision(self) -> float:
        """Labelled bracketing precision in percent: matched / test brackets."""
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0

    @property
    def recall(self) -> float:
        """Labelled bracketing recall in percent: matched / gold brackets."""
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def f1(self) -> float:
        """EVALB's "Bracketing FMeasure": 2PR / (P + R), in percent (0 if P+R is 0)."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict:
        """Every count and figure, for `--json`."""
        out = dataclasses.asdict(self)
        out.update(scored=self.scored, skipped=self.skipped, precision=self.precision,
                   recall=self.recall, f1=self.f1)
        return out

    def summary(self) -> str:
        """EVALB-style summary lines."""
        return "\n".join([
            f"Bracketing Recall         = {self.recall:6.2f}",
            f"Bracketing Precision      = {self.precision:6.2f}",
            f"Bracketing FMeasure       = {self.f1:6.2f}",
            f"Matched brackets          = {self.matched} (gold {self.gold_brackets}, "
            f"test {self.test_brackets})",
            f"Number of sentence        = {self.sentences}",
            f"Number of Valid sentence  = {self.scored}",
            f"Number of skipped         = {self.skipped} (length mismatch "
            f"{self.length_mismatch}, word mismatch {self.word_mismatch}, "
            f"empty test {self.empty_test})",
            f"Repaired predictions      = {self.repaired} (flat {self.flat})",
        ])
