"""`CorporaSpec`: the user's corpora.json, read and checked.

    {
      "source_lang": "en", "target_lang": "de",
      "vocab_size": 8000,
      "train": [{"source": "indomain.en.gz", "target": "indomain.de.gz", "weight": 3},
                {"source": "general.en.gz", "target": "general.de.gz", "weight": 1}],
      "dev":  {"source": "dev.en", "target": "dev.de"},
      "test": {"source": "test.en", "target": "test.de"}
    }

Paths are relative to the folder of corpora.json (or absolute). "dev" and
"test" take one corpus or a list (concatenated). Instead of "vocab_size",
"vocab" names an existing vocabulary to reuse (fine-tuning a run on new data
keeps its vocabulary): a SentencePiece model (`vocab.model`), or a
tensor2tensor SubwordTextEncoder file (`*.subwords`, the vocab.subwords of a
run imported from tensor2tensor), which the data is then encoded with. Every mistake (an unknown key, a missing or
empty file, a weight that is not a positive number, a corpus list that is
empty) is one DataError naming the file and the key.

Many languages in one model: a corpus may name its own "target_lang" (the
top-level one is the default). Where the corpora name more than one, the
problem is multilingual: each source line gets its corpus's target-language
token (`>>de<<` for "de", `language_tokens`), the tokens are pieces of the
vocabulary, and the dev BLEU is reported per language pair. Then every corpus
needs a target language, and the dev and test ones languages of the training
corpora.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from t2t_revival.data.data_error import DataError
from t2t_revival.data.language_tokens import CODE, language_token
from t2t_revival.files.json_file import read_json
from t2t_revival.data.parallel_corpus import ParallelCorpus

_TOP_KEYS = {"source_lang", "target_lang", "vocab_size", "vocab", "train", "dev", "test"}
_CORPUS_KEYS = {"source", "target", "weight", "target_lang"}
SPLITS = ("train", "dev", "test")


def _not_a_file(path: str) -> str:
    """Why `path`, which is not a file, cannot be read: "is missing" or what it is."""
    return "is a directory, not a file" if os.path.isdir(path) else "is missing"


@dataclasses.dataclass(frozen=True)
class CorporaSpec:
    """The corpora of a plain-text translation problem (see the module docstring).

    Attributes:
        path: where the spec was read from.
        source_lang, target_lang: language codes (informational; "" when unset).
        vocab_size: pieces of the shared SentencePiece vocabulary.
        vocab: an existing vocabulary to reuse instead of training one (""): a
            SentencePiece model or a tensor2tensor `*.subwords` file.
        train, dev, test: the corpora of each split, with absolute paths.
    """

    path: str
    source_lang: str
    target_lang: str
    vocab_size: int
    vocab: str
    train: tuple[ParallelCorpus, ...]
    dev: tuple[ParallelCorpus, ...]
    test: tuple[ParallelCorpus, ...]

    @property
    def target_langs(self) -> tuple[str, ...]:
        """The target languages of the corpora, sorted (one, or "", for most)."""
        return tuple(sorted({c.target_lang for s in SPLITS for c in self.corpora(s)}))

    @property
    def language_tokens(self) -> tuple[str, ...]:
        """The target-language tokens of a multilingual spec (`>>de<<`, sorted);
        () when the corpora have one target language."""
        langs = self.target_langs
        return tuple(language_token(code) for code in langs) if len(langs) > 1 else ()

    @property
    def weights(self) -> tuple[float, ...]:
        return tuple(c.weight for c in self.train)

    def corpora(self, split: str) -> tuple[ParallelCorpus, ...]:
        return getattr(self, split)

    def same_data(self, other: "CorporaSpec") -> bool:
        """Whether `other` names the same files and vocabulary (weights may differ)."""
        def files(spec):
            return ([(c.source, c.target, c.target_lang) for s in SPLITS
                     for c in spec.corpora(s)],
                    spec.vocab_size, spec.vocab)
        return files(self) == files(other)

    def to_json(self) -> str:
        values = {"source_lang": self.source_lang, "target_lang": self.target_lang,
                  "vocab_size": self.vocab_size,
                  "train": [c.to_dict() for c in self.train],
                  "dev": [{"source": c.source, "target": c.target,
                           "target_lang": c.target_lang} for c in self.dev],
                  "test": [{"source": c.source, "target": c.target,
                            "target_lang": c.target_lang} for c in self.test]}
        if self.vocab:
            values["vocab"] = self.vocab
        return json.dumps(values, indent=2) + "\n"

    @classmethod
    def load(cls, path: str, check_files: bool = True) -> "CorporaSpec":
        """Read and check corpora.json at `path` (a DataError naming the mistake).

        `check_files=False` reads datagen's copy in a data_dir, whose raw
        corpora need not be there any more.
        """
        path = os.path.abspath(path)
        values = read_json(
            path, error=DataError,
            directory=f"{path} is a directory, not a file; corpora.json is a JSON file "
                      f"(see docs/your-own-data.md). Received: path={path!r}",
            missing=f"{path} is missing; write it (see docs/your-own-data.md) or point "
                    f"--tmp_dir at the folder that holds corpora.json. Received: path={path!r}",
            corrupt=f"{path} is not valid JSON ({{why}}); fix it. Received: path={path!r}")
        return cls.from_dict(values, path, check_files)

    @classmethod
    def from_dict(cls, values, path: str, check_files: bool = True) -> "CorporaSpec":
        def bad(what: str, received) -> DataError:
            return DataError(f"{path}: {what}. Received: {received}")

        if not isinstance(values, dict):
            raise bad("must be a JSON object with \"train\", \"dev\", \"test\" and "
                      "\"vocab_size\"", type(values).__name__)
        unknown = sorted(set(values) - _TOP_KEYS)
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; the keys are "
                      f"{', '.join(sorted(_TOP_KEYS))}", f"{unknown[0]}={values[unknown[0]]!r}")
        base = os.path.dirname(path)
        vocab = values.get("vocab", "")
        if vocab and not check_files:
            vocab_size = values["vocab_size"]
        elif vocab:
            if not isinstance(vocab, str):
                raise bad("\"vocab\" must be the path of a SentencePiece .model, a "
                          "tensor2tensor .subwords vocabulary or a Marian run's "
                          "vocab.marian.json", f"vocab={vocab!r}")
            vocab = os.path.join(base, os.path.expanduser(vocab))
            if not os.path.isfile(vocab):
                raise bad(f"the \"vocab\" file {vocab} {_not_a_file(vocab)}",
                          f"vocab={values['vocab']!r}")
            from t2t_revival.data.vocabulary_file import load_vocabulary
            vocab_size = load_vocabulary(vocab).vocab_size
            if "vocab_size" in values and values["vocab_size"] != vocab_size:
                raise bad(f"\"vocab_size\" {values['vocab_size']} differs from the "
                          f"{vocab_size} pieces of \"vocab\"; leave vocab_size out",
                          f"vocab_size={values['vocab_size']!r}")
        else:
            vocab_size = values.get("vocab_size")
            if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) \
                    or vocab_size < 300:
                raise bad("\"vocab_size\" must be a whole number of at least 300 (256 byte "
                          "pieces are always included; 8000-32000 is usual)",
                          f"vocab_size={vocab_size!r}")
        langs = {k: values.get(k, "") for k in ("source_lang", "target_lang")}
        for k, v in langs.items():
            if not isinstance(v, str):
                raise bad(f"\"{k}\" must be a language code such as \"en\"", f"{k}={v!r}")
        splits = {s: cls._corpora(values, s, base, bad, check_files, langs["target_lang"])
                  for s in SPLITS}
        spec = cls(path=path, vocab_size=vocab_size, vocab=vocab, **langs, **splits)
        spec._check_languages(bad, values)
        return spec

    def _check_languages(self, bad, values: dict) -> None:
        """A multilingual spec's rules (the module docstring)."""
        if not self.language_tokens:
            return
        trained = sorted({c.target_lang for c in self.train})
        for split in SPLITS:
            for i, corpus in enumerate(self.corpora(split)):
                where = f"{split}[{i}]"
                if not corpus.target_lang:
                    raise bad(f"{where} has no \"target_lang\" (nor is there a top-level "
                              f"one): corpora of several target languages "
                              f"({', '.join(c for c in self.target_langs if c)}) each need "
                              f"one", f"{where}.target_lang=None")
                if not CODE.fullmatch(corpus.target_lang):
                    raise bad(f"the \"target_lang\" of {where} must be a language code such "
                              f"as \"de\" or \"deu\" (letters, then letters, digits, _ or -)",
                              f"target_lang={corpus.target_lang!r}")
                if corpus.target_lang not in trained:
                    raise bad(f"{where}.target_lang {corpus.target_lang!r} is the target "
                              f"language of no training corpus ({', '.join(trained)}); the "
                              f"model could not translate into it",
                              f"{where}.target_lang={corpus.target_lang!r}")
        if self.vocab and values.get("vocab") is not None:
            from t2t_revival.data.language_tokens import tokens_of
            from t2t_revival.data.vocabulary_file import load_vocabulary

            held = tokens_of(load_vocabulary(self.vocab)) if os.path.isfile(self.vocab) \
                else self.language_tokens
            lacking = [t for t in self.language_tokens if t not in held]
            if lacking:
                raise bad(f"the \"vocab\" {self.vocab} lacks the target-language "
                          f"token(s) {', '.join(lacking)} of these corpora; leave \"vocab\" "
                          f"out (datagen trains one that holds them) or name the "
                          f"vocabulary of a run of these languages",
                          f"vocab={values['vocab']!r}")

    @staticmethod
    def _corpora(values: dict, split: str, base: str, bad, check_files: bool,
                 target_lang: str) -> tuple[ParallelCorpus, ...]:
        if split not in values:
            raise bad(f"\"{split}\" is missing: give its {{\"source\": ..., \"target\": ...}} "
                      f"files", f"keys={sorted(values)}")
        items = values[split]
        items = [items] if isinstance(items, dict) else items
        if not isinstance(items, list) or not items:
            raise bad(f"\"{split}\" must be a corpus {{\"source\": ..., \"target\": ...}} or "
                      f"a non-empty list of them", f"{split}={values[split]!r}")
        corpora = []
        for i, item in enumerate(items):
            where = f"{split}[{i}]"
            if not isinstance(item, dict):
                raise bad(f"{where} must be an object with \"source\" and \"target\"",
                          f"{where}={item!r}")
            unknown = sorted(set(item) - _CORPUS_KEYS)
            if unknown:
                raise bad(f"{where} has the unknown key {unknown[0]!r}; a corpus has "
                          f"\"source\", \"target\", \"target_lang\" and (train) "
                          f"\"weight\"",
                          f"{where}.{unknown[0]}={item[unknown[0]]!r}")
            weight = item.get("weight", 1.0)
            if split != "train" and "weight" in item:
                raise bad(f"{where}: \"weight\" applies to the training corpora only",
                          f"{where}.weight={weight!r}")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                    or not math.isfinite(weight) or weight <= 0:
                raise bad(f"{where}.weight must be a positive number (a corpus's share of "
                          f"the training examples)", f"{where}.weight={weight!r}")
            lang = item.get("target_lang", target_lang)
            if "target_lang" in item and (not isinstance(lang, str)
                                          or lang and not CODE.fullmatch(lang)):
                raise bad(f"{where}.target_lang must be a language code such as \"de\" or "
                          f"\"deu\" (letters, then letters, digits, _ or -)",
                          f"{where}.target_lang={lang!r}")
            paths = []
            for side in ("source", "target"):
                name = item.get(side)
                if not isinstance(name, str) or not name:
                    raise bad(f"{where} needs a \"{side}\" file", f"{where}.{side}={name!r}")
                full = os.path.join(base, os.path.expanduser(name))
                if not check_files:
                    pass
                elif not os.path.isfile(full):
                    raise bad(f"the {where}.{side} file {full} {_not_a_file(full)}",
                              f"{side}={name!r}")
                elif os.path.getsize(full) == 0:
                    raise bad(f"the {where}.{side} file {full} is empty", f"{side}={name!r}")
                paths.append(full)
            corpora.append(ParallelCorpus(*paths, weight=float(weight), target_lang=lang))
        return tuple(corpora)
