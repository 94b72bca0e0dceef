"""Serving export: a self-contained SavedModel (strings in, strings out) for TF Serving."""
