"""Models. `BUILT_IN` names every built-in model's "module:Class".

`t2t_revival.registry` reads it and registers each model lazily: a model class
needs Keras, and Keras imports TensorFlow, so the module is imported on the
first `registry.models.get(name)`, not here. (This package imports nothing,
so the registry and the models do not import each other.)
"""

BUILT_IN = {"transformer": "t2t_revival.models.transformer:Transformer"}
"""Model name -> "module:Class" of the built-in models."""
