"""Registered hparam sets. Importing this package registers every set.

A few documented sets; everything else is an `--hparams` override (see the
README's table of the paper's Table 3 rows).
"""

from t2t_revival.hparams_sets import parsing, transformer  # noqa: F401  (registration)
