"""`T2TRunDir`: a tensor2tensor training directory, read."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from t2t_revival.errors import UserError

_CHECKPOINT = re.compile(r"^model\.ckpt-(\d+)\.index$")
_INDEX_LINE = re.compile(r'^\s*model_checkpoint_path:\s*"([^"]+)"\s*$', re.MULTILINE)
"""The line of a `checkpoint` index (a CheckpointState in text format) naming the latest."""


class T2TRunDir:
    """A tensor2tensor `output_dir`: `checkpoint`, `model.ckpt-N.index/.data-*`,
    `hparams.json` and (optional) `flags.txt`.

    Args:
        path: the directory; a UserError when it is not a T2T run (no
            hparams.json, or no model.ckpt-N.index).

    Attributes:
        path: the directory.
        hparams: T2T's hparams.json as a dict.
        flags: `{flag: value}` of flags.txt (empty without one).
    """

    def __init__(self, path: str):
        self.path = str(path)
        fix = ("point --t2t_dir at the output_dir of a t2t-trainer run (it holds "
               "hparams.json and model.ckpt-N.index/.data-* files)")
        if not os.path.isdir(self.path):
            raise UserError(f"{self.path} is not a directory; {fix}. Received: t2t_dir={path!r}")
        names = os.listdir(self.path)
        if "hparams.json" not in names or not any(_CHECKPOINT.match(n) for n in names):
            missing = "hparams.json" if "hparams.json" not in names else "model.ckpt-N.index"
            raise UserError(f"{self.path} is not a tensor2tensor run (no {missing}); {fix}. "
                            f"Received: t2t_dir={path!r}")
        hparams_file = os.path.join(self.path, "hparams.json")
        try:
            with open(hparams_file, encoding="utf-8") as f:
                self.hparams = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(f"cannot read {hparams_file} ({e}); it must be the JSON object "
                            f"t2t-trainer wrote. Received: t2t_dir={path!r}") from None
        if not isinstance(self.hparams, dict):
            raise UserError(f"{hparams_file} is not a JSON object of hparams. "
                            f"Received: t2t_dir={path!r}")
        self.flags = {}
        flags_file = os.path.join(self.path, "flags.txt")
        if os.path.isfile(flags_file):
            with open(flags_file, encoding="utf-8", errors="replace") as f:
                for line in f:
                    name, _, value = line.strip().lstrip("-").partition("=")
                    if name:
                        self.flags[name] = value

    def checkpoints(self) -> list[str]:
        """Every checkpoint prefix `path/model.ckpt-N`, oldest step first."""
        steps = sorted(int(m.group(1)) for m in map(_CHECKPOINT.match, os.listdir(self.path))
                       if m)
        return [os.path.join(self.path, f"model.ckpt-{step}") for step in steps]

    def latest(self) -> str:
        """The prefix that the `checkpoint` index names (else the newest step),
        read without TensorFlow: an index that is not UTF-8 or names no
        checkpoint (empty, garbage) is a UserError naming it; one naming a
        checkpoint that is not here (the run was copied) means the newest."""
        index = os.path.join(self.path, "checkpoint")
        if not os.path.isfile(index):
            return self.checkpoints()[-1]
        have = ", ".join(os.path.basename(p) for p in self.checkpoints())
        fix = (f"pass --checkpoint=model.ckpt-N (it has {have}) or --checkpoint=all, or "
               f"remove that file (then the newest is imported)")
        try:
            with open(index, "rb") as f:
                text = f.read().decode("utf-8")
        except UnicodeDecodeError as e:
            raise UserError(f"the checkpoint index {index} is not UTF-8 ({e.reason} at byte "
                            f"{e.start}), so it names no checkpoint; {fix}. "
                            f"Received: t2t_dir={self.path!r}") from None
        except OSError as e:
            raise UserError(f"cannot read the checkpoint index {index} ({e.strerror}); "
                            f"{fix}. Received: t2t_dir={self.path!r}") from None
        named = _INDEX_LINE.search(text)
        if not named:
            what = "empty" if not text.strip() else "not the text tensor2tensor writes"
            raise UserError(f"the checkpoint index {index} is {what} (no "
                            f"model_checkpoint_path: \"model.ckpt-N\" line); {fix}. "
                            f"Received: t2t_dir={self.path!r}")
        name = named.group(1)
        for prefix in (os.path.join(self.path, name),   # (an absolute one stays itself)
                       os.path.join(self.path, os.path.basename(name))):
            if os.path.isfile(prefix + ".index"):
                return prefix
        return self.checkpoints()[-1]

    def resolve(self, checkpoint: str | None) -> list[str]:
        """The prefixes `--checkpoint` means: None or "" the latest, "all"
        every one, else the one named (a prefix, or `model.ckpt-N` here)."""
        if not checkpoint:
            return [self.latest()]
        if checkpoint == "all":
            return self.checkpoints()
        prefix = checkpoint if os.path.exists(checkpoint + ".index") else \
            os.path.join(self.path, checkpoint)
        if not os.path.exists(prefix + ".index"):
            have = ", ".join(os.path.basename(p) for p in self.checkpoints())
            raise UserError(f"no checkpoint {checkpoint} in {self.path} (it has {have}); "
                            f"pass one of those, or 'all'. Received: checkpoint={checkpoint!r}")
        return [prefix]

    @staticmethod
    def read_variables(prefix: str) -> dict[str, np.ndarray]:
        """{T2T variable name: value} of the checkpoint `prefix`; a UserError
        naming the prefix when a shard is missing, truncated or corrupt."""
        import tensorflow as tf

        from t2t_revival.run_dir.checkpoint_folder import CORRUPT_RESTORE_ERRORS

        try:
            reader = tf.train.load_checkpoint(prefix)
            return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
        except (*CORRUPT_RESTORE_ERRORS, tf.errors.OpError, ValueError) as e:
            why = " ".join(str(getattr(e, "message", e)).split())[:200]
            raise UserError(f"the tensor2tensor checkpoint {prefix} cannot be read ({why}); "
                            f"a .data-* or .index file is missing or truncated: copy it again "
                            f"from where the run was trained. Received: checkpoint={prefix!r}"
                            ) from None
