"""Choosing the tf.distribute strategy.

- `TF_CONFIG` naming several workers: MultiWorkerMirroredStrategy.
- `num_cpu_devices` > 1: the CPU is split into that many logical devices and
  MirroredStrategy runs over them (how the mirrored path is tested without GPUs).
- Otherwise MirroredStrategy over every visible GPU (or the first
  `worker_gpu`), or over the CPU when there is none.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from t2t_revival.errors import UserError
from t2t_revival.process.logical_devices import split_cpu, visible_gpus


def _tf_config_workers() -> int:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UserError(f"TF_CONFIG is not valid JSON ({e}); it must describe the "
                        f"cluster as in the tf.distribute docs. Received: TF_CONFIG={raw[:80]!r}")
    cluster = config.get("cluster", {})
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def make_strategy(num_cpu_devices: int = 0, worker_gpu: int = 0) -> tf.distribute.Strategy:
    """Build the strategy; call before anything else initializes TF's devices.

    Args:
        num_cpu_devices: split the CPU into this many logical devices and
            mirror over them (0 or 1: no split).
        worker_gpu: use only the first N visible GPUs (0: all of them).
    """
    if _tf_config_workers() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if num_cpu_devices > 1:
        return tf.distribute.MirroredStrategy(split_cpu(num_cpu_devices))
    gpus = visible_gpus(worker_gpu)
    if gpus:
        return tf.distribute.MirroredStrategy(gpus)
    return tf.distribute.MirroredStrategy(["/cpu:0"])


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True for the worker that writes checkpoints and summaries."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())


def local_devices(strategy: tf.distribute.Strategy) -> list[str]:
    """The devices `strategy` computes on in this process (the default
    strategy: TensorFlow's default device, a GPU if any)."""
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:   # the default strategy
        return [d.name for d in tf.config.list_logical_devices("GPU")][:1] or ["CPU"]


def on_cpu_only(strategy: tf.distribute.Strategy) -> bool:
    """Whether every device of `strategy` is a CPU."""
    return all("CPU" in d.upper() for d in local_devices(strategy))
