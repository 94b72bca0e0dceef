"""The decoding cache's per-sentence part: one owner for the key that marks it.

A search runs several rows per sentence (beam search its `beam` hypotheses,
sampling its `samples_per_input` draws), sentence-major: rows `b * k ... b * k + k
- 1` are sentence `b`'s. Most of a model's decoding cache belongs to a row (a
self-attention buffer holds that row's own tokens): the search tiles it to
`[B * k, ...]` and reorders it with the beams. What follows from the source
alone (the encoder's keys and values, its padding) is the same in every row
of a sentence. A model keeps it under the key `PER_SENTENCE` of a dict of its
cache (at any depth, so an ensemble's caches nest as they are): there it
stays `[B, ...]`, the searches never tile nor reorder it (a stage of beam
search that drops sentences gathers it by sentence), and the model reads one
copy for all of a sentence's rows (`DecoderLayer`'s encoder-decoder
attention: a sentence's beams are its queries at once). Tiled, the keys and
values were copied `beam` times per batch and read `beam` times per step.

Written with no backend, so the model and the searches share it.
"""

from typing import Any, Callable

PER_SENTENCE = "per_sentence"


def map_cache(cache, per_row: Callable[[Any], Any], per_sentence: Callable[[Any], Any]):
    """`cache` with `per_row(x)` for each leaf of a row and `per_sentence(x)`
    for each leaf under a `PER_SENTENCE` key (nested dicts, lists, tuples)."""
    return _map(per_row, per_sentence, False, cache)


def map_caches(new, old, per_row: Callable[[Any, Any], Any],
               per_sentence: Callable[[Any, Any], Any]):
    """As `map_cache`, over two caches of the same structure, leaf by leaf."""
    return _map(per_row, per_sentence, False, new, old)


def _map(per_row, per_sentence, in_sentence, first, *others):
    """The walk of `map_cache` (one cache) and `map_caches` (two)."""
    if isinstance(first, dict):
        for other in others:
            if set(other) != set(first):
                raise ValueError(f"the step returned a cache with the keys {sorted(first)} "
                                 f"where it was given {sorted(other)}")
        return {key: _map(per_row, per_sentence, in_sentence or key == PER_SENTENCE,
                          value, *(other[key] for other in others))
                for key, value in first.items()}
    if isinstance(first, (list, tuple)):
        return type(first)(_map(per_row, per_sentence, in_sentence, *values)
                           for values in zip(first, *others, strict=True))
    return (per_sentence if in_sentence else per_row)(first, *others)
