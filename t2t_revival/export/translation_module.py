"""`TranslationModule`: the `tf.Module` saved as the serving SavedModel.

Everything a TF Serving request needs runs in the graph: tokenization
(SentencePiece through tensorflow-text, or tensor2tensor's SubwordTextEncoder
as tf.strings and tensorflow-text ops: `vocab.tf_tokenizer()`), the encoder,
beam search with the KV cache,
and detokenization. Nothing of this project (and no `py_function`, no XLA) is
needed to load or run it: TensorFlow plus tensorflow-text's ops, which TF
Serving links in.

Signatures:
    serving_default(sentences: tf.string [None])
        -> {"outputs": tf.string [None], "scores": float32 [None]}
    translate_ids(ids: int32 [None, None])   EOS-terminated, 0-padded
        -> {"outputs": int32 [None, None], "scores": float32 [None]}
           (output ids end with EOS, PAD after it)
    translate_with_alignments(sentences: tf.string [None])   only when
        exported with `--decode_hparams alignments=true`
        -> serving_default's outputs and scores, and "alignments": tf.string
           [None], each output's word alignment in Pharaoh format (`0-0 1-2
           ...`, `t2t-decoder`'s `.align` lines; `export/alignment_graph.py`)
    translate_nbest(sentences: tf.string [None], num_hypotheses: int32 [])
        -> {"outputs": tf.string [None, n], "scores": float32 [None, n]}: each
           sentence's n best hypotheses, best first, and their scores (as
           `t2t-decoder --decode_hparams return_beams=true,write_beam_scores=true`
           gives them); n in [1, beam_size], else the request fails
           (InvalidArgument, naming the range). With alignments=true also
           "alignments": tf.string [None, n]. It runs uncompiled, in an --xla
           export too.
    translate_constrained(sentences: tf.string [None], prefixes: tf.string [None],
                          constraints: tf.string [None])
        -> serving_default's outputs; each output starts with its prefix ("":
           none) and contains every phrase of its constraints (tab-separated
           phrases, "": none; empty or blank phrases are ignored, a blank
           prefix is none). One prefix and one constraints string per
           sentence, else the request fails (InvalidArgument). So does one
           whose constraints take more than `max_constraint_tokens` subwords
           in a row, or whose prefix and constraints take more than the row's
           outputs may have before EOS (t2t-decoder's rule: its input length,
           padded, + extra_length), naming the limit. This search runs
           uncompiled, in an --xla export too (its shapes vary with the
           prefixes).

Max decode length: `t2t_revival.decode.decode_length`'s rule, as `Decoder`
uses it: the batch is padded to a multiple of 16 tokens (not past
`max_length`), and beam search decodes at most that padded length +
`extra_length` positions (capped at `max_length` for learned positions): the
same limit as `t2t-decoder` for the same batch. It is a tensor in the graph;
the beam search and the cache preallocate their buffers with it.

With `xla=True` (`t2t-exporter --xla`) the encoder and beam search run as
one XLA-compiled function (`jit_compile=True`), the batch padded to a power
of two rows (copies of its last row) so that a server compiles one program
per (batch bucket, padded length) it meets, on the first request of that
shape. A bucket of `_STAGED_BUCKETS` rows runs a search traced for that
batch size, which drops the batch elements that have stopped (beam search's
stages, as `t2t-decoder` runs); the other buckets share one traced for any
batch size. Either way the first decoding steps run on short self-attention
buffers (beam search's `resize_cache`, the plain export too).
Tokenization, the cut and the padding stay outside it (plain TensorFlow
ops). Such a SavedModel loads anywhere, but runs only where XLA may compile:
TensorFlow in Python does; TF Serving needs
`--xla_cpu_compilation_enabled=true` on CPU.

A multilingual run's model (own data of several target languages,
`language_tokens`) takes each sentence with its target-language token first
(`>>de<< Hello`); a non-empty sentence without a known one fails the request
with InvalidArgument naming the tokens (its vocabulary's
`LanguageTokenTokenizer`), and the server goes on serving.

Input rows with no tokens (an empty or whitespace-only string, or an id row
starting with PAD or EOS) give an empty output (`""` / all PAD) with score 0.
Inputs longer than `max_length` tokens (EOS included) are cut to
`max_length` (the last kept token replaced by EOS), where `t2t-decoder`
refuses them: a server should not fail a whole batch for one long line.
"""

