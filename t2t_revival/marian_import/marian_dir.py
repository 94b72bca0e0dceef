"""`MarianDir`: a Marian model in Hugging Face's format, read (nothing downloaded).

The layout `save_pretrained` writes and the `Helsinki-NLP/opus-mt-*`
repositories hold:

    config.json              MarianConfig (model_type "marian")
    generation_config.json   generate()'s defaults (optional: beams, max_length, ...)
    model.safetensors        the weights (or pytorch_model.bin, read with torch)
    source.spm, target.spm   SentencePiece models
    vocab.json               piece -> id (target_vocab.json too: separate vocabularies)
    tokenizer_config.json    MarianTokenizer's settings (optional: languages, separate_vocabs)

Every missing, unreadable or inconsistent file is one UserError naming it.
"""

from __future__ import annotations

import json
import os

import numpy as np

from t2t_revival.errors import UserError

WEIGHTS = "model.safetensors"
TORCH_WEIGHTS = "pytorch_model.bin"
_FIX = ("point --marian_dir at a folder as transformers' save_pretrained writes it, or as "
        "the Hugging Face hub holds a Helsinki-NLP/opus-mt-* model (download it with "
        "`huggingface-cli download Helsinki-NLP/opus-mt-en-de --local-dir DIR` or a browser)")


class MarianDir:
    """The files of one Marian model folder.

    Args:
        path: the folder.

    Attributes:
        config: config.json as a dict (model_type "marian").
        generation: generation_config.json as a dict ({} without one).
        tokenizer: tokenizer_config.json as a dict ({} without one).
        separate_vocabs: whether source and target have vocabularies of their own.
    """

    def __init__(self, path: str):
        self.path = str(path)
        if not os.path.isdir(self.path):
            raise UserError(f"{self.path} is not a directory; {_FIX}. "
                            f"Received: marian_dir={path!r}")
        self.config = self._json("config.json", required=True)
        if self.config.get("model_type") != "marian":
            raise UserError(f"{self.file('config.json')} is not a Marian model's (its "
                            f"model_type is {self.config.get('model_type')!r}, not 'marian'); "
                            f"{_FIX}. Received: marian_dir={path!r}")
        self.generation = self._json("generation_config.json")
        self.tokenizer = self._json("tokenizer_config.json")
        self.separate_vocabs = bool(self.tokenizer.get("separate_vocabs", False))
        for name in ("source.spm", "target.spm", "vocab.json") + (
                ("target_vocab.json",) if self.separate_vocabs else ()):
            if not os.path.isfile(self.file(name)):
                raise UserError(f"the Marian model in {self.path} has no {name} (its "
                                f"tokenizer needs it); copy it there from the model's "
                                f"repository. Received: marian_dir={path!r}")

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _json(self, name: str, required: bool = False) -> dict:
        path = self.file(name)
        if not os.path.isfile(path):
            if required:
                raise UserError(f"{self.path} holds no {name}, so it is no Marian model "
                                f"folder; {_FIX}. Received: marian_dir={self.path!r}")
            return {}
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(f"{path} cannot be read ({str(e)[:120]}); copy it again from "
                            f"the model's repository. Received: marian_dir={self.path!r}") from None
        if not isinstance(value, dict):
            raise UserError(f"{path} is not a JSON object; copy it again from the model's "
                            f"repository. Received: marian_dir={self.path!r}")
        return value

    def spm_bytes(self, side: str) -> bytes:
        """The bytes of `source.spm` or `target.spm`, checked to load."""
        import sentencepiece as spm

        path = self.file(f"{side}.spm")
        with open(path, "rb") as f:
            data = f.read()
        try:
            spm.SentencePieceProcessor(model_proto=data)
        except RuntimeError as e:
            raise UserError(f"{path} is not a SentencePiece model ({str(e)[:100]}); copy it "
                            f"again from the model's repository. "
                            f"Received: marian_dir={self.path!r}") from None
        return data

    def vocabulary(self, target: bool = False) -> list[str]:
        """The pieces of vocab.json (target_vocab.json) by Marian id: a
        UserError unless the ids are 0 .. n-1, each once."""
        name = "target_vocab.json" if target and self.separate_vocabs else "vocab.json"
        mapping = self._json(name, required=True)
        ids = sorted(mapping.values()) if all(isinstance(v, int) for v in mapping.values()) \
            else None
        if ids != list(range(len(mapping))):
            raise UserError(f"{self.file(name)} does not map its pieces to the ids 0 .. "
                            f"{len(mapping) - 1}, each once; copy it again from the model's "
                            f"repository. Received: marian_dir={self.path!r}")
        pieces = [""] * len(mapping)
        for piece, i in mapping.items():
            pieces[i] = piece
        return pieces

    def weights(self) -> dict[str, np.ndarray]:
        """{Hugging Face name: float32 array} of model.safetensors, or of
        pytorch_model.bin where torch is installed."""
        safetensors, torch_file = self.file(WEIGHTS), self.file(TORCH_WEIGHTS)
        if os.path.isfile(safetensors):
            from safetensors import SafetensorError
            from safetensors.numpy import load_file

            try:
                tensors = load_file(safetensors)
            except (SafetensorError, OSError, ValueError) as e:
                raise UserError(f"{safetensors} cannot be read ({str(e)[:120]}); it may be "
                                f"truncated: copy it again from the model's repository. "
                                f"Received: marian_dir={self.path!r}") from None
        elif os.path.isfile(torch_file):
            tensors = _torch_weights(torch_file, self.path)
        else:
            raise UserError(f"the Marian model in {self.path} has no weights ({WEIGHTS} or "
                            f"{TORCH_WEIGHTS}); copy {WEIGHTS} there from the model's "
                            f"repository. Received: marian_dir={self.path!r}")
        return {name: np.asarray(value, np.float32) for name, value in tensors.items()}


def _torch_weights(path: str, folder: str) -> dict:
    try:
        import torch
    except ImportError:
        raise UserError(
            f"{path} is PyTorch's format, which needs torch to read, and torch is not "
            f"installed; download the model's {WEIGHTS} instead (the hub has it for "
            f"every OPUS-MT model), or convert it where torch is: python -c \"import torch; "
            f"from safetensors.torch import save_file; save_file({{k: v.contiguous() for k, v "
            f"in torch.load('{TORCH_WEIGHTS}', weights_only=True).items()}}, '{WEIGHTS}')\". "
            f"Received: marian_dir={folder!r}") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:   # torch's unpickling errors have no common class
        raise UserError(f"{path} cannot be read by torch ({str(e)[:120]}); copy it again "
                        f"from the model's repository. Received: marian_dir={folder!r}") from None
    return {name: value.float().numpy() for name, value in state.items()}
