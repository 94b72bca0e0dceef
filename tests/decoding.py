"""A decoder made as t2t-decoder makes one from its flags, for the tests."""


def decoder_of(output_dir, checkpoints=None, settings=""):
    """`Decoder.load` of `output_dir` with t2t-decoder's flag values:
    `checkpoints` as --checkpoint_path (comma-separated: an ensemble) and
    `settings` as --decode_hparams."""
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.decode_hparams import parse_decode_hparams

    paths = [c.strip() for c in str(checkpoints).split(",")] if checkpoints else None
    return Decoder.load(str(output_dir), paths, parse_decode_hparams(settings))
