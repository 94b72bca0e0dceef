"""The names of the files of a training directory (no TensorFlow here).

    output_dir/
      hparams.json        the resolved HParams (`HPARAMS_FILE`)
      run.json            the run record: problem, model, flags (`RUN_FILE`)
      vocab.model         a copy of the SentencePiece vocabulary (`VOCAB_FILE`), or
      vocab.subwords      a tensor2tensor SubwordTextEncoder vocabulary
                          (`T2T_VOCAB_FILE`) in a run imported from tensor2tensor, or
      vocab.marian.json   a Marian model's tokenizer (`MARIAN_VOCAB_FILE`) in a run
                          imported from Hugging Face's format (OPUS-MT)
      checkpoint          TensorFlow's index of the checkpoints below
      ckpt-<step>.*       training checkpoints (`CHECKPOINT_PREFIX`)
      averaged/ckpt-<step>.*   t2t-avg-checkpoints' output (`AVERAGED_DIR`)
      best/ckpt-<step>.*  a copy of the checkpoint with the best dev metric
                          (`BEST_DIR`), its own `checkpoint` index and
                          best.json (`BEST_FILE`: step, metric, value)
      export/<version>/   TF Serving SavedModels (`EXPORT_DIR`)
      export/ctranslate2/<version>/   CTranslate2 models (`CTRANSLATE2_EXPORT_DIR`)
      export/litert/<version>/        LiteRT models (`LITERT_EXPORT_DIR`)
      train/, eval/       TensorBoard summaries
      .lock               the running trainer's lock (`LOCK_FILE`; pid of the last holder)
"""

from __future__ import annotations

import re

HPARAMS_FILE = "hparams.json"
RUN_FILE = "run.json"
VOCAB_FILE = "vocab.model"
"""The SentencePiece model, in a training directory and in a CTranslate2 export."""
T2T_VOCAB_FILE = "vocab.subwords"
"""A tensor2tensor SubwordTextEncoder vocabulary (one quoted subtoken a line),
in place of VOCAB_FILE in a run imported from tensor2tensor (t2t-import)."""
MARIAN_VOCAB_FILE = "vocab.marian.json"
"""A Marian model's tokenizer (`MarianVocabulary`: its SentencePiece models and
vocabulary), in place of VOCAB_FILE in a run imported by t2t-import --marian_dir."""
CHECKPOINT_PREFIX = "ckpt"
AVERAGED_DIR = "averaged"
BEST_DIR = "best"
BEST_FILE = "best.json"
"""Inside BEST_DIR."""
BEST_PENDING_FILE = "best.json.pending"
"""Inside a best/ update's folder while it is built: the record of the checkpoint
being copied, renamed BEST_FILE when the copy is complete (`BestCheckpoint`)."""
EXPORT_DIR = "export"
CTRANSLATE2_EXPORT_DIR = "ctranslate2"
"""Below EXPORT_DIR."""
LITERT_EXPORT_DIR = "litert"
"""Below EXPORT_DIR."""

LOCK_FILE = ".lock"
CHECKPOINT_INDEX = "checkpoint"
"""TensorFlow's index of a directory's checkpoints (`tf.train.CheckpointManager`)."""

_STEP = re.compile(r"-(\d+)$")


def checkpoint_step(checkpoint_path: str) -> int | None:
    """The step in a checkpoint prefix (`.../ckpt-300` -> 300), None without one."""
    match = _STEP.search(checkpoint_path)
    return int(match.group(1)) if match else None
