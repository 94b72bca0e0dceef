"""`ServedRun`: one run that t2t-insights-server serves (`InsightsConfiguration`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ServedRun:
    """One run of the configuration: its label, folder, languages, decode
    settings and checkpoint."""

    label: str
    output_dir: str
    source_language: str = ""
    target_language: str = ""
    decode_hparams: str = ""
    checkpoint_path: str = ""   # "" : the run's newest intact checkpoint
