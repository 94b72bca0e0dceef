"""Kept for users' modules (`--t2t_usr_dir`) that import `t2t_revival.hparams`:
the hparams live in `t2t_revival.settings.hparams` now."""

from t2t_revival.settings.hparams import *  # noqa: F401,F403
from t2t_revival.settings.hparams import HParams, resolve  # noqa: F401
