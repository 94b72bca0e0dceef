"""Translating text with a CTranslate2 export (`t2t-exporter --format=ctranslate2`).

    translator = CTranslate2Translator("t2t_train/tiny/export/ctranslate2/300",
                                       compute_type="int8")
    translator.translate(["A man is riding a bike."])

Imports ctranslate2 and sentencepiece only (no TensorFlow), so a server that
serves the export needs neither TensorFlow nor Keras. The export's vocabulary
is SentencePiece's `vocab.model` or tensor2tensor's `vocab.subwords`
(`vocabulary_file.load_vocabulary`; pure Python).

Decoding follows `t2t-decoder` as closely as CTranslate2 allows:
- the beam settings (beam_size, alpha, extra_length, batch_size) come from the
  export's t2t_export.json, i.e. from hparams.json and the exporter's
  --decode_hparams;
- sentences are sorted by length and decoded `batch_size` at a time, with
  max_decoding_length = the batch's longest input (EOS included) padded to a
  multiple of 16, plus extra_length: the same order, batches and limit as
  `Decoder` (`t2t_revival.decode.decode_length`, which imports no TensorFlow);
- ranking: CTranslate2 normalizes a hypothesis's log-prob by
  length ** length_penalty, tensor2tensor by GNMT's ((5 + length) / 6) ** alpha
  with EOS counted in the length. We ask CTranslate2 for its `beam_size`
  finished hypotheses (EOS included), recover each log-prob from its score,
  and pick the best by the GNMT penalty.

What can still differ from `t2t-decoder` is the search itself: CTranslate2
finishes a hypothesis only when its EOS extension ranks among the top
`beam_size` of the 2 * beam_size candidates of a step, and stops once
`beam_size` hypotheses finished; tensor2tensor's beam search takes EOS
extensions from all 2 * beam_size candidates and goes on until no live
hypothesis can beat the best finished one. So t2t-decoder now and then finds
a shorter, better-scoring translation that CTranslate2 never considered.
"""

from __future__ import annotations

from typing import Callable, Sequence

from t2t_revival.decode import decode_length
from t2t_revival.settings.decode_choices import CPU_PARALLEL_BATCHES
from t2t_revival.decode.export_settings import newest_version, read_export_settings
from t2t_revival.decode.translator import OnBatch, Progress, Translator
from t2t_revival.errors import UserError
from t2t_revival.files.text_lines import one_field
from t2t_revival.settings.decode_choices import check_long_inputs
from t2t_revival.process.usable_cores import usable_cores
from t2t_revival.settings.setting_ranges import out_of_range
from t2t_revival.special_ids import EOS_ID, PAD_ID

# How to install the optional ctranslate2 package: the extra of the clone
# (`pip install "t2t-revival[ctranslate2]"` would fetch the project itself from
# the registry), or the package alone.
INSTALL_HINT = ('python -m pip install -e ".[ctranslate2]" from the clone\'s root '
                '(or pip install "ctranslate2>=4.5,<5")')


