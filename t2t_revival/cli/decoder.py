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

import sys

from absl import flags

from t2t_revival.cli import entry_point, path_flags, tensor2tensor_flags, tensorflow_noise
from t2t_revival.decode.decode_length import AUTO_LITERT_SENTENCES

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
flags.DEFINE_string("decode_hparams", "",
                    '"beam_size=4,alpha=0.6,extra_length=50,batch_size=32,return_beams=false,'
                    'batch_tokens=0,xla=auto,long_inputs=cut" (batch_tokens > 0: batches of '
                    'that many source tokens; xla=auto compiles the search with XLA where a '
                    'job is big enough to repay it, xla=true always, xla=false never; '
                    f'litert=auto decodes a job of up to {AUTO_LITERT_SENTENCES} lines, or '
                    '--decode_interactive, '
                    "on the run's LiteRT programs without TensorFlow (converted once, "
                    'kept in T2T_COMPILE_CACHE), litert=true any job they serve, '
                    'litert=false never; '
                    'long_inputs=refuse: stop at a line longer than max_length; '
                    'parallel_batches=N: N batches at once, a thread each; the default 0 '
                    'decodes 2 at once on a CPU, 4 at batch_size=1, and 1 on a GPU); '
                    'sampling instead of beam search: "sampling=true,temperature=1.0,'
                    'top_k=0,top_p=1.0,samples_per_input=1,seed=1" (top_k 0 and top_p 1.0 keep '
                    'every token; return_beams=true writes all samples_per_input, best first). '
                    'constraints=true: input lines source<TAB>phrase<TAB>... (every output '
                    'contains every phrase; max_constraint_tokens=32 subwords a line); '
                    'prefix=true: lines source<TAB>prefix (outputs start with it). '
                    "tensor2tensor's keys: num_samples=N decodes the first N inputs (-1 all), "
                    'max_input_size, write_beam_scores, delimiter, shards, shard_id, '
                    'log_results. Word alignments: "alignments=true,alignment_layer=-1,'
                    'alignment_heads=max" writes <decode_to_file>.align (Pharaoh '
                    '"0-0 1-2 ...", a line per output; interactive: after a tab), '
                    'alignment_heatmap=N also draws input line N to '
                    '<decode_to_file>.alignN.png.')
flags.DEFINE_string("language", "de", "Target language for the Moses tokenizer of the "
                    "paper-style BLEU.")
flags.DEFINE_bool("json", False, "Print the BLEU figures as one JSON object.")
flags.mark_flag_as_required("output_dir")
tensor2tensor_flags.define(PROG, __name__)


def _sharded(path: str | None, files) -> str | None:
    """`path` + the shard's three digits when `shards` > 1 (tensor2tensor's names)."""
    return f"{path}{files.shard_id:03d}" if path and files.shards > 1 else path


def _read_inputs(path: str, delimiter: str) -> list[str]:
    """The inputs of --decode_from_file: its lines, or, with another
    `delimiter`, its text split on it, each stripped, a last empty one
    dropped (tensor2tensor's _get_sorted_inputs)."""
    from t2t_revival.files.text_lines import read_text_lines

    lines = read_text_lines(path, "decode_from_file")
    if delimiter == "\n":
        return lines
    inputs = [record.strip() for record in "\n".join(lines).split(delimiter)]
    return inputs[:-1] if inputs and not inputs[-1] else inputs


def _default_output(decoder, from_file: str) -> str:
    run, dhp = decoder.run_record, decoder.decode_hparams
    search = (f"sample.temp{dhp.temperature}.top_k{dhp.top_k}.top_p{dhp.top_p}"
              f".seed{dhp.seed}") if dhp.sampling else f"beam{dhp.beam_size}.alpha{dhp.alpha}"
    return (f"{from_file}.{run.model}.{run.hparams_set or 'hparams'}"
            f".{search}.decodes")


