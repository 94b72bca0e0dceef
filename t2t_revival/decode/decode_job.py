"""`DecodeJob`: one t2t-decoder job, its settings resolved once, and its run.

    job = DecodeJob.of_files(output_dir, checkpoint_paths, settings,
                             from_file="test.en", to_file=None, reference="test.de",
                             prog="t2t-decoder", log=log)
    job.translate_file(translator)            # -> the translations, journaled
    job.score(translator.run_problem, ...)    # the problem's metric

The door (t2t-decoder's `main`) parses `--decode_hparams` once and resolves
it with the run's hparams.json into one frozen `DecodeHParams`; the job holds
it and every part below reads it from here, the engine included (no second
resolution). What a job does with the files: tensor2tensor's shards,
delimiter and num_samples; the guided inputs (prefix, constraints) split off
each line and refused lines reported; each batch journaled as it is decoded
(`DecodeJournal`: a rerun continues); the lines cut to max_length reported;
alignments and their heatmap written beside the output.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Sequence

from t2t_revival.decode.translator import Translator
from t2t_revival.data.language_tokens import (check_language_tokens, language_token,
                                               lines_by_language)
from t2t_revival.errors import UserError
from t2t_revival.files.text_lines import read_text_lines, write_text_lines
from t2t_revival.settings.decode_hparams import DecodeHParams

Log = Callable[[str], None]


def check_modes(score_file: str | None, from_file: str | None, interactive: bool,
                to_file: str | None, reference: str | None) -> None:
    """t2t-decoder's modes' flags go together (before anything is read or loaded)."""
    if score_file and (from_file or interactive or reference):
        raise UserError("--score_file scores given pairs; it does not go with "
                        "--decode_from_file, --decode_interactive or --decode_reference. "
                        f"Received: score_file={score_file!r}")
    if not from_file and not interactive and not score_file:
        raise UserError("pass --decode_from_file=FILE, --decode_interactive or "
                        "--score_file=PAIRS. Received: none of them")
    if to_file and not (from_file or score_file):
        raise UserError("--decode_to_file takes the translations of --decode_from_file "
                        "(or the scores of --score_file); --decode_interactive prints "
                        "to standard output (redirect it to keep them). "
                        f"Received: decode_to_file={to_file!r}")
    if reference and not from_file:
        raise UserError("--decode_reference needs --decode_from_file. "
                        f"Received: decode_reference={reference!r}")


def checkpoint_entries(flag: str | None) -> list[str]:
    """--checkpoint_path's entries (several, comma-separated, are an ensemble);
    an empty entry is a UserError."""
    entries = flag.split(",") if flag is not None else []
    if any(not e.strip() for e in entries):
        raise UserError("--checkpoint_path has an empty entry; give checkpoint prefixes "
                        "separated by commas, e.g. run/ckpt-2000,run/averaged/ckpt-2000. "
                        f"Received: checkpoint_path={flag!r}")
    return [e.strip() for e in entries]


def sharded(path: str | None, settings: DecodeHParams) -> str | None:
    """`path` + the shard's three digits when `shards` > 1 (tensor2tensor's names)."""
    return f"{path}{settings.shard_id:03d}" if path and settings.shards > 1 else path


def read_inputs(path: str, delimiter: str) -> list[str]:
    """The inputs of --decode_from_file: its lines, or, with another
    `delimiter`, its text split on it, each stripped, a last empty one
    dropped (tensor2tensor's _get_sorted_inputs)."""
    lines = read_text_lines(path, "decode_from_file")
    if delimiter == "\n":
        return lines
    inputs = [record.strip() for record in "\n".join(lines).split(delimiter)]
    return inputs[:-1] if inputs and not inputs[-1] else inputs


def guided_inputs(lines: list[str], settings: DecodeHParams
                  ) -> tuple[list[str], dict, dict[int, str]]:
    """(sources, `Translator.translate`'s prefixes/constraints keywords, {index:
    why} of lines refused) of input lines, split on tabs as the decode hparams
    constraints and prefix say (`split_guided_line`); plain lines without them."""
    if not (settings.constraints or settings.prefix):
        return lines, {}, {}
    from t2t_revival.decode.search_guides import split_guided_line

    sources, prefixes, phrases, refused = [], [], [], {}
    for i, line in enumerate(lines):
        try:
            source, prefix, line_phrases = split_guided_line(line, settings.prefix,
                                                             settings.constraints)
        except UserError as e:
            source, prefix, line_phrases, refused[i] = "", "", [], str(e)
        sources.append(source)
        prefixes.append(prefix)
        phrases.append(line_phrases)
    return sources, {"prefixes": prefixes if settings.prefix else None,
                     "constraints": phrases if settings.constraints else None}, refused


@dataclasses.dataclass(frozen=True)
class DecodeJob:
    """A decoding job: its resolved settings and its inputs.

    Attributes:
        output_dir, checkpoint_paths: the run and the checkpoints to decode.
        settings: the decode settings, resolved once (`DecodeHParams.from_hparams`).
        from_file, to_file: --decode_from_file and --decode_to_file, sharded
            (`sharded`); to_file None: the default name (`default_output`).
        sources, guides, refused: the inputs, their prefixes and constraints
            (`guided_inputs`) and the lines refused ({index: why}).
        references: the reference lines (num_samples applied), or None.
        language_tokens: the target-language tokens of a multilingual run's
            vocabulary (`language_tokens.tokens_of`), one of which starts
            each input line; () for a run of one target language.
        prog, log: the program's name and where lines are said.
    """

    output_dir: str
    checkpoint_paths: tuple[str, ...]
    settings: DecodeHParams
    log: Log
    prog: str = "t2t-decoder"
    from_file: str | None = None
    to_file: str | None = None
    sources: list[str] = dataclasses.field(default_factory=list)
    guides: dict = dataclasses.field(default_factory=dict)
    refused: dict[int, str] = dataclasses.field(default_factory=dict)
    references: list[str] | None = None
    language_tokens: tuple[str, ...] = ()

    def check_languages(self) -> None:
        """A UserError naming the first input line without a known
        target-language token (a multilingual run; before anything is written)."""
        check_language_tokens(self.sources, self.language_tokens,
                              f"--decode_from_file {self.from_file}: line")

    @classmethod
    def of_files(cls, output_dir: str, checkpoint_paths: Sequence[str],
                 settings: DecodeHParams, log: Log, prog: str = "t2t-decoder",
                 from_file: str | None = None, to_file: str | None = None,
                 reference: str | None = None) -> "DecodeJob":
        """The job of these files: the inputs read, sharded, cut to
        num_samples and split (`guided_inputs`); the references read and
        checked to align with them."""
        from_file, to_file = sharded(from_file, settings), sharded(to_file, settings)
        sources = read_inputs(from_file, settings.delimiter) if from_file else []
        references = read_text_lines(reference, "decode_reference") if reference else None
        if settings.num_samples >= 0:
            sources = sources[:settings.num_samples]
            references = references and references[:settings.num_samples]
        sources, guides, refused = guided_inputs(sources, settings)
        if references is not None and len(references) != len(sources):
            raise UserError(f"--decode_reference has {len(references)} lines but "
                            f"--decode_from_file has {len(sources)}; they must align. "
                            f"Received: decode_reference={reference!r}")
        return cls(output_dir, tuple(checkpoint_paths), settings, log, prog, from_file,
                   to_file, sources, guides, refused, references)

    def default_output(self, run_record) -> str:
        """tensor2tensor's name: <from_file>.<model>.<hparams_set>.<search>.decodes."""
        dhp = self.settings
        search = (f"sample.temp{dhp.temperature}.top_k{dhp.top_k}.top_p{dhp.top_p}"
                  f".seed{dhp.seed}") if dhp.sampling else f"beam{dhp.beam_size}.alpha{dhp.alpha}"
        return (f"{self.from_file}.{run_record.model}.{run_record.hparams_set or 'hparams'}"
                f".{search}.decodes")

    def report_skipped(self, skipped: dict[int, str]) -> None:
        """Each skipped line (index: why) with its number, then the count."""
        for i in sorted(skipped):
            self.log(f"{self.prog}: line {i + 1} skipped (an empty output): {skipped[i]}")
        if skipped:
            self.log(f"{self.prog}: skipped {len(skipped)} of {len(self.sources)} lines "
                     "whose prefix or constraints cannot be met; their outputs are empty lines")

    def report_cut(self, translator: Translator, total: int) -> None:
        """Say how many inputs were longer than max_length and cut (if any)."""
        if translator.cut_inputs:
            from t2t_revival.decode.decode_length import cut_lines_report
            self.log(cut_lines_report(translator.cut_inputs, total, translator.max_length))

    def translate_file(self, translator: Translator, out_path: str, progress=None,
                       compiling=None, on_first_batch=None) -> list[str]:
        """Translate the sources into out_path (each ended by the delimiter),
        each batch written as it is decoded to out_path.partial
        (`DecodeJournal`): a rerun continues from it. The lines refused or
        skipped (their prefix or constraints) are reported with their
        numbers; so is the count of lines cut."""
        from t2t_revival.decode.decode_journal import DecodeJournal
        from t2t_revival.run_dir.checkpoint_files import checkpoint_digest

        self.report_skipped(self.refused)
        sources, guides = self.sources, self.guides
        # Each checkpoint's contents, not only its path: one rewritten in place
        # (t2t-avg-checkpoints) starts the journal afresh.
        digests = [checkpoint_digest(path) or "" for path in
                   translator.checkpoint_path.split(",")]
        journal = DecodeJournal(out_path, sources, {
            "checkpoint": translator.checkpoint_path, "decode_hparams": str(self.settings),
            **({"guides": guides} if guides else {})},
            checkpoint=hashlib.sha256(",".join(digests).encode()).hexdigest()
            if any(digests) else "")
        if journal.resume(self.log):
            self.log(f"Continuing from {journal.path}: {len(journal.done)} of {len(sources)} "
                     f"lines decoded before")
        remaining = [i for i in range(len(sources)) if i not in journal.done]
        first_batch = [on_first_batch] if on_first_batch else []

        def on_batch(chunk, outputs):
            journal.add([remaining[i] for i in chunk], outputs)
            if first_batch:
                first_batch.pop()()

        if remaining:
            translator.translate([sources[i] for i in remaining], progress=progress,
                                 compiling=compiling, on_batch=on_batch,
                                 **{key: None if values is None else [values[i] for i in remaining]
                                    for key, values in guides.items()})
            self.report_skipped({remaining[i]: why for i, why in translator.skipped.items()})
        translations = [journal.done.get(i, "") for i in range(len(sources))]
        journal.finish(translations, self.settings.delimiter)
        if self.settings.log_results:
            for source, translation in zip(sources, translations):
                self.log(f"INPUT: {source}\nOUTPUT: {translation}")
        self.log(f"Wrote {len(translations)} translations to {out_path}")
        self.report_cut(translator, len(sources))
        return translations

    def score(self, problem_name: str, translations: Sequence[str], out_path: str,
              language: str, as_json: bool) -> str:
        """The metric of the run's problem (`problem_name`; the base Problem,
        BLEU, when it is missing or not registered) of the best translations
        against the references (its extra outputs written beside out_path),
        formatted; a multilingual run's (`language_tokens`) with the figure
        of each target language's lines after the whole file's
        (`>>de<< (500 lines) sacreBLEU ...`; JSON: under "languages")."""
        from t2t_revival import registry
        from t2t_revival.data.problem import Problem

        problem = registry.problems.get(problem_name)() if problem_name in registry.problems \
            else Problem()
        best = [t.split("\t", 1)[0] for t in translations]
        scored = problem.score_predictions(best, self.references, self.sources,
                                           language=language)
        for suffix, lines in scored.outputs.items():
            path = f"{out_path}.{suffix}"
            write_text_lines(path, lines)
            self.log(f"Wrote {len(lines)} {suffix} to {path}")
        groups = lines_by_language(self.sources, self.language_tokens)
        if not groups:
            return scored.format(as_json)
        # A multilingual run's file: the figure of each target language too,
        # each scored on its own lines (its Moses language for the tokenized BLEU).
        from t2t_revival.metrics.bleu import moses_language

        each = {code: problem.score_predictions(
                    [best[i] for i in indices], [self.references[i] for i in indices],
                    [self.sources[i] for i in indices], language=moses_language(code))
                for code, indices in groups.items()}
        if as_json:
            import json

            return json.dumps({**json.loads(scored.json_text), "languages": {
                code: {"lines": len(groups[code]), **json.loads(pair.json_text)}
                for code, pair in each.items()}}, indent=2)
        return "\n".join([scored.text] + [
            f"{language_token(code)} ({len(groups[code])} line"
            f"{'s' if len(groups[code]) > 1 else ''}) {line}"
            for code, pair in each.items() for line in pair.text.splitlines()])

    def aligner(self, translator: Translator):
        """alignments=true: the `WordAligner` (its settings, the heatmap's line
        and matplotlib checked now, not after decoding); else None."""
        dhp = self.settings
        if not dhp.alignments:
            return None
        from t2t_revival.decode.alignment_heatmap import check_matplotlib
        from t2t_revival.decode.word_alignment import WordAligner

        aligner = WordAligner(translator)
        if dhp.alignment_heatmap:
            if not self.from_file or dhp.alignment_heatmap > len(self.sources):
                raise UserError(f"decode hparam 'alignment_heatmap' names input line "
                                f"{dhp.alignment_heatmap} of --decode_from_file, which has "
                                f"{len(self.sources)}. Received: alignment_heatmap="
                                f"{dhp.alignment_heatmap}")
            check_matplotlib()
        return aligner

    def write_alignments(self, aligner, translations: list[str], out_path: str,
                         progress=None) -> None:
        """<out_path>.align, one Pharaoh line per translation line; with
        alignment_heatmap=N, input line N's heatmap beside it."""
        from t2t_revival.decode.alignment_heatmap import heatmap_path, write_heatmap

        sources = self.sources
        self.log("Aligning the translations")
        lines = aligner.align_lines(sources, translations, progress=progress)
        write_text_lines(f"{out_path}.align", lines)
        self.log(f"Wrote {len(lines)} alignments to {out_path}.align")
        line = self.settings.alignment_heatmap
        if line:
            source, output = sources[line - 1], translations[line - 1].split("\t")[0]
            if not source.split() or not output.split():
                self.log(f"Input line {line} or its output is empty: no heatmap drawn")
                return
            path = heatmap_path(out_path, line)
            write_heatmap(path, aligner.matrices([source], [output])[0], source.split(),
                          output.split())
            self.log(f"Drew input line {line}'s word attention to {path}")

    def interactive(self, translator: Translator, typed, say: Callable[[str], None],
                    report: Callable[[str], None], aligner=None, compiling=None) -> None:
        """Translate each typed line (bytes) and `say` its translation (with
        alignments: a tab, then its alignment); a bad line (not UTF-8, a
        prefix or constraints that cannot be met) is `report`ed and the
        session goes on."""
        for number, raw in enumerate(typed, start=1):
            try:
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as e:
                    raise UserError(f"input line {number} is not valid UTF-8 ({e.reason} at "
                                    f"byte {e.start}); type it again in UTF-8. "
                                    f"Received: {raw[:60]!r}") from None
                lines, guides, refused = guided_inputs([line], self.settings)
                if refused:
                    raise UserError(refused[0])
                check_language_tokens(lines, self.language_tokens, "input line", number)
                output = translator.translate(lines, compiling=compiling, **guides)[0]
                if translator.skipped:
                    raise UserError(f"line {number}: {translator.skipped[0]}")
                if aligner:   # the translation, a tab, its alignment
                    output = f"{output}\t{aligner.align_lines(lines, [output])[0]}"
                say(output)
                self.report_cut(translator, 1)
            except UserError as e:
                report(str(e))
