"""`t2t-decoder`: translate with a trained model, score BLEU or given pairs.

Modes: beam search (the default; `return_beams=true` writes the n-best
list), sampling (`--decode_hparams "sampling=true,top_p=0.9,seed=7"`),
ensembles (`--checkpoint_path=a,b`: the mean of the models' probabilities at
every step) and scoring (`--score_file=pairs.tsv`: each `source<TAB>target`
line's log-probability and length-penalized score by forced decoding).

`--decode_reference` is scored with the run's problem's `eval_metric`: BLEU
for translation. For a parsing problem (e.g. parsing_english_ptb_sample) it
takes the linearized gold targets written by t2t-datagen
(`<problem>-test.target.txt`, sources in `<problem>-test.source.txt`) and
reports EVALB labelled bracketing precision/recall/F1; the predicted trees,
repaired where malformed, are also written bracketed to
`<decode_to_file>.trees`.

    t2t-decoder --output_dir=t2t_train/tiny \\
        --decode_from_file=test.en --decode_to_file=test.hyp.de \\
        --decode_reference=test.de --decode_hparams="beam_size=4,alpha=0.6"

Constraints and prefixes (beam search): with `--decode_hparams
constraints=true` each input line is `source<TAB>phrase<TAB>phrase...` and
every output contains every phrase; with `prefix=true` it is
`source<TAB>prefix` and every output starts with the prefix (both:
`source<TAB>prefix<TAB>phrase...`). A line whose phrases or prefix cannot
be met (an empty phrase, more than max_constraint_tokens subwords, longer
than its outputs may be) is skipped: its output is an empty line, and each
is reported on stderr with its line number, then counted.

Reads hparams.json, run.json, vocab.model and the latest checkpoint (or
--checkpoint_path) from --output_dir: no training flag is needed again.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from t2t_revival.cli import entry_point, path_flags, tensor2tensor_flags, tensorflow_noise
from t2t_revival.settings.decode_hparams import decode_hparams_help

FLAGS = flags.FLAGS
PROG = "t2t-decoder"

path_flags.define_usr_dir_flag(__name__)
path_flags.define_path("output_dir", None, "The training directory (hparams.json, checkpoints).")
path_flags.define_path("checkpoint_path", None,
                       "A checkpoint prefix to decode with (default: the latest in output_dir), "
                       "e.g. output_dir/averaged/ckpt-N from t2t-avg-checkpoints, or a folder "
                       "of checkpoints such as output_dir/best (the trainer's best by dev "
                       "BLEU): its latest. Several, "
                       "comma-separated (prefixes, or directories for their latest), decode "
                       "as an ensemble: at each step the log of the mean of the models' "
                       "probabilities. They must share output_dir's vocabulary file contents "
                       "and vocab_size; each model is built from the hparams.json of its "
                       "own training directory.",
                       comma_separated=True)
path_flags.define_path("decode_from_file", None, "Source sentences, one a line (.gz too).")
path_flags.define_path("decode_to_file", None,
                       "Where to write translations (default: <decode_from_file>"
                       ".<model>.<hparams_set>.beam<N>.alpha<A>.decodes, as tensor2tensor).")
path_flags.define_path("decode_reference", None,
                       "Reference translations: report sacreBLEU and the paper's tokenized BLEU.")
flags.DEFINE_bool("decode_interactive", False, "Translate lines typed on standard input.")
path_flags.define_path("score_file", None,
                       "Score pairs instead of translating: a file (.gz too) of "
                       "source<TAB>target lines; prints, for each line in order, "
                       "'<log_prob><TAB><score>' (score = log_prob / ((5 + length) / 6) ** "
                       "alpha, length counting EOS: beam search's score of that output) to "
                       "stdout, or to --decode_to_file. An empty line, a line without "
                       "exactly one tab or a non-UTF-8 line stops it with one error line.")
flags.DEFINE_string("decode_hparams", "", decode_hparams_help())
flags.DEFINE_string("language", "de", "Target language for the Moses tokenizer of the "
                    "paper-style BLEU.")
flags.DEFINE_bool("json", False, "Print the BLEU figures as one JSON object.")
flags.DEFINE_integer("worker_gpu", 0,
                     "Decode on the first N visible GPUs (0 = all; CUDA_VISIBLE_DEVICES "
                     "chooses and orders them): one copy of the model each, fed batches as "
                     "each frees up. The outputs are those of one device, in input order; a "
                     "GPU that runs out of memory is said and left, the others go on.",
                     lower_bound=0)
flags.DEFINE_integer("cpu_devices", 0,
                     "Split the CPU into N logical devices and decode on each as on N GPUs "
                     "(the trainer's flag; tests the several-device path without GPUs, no "
                     "faster on one machine's cores). 0 or 1: the CPU as one device.",
                     lower_bound=0)
flags.mark_flag_as_required("output_dir")
tensor2tensor_flags.define(PROG, __name__)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _checkpoint_paths() -> list[str]:
    from t2t_revival.decode.decode_job import checkpoint_entries
    return checkpoint_entries(FLAGS.checkpoint_path)


def _score_pairs(settings) -> int:
    """--score_file: each pair's log-probability and score, in input order."""
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.files.text_lines import read_text_pairs, write_text_lines
    from t2t_revival.process.progress_bar import ProgressBar

    pairs = read_text_pairs(FLAGS.score_file, "score_file")
    decoder = Decoder.load(FLAGS.output_dir, _checkpoint_paths(), settings)
    _log(f"Scoring {len(pairs)} pairs with {decoder.checkpoint_path} (alpha={settings.alpha})")
    lines = [f"{log_prob:.6f}\t{score:.6f}"
             for log_prob, score in decoder.score(pairs, progress=ProgressBar())]
    if FLAGS.decode_to_file:
        write_text_lines(FLAGS.decode_to_file, lines)
        _log(f"Wrote {len(lines)} scores to {FLAGS.decode_to_file}")
    else:
        sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def _litert_translator(job, choice, cache, again: bool = False):
    """The `LiteRTTranslator` of `choice`'s programs; None when they do not
    load (a cache entry that passes its manifest but is not a valid
    Flatbuffer): the entry is said and removed (`LiteRTProgramCache.discard`).
    Programs converted anew that do not load either: said, and None (then
    TensorFlow decodes)."""
    from t2t_revival.errors import UserError

    backend = os.environ.get("KERAS_BACKEND")
    if "keras" not in sys.modules:   # (a caller's Keras keeps its backend)
        os.environ["KERAS_BACKEND"] = "numpy"
    from t2t_revival.decode.litert_translator import LiteRTTranslator
    try:
        with tensorflow_noise.quiet_native_stderr():   # LiteRT's XNNPACK line
            return LiteRTTranslator(choice.programs, long_inputs=job.settings.long_inputs,
                                    checkpoint_path=choice.checkpoint, run_programs=True)
    except (ValueError, UserError) as e:
        if "keras" not in sys.modules:   # TensorFlow may decode: its backend back
            os.environ.pop("KERAS_BACKEND", None)
            if backend is not None:
                os.environ["KERAS_BACKEND"] = backend
        problem = f"its programs do not load: {str(e).rstrip('.')}"
        if again:
            _log(f"{PROG}: could not load the LiteRT programs {choice.programs} "
                 f"({problem}); decoding with TensorFlow")
        cache.discard(choice.programs, problem, say=not again)
        return None


