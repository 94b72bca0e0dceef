"""Decoding: beam search and sampling over a step callback, the engines that
translate (the TensorFlow `Decoder`, ensembles, forced scoring) and decoding's
rules (`decode_length`: input and output lengths, the sort-and-batch loop).

This `__init__` imports nothing (no TensorFlow, no Keras), so that
`decode_length` serves the CTranslate2 translator without them: import the
modules, e.g. `from t2t_revival.decode.beam_search import beam_search`.
"""
