"""Path flags and the usr_dir: what every CLI does with the files and folders
its flags name.

`define_path` defines a flag whose `~` means the home folder however it is
written; `check_directory` and `check_output_file` refuse, in one line, a
path that cannot be what the flag needs before any long work starts;
`define_usr_dir_flag` and `import_usr_dir` give every CLI that resolves
registered names tensor2tensor's `--t2t_usr_dir`.
"""

from __future__ import annotations

import os
import sys
import tempfile

from absl import flags

from t2t_revival.errors import UserError


class _PathParser(flags.ArgumentParser):
    """A path flag's value with a leading `~` (or `~user`) expanded, as the
    shell expands `--flag ~/x` but not `--flag=~/x`; with `comma_separated`,
    each comma-separated path (a checkpoint list)."""

    syntactic_help = "a path (~ is your home folder)"

    def __init__(self, comma_separated: bool = False):
        self.comma_separated = comma_separated

    def parse(self, argument):
        if not isinstance(argument, str) or not argument:
            return argument
        if self.comma_separated:
            return ",".join(os.path.expanduser(part) for part in argument.split(","))
        return os.path.expanduser(argument)

    def flag_type(self) -> str:
        return "path"


def define_path(name: str, default: str | None, help: str,
                comma_separated: bool = False) -> flags.FlagHolder:
    """`flags.DEFINE_string` for a file or folder: `--name=~/x` means your home's x,
    in every CLI alike (the shell leaves a `~` after `=` as it is).

    The flag belongs to the calling module, as one `flags.DEFINE_string` there
    would (absl would name this module), so that its `--helpshort` lists it.
    """
    caller = sys._getframe(1).f_globals["__name__"]
    return flags.DEFINE(_PathParser(comma_separated), name, default, help,
                        serializer=flags.ArgumentSerializer(),
                        module_name=sys.argv[0] if caller == "__main__" else caller)


def define_paths(name: str, help: str) -> flags.FlagHolder:
    """`define_path` for several files: the flag repeated, or its value
    comma-separated, or both; `paths` gives the list in order."""
    caller = sys._getframe(1).f_globals["__name__"]
    return flags.DEFINE_multi(_PathParser(comma_separated=True), flags.ArgumentSerializer(),
                              name, None, help,
                              module_name=sys.argv[0] if caller == "__main__" else caller)


def paths(values: list[str] | None) -> list[str]:
    """The paths of a `define_paths` flag's values, in order (none: [])."""
    return [path for value in values or [] for path in value.split(",")]


USR_DIR_FLAG = "t2t_usr_dir"


def define_usr_dir_flag(module_name: str) -> None:
    """Define `--t2t_usr_dir` (once per process) and show it in `module_name`'s help.

    Called at the top of every CLI that resolves registered names.
    """
    if USR_DIR_FLAG not in flags.FLAGS:
        flags.DEFINE_string(
            USR_DIR_FLAG, None,
            "A folder of your own @register_problem/@register_hparams/@register_model "
            "code (a package with __init__.py, or a folder of modules), imported before "
            "any name is looked up, as in tensor2tensor. The trainer records it in "
            "run.json, so the decoder, exporter and averager of that output_dir import "
            "it without the flag.")
    flags.FLAGS.register_key_flag_for_module(module_name, flags.FLAGS[USR_DIR_FLAG])


def import_usr_dir(output_dir: str | None = None) -> str | None:
    """Import `--t2t_usr_dir`, or else the usr_dir that output_dir's run.json records.

    Returns the absolute usr_dir imported (None when there is none). The flag,
    when given, wins over the record. A recorded usr_dir that no longer exists
    is a UserError saying to pass --t2t_usr_dir.
    """
    from t2t_revival.usr_dir import import_usr_dir as import_dir

    given = flags.FLAGS[USR_DIR_FLAG].value if USR_DIR_FLAG in flags.FLAGS else None
    if given:
        return import_dir(given)
    recorded = _recorded_usr_dir(output_dir) if output_dir else ""
    if not recorded:
        return None
    if not os.path.isdir(recorded):
        raise UserError(f"the usr_dir {recorded} that {output_dir}'s run.json records no "
                        f"longer exists; pass --t2t_usr_dir=DIR where that code is now. "
                        f"Received: output_dir={output_dir!r}")
    return import_dir(recorded)


def _recorded_usr_dir(output_dir: str) -> str:
    """The usr_dir in output_dir/run.json ("" without a run.json or a usr_dir)."""
    from t2t_revival.run_dir.run_record import RunRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    try:
        return RunRecord.load(TrainingDirectory(output_dir).run_file).usr_dir
    except OSError:   # missing, a folder, unreadable: said where the run is read
        return ""


def check_directory(flag: str, path: str | None, writable: bool = False) -> str:
    """The directory `--flag` names, refused as one line when it cannot be one.

    Refused: an empty value, a path that is a file (or under one) and, with
    `writable`, a place where no file can be created (checked by creating one
    in the directory, or in its nearest existing parent when it does not
    exist yet), so long work never starts only to fail at its first write.
    """
    if not path:
        raise UserError(f"--{flag} must name a directory. Received: --{flag}={path!r}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--{flag} names a file, not a directory; point it at a "
                        f"directory. Received: --{flag}={path!r}")
    if writable or not os.path.exists(path):
        _check_can_create_in(flag, path, path, writable)
    return path


def check_output_file(flag: str, path: str) -> str:
    """`--flag` names a file that can be written (temp file and rename beside it)."""
    if not path or os.path.isdir(path):
        raise UserError(f"--{flag} must name a file, and {path!r} is "
                        f"{'a directory' if path else 'empty'}. Received: --{flag}={path!r}")
    _check_can_create_in(flag, os.path.dirname(os.path.abspath(path)), path, True)
    return path


def _check_can_create_in(flag: str, directory: str, path: str, writable: bool) -> None:
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"--{flag} lies under {existing}, which is a file, not a "
                        f"directory. Received: --{flag}={path!r}")
    if not writable:
        return
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise UserError(f"cannot write in {existing} ({e.strerror}); choose a writable "
                        f"--{flag} or fix the folder's permissions. "
                        f"Received: --{flag}={path!r}") from None
