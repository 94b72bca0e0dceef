"""A sentence's word attention as a labelled heatmap (PNG), for people who
want to look at an alignment rather than read `0-0 1-2 ...`.

    t2t-decoder ... --decode_hparams "alignments=true,alignment_heatmap=3"

draws input line 3's word attention (`WordAligner.matrices`) to
`<decode_to_file>.align3.png`: source words along the top, output words down
the side, darker = more attention, each target word's alignment link boxed.
matplotlib draws it; it is an optional extra (`pip install
t2t-revival[plots]`), asked for only when a heatmap is.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from t2t_revival.files.atomic_file import atomic_output
from t2t_revival.errors import UserError


LABEL_CHARACTERS = 16
"""A word longer than this is cut (ending in "…") in the picture's labels."""


def _label(word: str) -> str:
    return word if len(word) <= LABEL_CHARACTERS else word[:LABEL_CHARACTERS - 1] + "…"


def heatmap_path(decode_to_file: str, line: int) -> str:
    """Where t2t-decoder draws input line `line`'s heatmap: `<decode_to_file>.align<line>.png`."""
    return f"{decode_to_file}.align{line}.png"


def check_matplotlib() -> None:
    """A UserError when matplotlib (the `plots` extra) is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("alignment_heatmap draws with matplotlib, which is not installed: "
                        "pip install 't2t-revival[plots]' (or drop alignment_heatmap). "
                        "Received: alignment_heatmap set") from None


def write_heatmap(path: str, matrix: np.ndarray, source_words: Sequence[str],
                  target_words: Sequence[str]) -> None:
    """Draw `matrix` float `[len(target_words), len(source_words)]` (a
    target word's attention over the source words) to the PNG `path`,
    atomically. A UserError when matplotlib is missing or a side is empty."""
    check_matplotlib()
    if not len(source_words) or not len(target_words):
        raise UserError("an alignment heatmap needs a non-empty source and output. "
                        f"Received: {len(source_words)} source words, "
                        f"{len(target_words)} output words")
    import matplotlib
    matplotlib.use("Agg")   # no display needed
    from matplotlib import pyplot
    from matplotlib.patches import Rectangle

    width = max(4.0, 0.45 * len(source_words) + 2)
    height = max(3.0, 0.35 * len(target_words) + 2)
    figure, axes = pyplot.subplots(figsize=(width, height))
    axes.imshow(matrix, cmap="Greys", vmin=0.0, vmax=max(float(matrix.max()), 1e-9),
                aspect="auto")
    axes.set_xticks(range(len(source_words)), labels=[_label(w) for w in source_words],
                    rotation=60, ha="left", rotation_mode="anchor")
    axes.set_yticks(range(len(target_words)), labels=[_label(w) for w in target_words])
    axes.xaxis.tick_top()
    for t, s in enumerate(matrix.argmax(axis=1)):
        axes.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="red",
                                 linewidth=1.5))
    axes.set_xlabel("source words")
    axes.set_ylabel("output words (red: the alignment link)")
    figure.tight_layout()   # labels are at most LABEL_CHARACTERS long: they fit
    with atomic_output(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    pyplot.close(figure)
