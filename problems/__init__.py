"""Registered problems. Importing this package registers every problem.

Each family of problems lives in its own module; import it here.
"""

from t2t_revival.problems import (  # noqa: F401  (registration)
    parsing_english, translate_multi30k, translate_plain_text, translate_tfds, translate_wmt,
    translate_wmt_bpe, translate_wmt_pairs)
