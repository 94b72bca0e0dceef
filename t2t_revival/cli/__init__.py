"""Command-line entry points: parse absl flags, call one library function.

Importing this package (which every `t2t_revival.cli.<name>` does first)
gives a standard stream the process started with closed /dev/null
(`closed_streams`), hides TensorFlow's C++ start-up lines unless the command line asks for them
(see `tensorflow_noise.quiet_tensorflow_startup`), writes the project's own
log lines without absl's prefix (`plain_own_lines`), and hides TensorFlow's
warnings about a damaged checkpoint that `CheckpointFolder` says in one line
of its own (`restore_warnings.hide_restore_warnings`). Each CLI module runs its
`main` through `entry_point.run` and defines its path flags with `path_flags`.
"""

import sys

from t2t_revival.cli.closed_streams import reopen_closed_streams

reopen_closed_streams()   # first: a closed stderr would break what follows

from t2t_revival.cli import plain_own_lines, tensorflow_noise  # noqa: E402
from t2t_revival.run_dir.restore_warnings import hide_restore_warnings

tensorflow_noise.quiet_tensorflow_startup(sys.argv)
plain_own_lines.show_own_lines_plain(sys.argv)
hide_restore_warnings()
