"""Models. Importing this package registers every model.

Lazily (see `t2t_revival.registry`): a model class needs Keras, and Keras
imports TensorFlow, so the module is imported on the first
`registry.models.get(name)`, not here.
"""

from t2t_revival.registry import models

models.register_lazy("transformer", "t2t_revival.models.transformer:Transformer")
