"""`SubwordVocabulary`: one SentencePiece BPE model shared by source and target."""

from __future__ import annotations

import io
import os
import random
import re
import threading
from typing import Iterable, Sequence

import numpy as np
import sentencepiece as spm

from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.data.data_error import DataError
from t2t_revival.data.language_tokens import is_language_token, split_language_token
from t2t_revival.data.shared_sides import SharedSides
from t2t_revival.run_dir.file_names import VOCAB_FILE
from t2t_revival.special_ids import EOS_ID, PAD_ID, UNK_ID


class SubwordVocabulary(SharedSides):
    """A shared source/target subword vocabulary backed by a SentencePiece model.

    Ids follow the project contract: PAD = 0, EOS = 1, UNK = 2, no BOS. The
    model is BPE with `byte_fallback` (a character outside the pieces becomes
    its UTF-8 bytes, never UNK) and the "identity" normalization with extra
    whitespace kept, so `decode(encode(s)) == s` for any text without a
    leading/trailing space or newline (which the corpus readers strip).

    The same ids come from Python (`encode`) and from the TensorFlow graph
    (`tf_tokenizer()`, a `tensorflow_text.SentencepieceTokenizer`), so an
    exported SavedModel can tokenize strings itself.

    A multilingual vocabulary holds target-language tokens (`>>de<<`,
    `language_tokens`) as user-defined pieces: a source line's leading token
    is its own id and the rest (after one space) is encoded as a line of its
    own (`language_tokens.split_language_token`), in Python and in the graph
    alike; target text is encoded as it is (`encode_target`).

    Args:
        model_file: path of the SentencePiece `.model` file.
    """

    kind = "SentencePiece"
    """What the pieces are, as T2T Insights names them (SentencePiece)."""

    RUN_FILE_NAME = VOCAB_FILE
    """The name of its copy in a training directory."""
    RESERVED_PIECES = ("<pad>", "</s>", "<unk>")
    """The pieces of PAD_ID, EOS_ID and UNK_ID."""
    UNKNOWN_PIECE = "<unk>"
    """The piece of UNK_ID (an exporter's unknown token)."""

    def __init__(self, model_file: str):
        self.model_file = str(model_file)
        if not os.path.isfile(self.model_file):
            raise DataError(
                f"No vocabulary at {self.model_file}; run t2t-datagen for this "
                f"problem and data_dir first. Received: model_file={self.model_file!r}")
        try:
            self._sp = spm.SentencePieceProcessor(model_file=self.model_file)
        except RuntimeError as e:  # SentencePiece's "could not parse ModelProto", ...
            raise DataError(
                f"The vocabulary {self.model_file} is corrupt ({str(e)[:120]}); in a "
                f"data_dir, delete it and rerun t2t-datagen; in a training directory, "
                f"copy back the vocabulary of the data_dir it was trained on. "
                f"Received: model_file={self.model_file!r}") from None
        if (self._sp.pad_id(), self._sp.eos_id(), self._sp.unk_id(), self._sp.bos_id()) \
                != (PAD_ID, EOS_ID, UNK_ID, -1):
            raise DataError(
                f"The vocabulary {self.model_file} does not use pad=0, eos=1, unk=2 "
                f"and no BOS; regenerate it with t2t-datagen. Received: "
                f"pad={self._sp.pad_id()}, eos={self._sp.eos_id()}, "
                f"unk={self._sp.unk_id()}, bos={self._sp.bos_id()}")
        self._token_ids = _language_token_ids(self.model_file)
        self.language_tokens = tuple(self._token_ids)
        """The target-language tokens (`>>de<<`, ...), sorted; () for a model of one
        target language."""

    # ---- encoding ------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of ids (pieces), PAD/EOS/UNK and the 256 byte pieces included."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of source text `text` (a leading language token one id),
        without EOS."""
        if not self._token_ids:
            return self._sp.encode(text, out_type=int)
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """`encode` for many strings at once (one C++ call; faster).

        `num_threads`: SentencePiece's threads (-1: its default); datagen's
        worker processes pass 1, being one per core already.
        """
        return self._with_language_tokens(
            texts, lambda rests: self._sp.encode(rests, out_type=int, num_threads=num_threads))

    def _with_language_tokens(self, texts: Sequence[str], encode) -> list[list[int]]:
        """`encode(list of texts)` of `texts`, each line's leading language token
        split off first and put back as its one id (a model of one target
        language: `encode(texts)`)."""
        if not self._token_ids:
            return encode(list(texts))
        split = [split_language_token(t, self._token_ids) for t in texts]
        rests = encode([rest for _, rest in split])
        return [[self._token_ids[token], *ids] if token else ids
                for (token, _), ids in zip(split, rests)]

    def encode_target(self, text: str) -> list[int]:
        """Ids of target text (no language token split off), without EOS."""
        return self._sp.encode(text, out_type=int)

    def encode_target_batch(self, texts: Sequence[str],
                            num_threads: int = -1) -> list[list[int]]:
        return self._sp.encode(list(texts), out_type=int, num_threads=num_threads)

    def encode_target_pieces(self, text: str) -> list[str]:
        return self._sp.encode(text, out_type=str)

    @property
    def model_type(self) -> str:
        """The SentencePiece model's kind: "bpe" (what datagen trains), "unigram", ..."""
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto.FromString(self._sp.serialized_model_proto())
        return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(
            proto.trainer_spec.model_type).lower()

    def sample_encode_batch(self, texts: Sequence[str], alpha: float, nbest_size: int = -1,
                            seed: int = 0, target: bool = False) -> list[list[int]]:
        """Sampled segmentations of `texts` (subword regularization), ids without
        EOS: source text (a leading language token one id, never sampled, as
        `encode_batch`), or target text when `target`.

        SentencePiece's sampling: BPE-dropout for a BPE model (each merge
        skipped with probability `alpha`; `nbest_size` not read), for a unigram
        model Kudo (2018)'s, from the `nbest_size` best segmentations (-1: all)
        with smoothing `alpha`. The same `seed` gives the same ids: SentencePiece
        draws from a generator of each thread, seeded (from its process-wide
        seed) when the thread first draws, so the batch is encoded in a thread
        of its own, started once the seed is set, one batch at a time.
        """
        def sample(rests: list[str]) -> list[list[int]]:
            with _SAMPLING_SEED:
                # 2**32 - 1 is SentencePiece's "no seed" (it would draw one at random).
                spm.set_random_generator_seed(seed % 0xFFFFFFFF)
                return _in_worker_thread(self._sp.encode, input=rests, out_type=int,
                                         enable_sampling=True, alpha=alpha,
                                         nbest_size=nbest_size, num_threads=1)

        return sample(list(texts)) if target else self._with_language_tokens(texts, sample)

    def decode_exactly(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """The texts of id sequences, every id read (no EOS or PAD among them):
        `encode`'s inverse, since `decode(encode(s)) == s`."""
        return self._sp.decode([np.asarray(row, np.int64).tolist() for row in ids])

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`: stops at the first EOS and drops PAD.

        Ids past the vocabulary (a model whose vocab_size was rounded up has
        embedding rows no piece owns) have no text and are dropped too.
        """
        kept = []
        size = self.vocab_size
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i != PAD_ID and i < size:
                kept.append(i)
        return self._sp.decode(kept)

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(int(i))

    def encode_pieces(self, text: str) -> list[str]:
        """The pieces of `text` (`encode`'s ids as strings), without EOS."""
        return [self.id_to_piece(i) for i in self.encode(text)]

    def decode_pieces(self, pieces: Sequence[str]) -> str:
        """Text of pieces (no EOS/PAD among them)."""
        return self._sp.decode(list(pieces))

    def tf_tokenizer(self):
        """A `tensorflow_text.SentencepieceTokenizer` giving the same ids in-graph.

        `tokenize(strings [B]) -> RaggedTensor int32 [B, (len)]` without EOS;
        `detokenize(ids) -> strings` (strip EOS/PAD first). A multilingual
        vocabulary's is a `LanguageTokenTokenizer` around it (`encode`'s
        ids; a line without a known language token is an InvalidArgument).
        """
        import tensorflow as tf
        import tensorflow_text as tf_text

        with open(self.model_file, "rb") as f:
            model = f.read()
        sentencepiece = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32,
                                                       add_bos=False, add_eos=False)
        if not self._token_ids:
            return sentencepiece
        from t2t_revival.data.language_token_tokenizer import LanguageTokenTokenizer

        return LanguageTokenTokenizer(sentencepiece, self.language_tokens,
                                      list(self._token_ids.values()))

    def tf_target_tokenizer(self, source_tokenizer=None):
        """The target side in the graph: `source_tokenizer` (held once), or
        for a multilingual vocabulary its SentencePiece tokenizer (target
        text has no language token)."""
        if source_tokenizer is None:
            source_tokenizer = self.tf_tokenizer()
        return getattr(source_tokenizer, "sentencepiece", source_tokenizer)

    # ---- training ------------------------------------------------------
    @classmethod
    def train(cls, sentences: Iterable[str], model_file: str, vocab_size: int,
              max_sentences: int = 1_000_000, seed: int = 1234,
              num_threads: int = 1,
              split_by_unicode_script: bool = True,
              language_tokens: Sequence[str] = ()) -> "SubwordVocabulary":
        """Train a BPE model on a bounded sample of `sentences`; save it atomically.

        The sample is a seeded reservoir sample of at most `max_sentences`
        non-empty lines, so training is deterministic: the same sentences give
        a byte-identical model file.

        Args:
            sentences: training text, one sentence per item (both languages).
            model_file: where to write the `.model` (temp name, then rename).
            vocab_size: number of pieces, special and byte pieces included.
            max_sentences: size of the reservoir sample.
            seed: seed of the sample and of SentencePiece.
            num_threads: SentencePiece trainer threads (small: deterministic, and
                the dev machines have 2 cores).
            split_by_unicode_script: SentencePiece's rule that a piece never
                mixes scripts; False lets punctuation fuse with letters, so a
                linearized tree's `(NP` and `)NP` become single pieces.
            language_tokens: target-language tokens (`>>de<<`) to hold as
                user-defined pieces (ids 3, 4, ...): a multilingual vocabulary.
        """
        rng = random.Random(seed)
        sample: list[str] = []
        seen = 0
        for s in sentences:
            if not s:
                continue
            if len(sample) < max_sentences:
                sample.append(s)
            else:
                j = rng.randint(0, seen)
                if j < max_sentences:
                    sample[j] = s
            seen += 1
        if not sample:
            raise DataError(
                f"No training text to build the vocabulary {model_file} from; check "
                f"the corpus files. Received: sentences=0")
        spm.set_random_generator_seed(seed)
        buffer = io.BytesIO()
        try:
            _in_worker_thread(
                spm.SentencePieceTrainer.train,
                sentence_iterator=iter(sample),
                model_writer=buffer,
                model_type="bpe",
                vocab_size=vocab_size,
                pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
                pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>",
                byte_fallback=True,
                character_coverage=0.9995,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                split_digits=False,
                split_by_unicode_script=split_by_unicode_script,
                user_defined_symbols=list(language_tokens),
                input_sentence_size=0,
                shuffle_input_sentence=False,
                max_sentence_length=1 << 14,
                num_threads=num_threads,
                minloglevel=2,
            )
        except RuntimeError as e:
            most = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to "
                             r"a value <= (\d+)", str(e))
            least = re.search(r"Vocabulary size is smaller than required_chars\. "
                              r"\d+ vs (\d+)", str(e))
            if least:
                raise DataError(
                    f"A {vocab_size}-piece vocabulary cannot hold this corpus: its characters "
                    f"and the special and byte pieces need at least {least.group(1)} pieces; "
                    f"raise vocab_size to at least {least.group(1)} (\"vocab_size\" in "
                    f"corpora.json for your own data). Received: vocab_size={vocab_size}, "
                    f"model_file={model_file!r}") from None
            if not most:
                raise  # another SentencePiece failure is a bug: keep its traceback
            raise DataError(
                f"The corpus is too small for a {vocab_size}-piece vocabulary: its "
                f"{len(sample)} sentences give at most {most.group(1)} pieces; use a "
                f"larger corpus, or a problem with a smaller vocab_size. Received: "
                f"vocab_size={vocab_size}, sentences={len(sample)}, "
                f"model_file={model_file!r}") from None
        write_atomically(model_file, buffer.getvalue())
        return cls(model_file)


def _language_token_ids(model_file: str) -> dict[str, int]:
    """{token: id} of the model's user-defined pieces that are language tokens."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    with open(model_file, "rb") as f:
        proto.ParseFromString(f.read())
    user_defined = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    return dict(sorted((p.piece, i) for i, p in enumerate(proto.pieces)
                       if p.type == user_defined and is_language_token(p.piece)))


# Held while a sampled batch is encoded: SentencePiece's seed is one for the
# process, read by each new thread at its first draw (`sample_encode_batch`).
_SAMPLING_SEED = threading.Lock()

# How often the main thread wakes while SentencePiece trains, to run a signal
# handler that is waiting (seconds).
_SIGNAL_POLL_SECONDS = 0.1


def _in_worker_thread(fn, **kwargs):
    """`fn(**kwargs)` run in a worker thread, while the main thread waits for it.

    SentencePiece trains in C++ without the GIL, for seconds on a small corpus
    and minutes on a large one. Python runs a signal handler only in the main
    thread, between bytecodes: had the main thread made the call itself, a
    Ctrl-C or SIGTERM would wait for the training to end. Here the main thread
    waits in short `join`s, so the handler runs within `_SIGNAL_POLL_SECONDS`
    and its exception (the CLIs' StoppedBySignal) propagates from here; the
    daemon worker is then abandoned, and the process exits without writing
    anything (the model is written after this returns).

    Returns fn's result; re-raises its exception in the calling thread.
    """
    outcome: dict = {}

    def work():
        try:
            outcome["result"] = fn(**kwargs)
        except BaseException as e:  # re-raised in the caller's thread below
            outcome["error"] = e

    worker = threading.Thread(target=work, name="sentencepiece-train", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_SIGNAL_POLL_SECONDS)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
