"""`RunInsights`: what one trained run does with one sentence, for T2T Insights.

    run = RunInsights("base", "t2t_train/base")
    result = run.query("A man is riding a bike.", QueryForm(beam_size="8"))

A query runs the run's `Decoder` (the same settings checks, input rule and
search as t2t-decoder) on the one sentence, its search traced once per
settings (a tf.function) with beam search's choice observer handing each
step's choice to the query's `BeamGraph` (`tf.numpy_function`); then one
teacher-forced pass of the model over (source, best output) returns every
layer's attention weights, as the layers computed them (`Transformer.encode`
and `decode` with `return_attention=True`), and `WordAligner` gives the
word alignment t2t-decoder prints with alignments=true. The result is the
JSON of docs/insights.md's API.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Sequence

import numpy as np

from t2t_revival.decode.decode_length import max_decode_length, padded_length, position_limit
from t2t_revival.decode.decoder import Decoder, output_lines
from t2t_revival.decode.search_guides import SearchGuides
from t2t_revival.decode.word_alignment import WordAligner, piece_words
from t2t_revival.errors import UserError
from t2t_revival.insights.beam_graph import CHOICE_FIELDS, BeamGraph
from t2t_revival.insights.query_form import QueryForm, query_settings
from t2t_revival.models.trained_model import TrainedModel
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.special_ids import EOS_ID, PAD_ID

MAX_SENTENCE_CHARACTERS = 5000
"""A query's longest sentence in characters (its tokens are checked against
the run's max_length too)."""

# The decoders of this many settings are kept per run (each holds traced functions).
_DECODERS_KEPT = 8


class RunInsights:
    """One run served by the insights server.

    Args:
        label: its name on the page and in the API.
        output_dir: the training directory (ours, `t2t-import`ed, ...).
        source_language, target_language: language codes for the page ("" :
            from the problem's name, as translate_ende_*).
        decode_hparams: the run's decode settings over its hparams (`k=v,...`).
        checkpoint_path: the checkpoint (a prefix, or a folder such as
            `output_dir/averaged`); default the run's newest intact one.
    """

    def __init__(self, label: str, output_dir: str, source_language: str = "",
                 target_language: str = "", decode_hparams: str = "",
                 checkpoint_path: str | None = None):
        self.label, self.output_dir = label, output_dir
        self.trained = TrainedModel.load(TrainingDirectory(output_dir), checkpoint_path or None)
        self.defaults = decode_hparams
        self.settings = query_settings(self.trained.hparams, decode_hparams, QueryForm())
        languages = re.match(r"translate_([a-z]{2})([a-z]{2})_", self.trained.run_record.problem)
        self.source_language = source_language or (languages.group(1) if languages else "")
        self.target_language = target_language or (languages.group(2) if languages else "")
        self._decoders: dict[DecodeHParams, tuple[Decoder, WordAligner, Any]] = {}
        self._lock = threading.Lock()   # one query of a run at a time: its decoders are shared
        self._graph: BeamGraph | None = None   # the running query's (under the lock)

    def describe(self) -> dict:
        """The run as GET /api/runs lists it."""
        hp, record, dhp = self.trained.hparams, self.trained.run_record, self.settings
        return {"label": self.label, "output_dir": self.output_dir,
                "source_language": self.source_language,
                "target_language": self.target_language, "problem": record.problem,
                "model": record.model, "hparams_set": record.hparams_set,
                "checkpoint": self.trained.checkpoint_path,
                "vocabulary": self.trained.vocab.kind,
                "layers": {"encoder": hp.encoder_layers, "decoder": hp.decoder_layers},
                "heads": hp.num_heads, "max_length": hp.max_length,
                "settings": {"beam_size": dhp.beam_size, "alpha": dhp.alpha,
                             "extra_length": dhp.extra_length, "early_stop": dhp.early_stop}}

    def _decoder(self, settings: DecodeHParams) -> tuple[Decoder, WordAligner, Any]:
        """The decoder of `settings`, its aligner and its observed search
        ((inputs [1, S], max_decode_length, guides) -> the search's outputs,
        each step's choice going to `self._graph`), made once."""
        import tensorflow as tf

        if settings not in self._decoders:
            if len(self._decoders) >= _DECODERS_KEPT:
                self._decoders.pop(next(iter(self._decoders)))
            decoder = Decoder(self.trained, settings)
            names = ("index",) + CHOICE_FIELDS

            def keep(*values) -> np.int32:
                self._graph.observe(dict(zip(names, values)))
                return np.int32(0)

            def observe(choice) -> None:   # runs at every step of the traced loop
                tf.numpy_function(keep, [choice[name] for name in names], tf.int32,
                                  stateful=True)

            search = tf.function(
                lambda inputs, limit, guides: decoder.search_batch(
                    inputs, limit, guides=guides, on_choice=observe),
                autograph=False, reduce_retracing=True)
            self._decoders[settings] = (decoder, WordAligner(decoder), search)
        return self._decoders[settings]

    def query(self, sentence: str, form: QueryForm = QueryForm()) -> dict:
        """The page's view of `sentence` (see the module docstring); a
        UserError (one line) for what the run cannot answer."""
        start = time.perf_counter()
        check_sentence(sentence)
        settings = query_settings(self.trained.hparams, self.defaults, form)
        with self._lock:
            decoder, aligner, search = self._decoder(settings)
            result = self._search(decoder, search, sentence, form)
            result["alignment"] = alignment_links(aligner.align([sentence],
                                                                [result["translation"]])[0])
        result["seconds"] = round(time.perf_counter() - start, 4)
        return result

    def _search(self, decoder: Decoder, search, sentence: str, form: QueryForm) -> dict:
        """Translation, n-best list, beam graph, tokens and attention of `sentence`."""
        import tensorflow as tf

        hp, dhp, vocab = self.trained.hparams, decoder.decode_hparams, self.trained.vocab
        ids = decoder.encode([sentence])[0]   # the input rule: refused when too long
        length = padded_length(len(ids), hp.max_length)
        limit = max_decode_length(length, dhp.extra_length,
                                  position_limit(hp.position_encoding, hp.max_length))
        guides = SearchGuides.of_inputs(vocab, dhp, [form.prefix] if form.prefix.strip() else None,
                                        [list(form.constraints)] if form.constraints else None)
        extra = None
        if guides:
            unmet = guides.refuse_unmet([list(ids)], lambda n: limit)
            if unmet:
                raise UserError(f"the prefix or constraints cannot be met: {unmet[0]}")
            extra = guides.tensors([0], limit)
        graph = self._graph = BeamGraph(dhp.beam_size, dhp.alpha, penalty=dhp.length_penalty)
        inputs = tf.constant([ids + [PAD_ID] * (length - len(ids))], tf.int32)
        sequences, scores = search(inputs, tf.constant(limit, tf.int32), extra)
        sequences, scores = np.asarray(sequences)[0], np.asarray(scores)[0]   # [k, L], [k]
        drawn = graph.build(limit, sequences, scores, lambda token: piece_of(vocab, token))
        texts = output_lines(vocab, sequences[None], scores[None], dhp)[0].split("\t")
        ends = {n["rank"]: n for n in drawn["nodes"] if n["rank"] is not None}
        nbest = [{"rank": rank, "text": texts[rank], "score": float(scores[rank]),
                  "log_prob": ends[rank]["log_prob"], "node": ends[rank]["id"]}
                 for rank in sorted(ends)]
        target = _ended(sequences[0])
        attention = self._attention(ids, target)
        return {
            "run": self.label, "sentence": sentence, "translation": texts[0], "nbest": nbest,
            "settings": {"beam_size": dhp.beam_size, "alpha": dhp.alpha,
                         "extra_length": dhp.extra_length, "early_stop": dhp.early_stop,
                         "max_decode_length": int(limit), "prefix": form.prefix,
                         "constraints": list(form.constraints)},
            "source": tokens_view(vocab, sentence, ids),
            "target": {**tokens_view(vocab, texts[0], target),
                       "decoder_inputs": ["<start>"] + [piece_of(vocab, i)
                                                        for i in target[:-1]]},
            "beam_graph": {name: drawn[name] for name in ("beam_size", "steps", "stopped",
                                                          "nodes")},
            "history": drawn["history"], "attention": attention}

    def _attention(self, source: list[int], target: list[int]) -> dict:
        """{"encoder", "decoder", "cross"}: [layer][head][row][column] weights
        of the teacher-forced pass over (source, target), 7 decimals."""
        import tensorflow as tf

        model = self.trained.model
        encoder_output, padding, encoder = model.encode(tf.constant([source], tf.int32),
                                                        return_attention=True)
        _, weights = model.decode(tf.constant([target], tf.int32), encoder_output, padding,
                                  return_attention=True)
        return {name: np.round(np.asarray(value, np.float64)[0], 7).tolist()
                for name, value in (("encoder", encoder), ("decoder", weights["decoder"]),
                                    ("cross", weights["cross"]))}


