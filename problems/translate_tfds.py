"""TFDS translation datasets as problems (read through tensorflow_datasets).

Use these when the dataset is already prepared in a TFDS data_dir (yours, or
a shared one): `tfds build wmt14_translate/de-en --data_dir=DIR`, then
`t2t-datagen --problem=translate_ende_wmt14_tfds --tfds_data_dir=DIR`. The
archive-based problems of translate_wmt.py read the official WMT archives
instead and need no TFDS preparation.
"""

from __future__ import annotations

from t2t_revival.data.tfds_translate_problem import TfdsTranslateProblem
from t2t_revival.registry import register_problem


@register_problem
class TranslateEndeWmt14Tfds(TfdsTranslateProblem):
    """TFDS wmt14_translate/de-en (the WMT14 En-De corpora; newstest2013 dev, newstest2014 test), 32768 shared BPE pieces."""

    tfds_name = "wmt14_translate/de-en"
    vocab_size = 32768
    num_shards = {"train": 100, "dev": 1}


@register_problem
class TranslateEndeWmtT2tTfds(TfdsTranslateProblem):
    """TFDS wmt_t2t_translate/de-en (tensor2tensor's En-De training mix), 32768 shared BPE pieces."""

    tfds_name = "wmt_t2t_translate/de-en"
    vocab_size = 32768
    num_shards = {"train": 100, "dev": 1}
