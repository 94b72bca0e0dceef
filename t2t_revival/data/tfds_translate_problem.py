"""`TfdsTranslateProblem`: any TFDS translation dataset as a problem."""

from __future__ import annotations

import os
from typing import Iterator

from t2t_revival.data.data_error import DataError
from t2t_revival.data.text2text_problem import Text2TextProblem


class _TfdsPairReader:
    """(source, target) texts of one TFDS split, with TextPairReader's counters."""

    def __init__(self, problem: "TfdsTranslateProblem", split: str):
        self.problem, self.split = problem, split
        self.pairs = 0
        self.empty_dropped = 0
        self.undecodable_skipped = 0  # TFDS text is UTF-8 already

    def __iter__(self) -> Iterator[tuple[str, str]]:
        import tensorflow_datasets as tfds

        source, target = self.problem.source_language, self.problem.target_language
        dataset = self.problem.builder().as_dataset(split=self.split, shuffle_files=False)
        for example in tfds.as_numpy(dataset):
            src = example[source].decode("utf-8").strip()
            tgt = example[target].decode("utf-8").strip()
            if not src or not tgt:
                self.empty_dropped += 1
                continue
            self.pairs += 1
            yield src, tgt


class TfdsTranslateProblem(Text2TextProblem):
    """Sentence pairs read through `tensorflow_datasets` from a prepared TFDS data_dir.

    The pairs go through the same vocabulary training and sharded TFRecord
    writing as the archive-based problems. TFDS problems never download:
    preparing a WMT dataset takes hours and is the user's step, e.g.
    `tfds build wmt14_translate/de-en --data_dir=DIR`; with nothing prepared,
    datagen stops with one line saying that command.

    Subclasses set `tfds_name` (builder/config), the two languages (feature
    names of the TFDS `Translation`) and `tfds_splits` (our split -> TFDS
    split, e.g. "dev" -> "validation").

    Args:
        download, num_workers: as for every Text2TextProblem (download is
            unused here).
        tfds_data_dir: the TFDS data_dir the dataset was prepared in (default
            TFDS's own, `~/tensorflow_datasets` or $TFDS_DATA_DIR).
    """

    tfds_name: str = ""
    source_language: str = "en"
    target_language: str = "de"
    tfds_splits: dict[str, str] = {"train": "train", "dev": "validation", "test": "test"}

    def __init__(self, download: bool = True, num_workers: int | None = None,
                 tfds_data_dir: str | None = None):
        super().__init__(download=download, num_workers=num_workers)
        self.tfds_data_dir = tfds_data_dir

    def builder(self):
        import tensorflow_datasets as tfds

        return tfds.builder(self.tfds_name, data_dir=self.tfds_data_dir)

    def prepare(self, tmp_dir: str) -> None:
        """Check that the dataset is prepared (a DataError saying how, when not)."""
        builder = self.builder()
        try:
            builder.as_dataset(split=self.tfds_splits["train"])
        except AssertionError as e:  # TFDS: "could not find data in DIR. Please make sure..."
            if "could not find data" not in str(e):
                raise
            data_dir = self.tfds_data_dir or os.path.dirname(os.path.dirname(
                os.path.dirname(str(builder.data_path))))
            raise DataError(
                f"The TFDS dataset {self.tfds_name} is not prepared in {data_dir}; "
                f"prepare it once with network access (`tfds build {self.tfds_name} "
                f"--data_dir={data_dir}`, or tfds.builder({self.tfds_name!r}, "
                f"data_dir=...).download_and_prepare()), or pass --tfds_data_dir where "
                f"it is. Received: tfds_data_dir={self.tfds_data_dir!r}") from None

    def readers(self, split: str, tmp_dir: str) -> list[_TfdsPairReader]:
        return [_TfdsPairReader(self, self.tfds_splits[split])]

    def expected_pairs(self, split: str) -> int | None:
        splits = self.builder().info.splits
        name = self.tfds_splits[split]
        return splits[name].num_examples if name in splits else None
