"""The devices a process computes on: the one owner of how the CPU is split
into logical devices and which GPUs are used.

    split_cpu(2)          # ["/device:CPU:0", "/device:CPU:1"]: before TF starts its devices
    visible_gpus(2)       # the first 2 visible GPUs (0: all of them)
    decode_devices(0, 0)  # t2t-decoder's: every visible GPU, or [] (the CPU, as ever)

The trainer's MirroredStrategy (`train.strategy.make_strategy`) and the
decoder's model copies (`decode.device_pool.DevicePool`) both take their
devices from here, with the same two flags: --cpu_devices=N splits the CPU
into N logical devices (how the several-device paths are tested without
GPUs: on one machine's cores they share one thread pool, so they show no
speed-up), --worker_gpu=N uses the first N visible GPUs (CUDA_VISIBLE_DEVICES
chooses and orders them).
"""

from __future__ import annotations

import tensorflow as tf

from t2t_revival.errors import UserError


def split_cpu(count: int) -> list[str]:
    """The CPU split into `count` logical devices (> 1), their names (where
    TensorFlow already split it into more, the first `count`); a UserError
    when TensorFlow already started fewer."""
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        pass  # devices already initialized in this process; keep what exists
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:count]
    if len(devices) != count:
        raise UserError(
            f"could not split the CPU into {count} devices: TensorFlow "
            f"was already initialized with {len(devices)}. "
            f"Received: num_cpu_devices={count}")
    return devices


def visible_gpus(worker_gpu: int = 0) -> list[str]:
    """The visible GPUs' names, only the first `worker_gpu` when it is not 0
    (more than are visible: a UserError)."""
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if worker_gpu:
        if worker_gpu > len(gpus):
            raise UserError(f"--worker_gpu={worker_gpu} but only {len(gpus)} GPUs are "
                            f"visible. Received: worker_gpu={worker_gpu}")
        gpus = gpus[:worker_gpu]
    return gpus


def decode_devices(worker_gpu: int = 0, cpu_devices: int = 0) -> list[str]:
    """The devices a decode runs one model copy on: the CPU split into
    `cpu_devices` (> 1), else the visible GPUs (`visible_gpus`), else none:
    [] decodes on the CPU as a process does by default."""
    if cpu_devices > 1:
        return split_cpu(cpu_devices)
    return visible_gpus(worker_gpu)


def short_name(device: str) -> str:
    """"/job:worker/replica:0/task:0/device:GPU:1" -> "GPU:1" (for messages)."""
    return device.rsplit("device:", 1)[-1]
