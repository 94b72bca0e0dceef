"""Command-line entry points: parse absl flags, call one library function.

Importing this package (which every `t2t_revival.cli.<name>` does first)
hides TensorFlow's C++ start-up lines unless the command line asks for them;
see `tensorflow_noise.quiet_tensorflow_startup`. Each CLI module runs its
`main` through `entry_point.run` and defines its path flags with `path_flags`.
"""

import sys

from t2t_revival.cli import tensorflow_noise

tensorflow_noise.quiet_tensorflow_startup(sys.argv)