def _problem(name: str):
    """The run's registered problem; the base Problem (BLEU) when the name is
    missing or not registered."""
    from t2t_revival import registry
    from t2t_revival.data.problem import Problem

    registry.load_all()
    return registry.problems.get(name)() if name in registry.problems else Problem()


def _score(decoder, predictions, references, sources, out_path) -> None:
    """Print the problem's metric; write its extra outputs beside out_path."""
    from t2t_revival.files.text_lines import write_text_lines

    scored = _problem(decoder.run_record.problem).score_predictions(
        predictions, references, sources, language=FLAGS.language)
    for suffix, lines in scored.outputs.items():
        path = f"{out_path}.{suffix}"
        write_text_lines(path, lines)
        print(f"Wrote {len(lines)} {suffix} to {path}", file=sys.stderr)
    print(scored.format(FLAGS.json))


def _interactive_line(raw: bytes, number: int) -> str:
    """One typed line as text; bytes that are not UTF-8 are a UserError."""
    from t2t_revival.errors import UserError
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise UserError(f"input line {number} is not valid UTF-8 ({e.reason} at byte "
                        f"{e.start}); type it again in UTF-8. "
                        f"Received: {raw[:60]!r}") from None


def _checkpoint_paths() -> list[str]:
    """--checkpoint_path's entries (several, comma-separated, are an ensemble);
    an empty entry is a UserError."""
    from t2t_revival.errors import UserError

    if FLAGS.checkpoint_path is None:
        return []
    entries = FLAGS.checkpoint_path.split(",")
    if any(not e.strip() for e in entries):
        raise UserError("--checkpoint_path has an empty entry; give checkpoint prefixes "
                        "separated by commas, e.g. run/ckpt-2000,run/averaged/ckpt-2000. "
                        f"Received: checkpoint_path={FLAGS.checkpoint_path!r}")
    return [e.strip() for e in entries]


def _score_pairs(overrides) -> int:
    """--score_file: each pair's log-probability and score, in input order."""
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.process.progress_bar import ProgressBar
    from t2t_revival.files.text_lines import read_text_pairs, write_text_lines

    pairs = read_text_pairs(FLAGS.score_file, "score_file")
    decoder = Decoder.load(FLAGS.output_dir, _checkpoint_paths(), overrides)
    print(f"Scoring {len(pairs)} pairs with {decoder.checkpoint_path} "
          f"(alpha={decoder.decode_hparams.alpha})", file=sys.stderr)
    scored = decoder.score(pairs, progress=ProgressBar())
    lines = [f"{log_prob:.6f}\t{score:.6f}" for log_prob, score in scored]
    if FLAGS.decode_to_file:
        write_text_lines(FLAGS.decode_to_file, lines)
        print(f"Wrote {len(lines)} scores to {FLAGS.decode_to_file}", file=sys.stderr)
    else:
        sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def _report_cut(decoder, total: int) -> None:
    """Say how many inputs were longer than max_length and cut (if any)."""
    if decoder.cut_inputs:
        from t2t_revival.decode.decode_length import cut_lines_report
        print(cut_lines_report(decoder.cut_inputs, total, decoder.hparams.max_length),
              file=sys.stderr)


def _guided_inputs(lines: list[str], files) -> tuple[list[str], dict, dict[int, str]]:
    """(sources, `Decoder.translate`'s prefixes/constraints keywords, {index:
    why} of lines refused) of input lines, split on tabs as the decode hparams
    constraints and prefix say (`split_guided_line`); plain lines without them."""
    if not (files.constraints or files.prefix):
        return lines, {}, {}
    from t2t_revival.decode.search_guides import split_guided_line
    from t2t_revival.errors import UserError

    sources, prefixes, phrases, refused = [], [], [], {}
    for i, line in enumerate(lines):
        try:
            source, prefix, line_phrases = split_guided_line(line, files.prefix, files.constraints)
        except UserError as e:
            source, prefix, line_phrases, refused[i] = "", "", [], str(e)
        sources.append(source)
        prefixes.append(prefix)
        phrases.append(line_phrases)
    return sources, {"prefixes": prefixes if files.prefix else None,
                     "constraints": phrases if files.constraints else None}, refused