def _translator(job, hparams):
    """The job's engine (`EngineChoice`): the run's LiteRT programs, with
    Keras's numpy backend and no TensorFlow imported, or the TensorFlow
    `Decoder` (XLA's compile cache set up first), the memory checked first
    for both (before the model loads or a conversion starts). Devices
    asked for (--worker_gpu, --cpu_devices) decode with TensorFlow."""
    import dataclasses

    from t2t_revival.decode.engine_choice import EngineChoice
    from t2t_revival.decode.litert_program_cache import LiteRTProgramCache
    from t2t_revival.decode.search_memory import check_decode_fits
    from t2t_revival.process.phase_times import phase

    # Before either engine: a beam that cannot fit is refused before a LiteRT
    # conversion starts (beam_size=100000000 ran it out of memory first).
    check_decode_fits(hparams, job.settings, max(len(job.sources), 1))
    settings = job.settings
    if FLAGS.worker_gpu or FLAGS.cpu_devices > 1:
        if settings.litert == "true":
            from t2t_revival.errors import UserError
            raise UserError("decode hparam litert=true decodes with one LiteRT program on "
                            "the CPU, not on the devices of --worker_gpu or --cpu_devices; "
                            "give one of them. Received: litert=true, worker_gpu="
                            f"{FLAGS.worker_gpu}, cpu_devices={FLAGS.cpu_devices}")
        settings = dataclasses.replace(settings, litert="false")
    cache = LiteRTProgramCache.from_environment(PROG, _log)
    choice = EngineChoice.for_job(
        job.output_dir, job.checkpoint_paths, settings, len(job.sources), cache, _log,
        FLAGS.decode_interactive, FLAGS.t2t_usr_dir)
    phase("checked")
    if choice.engine == "litert":
        translator = _litert_translator(job, choice, cache)
        if translator is None:   # the programs do not load: converted anew
            choice = EngineChoice.for_job(
                job.output_dir, [choice.checkpoint], settings, len(job.sources), cache,
                _log, FLAGS.decode_interactive, FLAGS.t2t_usr_dir)
            translator = _litert_translator(job, choice, cache, again=True) \
                if choice.engine == "litert" else None
        if translator is not None:
            phase("imported")
            return translator
    from t2t_revival.process.xla_compile_cache import XlaCompileCache
    # Named to TensorFlow before anything starts its devices (which reads
    # TF_XLA_FLAGS once): kept for the process.
    XlaCompileCache.open(PROG, log=_log)
    from t2t_revival.process.logical_devices import decode_devices
    devices = decode_devices(FLAGS.worker_gpu, FLAGS.cpu_devices)   # before TF starts them
    from t2t_revival.decode.decoder import Decoder
    phase("imported")
    paths = [choice.checkpoint] if choice.checkpoint else job.checkpoint_paths
    return Decoder.load(job.output_dir, paths, job.settings, devices)


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(PROG)
    path_flags.check_directory("output_dir", FLAGS.output_dir)
    tensor2tensor_flags.check_run_flags(FLAGS.output_dir)
    path_flags.import_usr_dir(FLAGS.output_dir)
    if FLAGS.decode_to_file:
        path_flags.check_output_file("decode_to_file", FLAGS.decode_to_file)
    # Every check of the flags, names and files comes before the imports of
    # TensorFlow and Keras (seconds): a mistake is reported at once. The
    # decode settings are resolved here, once, and passed down.
    from t2t_revival.decode.decode_job import check_modes
    check_modes(FLAGS.score_file, FLAGS.decode_from_file, FLAGS.decode_interactive,
                FLAGS.decode_to_file, FLAGS.decode_reference)
    from t2t_revival.decode.decode_job import DecodeJob
    from t2t_revival.process.progress_bar import ProgressBar
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    from t2t_revival.settings.decode_hparams import DecodeHParams, parse_decode_hparams

    directory = TrainingDirectory(FLAGS.output_dir)
    hparams = directory.read_hparams()
    settings = DecodeHParams.from_hparams(hparams, parse_decode_hparams(FLAGS.decode_hparams))
    if FLAGS.score_file:
        return _score_pairs(settings)
    job = DecodeJob.of_files(FLAGS.output_dir, _checkpoint_paths(), settings, _log, PROG,
                             FLAGS.decode_from_file, FLAGS.decode_to_file,
                             FLAGS.decode_reference)
    import dataclasses

    from t2t_revival.data.language_tokens import tokens_of
    job = dataclasses.replace(job, language_tokens=tokens_of(
        directory.vocabulary(directory.read_run_record())))
    job.check_languages()   # a multilingual run's: before the model loads
    if job.references is not None:
        from t2t_revival.metrics.bleu import check_language
        check_language(FLAGS.language)  # now, not after decoding
    translator = _translator(job, hparams)
    _log(f"Decoding with {translator.describe()} ({settings})")
    aligner = job.aligner(translator)
    if FLAGS.decode_from_file:
        from t2t_revival.process.phase_times import phase
        out_path = job.to_file or job.default_output(directory.read_run_record())
        path_flags.check_output_file("decode_to_file", out_path)  # before decoding, not after
        bar = ProgressBar()
        translations = job.translate_file(translator, out_path, bar, bar.compiling,
                                          lambda: phase("first_batch"))
        if aligner:
            job.write_alignments(aligner, translations, out_path, ProgressBar())
        if job.references is not None:
            print(job.score(directory.read_run_record().problem, translations, out_path,
                            FLAGS.language, FLAGS.json))
    if FLAGS.decode_interactive:
        _log("Type a sentence and press Enter (Ctrl-D to quit).")
        job.interactive(translator, sys.stdin.buffer, lambda line: print(line, flush=True),
                        lambda message: entry_point.report(PROG, message), aligner,
                        lambda programs: ProgressBar().compiling(programs))
    return 0


def run() -> None:
    entry_point.run(main, prog=PROG)


if __name__ == "__main__":
    run()
