"""`MarianVocabulary`: a Marian (OPUS-MT) model's tokenizer, as transformers'
`MarianTokenizer` runs it, in one file of a training directory.

A Marian model in Hugging Face's format tokenizes with two SentencePiece
models (`source.spm`, `target.spm`) whose pieces are then looked up in
`vocab.json` (and `target_vocab.json` where the vocabularies are separate):

1. a source line may start with a target-language code, `>>deu<<`: it is
   one token of its own (looked up as it is), the rest of the line is
   tokenized;
2. the source SentencePiece model splits the line into pieces (target text,
   such as references to score and prefixes, goes through the target model);
3. each piece becomes its id in the vocabulary, a piece missing from it
   `<unk>` (transformers 5.x normalizes no punctuation of its own first);
   EOS ends the line (the callers append it, as for every vocabulary here).

Decoding drops EOS, PAD and UNK (`skip_special_tokens=True`), joins the
pieces with the SentencePiece model transformers decodes with (the source
model where the vocabulary is shared, the target model where it is
separate), replaces any `▁` left (pieces that model does not know) with a
space and strips the ends: MarianTokenizer's `decode`.

Ids here are the project's (PAD = 0, EOS = 1, UNK = 2, `special_ids`):
`t2t-import --marian_dir` reorders Marian's ids (there `</s>` 0, `<unk>` 1,
`<pad>` last, typically) so that the model, the searches and the exports
need no other contract; the pieces keep their order otherwise. The file
(`MARIAN_VOCAB_FILE`, JSON) holds both SentencePiece models (base64), the
pieces by our id (and the target's, when separate), which model decodes, and
the languages. Imports no TensorFlow.
"""

from __future__ import annotations

import base64
import json
from typing import Iterable, Sequence

import sentencepiece as spm

from t2t_revival.data.data_error import DataError
from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.run_dir.file_names import MARIAN_VOCAB_FILE
from t2t_revival.special_ids import EOS_ID, PAD_ID, UNK_ID

FORMAT = "marian-tokenizer"
"""The "format" of the file (the class that reads a run's vocabulary keys on it)."""
RESERVED_PIECES = ("<pad>", "</s>", "<unk>")
"""Marian's pieces of PAD_ID, EOS_ID and UNK_ID."""
_UNDERLINE = "\u2581"


def split_language_code(text: str) -> tuple[list[str], str]:
    """([">>xxx<<"] or [], the rest) of a source line: MarianTokenizer's
    `remove_language_code` (a line starting with `>>` up to the first `<<`)."""
    if text.startswith(">>"):
        end = text.find("<<")
        if end != -1:
            return [text[:end + 2]], text[end + 2:]
    return [], text


