"""Registered problems. Importing this package registers every problem.

Each family of problems lives in its own module; import it here.
"""
