"""The arguments of the decoding benchmarks that name what they decode: a
trained model (`--output_dir`, `--checkpoint_path`) and its test sentences
(`--source`, by default the Multi30k test set in ../shared/data); and one
line, not a traceback, when they name nothing usable."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

DEFAULT_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "shared", "data", "multi30k", "test_2016_flickr.en.gz")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --output_dir (required), --checkpoint_path and --source to `parser`."""
    parser.add_argument("--output_dir", required=True, help="a t2t-trainer output_dir")
    parser.add_argument("--checkpoint_path", default=None,
                        help="a checkpoint prefix (default: the latest in output_dir)")
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help="sentences to translate, one per line (.gz read as gzip)")


@contextlib.contextmanager
def user_errors_exit(prog: str):
    """Turn a `UserError` (a missing training directory, an unreadable
    --source, ...) into one line on stderr and exit status 2, as the CLIs do."""
    from t2t_revival.errors import UserError

    try:
        yield
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)


def sources_and_decoder(args: argparse.Namespace, decode_hparams: str):
    """(the first `args.max_sentences` lines of --source, a `Decoder` of
    --output_dir and --checkpoint_path with `decode_hparams`, then the
    user's --decode_hparams): what decode_profile and decode_steps decode.
    A UserError when --source has no lines."""
    from t2t_revival.decode.decoder import Decoder, read_text_lines
    from t2t_revival.errors import UserError

    sources = read_text_lines(args.source, "source")[:args.max_sentences]
    if not sources:
        raise UserError(f"--source has no lines to translate. Received: --source={args.source!r}")
    decoder = Decoder(args.output_dir, args.checkpoint_path, decode_hparams=(
        decode_hparams + (f",{args.decode_hparams}" if args.decode_hparams else "")))
    return sources, decoder