from __future__ import annotations

import tensorflow as tf

from t2t_revival.decode import decode_length
from t2t_revival.decode.beam_search import beam_search
from t2t_revival.decode.word_alignment import check_alignment_settings
from t2t_revival.decode.search_guides import search_arguments
from t2t_revival.decode.decode_length import batch_bucket, cut_to_max_length, padded_length
from t2t_revival.run_dir.checkpoint_variables import model_variables
from t2t_revival.special_ids import EOS_ID, PAD_ID
from t2t_revival.files.text_lines import FIELD_BREAKS

# The batch buckets (rows) that the XLA export traces a search of their own
# for, so that it runs in beam search's stages of halving size (a batch
# element that has stopped is dropped from the steps): from 8 rows up (4 and
# fewer run one loop anyway). Each is one more search in the SavedModel's
# graph (about 10 s of export on a 2-core CPU) and, on its first request,
# one more compile; other buckets share the search traced for any number of
# rows.
_STAGED_BUCKETS = (8, 16, 32, 64)


class TranslationModule(tf.Module):
    """A trained model, its vocabulary's in-graph tokenizer and its decode settings.

    Args:
        model: the restored `Transformer` (built, weights loaded).
        hparams: its `HParams` (max_length, position_encoding).
        decode_hparams: `DecodeHParams` (beam_size, alpha, extra_length, early_stop).
        vocab: its vocabulary (`load_vocabulary`'s), whose `tf_tokenizer()`
            (the source side) and `tf_target_tokenizer()` (prefixes,
            constraints, the outputs; the same one where the sides share
            it) the module holds.
        xla: compile the encoder and beam search with XLA (see the module doc).
    """

    def __init__(self, model, hparams, decode_hparams, vocab, xla: bool = False):
        super().__init__(name="t2t_translation")
        self._model = model
        # Keras 3 does not expose layers kept in Python lists to tf.train's
        # object graph; track every weight explicitly so the SavedModel holds them.
        self._weights = model_variables(model)
        self._tokenizer = vocab.tf_tokenizer()
        self._target_tokenizer = vocab.tf_target_tokenizer(self._tokenizer)
        self._max_length = int(hparams.max_length)
        self._position_limit = decode_length.position_limit(hparams.position_encoding,
                                                            hparams.max_length)
        self._beam_size = int(decode_hparams.beam_size)
        self._alpha = float(decode_hparams.alpha)
        self._penalty = str(decode_hparams.length_penalty)
        self._extra_length = int(decode_hparams.extra_length)
        self._early_stop = str(decode_hparams.early_stop)
        self._max_constraint_tokens = int(decode_hparams.max_constraint_tokens)
        self._xla = bool(xla)
        self._alignment = (check_alignment_settings(
            decode_hparams.alignment_layer, decode_hparams.alignment_heads,
            hparams.decoder_layers, hparams.num_heads),
            decode_hparams.alignment_heads) if decode_hparams.alignments else None
        """(layer, heads) of `translate_with_alignments`, None without it."""
        if self._alignment is not None:
            # An attribute only where asked for: tf.saved_model.save traces
            # (and saves) every tf.function of the module with a signature.
            self.translate_with_alignments = tf.function(
                self._translate_with_alignments, autograph=False,
                input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        if self._xla:
            self._compiled_beam_search = tf.function(
                self._beam_search, jit_compile=True, autograph=False)

    # ------------------------------------------------------------------
    def _search(self, ids, guides=None, beams: bool = False):
        """ids int32 [B, S] (EOS-terminated, 0-padded) -> (ids [B, L], scores [B]),
        with `beams` every beam's: (ids [B, k, L], scores [B, k]), uncompiled.
        guides: None, or the rows' prefix and constraints (`_guides`)."""
        ids = tf.cast(ids, tf.int32)
        batch = tf.shape(ids)[0]
        length = tf.shape(ids)[1]
        empty = tf.cond(tf.equal(length, 0), lambda: tf.ones([batch], tf.bool),
                        lambda: tf.logical_or(tf.equal(ids[:, 0], PAD_ID),
                                              tf.equal(ids[:, 0], EOS_ID)))
        # Rows with no tokens decode a lone EOS (well-defined), masked below.
        ids = tf.pad(ids, [[0, 0], [0, 1]])
        first = tf.one_hot(0, tf.shape(ids)[1], on_value=EOS_ID, off_value=PAD_ID,
                           dtype=tf.int32)                                     # [S+1]
        ids = tf.where(empty[:, None], first[None, :], ids)
        ids, length = cut_to_max_length(ids, self._max_length, PAD_ID, EOS_ID)
        padded = padded_length(length, self._max_length)
        ids = tf.pad(ids, [[0, 0], [0, padded - length]])
        if self._xla and guides is None and not beams:
            # A power-of-two batch: rows past the last are copies of it (a
            # lone EOS row stands in for an empty batch).
            ids = tf.concat([ids, tf.one_hot([0], padded, on_value=EOS_ID,
                                             off_value=PAD_ID, dtype=tf.int32)], axis=0)
            bucket = batch_bucket(tf.maximum(batch, 1))
            rows = tf.minimum(tf.range(bucket), tf.maximum(batch - 1, 0))
            sequences, scores = self._compiled_search_of_bucket(tf.gather(ids, rows), bucket)
            sequences, scores = sequences[:batch], scores[:batch]
        else:
            sequences, scores = self._beam_search(ids, guides, beams)
        rows = tf.reshape(empty, [-1] + [1] * (len(scores.shape) - 1))      # [B(, 1)]
        sequences = tf.where(rows[..., None], tf.zeros_like(sequences), sequences)
        scores = tf.where(rows, tf.zeros_like(scores), scores)
        return sequences, scores

    def _compiled_search_of_bucket(self, ids, bucket):
        """ids int32 [bucket, S] -> the XLA search's (ids [bucket, L], scores [bucket]).

        A bucket of `_STAGED_BUCKETS` runs a search traced for that many rows
        (a Python int: beam search's stages of halving size), any other one
        the search traced for any number of rows (one loop).
        """
        def static(rows):
            return lambda: self._compiled_beam_search(tf.ensure_shape(ids, [rows, None]))

        staged = tf.constant(_STAGED_BUCKETS, tf.int32)
        branch = tf.reduce_sum(tf.cast(staged < bucket, tf.int32))
        branch = tf.where(tf.reduce_any(tf.equal(staged, bucket)), branch, len(_STAGED_BUCKETS))
        return tf.switch_case(branch, [static(rows) for rows in _STAGED_BUCKETS],
                              default=lambda: self._compiled_beam_search(ids))

    def _beam_search(self, ids, guides=None, beams: bool = False):
        """ids int32 [B, S], S already padded -> (ids [B, L], scores [B]), with
        `beams` (ids [B, k, L], scores [B, k]).

        Every length here follows from the shape of `ids`, so under XLA it is
        a compile-time constant. B is a Python int where `ids` has a static
        batch size (`_compiled_search_of_bucket`).
        """
        max_decode_length = decode_length.max_decode_length(
            tf.shape(ids)[1], self._extra_length, self._position_limit)
        encoder_output, encoder_padding = self._model.encode(ids, training=False)
        cache = self._model.init_cache(encoder_output, encoder_padding, max_decode_length)
        batch = ids.shape[0] if ids.shape[0] is not None else tf.shape(ids)[0]
        return beam_search(
            self._model.decode_step, cache, batch, beam_size=self._beam_size,
            alpha=self._alpha, penalty=self._penalty, max_decode_length=max_decode_length,
            return_beams=beams,
            early_stop=self._early_stop, resize_cache=self._model.resize_cache,
            **search_arguments(guides))

    def _guides(self, prefixes, constraints, lengths) -> dict:
        """`SearchGuides.tensors`'s of tf.string [B] prefixes and tab-joined
        phrases, for inputs of `lengths` int32 [B] tokens (EOS included; 0:
        blank), with the decoder's rules (`SearchGuides`): a blank prefix or
        phrase is none; a row whose constraints take more than
        `max_constraint_tokens` subwords, or whose prefix and constraints
        take more than its outputs may have before EOS, fails the request
        (InvalidArgument, naming the row and the limit)."""
        blank = lambda text: tf.where(tf.equal(tf.strings.strip(text), ""), "", text)  # noqa: E731
        prefix = self._target_tokenizer.tokenize(blank(prefixes))              # [B, (p)]
        phrases = tf.strings.split(constraints, "\t")                          # [B, (p)]
        tokens = self._target_tokenizer.tokenize(blank(phrases.flat_values))   # [P, (t)]
        first = tf.equal(tf.ragged.range(tokens.row_lengths()), 0)
        ids = phrases.with_values(tokens).merge_dims(1, 2)                      # [B, (c)]
        starts = phrases.with_values(first).merge_dims(1, 2)
        width = self._max_constraint_tokens
        taken = tf.cast(ids.row_lengths(), tf.int32)                            # [B]
        guided = tf.cast(prefix.row_lengths(), tf.int32) + taken
        rows = tf.cast(tf.range(tf.shape(lengths)[0]), tf.int32)
        # The decoder's limit of each input alone (`Decoder.translate`'s
        # `refuse_unmet`), not of the padded batch it lands in.
        room = decode_length.max_decode_length(
            padded_length(tf.minimum(lengths, self._max_length), self._max_length),
            self._extra_length, self._position_limit) - 1
        over = tf.logical_and(lengths > 0, guided > room)
        checks = [
            tf.debugging.Assert(tf.reduce_all(taken <= width), [
                f"a row's constraints take more than max_constraint_tokens={width} "
                "subwords (the export's --decode_hparams); send fewer phrases. Row, tokens:",
                tf.argmax(taken), tf.reduce_max(taken)]),
            tf.debugging.Assert(tf.logical_not(tf.reduce_any(over)), [
                "a row's prefix and constraints take more subword tokens than its outputs "
                "may have before EOS (its input length + the export's extra_length); "
                "shorten them. Row, tokens, most:",
                tf.argmax(tf.cast(over, tf.int32)), tf.reduce_max(tf.where(over, guided, 0)),
                tf.reduce_max(tf.where(over, room, 0))])]
        with tf.control_dependencies(checks):
            batch = tf.shape(constraints)[0]
            # At least one column: a batch of no prefixes is all PAD.
            prefix = tf.pad(prefix.to_tensor(default_value=PAD_ID), [[0, 0], [0, 1]])
            return {"prefix": tf.cast(prefix, tf.int32),
                    "constraint_ids": tf.cast(ids.to_tensor(PAD_ID, shape=[batch, width]),
                                              tf.int32),
                    "constraint_starts": starts.to_tensor(False, shape=[batch, width])}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="ids")],
                 autograph=False)
    def translate_ids(self, ids):
        """int32 [B, S] EOS-terminated, 0-padded ids -> output ids and scores."""
        sequences, scores = self._search(ids)
        return {"outputs": sequences, "scores": scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
                 autograph=False)
    def serve(self, sentences):
        """tf.string [B] sentences -> translations tf.string [B] and scores float32 [B]."""
        text, scores, _, _ = self._translate(sentences)
        return {"outputs": text, "scores": scores}

    def _translate_with_alignments(self, sentences):
        """`serve`'s outputs and scores, and each one's Pharaoh word alignment
        (the `translate_with_alignments` signature, with alignments=true)."""
        text, scores, tokens, sequences = self._translate(sentences)
        return {"outputs": text, "scores": scores,
                "alignments": self._alignments(tokens, sequences, sentences, text)}

    def _alignments(self, tokens, sequences, sentences, text):
        """tf.string [R] Pharaoh lines of rows of (input tokens, output ids,
        source line, output line) (`alignment_graph.graph_alignments`)."""
        from t2t_revival.export.alignment_graph import graph_alignments

        inputs, _ = cut_to_max_length(tf.pad(tokens, [[0, 0], [0, 1]]), self._max_length,
                                      PAD_ID, EOS_ID)
        layer, heads = self._alignment
        return graph_alignments(self._model, layer, heads, (self._tokenizer,
                                                            self._target_tokenizer),
                                inputs, sequences, sentences, text)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences"),
                                  tf.TensorSpec([], tf.int32, name="num_hypotheses")],
                 autograph=False)
    def translate_nbest(self, sentences, num_hypotheses):
        """tf.string [B] sentences -> the n best translations tf.string [B, n]
        and scores float32 [B, n] (and alignments, with alignments=true)."""
        k = self._beam_size
        check = tf.debugging.Assert(
            tf.logical_and(num_hypotheses >= 1, num_hypotheses <= k),
            [f"num_hypotheses must be in [1, {k}] (the export's beam_size); received",
             num_hypotheses])
        with tf.control_dependencies([check]):
            n = tf.identity(num_hypotheses)
        text, scores, tokens, sequences = self._translate(sentences, beams=True)   # [B, k]
        result = {"outputs": text[:, :n], "scores": scores[:, :n]}
        if self._alignment is not None:
            batch = tf.shape(sentences)[0]
            flat = tf.reshape(sequences[:, :n], [batch * n, -1])
            repeat = lambda x: tf.repeat(x, n, axis=0)                          # noqa: E731
            result["alignments"] = tf.reshape(self._alignments(
                repeat(tokens), flat, repeat(sentences), tf.reshape(text[:, :n], [-1])),
                [batch, n])
        return result

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences"),
                                  tf.TensorSpec([None], tf.string, name="prefixes"),
                                  tf.TensorSpec([None], tf.string, name="constraints")],
                 autograph=False)
    def translate_constrained(self, sentences, prefixes, constraints):
        """`serve` with each row's prefix and tab-joined constraint phrases
        (one of each per sentence, else InvalidArgument)."""
        sizes = tf.stack([tf.size(sentences), tf.size(prefixes), tf.size(constraints)])
        check = tf.debugging.Assert(tf.reduce_all(tf.equal(sizes, sizes[0])), [
            "translate_constrained takes one prefix and one constraints string per "
            "sentence (\"\" for none); received sentences, prefixes, constraints:", sizes])
        with tf.control_dependencies([check]):
            sentences = tf.identity(sentences)
        text, scores, _, _ = self._translate(
            sentences, lambda lengths: self._guides(prefixes, constraints, lengths))
        return {"outputs": text, "scores": scores}

    def _translate(self, sentences, guides_of=None, beams: bool = False):
        """tf.string [B] -> (translations tf.string [B], scores float32 [B], the
        EOS-terminated input ids int32 [B, S], the output ids int32 [B, L]);
        with `beams`, every beam's: [B, k] and [B, k, L]. `guides_of`: None,
        or the search's guides of the rows' token counts (`_guides`)."""
        blank = tf.equal(tf.strings.strip(sentences), "")
        # A blank row tokenizes to nothing, so it becomes a lone EOS: empty output.
        tokens = self._tokenizer.tokenize(tf.where(blank, "", sentences))  # [B, (n)]
        lengths = tf.where(blank, 0, tf.cast(tokens.row_lengths(), tf.int32) + 1)   # [B]
        eos = tf.fill([tf.shape(sentences)[0], 1], EOS_ID)
        tokens = tf.concat([tokens, tf.RaggedTensor.from_tensor(eos)], axis=1)
        tokens = tokens.to_tensor(default_value=PAD_ID)
        guides = None if guides_of is None else guides_of(lengths)
        sequences, scores = self._search(tokens, guides, beams)
        flat = tf.reshape(sequences, [-1, tf.shape(sequences)[-1]])             # [B(*k), L]
        # Keep the tokens before the first EOS, drop PAD.
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(flat, EOS_ID), tf.int32),
                                        axis=1), 0)
        keep = tf.logical_and(before_eos, tf.not_equal(flat, PAD_ID))
        text = self._target_tokenizer.detokenize(tf.ragged.boolean_mask(flat, keep))
        # One line each, as t2t-decoder writes them (`text_lines.one_field`).
        text = tf.strings.regex_replace(text, f"[{FIELD_BREAKS}]", " ")
        return tf.reshape(text, tf.shape(scores)), scores, tokens, sequences
