"""Registered hparam sets. Importing this package registers every set.

A few documented sets; everything else is an `--hparams` override (the paper's
Table 3 rows are in docs/reproducing.md).
"""

from t2t_revival.hparams_sets import parsing, transformer  # noqa: F401  (registration)