def _report_skipped(skipped: dict[int, str], total: int) -> None:
    """Each skipped line (index: why) on stderr with its number, then the count."""
    for i in sorted(skipped):
        print(f"{PROG}: line {i + 1} skipped (an empty output): {skipped[i]}", file=sys.stderr)
    if skipped:
        print(f"{PROG}: skipped {len(skipped)} of {total} lines whose prefix or constraints "
              "cannot be met; their outputs are empty lines", file=sys.stderr)


def _translate_file(decoder, sources: list[str], out_path: str,
                    delimiter: str = "\n", guides: dict | None = None) -> list[str]:
    """Translate `sources` into out_path (each ended by `delimiter`), each
    batch written as it is decoded to out_path.partial (`DecodeJournal`): a
    rerun continues from it. guides: `Decoder.translate`'s prefixes and
    constraints keywords, one entry per source; the lines it skips are
    reported with their numbers."""
    from t2t_revival.decode.decode_journal import DecodeJournal
    from t2t_revival.process.progress_bar import ProgressBar
    from t2t_revival.process.phase_times import phase

    journal = DecodeJournal(out_path, sources, {"checkpoint": decoder.checkpoint_path,
                                                "decode_hparams": str(decoder.decode_hparams),
                                                **({"guides": guides} if guides else {})})
    if journal.resume():
        print(f"Continuing from {journal.path}: {len(journal.done)} of {len(sources)} lines "
              f"decoded before", file=sys.stderr)
    remaining = [i for i in range(len(sources)) if i not in journal.done]
    first_batch = [True]

    def on_batch(chunk, outputs):
        journal.add([remaining[i] for i in chunk], outputs)
        if first_batch:
            first_batch.clear()
            phase("first_batch")   # its program's compilation included

    if remaining:
        bar = ProgressBar()
        decoder.translate([sources[i] for i in remaining], progress=bar,
                          compiling=bar.compiling, on_batch=on_batch,
                          **{key: None if values is None else [values[i] for i in remaining]
                             for key, values in (guides or {}).items()})
        _report_skipped({remaining[i]: why for i, why in decoder.skipped.items()},
                        len(sources))
    translations = [journal.done.get(i, "") for i in range(len(sources))]
    journal.finish(translations, delimiter)
    return translations


def _aligner(decoder, sources: list[str]):
    """alignments=true: the `WordAligner` (its settings, the heatmap's line
    and matplotlib checked now, not after decoding); else None."""
    dhp = decoder.decode_hparams
    if not dhp.alignments:
        return None
    from t2t_revival.decode.alignment_heatmap import check_matplotlib
    from t2t_revival.decode.word_alignment import WordAligner
    from t2t_revival.errors import UserError

    aligner = WordAligner(decoder)
    if dhp.alignment_heatmap:
        if not FLAGS.decode_from_file or dhp.alignment_heatmap > len(sources):
            raise UserError(f"decode hparam 'alignment_heatmap' names input line "
                            f"{dhp.alignment_heatmap} of --decode_from_file, which has "
                            f"{len(sources)}. Received: alignment_heatmap="
                            f"{dhp.alignment_heatmap}")
        check_matplotlib()
    return aligner


