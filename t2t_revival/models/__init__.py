"""Models. Importing this package registers every model."""

from t2t_revival.models.transformer import Transformer  # noqa: F401  (registration)