def thread_setting(intra_threads: int, inter_threads: int, on_gpu: bool,
                   cores: int) -> tuple[int, int]:
    """(intra_threads, inter_threads) with their defaults (0) made numbers.

    On a GPU: inter_threads 1, intra_threads as given (0: CTranslate2's own
    default). On a CPU of `cores` cores: inter_threads `CPU_PARALLEL_BATCHES`,
    or fewer where the given intra_threads leave too few cores (never more
    threads than cores); intra_threads the cores shared among them.
    An explicit value is kept.
    """
    if on_gpu:
        return intra_threads, inter_threads or 1
    if not inter_threads:
        free = cores // intra_threads if intra_threads else cores
        inter_threads = max(1, min(CPU_PARALLEL_BATCHES, free))
    if not intra_threads:
        intra_threads = max(1, cores // inter_threads)
    return intra_threads, inter_threads


class CTranslate2Translator(Translator):
    """Beam-search translation with a CTranslate2 export directory (a
    `Translator`: prefixes, no constraints).

    Args:
        export_dir: a version directory written by `export_ctranslate2`
            (model.bin, vocab.model or vocab.subwords, t2t_export.json), or the folder of versions
            above it (`output_dir/export/ctranslate2`): then the highest version,
            as TF Serving picks from its model base path.
        device: "cpu", "cuda" or "auto".
        compute_type: CTranslate2's compute type ("default" = as stored,
            "int8", "int8_float32", "float32", "float16", ...).
        intra_threads: threads per translation; 0 (the default): on a CPU,
            the cores shared among the inter_threads (`thread_setting`), on a
            GPU CTranslate2's own default.
        inter_threads: translations run in parallel: `translate` decodes
            that many batches at once (`decode_in_length_order`'s
            parallel_batches); 0 (the default): on a CPU
            `CPU_PARALLEL_BATCHES` (2) if the cores allow one thread each,
            on a GPU 1. On the 2-core machine the default (2 x 1 thread)
            translated 1.3-1.5x faster than CTranslate2's own (1 x 2) at
            batch 32 and 1.2-1.7x at batch 1 (benchmarks/RESULTS.md).
        beam_size, alpha, extra_length, batch_size: overrides of the export's
            settings (None keeps them).
        long_inputs: "cut" (the default) cuts a sentence longer than the
            model's max_length to it, as `t2t-decoder` and the SavedModel do
            (`cut_inputs` counts them after each `translate`); "refuse" raises
            a UserError naming it.

    Attributes:
        export_dir: the version directory read.
        settings: its decode settings, with the overrides.
        intra_threads, inter_threads: the threads used, after the defaults.
        translator: the `ctranslate2.Translator` (`num_translators` of them
            run at once: inter_threads).
    """

    engine = "CTranslate2"
    serves = frozenset({"prefixes"})

    def __init__(self, export_dir: str, device: str = "cpu", compute_type: str = "default",
                 intra_threads: int = 0, inter_threads: int = 0,
                 beam_size: int | None = None, alpha: float | None = None,
                 extra_length: int | None = None, batch_size: int | None = None,
                 long_inputs: str = "cut"):
        overrides = {"beam_size": beam_size, "alpha": alpha, "extra_length": extra_length,
                     "batch_size": batch_size}
        for name, value in overrides.items():
            problem = value is not None and out_of_range(name, value)
            if problem:
                raise UserError(f"CTranslate2Translator: {problem}")
        for name, value in (("intra_threads", intra_threads), ("inter_threads", inter_threads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(f"CTranslate2Translator: {name} must be an integer >= 0 "
                                f"(0: the default). Received: {name}={value!r}")
        self.long_inputs = check_long_inputs(
            long_inputs, "CTranslate2Translator: long_inputs")
        self.skipped: dict[int, str] = {}
        try:
            import ctranslate2

            from t2t_revival.data.vocabulary_file import load_vocabulary, vocabulary_in
        except ImportError as e:
            raise UserError(f"translating with a CTranslate2 export needs the optional "
                            f"ctranslate2 package ({e}); install it with {INSTALL_HINT}. "
                            f"Received: export_dir={export_dir!r}") from None
        export_dir = newest_version(export_dir)
        on_gpu = device == "cuda" or (device == "auto" and ctranslate2.get_cuda_device_count() > 0)
        # The threads used (after the defaults): per translation, and translations at once.
        self.intra_threads, self.inter_threads = thread_setting(
            intra_threads, inter_threads, on_gpu, usable_cores())
        self.settings = read_export_settings(export_dir, "ctranslate2")
        self.settings.update({k: v for k, v in overrides.items() if v is not None})
        self.export_dir = export_dir
        self.max_length = int(self.settings["max_input_length"])
        self.checkpoint_path = self.settings.get("checkpoint", export_dir)
        self.vocab = load_vocabulary(vocabulary_in(export_dir))
        """The export's vocabulary (`SubwordVocabulary` or `T2TSubwordVocabulary`)."""
        self._eos_piece = self.vocab.id_to_piece(EOS_ID)
        try:
            self.translator = ctranslate2.Translator(
                export_dir, device=device, compute_type=compute_type,
                intra_threads=self.intra_threads, inter_threads=self.inter_threads)
        except (RuntimeError, ValueError) as e:
            raise UserError(f"CTranslate2 cannot load {export_dir} on {device} with "
                            f"compute_type {compute_type} ({e}). "
                            f"Received: compute_type={compute_type!r}") from None

    @property
    def beam_size(self) -> int:
        return int(self.settings["beam_size"])

    @property
    def alpha(self) -> float:
        return float(self.settings["alpha"])

    def _penalty(self, length: int) -> float:
        """The export's length penalty of `length` tokens, as
        `beam_search.length_penalty`: ((5 + length) / 6) ** alpha (GNMT), or
        length ** alpha (`length_penalty=power`, CTranslate2's own)."""
        if self.settings.get("length_penalty", "gnmt") == "power":
            return float(length) ** self.alpha
        return ((5.0 + length) / 6.0) ** self.alpha

    def _max_decode_length(self, longest_input: int) -> int:
        max_length = int(self.settings["max_input_length"])
        limit = decode_length.max_decode_length(
            decode_length.padded_length(longest_input, max_length),
            int(self.settings["extra_length"]),
            decode_length.position_limit(self.settings["position_encoding"], max_length))
        # The export's position table holds the longest decode of its own
        # extra_length; a larger extra_length given here stops there.
        return min(limit, int(self.settings["max_decode_length"]))

    def translate_pieces(self, pieces: Sequence[Sequence[str]],
                         prefixes: Sequence[Sequence[str]] | None = None
                         ) -> list[tuple[list[str], float]]:
        """Best hypothesis (pieces, without EOS) and its score, for one
        batch (`nbest_pieces`' first)."""
        return [hypotheses[0] for hypotheses in self.nbest_pieces(pieces, prefixes)]

    def nbest_pieces(self, pieces: Sequence[Sequence[str]],
                     prefixes: Sequence[Sequence[str]] | None = None
                     ) -> list[list[tuple[list[str], float]]]:
        """Every finished hypothesis (pieces, without EOS) and its score (the
        export's length penalty: `_penalty`),
        best first, `beam_size` of each sentence of one batch.

        Args:
            pieces: the vocabulary's pieces of each source sentence, without EOS
                (the model appends it), none empty.
            prefixes: None, or each sentence's target prefix as pieces
                (CTranslate2's `target_prefix`; [] none): the hypotheses
                start with it.
        """
        longest = max(len(p) for p in pieces) + 1  # + EOS
        beam = self.beam_size
        prefix = None if prefixes is None or not any(prefixes) else \
            [list(p) or None for p in prefixes]
        banned = None if self.settings.get("emit_pad", True) else \
            [[self.vocab.id_to_piece(PAD_ID)]]   # PAD never chosen (emit_pad=false)
        results = self.translator.translate_batch(
            [list(p) for p in pieces], target_prefix=prefix, beam_size=beam, num_hypotheses=beam,
            length_penalty=self.alpha, return_scores=True, return_end_token=True,
            max_input_length=0, max_decoding_length=self._max_decode_length(longest),
            suppress_sequences=banned, patience=float(self.settings.get("patience", 1)))
        ranked = []
        for result in results:
            candidates = []
            for hypothesis, score in zip(result.hypotheses, result.scores):
                length = len(hypothesis)  # EOS included, unless cut at the limit
                log_prob = score * length ** self.alpha
                if hypothesis and hypothesis[-1] == self._eos_piece:
                    hypothesis = hypothesis[:-1]
                candidates.append((hypothesis, log_prob / self._penalty(length)))
            # Stable: of equal scores, CTranslate2's order.
            ranked.append(sorted(candidates, key=lambda c: -c[1]))
        return ranked

    def translate_nbest(self, sentences: Sequence[str], num_hypotheses: int,
                        progress: Progress | None = None,
                        prefixes: Sequence[str] | None = None
                        ) -> list[list[tuple[str, float]]]:
        """The `num_hypotheses` best translations of each sentence and their
        scores, best first (the SavedModel's `translate_nbest`, t2t-decoder's
        return_beams=true,write_beam_scores=true): in [1, beam_size], else a
        UserError. A blank sentence gives empty translations scored 0.

            translator.translate_nbest(["A dog runs."], 2)
            # [[("Ein Hund läuft.", -1.93), ("Ein Hund rennt.", -2.41)]]
        """
        beam = self.beam_size
        if isinstance(num_hypotheses, bool) or not isinstance(num_hypotheses, int) \
                or not 1 <= num_hypotheses <= beam:
            raise UserError(f"num_hypotheses must be in [1, {beam}] (the beam size). "
                            f"Received: num_hypotheses={num_hypotheses!r}")
        encoded, prefix_pieces = self._pieces(sentences, prefixes)
        lists: list[list[tuple[str, float]]] = [[("", 0.0)] * num_hypotheses] * len(encoded)

        def decode_batch(chunk: list[int]) -> list[str]:
            ranked = self.nbest_pieces([encoded[i] for i in chunk], None if prefix_pieces is None
                                       else [prefix_pieces[i] for i in chunk])
            for i, hypotheses in zip(chunk, ranked):
                lists[i] = [(one_field(self.vocab.decode_pieces(h)), score)
                            for h, score in hypotheses[:num_hypotheses]]
            return ["" for _ in chunk]

        decode_length.decode_in_length_order(
            [len(p) + 1 if p else 0 for p in encoded], int(self.settings["batch_size"]),
            decode_batch, progress, parallel_batches=self.inter_threads)
        return lists

    def describe(self) -> str:
        return f"{self.checkpoint_path} on the CTranslate2 export {self.export_dir}"

    def _pieces(self, sentences: Sequence[str], prefixes: Sequence[str] | None):
        """(each sentence's pieces by the input rule, without EOS: the model
        appends it; each prefix's pieces, [] for none, or None)."""
        encoded = [pieces[:-1] for pieces in self.fit(
            sentences, self.vocab.encode_pieces, self._eos_piece, self.long_inputs)]
        return encoded, None if prefixes is None else [
            self.vocab.encode_target_pieces(p) if p.strip() else [] for p in prefixes]

    def translate(self, sentences: Sequence[str], progress: Progress | None = None,
                  compiling: Callable[[int], None] | None = None,
                  on_batch: OnBatch | None = None, prefixes: Sequence[str] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[str]:
        """`Translator.translate`, in `Decoder.translate`'s order and batches.
        prefixes: None, or each sentence's target prefix ("" none), which its
        translation starts with (CTranslate2's `target_prefix`). CTranslate2
        has no hard lexical constraints (refused): `Decoder` and the
        SavedModel serve them."""
        self.refuse(constraints=constraints)
        encoded, prefix_pieces = self._pieces(sentences, prefixes)

        def decode_batch(chunk: list[int]) -> list[str]:
            return [one_field(self.vocab.decode_pieces(hypothesis)) for hypothesis, _ in
                    self.translate_pieces([encoded[i] for i in chunk], None if prefix_pieces
                                          is None else [prefix_pieces[i] for i in chunk])]

        # The same order and batches as `Decoder.translate`; an empty
        # sentence (no pieces) is never decoded: an empty output.
        return decode_length.decode_in_length_order(
            [len(p) + 1 if p else 0 for p in encoded], int(self.settings["batch_size"]),
            decode_batch, progress, parallel_batches=self.inter_threads, on_batch=on_batch)
