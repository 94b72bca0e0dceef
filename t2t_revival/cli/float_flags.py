"""Float flags that refuse NaN and infinities.

absl's bounds let NaN through (every comparison with it is false): a NaN
--max_train_minutes or --eval_early_stopping_delta would be taken, and the
last makes every evaluation "not better", so early stopping fires whatever
the loss does. `require_finite(name)`, after the flag's `flags.DEFINE_float`,
registers a validator that refuses them, also when a value is set after
parsing (a tensor2tensor flag mapped onto ours).
"""

from __future__ import annotations

import math

from absl import flags


def require_finite(name: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Refuse NaN and infinities as values of the float flag `name`."""
    flags.register_validator(name, lambda value: value is None or math.isfinite(value),
                             "must be a finite number (NaN and infinities are not)",
                             flag_values=flag_values)
