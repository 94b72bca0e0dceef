"""Target-language tokens of a multilingual model: `>>xxx<<` at the start of
a source line says which language to translate it into (OPUS-MT's
convention, as Marian's multilingual models take it).

    language_token("de")                        -> ">>de<<"
    split_language_token(">>de<< Hello", {">>de<<"}) -> (">>de<<", "Hello")
    check_language_tokens(["Hello"], (">>de<<", ">>fr<<"))   -> a UserError
    lines_by_language([">>fr<< a", ">>de<< b"], (">>de<<", ">>fr<<")) -> {"de": [1], "fr": [0]}

The one owner of the convention: the corpora.json codes it accepts, the
token of a code, where a line's token ends (`marian_vocabulary`'s
`split_language_code`, the rule Marian's tokenizer has) and the one-line
error of a line without a known one. A vocabulary that holds such tokens as
user-defined pieces (`SubwordVocabulary.language_tokens`) makes its model
multilingual. Imports no TensorFlow.
"""

from __future__ import annotations

import re
from typing import Collection, Sequence

from t2t_revival.data.marian_vocabulary import split_language_code
from t2t_revival.errors import UserError

CODE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
"""A language code corpora.json may name ("de", "deu", "pt_BR", "zh-Hant")."""
TOKEN = re.compile(r">>[A-Za-z][A-Za-z0-9_-]*<<")
"""A language token (a vocabulary's user-defined piece of this form is one)."""
GRAPH_PATTERN = r"(?s)^(>>.*?<<) ?(.*)$"
"""RE2: (a line's leading token, the rest after one space): `split_language_token`
in the graph (`LanguageTokenTokenizer`)."""


def language_token(code: str) -> str:
    """The token of the language code `code` ("de" -> ">>de<<")."""
    return f">>{code}<<"


def is_language_token(piece: str) -> bool:
    return TOKEN.fullmatch(piece) is not None


def tokens_of(vocab) -> tuple[str, ...]:
    """The language tokens of a vocabulary (`SubwordVocabulary.language_tokens`;
    () for one without: a model of one target language)."""
    return tuple(getattr(vocab, "language_tokens", ()))


def split_language_token(text: str, tokens: Collection[str]) -> tuple[str, str]:
    """(the leading token of `text`, the rest after one space) when `text`
    starts with one of `tokens`; else ("", text)."""
    code, rest = split_language_code(text)
    if not code or code[0] not in tokens:
        return "", text
    return code[0], rest[1:] if rest.startswith(" ") else rest


def lines_by_language(lines: Sequence[str], tokens: Sequence[str]) -> dict[str, list[int]]:
    """{language code ("de"): the indices of the `lines` that start with its
    token}, in the order of `tokens` (a code no line starts with is left
    out); {} when `tokens` is empty (a model of one target language). How
    dev BLEU and t2t-decoder's score group a multilingual file by pair."""
    groups: dict[str, list[int]] = {token: [] for token in tokens}
    for index, line in enumerate(lines):
        token = split_language_token(line, groups)[0]
        if token:
            groups[token].append(index)
    return {token[2:-2]: indices for token, indices in groups.items() if indices}


def check_language_tokens(lines: Sequence[str], tokens: Sequence[str],
                          what: str = "input line", first_number: int = 1) -> None:
    """A UserError naming the first non-empty line of `lines` (numbered from
    `first_number`) that does not start with one of `tokens` (nothing when
    `tokens` is empty: a model of one target language)."""
    if not tokens:
        return
    for number, line in enumerate(lines, start=first_number):
        if not line.strip() or split_language_token(line, tokens)[0]:
            continue
        code, _ = split_language_code(line)
        choices = ", ".join(tokens)
        if code:
            raise UserError(
                f"{what} {number} starts with {code[0]}, which is not a target language of "
                f"this model; start it with one of {choices}. Received: line {number}="
                f"{line[:60]!r}")
        raise UserError(
            f"{what} {number} has no target-language token: this model translates into "
            f"several languages, so each line starts with one of {choices} (e.g. "
            f"'{tokens[0]} {line[:20]}'). Received: line {number}={line[:60]!r}")
