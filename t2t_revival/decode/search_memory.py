"""How much memory a search takes, so that it stays bounded whatever the
settings: the rows one search call decodes at once, and the settings
refused before the model loads.

A search row (a sentence's beam, or one sample) holds the decoder's
key/value cache, its logits and their filters, and its tokens
(`row_bytes`). `Decoder` bounds the rows of one call: sampling draws
`samples_per_input` in chunks of `sample_chunk` samples per input (at most
`SEARCH_BYTES` of rows) and keeps the best (or every sample, with
return_beams); beam search takes fewer sentences per batch where their
beams at the longest decode length would take more than a quarter of the
memory available (`beam_batch_size`). What cannot be made smaller
(one sentence's beam, the samples return_beams keeps) is compared with the
memory available before the model loads (`check_decode_fits`): a UserError
with the estimate.
"""

from __future__ import annotations

import os

import numpy as np

from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.decode.decode_length import longest_decode_length
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams

SEARCH_BYTES = 256 * 2 ** 20
"""The rows of one search call take about this much memory at most."""

_FLOAT = 4
# logits, tempered, top-k and top-p filtered, their softmax, sort and sum,
# the draw (or beam search's log-probabilities and top-k over them)
_LOGIT_COPIES = 8
# bytes a kept output token takes: its id (int32), then its text
_KEPT_TOKEN_BYTES = 4 + 8


def row_bytes(hparams: HParams, decode_length: int) -> int:
    """Memory of one search row decoding up to `decode_length` positions."""
    cache = 2 * hparams.decoder_layers * decode_length * hparams.d_model * _FLOAT
    logits = _LOGIT_COPIES * hparams.output_vocab_size * _FLOAT
    tokens = 2 * decode_length * _FLOAT
    return cache + logits + tokens


