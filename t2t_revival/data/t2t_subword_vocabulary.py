"""`T2TSubwordVocabulary`: a tensor2tensor SubwordTextEncoder vocabulary file.

tensor2tensor (1.x) stored its `SubwordTextEncoder` as one quoted subtoken a
line (`'<pad>'`, `'<EOS>'`, `'the_'`, ...): the file a T2T user has beside a
trained model (`vocab.translate_ende_wmt32k.32768.subwords`). This class reads
it and encodes and decodes as T2T 1.15.7's `text_encoder.SubwordTextEncoder`
with its `tokenizer` does, so a model trained by tensor2tensor sees the ids it
was trained on:

1. tokenize: split the text at every boundary between an alphanumeric
   character (Unicode category L* or N*) and a non-alphanumeric one; drop a
   token that is a single space unless it is the first or the last;
2. escape each token: `\\` -> `\\\\`, `_` -> `\\u`, a character outside the
   vocabulary's alphabet (or a newline) -> `\\<code point>;`, then append `_`;
3. split each escaped token greedily into the longest subtokens of the
   vocabulary, from the left.

Decoding joins the subtokens, splits at `_`, unescapes each piece, and joins
the tokens with a space between two alphanumeric ones.

Ids are line numbers (0-based): T2T's reserved `<pad>` = 0 and `<EOS>` = 1
are the project's PAD_ID and EOS_ID. There is no UNK: every character can be
escaped into the alphabet.

Imports no TensorFlow (the CTranslate2 translator uses it too);
`tf_tokenizer()` builds the in-graph twin (`T2TSubwordTokenizer`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

from t2t_revival.data.data_error import DataError
from t2t_revival.data.shared_sides import SharedSides
from t2t_revival.run_dir.file_names import T2T_VOCAB_FILE
from t2t_revival.special_ids import EOS_ID, PAD_ID

RESERVED_PIECES = ("<pad>", "<EOS>")
"""T2T's reserved tokens, the first two lines of its vocabulary files (PAD=0, EOS=1)."""
ESCAPE_CHARS = frozenset("\\_u;0123456789")
"""Characters T2T adds to every alphabet (they spell the escapes)."""
_UNESCAPE = re.compile(r"\\u|\\\\|\\([0-9]+);")
_UNDEFINED_CHAR = "\u3013"   # T2T's stand-in for an escape of no valid code point


@lru_cache(maxsize=1 << 16)
def is_alphanumeric(char: str) -> bool:
    """Whether T2T's tokenizer counts `char` as alphanumeric (category L* or N*)."""
    return unicodedata.category(char)[0] in "LN"


def split_tokens(text: str) -> list[str]:
    """T2T's `tokenizer.encode`: alternating alphanumeric and other runs, a
    single-space run dropped unless it is the first or the last."""
    if not text:
        return []
    tokens = []
    start = 0
    alnum = [is_alphanumeric(c) for c in text]
    for pos in range(1, len(text)):
        if alnum[pos] != alnum[pos - 1]:
            token = text[start:pos]
            if token != " " or start == 0:
                tokens.append(token)
            start = pos
    tokens.append(text[start:])
    return tokens


def join_tokens(tokens: Sequence[str]) -> str:
    """T2T's `tokenizer.decode`: a space between two alphanumeric tokens."""
    out = []
    for i, token in enumerate(tokens):
        if i > 0 and is_alphanumeric(tokens[i - 1][0]) and is_alphanumeric(token[0]):
            out.append(" ")
        out.append(token)
    return "".join(out)


def unescape(piece: str) -> str:
    """The token of an escaped piece (its trailing `_` removed already)."""
    def replace(m):
        if m.group(1) is None:
            return "_" if m.group(0) == "\\u" else "\\"
        try:
            return chr(int(m.group(1)))
        except (ValueError, OverflowError):
            return _UNDEFINED_CHAR
    return _UNESCAPE.sub(replace, piece)


