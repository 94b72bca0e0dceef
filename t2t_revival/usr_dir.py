"""`--t2t_usr_dir`: the user's own problems, hparam sets and models, imported
before the registry is read (as tensor2tensor's `usr_dir.import_usr_dir`).

A usr_dir is either a Python package (a folder with `__init__.py`, which
imports its modules) or a plain folder of modules (each `*.py` is imported,
in name order). Its `@register_problem`, `@register_hparams` and
`@register_model` decorators then take effect like the built-in ones.

    my_usr_dir/
      __init__.py          from . import my_problem
      my_problem.py        @register_problem class MyProblem(Text2TextProblem): ...

Once per process: Python's own module cache (`sys.modules`) is the record, so
a second import of the same folder checks it again and runs none of its
modules twice. Its registrations come after the built-in names (each
registry loads those first), so a clash names the user's file.

An error while importing it (a SyntaxError, an ImportError, any exception
its code raises, a duplicate registered name, a `sys.exit` or an argparse
that reads the command's own flags) is a `UsrDirError`: one line naming the
file and line where it happened, never swallowed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import traceback

from t2t_revival.errors import UserError


class UsrDirError(UserError):
    """A usr_dir that is missing, not a folder, or fails to import."""


def _where(error: BaseException, usr_dir: str) -> str:
    """`file:line` inside usr_dir where `error` arose (the deepest such frame)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}:{error.lineno}"
    inside = [f for f in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(f.filename).startswith(usr_dir + os.sep)]
    if inside:
        return f"{inside[-1].filename}:{inside[-1].lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else usr_dir


def _module_names(usr_dir: str) -> tuple[str, list[str]]:
    """(folder to put on sys.path, module names to import)."""
    if os.path.isfile(os.path.join(usr_dir, "__init__.py")):
        parent, name = os.path.split(usr_dir)
        return parent, [name]
    names = sorted(f[:-3] for f in os.listdir(usr_dir)
                   if f.endswith(".py") and not f.startswith((".", "_")))
    return usr_dir, names


def _check_no_clash(name: str, folder: str, usr_dir: str) -> None:
    """A module of that name imported from elsewhere would hide the user's."""
    module = sys.modules.get(name)
    if module is None:
        return
    origin = os.path.abspath(getattr(module, "__file__", None) or "")
    if not origin.startswith(os.path.join(folder, name)):
        raise UsrDirError(
            f"the usr_dir module name '{name}' is already taken by {origin or 'a built-in module'}"
            f"; rename {os.path.join(folder, name)} (e.g. my_{name}). "
            f"Received: t2t_usr_dir={usr_dir!r}")


def import_usr_dir(path: str | None) -> str | None:
    """Import the usr_dir at `path` (its modules once per process); returns its absolute path.

    None or "" does nothing and returns None. A missing path, a file, an empty
    folder and an import error are UsrDirErrors (one line, file:line).
    """
    if not path:
        return None
    usr_dir = os.path.abspath(os.path.expanduser(str(path))).rstrip(os.sep)
    if not os.path.exists(usr_dir):
        raise UsrDirError(f"the usr_dir {usr_dir} does not exist; point --t2t_usr_dir at "
                          f"the folder of your problem/hparams/model modules. "
                          f"Received: t2t_usr_dir={path!r}")
    if not os.path.isdir(usr_dir):
        raise UsrDirError(f"the usr_dir {usr_dir} is a file; --t2t_usr_dir takes the "
                          f"folder that holds it (a package with __init__.py, or a folder "
                          f"of modules). Received: t2t_usr_dir={path!r}")
    folder, names = _module_names(usr_dir)
    if not names:
        raise UsrDirError(f"the usr_dir {usr_dir} holds no Python module (no __init__.py, "
                          f"no *.py); put your @register_problem code there. "
                          f"Received: t2t_usr_dir={path!r}")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    for name in names:
        _check_no_clash(name, folder, usr_dir)
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                importlib.import_module(name)
        except SystemExit as e:   # sys.exit, or argparse reading the command's own flags
            said = (out.getvalue() + err.getvalue()).strip().splitlines()
            out, err = io.StringIO(), io.StringIO()   # said in the line instead
            raise UsrDirError(
                f"importing the usr_dir {usr_dir} failed at {_where(e, usr_dir)}: the module "
                f"exited while importing (SystemExit: {e.code})"
                f"{f', after printing {said[-1]!r}' if said else ''}; every t2t command "
                f"imports the usr_dir, so its modules must not exit or parse the command "
                f"line when imported: put such code under `if __name__ == \"__main__\":`. "
                f"Received: t2t_usr_dir={path!r}") from None
        except Exception as e:   # noqa: BLE001  every import failure, reported where it is
            detail = e.msg if isinstance(e, SyntaxError) else str(e)
            raise UsrDirError(
                f"importing the usr_dir {usr_dir} failed at {_where(e, usr_dir)}: "
                f"{type(e).__name__}: {detail}; fix that file. "
                f"Received: t2t_usr_dir={path!r}") from None
        finally:   # what the module printed, after its import
            sys.stdout.write(out.getvalue())
            sys.stderr.write(err.getvalue())
    return usr_dir
