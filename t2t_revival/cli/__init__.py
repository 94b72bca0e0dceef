"""Command-line entry points: parse absl flags, call one library function."""
