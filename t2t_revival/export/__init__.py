"""Serving export: a self-contained SavedModel (strings in, strings out) for TF Serving,
and a CTranslate2 model directory for fast CPU/GPU decoding."""