class MarianVocabulary:
    """A Marian model's source and target tokenizers over its vocabulary.

    The interface of `SubwordVocabulary` (encode, encode_batch, decode,
    vocab_size, id_to_piece, encode_pieces, decode_pieces, model_file, kind),
    plus the target side: `encode_target`, `encode_target_batch` (for text
    the decoder produces: references, prefixes, constraints) and
    `target_vocab_size`.

    Args:
        model_file: the `MARIAN_VOCAB_FILE` of an imported run.

    Raises:
        DataError: the file is missing, not the JSON `write` makes, or its
            SentencePiece models do not load; one line naming it.
    """

    kind = "SentencePiece (Marian)"
    """What the pieces are, as T2T Insights names them."""
    RUN_FILE_NAME = MARIAN_VOCAB_FILE
    """The name of the file in a training directory."""
    RESERVED_PIECES = RESERVED_PIECES
    UNKNOWN_PIECE = "<unk>"

    def __init__(self, model_file: str):
        self.model_file = str(model_file)
        fix = ("import the Marian model again with t2t-import --marian_dir. "
               f"Received: model_file={self.model_file!r}")
        try:
            with open(self.model_file, encoding="utf-8") as f:
                record = json.load(f)
        except FileNotFoundError:
            raise DataError(f"No vocabulary at {self.model_file}; {fix}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"The vocabulary {self.model_file} is corrupt "
                            f"({str(e)[:120]}); {fix}") from None
        try:
            if record.get("format") != FORMAT:
                raise ValueError(f"its format is {record.get('format')!r}, not {FORMAT!r}")
            self._spm_bytes = {side: base64.b64decode(record[f"{side}_spm"], validate=True)
                               for side in ("source", "target")}
            self._source = _load_spm(self._spm_bytes["source"])
            self._target = _load_spm(self._spm_bytes["target"])
            self.pieces = tuple(record["pieces"])
            self.target_pieces = tuple(record.get("target_pieces") or self.pieces)
            self.separate = bool(record.get("target_pieces"))
            self.source_lang = record.get("source_lang")
            self.target_lang = record.get("target_lang")
            decoding = record.get("decode_with", "target" if self.separate else "source")
        except (AttributeError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise DataError(f"The vocabulary {self.model_file} is corrupt "
                            f"({str(e)[:120]}); {fix}") from None
        for pieces in (self.pieces, self.target_pieces):
            if pieces[:3] != RESERVED_PIECES:
                raise DataError(f"The vocabulary {self.model_file} does not start with "
                                f"{', '.join(RESERVED_PIECES)}; {fix}")
        self._decoding = self._source if decoding == "source" else self._target
        self._ids = {piece: i for i, piece in enumerate(self.pieces)}
        self._target_ids = self._ids if not self.separate else \
            {piece: i for i, piece in enumerate(self.target_pieces)}

    @staticmethod
    def write(path: str, source_spm: bytes, target_spm: bytes, pieces: Sequence[str],
              target_pieces: Sequence[str] | None = None, source_lang: str | None = None,
              target_lang: str | None = None) -> None:
        """Write the file (atomically): `pieces[i]` the piece of our id i, the
        target's where the vocabularies are separate."""
        record = {"format": FORMAT, "source_spm": base64.b64encode(source_spm).decode(),
                  "target_spm": base64.b64encode(target_spm).decode(),
                  "pieces": list(pieces),
                  "target_pieces": list(target_pieces) if target_pieces else None,
                  "decode_with": "target" if target_pieces else "source",
                  "source_lang": source_lang, "target_lang": target_lang}
        write_atomically(path, json.dumps(record, ensure_ascii=False))

    # ---- sizes and pieces ----------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Ids of the source side (the whole vocabulary when shared)."""
        return len(self.pieces)

    @property
    def target_vocab_size(self) -> int:
        return len(self.target_pieces)

    def id_to_piece(self, i: int) -> str:
        """The target piece of id `i` (the source's where shared)."""
        return self.target_pieces[int(i)]

    def source_id_to_piece(self, i: int) -> str:
        return self.pieces[int(i)]

    # ---- encoding ------------------------------------------------------
    def encode_pieces(self, text: str) -> list[str]:
        """The source pieces of `text` as the vocabulary has them (a piece it
        lacks as `<unk>`), without EOS."""
        return [self.pieces[i] for i in self.encode(text)]

    def encode(self, text: str) -> list[int]:
        """Source ids of `text` (a leading `>>xxx<<` one token), without EOS."""
        code, rest = split_language_code(text)
        return [self._ids.get(piece, UNK_ID)
                for piece in code + self._source.encode(rest, out_type=str)]

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_target_pieces(self, text: str) -> list[str]:
        """The target pieces of `text` as the vocabulary has them, without EOS."""
        return [self.target_pieces[i] for i in self.encode_target(text)]

    def encode_target(self, text: str) -> list[int]:
        """Target ids of `text` (the target SentencePiece model), without EOS."""
        return [self._target_ids.get(piece, UNK_ID)
                for piece in self._target.encode(text, out_type=str)]

    def encode_target_batch(self, texts: Sequence[str],
                            num_threads: int = -1) -> list[list[int]]:
        return [self.encode_target(t) for t in texts]

    # ---- decoding ------------------------------------------------------
    def decode(self, ids: Iterable[int]) -> str:
        """Text of target `ids`: stops at the first EOS; PAD, UNK and ids past
        the vocabulary dropped (MarianTokenizer's skip_special_tokens)."""
        pieces = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i != PAD_ID and i < len(self.target_pieces):
                pieces.append(self.target_pieces[i])
        return self.decode_pieces(pieces)   # (UNK's piece dropped there)

    def decode_pieces(self, pieces: Sequence[str]) -> str:
        """Text of target pieces, as MarianTokenizer's decode (its special
        pieces dropped, then convert_tokens_to_string)."""
        kept = [p for p in pieces if p not in RESERVED_PIECES]
        return self._decoding.decode_pieces(kept).replace(_UNDERLINE, " ").strip()

    def tf_tokenizer(self):
        """The source side in the graph (`MarianTokenizer`: `encode`'s ids)."""
        from t2t_revival.data.marian_tokenizer import MarianTokenizer

        return MarianTokenizer(self._spm_bytes["source"], self.pieces, language_codes=True,
                               side="source")

    def tf_target_tokenizer(self, source_tokenizer=None):
        """The target side in the graph (`encode_target`'s ids, `decode`'s text)."""
        from t2t_revival.data.marian_tokenizer import MarianTokenizer

        return MarianTokenizer(self._spm_bytes["target"], self.target_pieces,
                               language_codes=False, side="target")


def _load_spm(model: bytes) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_proto=model)