def sample_chunk(hparams: HParams, sentences: int, decode_length: int,
                 samples_per_input: int) -> int:
    """Samples per input drawn in one search call of `sentences` inputs."""
    rows = SEARCH_BYTES // row_bytes(hparams, decode_length)
    return max(1, min(samples_per_input, rows // max(sentences, 1)))


def sample_in_chunks(search, inputs, decode_length: int, hparams: HParams,
                     dhp: DecodeHParams) -> tuple[np.ndarray, np.ndarray]:
    """The samples of `inputs` (int32 [B, S]), drawn in chunks of
    `sample_chunk` samples per input, and their scores: every sample
    ([B, n, L], [B, n]) best first with return_beams, else the best ([B, L], [B]).

    search: `Decoder.search`, (inputs, decode_length, samples_per_input) ->
        (sequences, scores) of that many samples."""
    chunk = sample_chunk(hparams, int(inputs.shape[0]), decode_length, dhp.samples_per_input)
    kept_sequences = kept_scores = None
    for start in range(0, dhp.samples_per_input, chunk):
        sequences, scores = search(inputs, decode_length, min(chunk, dhp.samples_per_input - start))
        sequences, scores = sequences.numpy(), scores.numpy()
        if kept_sequences is None:
            kept_sequences, kept_scores = sequences, scores
        elif dhp.return_beams:   # [B, n, L]: every sample, sorted below
            kept_sequences = np.concatenate([kept_sequences, sequences], axis=1)
            kept_scores = np.concatenate([kept_scores, scores], axis=1)
        else:   # [B, L]: the better of the best so far and this chunk's best
            better = scores > kept_scores
            kept_sequences = np.where(better[:, None], sequences, kept_sequences)
            kept_scores = np.where(better, scores, kept_scores)
    if dhp.return_beams and chunk < dhp.samples_per_input:
        order = np.argsort(-kept_scores, axis=1, kind="stable")
        kept_sequences = np.take_along_axis(kept_sequences, order[:, :, None], axis=1)
        kept_scores = np.take_along_axis(kept_scores, order, axis=1)
    return kept_sequences, kept_scores


def beam_batch_size(hparams: HParams, dhp: DecodeHParams, budget: int) -> int:
    """Sentences per beam search batch: batch_size, fewer where their beams
    at the longest decode length would take more than `budget` bytes (at
    least 1: `check_decode_fits` refuses a beam that cannot fit)."""
    length = longest_decode_length(hparams.max_length, dhp.extra_length,
                                   hparams.position_encoding)
    rows = budget // row_bytes(hparams, length)
    return max(1, min(dhp.batch_size, rows // dhp.beam_size))


def available_bytes() -> int:
    """The memory this process can take: MemAvailable (Linux), else all of it."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _gb(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GB"


def check_decode_fits(hparams: HParams, dhp: DecodeHParams, lines: int,
                      available: int | None = None) -> None:
    """A UserError, with the estimate, when the memory that no chunking makes
    smaller does not fit in `available` bytes (default: `available_bytes`):
    one sentence's beam, or with sampling and return_beams every sample kept.

    Args:
        hparams: the run's hparams (hparams.json).
        dhp: the decode settings.
        lines: the inputs to decode.
    """
    available = available_bytes() if available is None else available
    length = longest_decode_length(hparams.max_length, dhp.extra_length,
                                   hparams.position_encoding)
    if dhp.sampling and dhp.return_beams:
        need = lines * dhp.samples_per_input * length * _KEPT_TOKEN_BYTES
        what = (f"return_beams keeps all {dhp.samples_per_input} samples of each of the {lines} "
                f"lines, up to {length} tokens each")
        lower = "lower samples_per_input, decode fewer lines at a time, or set return_beams=false"
        received = f"samples_per_input={dhp.samples_per_input}, return_beams=true"
    elif not dhp.sampling:
        need = dhp.beam_size * row_bytes(hparams, length)
        what = f"one sentence's beam of {dhp.beam_size} rows, up to {length} tokens each"
        lower = "lower beam_size"
        received = f"beam_size={dhp.beam_size}"
    else:
        return   # sampling without return_beams: chunks of SEARCH_BYTES
    if need > available:
        raise UserError(f"decoding would need about {_gb(need)} of memory ({what}), more "
                        f"than the {_gb(available)} available; {lower}. Received: {received}")


def out_of_memory_advice(dhp: DecodeHParams, settings: str = "the decode hparams'",
                         then: str = "") -> str:
    """`Lower <settings> batch_size (now 32 sentences; e.g. batch_size=16),
    beam_size (now 4)<then>. Received: batch_size=32`: the decode hparams
    that take less device memory, `settings` naming where they are set
    (batch_size only above 1; with none left to lower, a device with more
    memory)."""
    lower = []
    if dhp.batch_tokens:
        lower.append(f"batch_tokens (now {dhp.batch_tokens}; e.g. "
                     f"batch_tokens={max(dhp.batch_tokens // 2, 1)})")
        received = f"batch_tokens={dhp.batch_tokens}"
    else:
        if dhp.batch_size > 1:
            lower.append(f"batch_size (now {dhp.batch_size} sentences; e.g. "
                         f"batch_size={dhp.batch_size // 2})")
        received = f"batch_size={dhp.batch_size}"
    if dhp.beam_size > 1 and not dhp.sampling:
        lower.append(f"beam_size (now {dhp.beam_size})")
    if dhp.sampling and dhp.samples_per_input > 1:   # samples_per_input rows per sentence
        lower.append(f"samples_per_input (now {dhp.samples_per_input})")
    if dhp.parallel_batches > 1:
        lower.append(f"parallel_batches (now {dhp.parallel_batches})")
    if not lower:
        return (f"Nothing in {settings} settings is left to lower (one sentence at a "
                f"time, one hypothesis): decode on a device with more memory. "
                f"Received: {received}")
    return f"Lower {settings} {', '.join(lower)}{then}. Received: {received}"