def _write_alignments(aligner, sources: list[str], translations: list[str],
                      out_path: str) -> None:
    """<out_path>.align, one Pharaoh line per translation line; with
    alignment_heatmap=N, input line N's heatmap beside it."""
    from t2t_revival.decode.alignment_heatmap import heatmap_path, write_heatmap
    from t2t_revival.process.progress_bar import ProgressBar
    from t2t_revival.files.text_lines import write_text_lines

    print("Aligning the translations", file=sys.stderr)
    lines = aligner.align_lines(sources, translations, progress=ProgressBar())
    write_text_lines(f"{out_path}.align", lines)
    print(f"Wrote {len(lines)} alignments to {out_path}.align", file=sys.stderr)
    line = aligner.decoder.decode_hparams.alignment_heatmap
    if line:
        source, output = sources[line - 1], translations[line - 1].split("\t")[0]
        if not source.split() or not output.split():
            print(f"Input line {line} or its output is empty: no heatmap drawn",
                  file=sys.stderr)
            return
        path = heatmap_path(out_path, line)
        write_heatmap(path, aligner.matrices([source], [output])[0], source.split(),
                      output.split())
        print(f"Drew input line {line}'s word attention to {path}", file=sys.stderr)


def _litert_decoder(settings, sentences: int):
    """The `LiteRTDecoder` of this job (`litert` in the decode hparams), or
    None: the TensorFlow `Decoder` decodes it. Keras takes its numpy backend
    (the LiteRT path's beam search), so TensorFlow is never imported."""
    import os

    from t2t_revival.export.litert_decoder import LiteRTDecoder
    from t2t_revival.process.phase_times import phase

    found = LiteRTDecoder.programs_for_job(
        PROG, FLAGS.output_dir, _checkpoint_paths(), settings, sentences,
        interactive=FLAGS.decode_interactive, usr_dir=FLAGS.t2t_usr_dir)
    if found is None:
        return None
    programs, checkpoint = found
    phase("checked")
    if "keras" not in sys.modules:   # (a caller's Keras keeps its backend)
        os.environ["KERAS_BACKEND"] = "numpy"
    with tensorflow_noise.quiet_native_stderr():   # LiteRT's XNNPACK line
        decoder = LiteRTDecoder(programs, settings, FLAGS.output_dir, checkpoint)
    phase("imported")
    return decoder


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(PROG)
    path_flags.check_directory("output_dir", FLAGS.output_dir)
    tensor2tensor_flags.check_run_flags(FLAGS.output_dir)
    path_flags.import_usr_dir(FLAGS.output_dir)
    if FLAGS.decode_to_file:
        path_flags.check_output_file("decode_to_file", FLAGS.decode_to_file)
    # Every check of the flags, names and files comes before the imports of
    # TensorFlow and Keras (seconds): a mistake is reported at once.
    from t2t_revival.errors import UserError
    from t2t_revival.files.text_lines import read_text_lines

    if FLAGS.score_file and (FLAGS.decode_from_file or FLAGS.decode_interactive
                             or FLAGS.decode_reference):
        raise UserError("--score_file scores given pairs; it does not go with "
                        "--decode_from_file, --decode_interactive or --decode_reference. "
                        f"Received: score_file={FLAGS.score_file!r}")
    if not FLAGS.decode_from_file and not FLAGS.decode_interactive and not FLAGS.score_file:
        raise UserError("pass --decode_from_file=FILE, --decode_interactive or "
                        "--score_file=PAIRS. Received: none of them")
    if FLAGS.decode_to_file and not (FLAGS.decode_from_file or FLAGS.score_file):
        raise UserError("--decode_to_file takes the translations of --decode_from_file "
                        "(or the scores of --score_file); --decode_interactive prints "
                        "to standard output (redirect it to keep them). "
                        f"Received: decode_to_file={FLAGS.decode_to_file!r}")
    if FLAGS.decode_reference and not FLAGS.decode_from_file:
        raise UserError("--decode_reference needs --decode_from_file. "
                        f"Received: decode_reference={FLAGS.decode_reference!r}")
    # Cheap checks first: the decode hparams (parsed once, here), the training
    # directory, the files.
    from t2t_revival.settings.decode_hparams import DecodeHParams, parse_decode_hparams
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    overrides = parse_decode_hparams(FLAGS.decode_hparams)
    hparams = TrainingDirectory(FLAGS.output_dir).read_hparams()
    if FLAGS.score_file:
        return _score_pairs(overrides)
    # tensor2tensor's file keys: shards, delimiter, num_samples.
    files = DecodeHParams(**overrides)
    from_file, to_file = _sharded(FLAGS.decode_from_file, files), _sharded(FLAGS.decode_to_file,
                                                                          files)
    sources = _read_inputs(from_file, files.delimiter) if from_file else []
    if files.num_samples >= 0:
        sources = sources[:files.num_samples]
    sources, guides, refused = _guided_inputs(sources, files)
    references = read_text_lines(FLAGS.decode_reference, "decode_reference") \
        if FLAGS.decode_reference else None
    if references is not None and files.num_samples >= 0:
        references = references[:files.num_samples]
    if references is not None:
        from t2t_revival.metrics.bleu import check_language
        check_language(FLAGS.language)  # now, not after decoding
    if references is not None and len(references) != len(sources):
        raise UserError(f"--decode_reference has {len(references)} lines but "
                        f"--decode_from_file has {len(sources)}; they must align. "
                        f"Received: decode_reference={FLAGS.decode_reference!r}")
    from t2t_revival.process.progress_bar import ProgressBar
    from t2t_revival.process.phase_times import phase
    settings = DecodeHParams.from_hparams(hparams, overrides)
    decoder = _litert_decoder(settings, len(sources))
    if decoder is None:
        from t2t_revival.process.xla_compile_cache import XlaCompileCache
        XlaCompileCache.for_process(PROG)   # before the first compile
        phase("checked")
        from t2t_revival.decode.decoder import Decoder
        from t2t_revival.decode.search_memory import check_decode_fits
        phase("imported")
        check_decode_fits(hparams, settings, max(len(sources), 1))   # before the model loads
        decoder = Decoder.load(FLAGS.output_dir, _checkpoint_paths(), overrides)
    engine = f" on its LiteRT programs ({decoder.programs})" if hasattr(decoder, "programs") \
        else ""
    print(f"Decoding with {decoder.checkpoint_path}{engine} ({decoder.decode_hparams})",
          file=sys.stderr)
    aligner = _aligner(decoder, sources)

    if FLAGS.decode_from_file:
        out_path = to_file or _default_output(decoder, from_file)
        path_flags.check_output_file("decode_to_file", out_path)  # before decoding, not after
        _report_skipped(refused, len(sources))
        translations = _translate_file(decoder, sources, out_path, files.delimiter, guides)
        if files.log_results:
            for source, translation in zip(sources, translations):
                print(f"INPUT: {source}\nOUTPUT: {translation}", file=sys.stderr)
        print(f"Wrote {len(translations)} translations to {out_path}", file=sys.stderr)
        _report_cut(decoder, len(sources))
        if aligner:
            _write_alignments(aligner, sources, translations, out_path)
        if references is not None:
            best = [t.split("\t", 1)[0] for t in translations]
            _score(decoder, best, references, sources, out_path)
    if FLAGS.decode_interactive:
        print("Type a sentence and press Enter (Ctrl-D to quit).", file=sys.stderr)
        for number, raw in enumerate(sys.stdin.buffer, start=1):
            try:
                line = _interactive_line(raw, number)
                lines, guides, refused = _guided_inputs([line], files)
                if refused:
                    raise UserError(refused[0])
                output = decoder.translate(lines, compiling=ProgressBar().compiling, **guides)[0]
                if decoder.skipped:
                    raise UserError(f"line {number}: {decoder.skipped[0]}")
                if aligner:   # the translation, a tab, its alignment
                    output = f"{output}	{aligner.align_lines(lines, [output])[0]}"
                print(output, flush=True)
                _report_cut(decoder, 1)
            except UserError as e:  # a bad line is reported; the session goes on
                entry_point.report(PROG, str(e))
    return 0


def run() -> None:
    entry_point.run(main, prog=PROG)


if __name__ == "__main__":
    run()
