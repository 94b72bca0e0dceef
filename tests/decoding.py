"""A decoder made as t2t-decoder makes one from its flags, for the tests, and
kept: building a `Decoder` is cheap, but its first search traces (seconds)
or compiles with XLA (more), so the suite makes each decoder of the same
(run, checkpoints, settings) once per worker process and hands it to every
test that asks (`decoder_of`)."""

_DECODERS: dict[tuple[str, str, str], tuple[object, dict[str, int]]] = {}


def _load(output_dir, checkpoints, settings):
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import parse_decode_hparams

    paths = [c.strip() for c in str(checkpoints).split(",")] if checkpoints else None
    return Decoder.load(str(output_dir), paths, parse_decode_hparams(settings))


def _seams(decoder) -> dict[str, int]:
    """{attribute: id} of the decoder's callables a test may replace (its
    searches, scoring, the beam observer)."""
    return {name: id(value) for name, value in vars(decoder).items()
            if callable(value) or name == "on_beam_step"}


def decoder_of(output_dir, checkpoints=None, settings="", fresh=False):
    """`Decoder.load` of `output_dir` with t2t-decoder's flag values:
    `checkpoints` as --checkpoint_path (comma-separated: an ensemble) and
    `settings` as --decode_hparams.

    The same decoder for the same arguments, made once (its traces and XLA
    programs kept): tests only translate and score with it. A test that
    replaces a decoder's search or scoring, or counts what its first call
    traces or compiles, asks for its own with `fresh=True`; a kept decoder
    found changed fails the test that asks for it, naming the attribute.
    """
    if fresh:
        return _load(output_dir, checkpoints, settings)
    key = (str(output_dir), str(checkpoints), settings)
    if key not in _DECODERS:
        decoder = _load(output_dir, checkpoints, settings)
        _DECODERS[key] = decoder, _seams(decoder)
    decoder, seams = _DECODERS[key]
    changed = sorted(k for k in seams.keys() | _seams(decoder).keys()
                     if seams.get(k) != _seams(decoder).get(k))
    assert not changed, (f"an earlier test replaced {changed} of the kept decoder of {key}: "
                         f"a test that changes a decoder takes decoder_of(..., fresh=True)")
    return decoder
