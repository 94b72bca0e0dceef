"""What every worker of a MultiWorker run must decide alike.

Workers' clocks differ, and only the chief evaluates; a worker that stops,
saves or goes on alone would leave the others waiting forever in the next
all-reduce. These functions turn one worker's view into every worker's, by a
collective; with one worker (every other strategy) they return it as it is.
(The reductions are SUMs: cross-device reductions know only SUM and MEAN.)
"""

from __future__ import annotations

import tensorflow as tf


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def _sum(strategy: tf.distribute.Strategy, value_fn):
    values = strategy.experimental_distribute_values_from_function(value_fn)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)


def any_worker(strategy: tf.distribute.Strategy, flag: bool) -> bool:
    """True on every worker when `flag` is True on any one (the time budget)."""
    if not is_multi_worker(strategy):
        return flag
    return float(_sum(strategy, lambda _: tf.constant(1.0 if flag else 0.0))) > 0.0


def chief_decides(strategy: tf.distribute.Strategy, chief: bool, *flags: bool) -> list[bool]:
    """The chief's `flags`, on every worker (a new best, early stopping)."""
    if not is_multi_worker(strategy):
        return list(flags)
    mine = [1.0 if (f and chief) else 0.0 for f in flags]
    return [bool(v > 0.0) for v in _sum(strategy, lambda _: tf.constant(mine)).numpy()]


def chief_value(strategy: tf.distribute.Strategy, value: float) -> float:
    """The value of the worker holding replica 0 (the chief), on every worker
    (the cooldown's end, estimated from each worker's own clock)."""
    if not is_multi_worker(strategy):
        return value
    return float(_sum(strategy, lambda context: tf.constant(
        float(value) if context.replica_id_in_sync_group == 0 else 0.0)))

