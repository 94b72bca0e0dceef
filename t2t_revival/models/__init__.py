"""Models. Importing this package registers every model."""
