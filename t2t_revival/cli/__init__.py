"""Command-line entry points: parse absl flags, call one library function.

Importing this package (which every `t2t_revival.cli.<name>` does first)
hides TensorFlow's C++ start-up lines unless the command line asks for them;
see `common.quiet_tensorflow_startup`.
"""

import sys

from t2t_revival.cli import common

common.quiet_tensorflow_startup(sys.argv)