def check_sentence(sentence: str) -> None:
    """A UserError for a sentence the page cannot query: empty, several lines,
    or over `MAX_SENTENCE_CHARACTERS`."""
    if not sentence.strip():
        raise UserError("the sentence is empty; type a sentence to translate")
    if len(sentence) > MAX_SENTENCE_CHARACTERS:
        raise UserError(f"the sentence has {len(sentence)} characters; a query takes at most "
                        f"{MAX_SENTENCE_CHARACTERS}")
    if len(sentence.splitlines()) > 1:
        raise UserError(f"a query is one sentence, on one line; the text has "
                        f"{len(sentence.splitlines())} lines")


def _ended(sequence: Sequence[int]) -> list[int]:
    """A returned beam's tokens up to and including EOS (all, for a cut one)."""
    tokens = [int(t) for t in sequence]
    return tokens[:tokens.index(EOS_ID) + 1] if EOS_ID in tokens else \
        [t for t in tokens if t != PAD_ID] or [EOS_ID]


def piece_of(vocab, token: int) -> str:
    """The vocabulary's piece of `token`; `<unused N>` for an id past its
    pieces (the model's vocabulary may be padded to a multiple)."""
    token = int(token)
    return vocab.id_to_piece(token) if 0 <= token < vocab.vocab_size else f"<unused {token}>"


def tokens_view(vocab, text: str, ids: Sequence[int]) -> dict:
    """{"text", "ids", "pieces", "words", "piece_words"} of ids ending in EOS
    (piece_words: each piece's whitespace word of `text`, -1 for EOS)."""
    words = text.split()
    body = [i for i in ids if i != EOS_ID]
    return {"text": text, "ids": [int(i) for i in ids],
            "pieces": [piece_of(vocab, i) for i in ids], "words": words,
            "piece_words": piece_words(vocab, body, len(words)) + [-1] * (len(ids) - len(body))}


def alignment_links(pharaoh: str) -> dict:
    """{"pharaoh": the line, "links": [[source word, target word], ...]}."""
    return {"pharaoh": pharaoh,
            "links": [[int(s), int(t)] for s, t in (link.split("-") for link in pharaoh.split())]}