class T2TSubwordVocabulary(SharedSides):
    """A tensor2tensor SubwordTextEncoder vocabulary, shared by source and target.

    The same interface as `SubwordVocabulary` (encode, encode_batch, decode,
    vocab_size, id_to_piece, tf_tokenizer, model_file), so the decoder,
    scoring, the trainer's data and the exports work with either
    (`vocabulary_file.load_vocabulary` picks the class from the file).

    Args:
        model_file: path of the vocabulary file (one quoted subtoken a line,
            `'<pad>'` and `'<EOS>'` first).

    Raises:
        DataError: the file is missing, empty, not UTF-8, has a line that is
            not a quoted string, or does not start with `<pad>`, `<EOS>`;
            one line naming the file and the line.
    """

    kind = "SubwordTextEncoder"
    """What the pieces are, as T2T Insights names them (tensor2tensor's SubwordTextEncoder)."""

    RUN_FILE_NAME = T2T_VOCAB_FILE
    """The name of its copy in a training directory."""
    RESERVED_PIECES = RESERVED_PIECES
    """The pieces of PAD_ID and EOS_ID."""
    UNKNOWN_PIECE = RESERVED_PIECES[PAD_ID]
    """What an exporter may name as its unknown token: there is none (every
    character escapes into the alphabet), so PAD stands in, never produced."""

    def __init__(self, model_file: str):
        self.model_file = str(model_file)
        self._pieces = read_subtokens(self.model_file)
        # Later duplicates win and "" is never matched, as in T2T.
        self._ids = {s: i for i, s in enumerate(self._pieces) if s}
        self._longest = max(len(s) for s in self._pieces)
        self._alphabet = frozenset(c for s in self._pieces for c in s) | ESCAPE_CHARS
        unspelled = sorted(c for c in self._alphabet if c not in self._ids)
        if unspelled:   # T2T builds every alphabet character in as a subtoken
            raise DataError(
                f"The vocabulary {self.model_file} has no subtoken for the character(s) "
                f"{''.join(unspelled[:10])!r}, so it cannot spell every text; it is not a "
                f"vocabulary tensor2tensor built. Received: vocab_file={self.model_file!r}")
        self._cache: dict[str, tuple[int, ...]] = {}

    # ---- encoding ------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of ids: the lines of the file, `<pad>` and `<EOS>` included."""
        return len(self._pieces)

    @property
    def pieces(self) -> tuple[str, ...]:
        """The subtoken of every id."""
        return self._pieces

    @property
    def alphabet(self) -> frozenset:
        """The characters that need no `\\NNN;` escape (plus the escape characters)."""
        return self._alphabet

    def escape(self, token: str) -> str:
        """T2T's `_escape_token`: the token spelled in the alphabet, `_`-terminated."""
        token = token.replace("\\", "\\\\").replace("_", "\\u")
        return "".join(c if c in self._alphabet and c != "\n" else f"\\{ord(c)};"
                       for c in token) + "_"

    def _token_ids(self, token: str) -> tuple[int, ...]:
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        escaped = self.escape(token)
        ids = []
        start, end_of_token = 0, len(escaped)
        while start < end_of_token:
            for end in range(min(end_of_token, start + self._longest), start, -1):
                i = self._ids.get(escaped[start:end])
                if i is not None:   # found at the latest for end = start + 1
                    ids.append(i)
                    start = end
                    break
        if len(self._cache) > 1 << 20:
            self._cache.clear()
        self._cache[token] = result = tuple(ids)
        return result

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without EOS."""
        ids: list[int] = []
        for token in split_tokens(text):
            ids.extend(self._token_ids(token))
        return ids

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """`encode` of each string (`num_threads` is accepted for
        `SubwordVocabulary`'s interface; encoding runs in this thread)."""
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`: stops at the first EOS and drops PAD, and ids past
        the vocabulary (embedding rows no subtoken owns)."""
        pieces = []
        size = self.vocab_size
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i != PAD_ID and 0 <= i < size:
                pieces.append(self._pieces[i])
        return self.decode_pieces(pieces)

    @staticmethod
    def decode_pieces(pieces: Iterable[str]) -> str:
        """Text of subtoken strings (T2T's `_subtoken_ids_to_tokens` + `tokenizer.decode`)."""
        tokens = []
        for part in "".join(pieces).split("_"):
            if part:
                token = unescape(part)
                if token:
                    tokens.append(token)
        return join_tokens(tokens)

    def id_to_piece(self, i: int) -> str:
        return self._pieces[int(i)]

    def encode_pieces(self, text: str) -> list[str]:
        """The subtokens of `text` (`encode`'s ids as strings), without EOS."""
        return [self._pieces[i] for i in self.encode(text)]

    def tf_tokenizer(self):
        """A `T2TSubwordTokenizer` giving the same ids and text in-graph.

        `tokenize(strings [B]) -> RaggedTensor int32 [B, (len)]` without EOS;
        `detokenize(ids) -> strings` (strip EOS/PAD first).
        """
        from t2t_revival.data.t2t_subword_tokenizer import T2TSubwordTokenizer

        return T2TSubwordTokenizer(self._pieces, self._alphabet)


def read_subtokens(path: str) -> tuple[str, ...]:
    """The subtokens of a T2T vocabulary file, checked (see `T2TSubwordVocabulary`)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:   # missing, a folder, no permission
        why = "No vocabulary at" if isinstance(e, FileNotFoundError) else \
            f"Cannot read ({e.strerror or e}) the vocabulary"
        raise DataError(f"{why} {path}; pass the tensor2tensor vocabulary file "
                        f"(vocab.<problem>.<size>.subwords). "
                        f"Received: vocab_file={path!r}") from None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if not lines:
        raise DataError(f"The vocabulary {path} is empty; pass the tensor2tensor vocabulary "
                        f"file the model was trained with. Received: vocab_file={path!r}")
    pieces = []
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8").rstrip()
        except UnicodeDecodeError as e:
            raise DataError(f"{path}:{number}: not UTF-8 ({e.reason} at byte {e.start}); a "
                            f"tensor2tensor vocabulary is UTF-8 text, one quoted subtoken a "
                            f"line. Received: line={raw[:60]!r}") from None
        if len(line) < 2 or line[0] not in "'\"" or line[-1] != line[0]:
            raise DataError(f"{path}:{number}: not a quoted subtoken; a tensor2tensor "
                            f"vocabulary has one a line, like 'the_'. Received: "
                            f"line={line[:60]!r}")
        pieces.append(line[1:-1])
    if tuple(pieces[:2]) != RESERVED_PIECES:
        raise DataError(f"{path}:1: the vocabulary does not start with '<pad>' and '<EOS>' "
                        f"(ids 0 and 1); it is not a tensor2tensor text-problem vocabulary. "
                        f"Received: first={pieces[:2]!r}")
    return tuple(pieces)
