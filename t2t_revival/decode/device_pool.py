"""`DevicePool`: one copy of a search per device, lent to batches as each
device frees up (CTranslate2's `device_index=[0, 1]`, Marian's `--devices`).

    pool = DevicePool([("/device:GPU:0", decoder), ("/device:GPU:1", copy)], slots=1)
    sequences, scores = pool.run(lambda member: member.search_rows(...))

`Decoder.translate` hands each batch to `run` from a thread of
`decode_in_length_order` (which takes the results back in length order, so
the outputs stay in input order); `run` waits for a free slot, runs the
batch on that slot's device (`tf.device`) and frees the slot. Each member is
a whole search over its own copy of the weights (`copy_to_device`), so a
batch gives the same outputs on whichever device runs it.

A device that runs out of memory is said once (`log`) and given up; its
batch goes to another device. When the last one runs out, the error is
raised (the batches decoded so far are kept by the caller: `DecodeJournal`).
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Generic, Sequence, TypeVar

import tensorflow as tf

from t2t_revival.process.logical_devices import short_name
from t2t_revival.process.xla_compile_cache import cache_disk_full

Member = TypeVar("Member")
Result = TypeVar("Result")


@functools.singledispatch
def copy_to_device(model, device: str):
    """A copy of `model` whose weights live on `device`, holding the weights
    `model` has now (`copy_weights` copies them again): a Keras model
    rebuilt from its config. Other kinds register their own (`Ensemble`)."""
    from t2t_revival.models.build_model import built

    with tf.device(device):
        copy = built(type(model).from_config(model.get_config()))
        copy.set_weights(model.get_weights())
    return copy


class DevicePool(Generic[Member]):
    """What runs on each device, and the slots free to run a batch.

    Args:
        members: (device name, the search there) of each device. One member:
            `run` calls it in the caller's thread, under no device scope
            (today's single-device decode, untouched).
        slots: batches each device runs at once (the decoder's
            parallel_batches; 1 with sampling, whose seed state is the
            member's).
        log: where a device given up is said.
    """

    def __init__(self, members: Sequence[tuple[str, Member]], slots: int = 1,
                 log: Callable[[str], None] = print):
        if not members:
            raise ValueError("a DevicePool needs at least one device. Received: members=[]")
        self.members = list(members)
        self.slots = max(1, slots)
        self.log = log
        self.lost: dict[str, str] = {}
        """{device: why} of the devices given up (each said once)."""
        # Free slots, device after device: the first batches spread over all.
        self._free = [member for _ in range(self.slots) for member in self.members]
        self._ready = threading.Condition()

    @property
    def devices(self) -> list[str]:
        """Every device's name, the given-up ones too."""
        return [device for device, _ in self.members]

    def working(self) -> list[str]:
        """The devices not given up."""
        return [device for device in self.devices if device not in self.lost]

    def describe(self) -> str:
        """"2 devices (CPU:0, CPU:1)", for the line that says what decodes."""
        names = ", ".join(short_name(d) for d in self.devices)
        return f"{len(self.devices)} devices ({names})"

    def run(self, work: Callable[[Member], Result]) -> Result:
        """`work(member)` on a free device's member (waiting for one),
        under that device's scope; a device out of memory is given up and
        the work goes to another, until none is left (then its error)."""
        if len(self.members) == 1:
            return work(self.members[0][1])
        while True:
            device, member = self._take()
            try:
                with tf.device(device):
                    result = work(member)
            except tf.errors.ResourceExhaustedError as error:
                if cache_disk_full(error) is not None:   # the compile cache's disk, not
                    self._give_back((device, member))    # the device's memory
                    raise
                self._give_up(device, error)
                continue
            except BaseException:
                self._give_back((device, member))
                raise
            self._give_back((device, member))
            return result

    # ------------------------------------------------------------------
    def _take(self) -> tuple[str, Member]:
        with self._ready:
            while True:
                if not self.working():
                    raise self._last_error
                for i, (device, member) in enumerate(self._free):
                    if device not in self.lost:
                        return self._free.pop(i)
                self._ready.wait()

    def _give_back(self, slot: tuple[str, Member]) -> None:
        with self._ready:
            self._free.append(slot)
            self._ready.notify()

    def _give_up(self, device: str, error: Exception) -> None:
        """Give up `device` (said once, while others are left); none left:
        every waiting batch wakes to raise `error`."""
        with self._ready:
            first = device not in self.lost
            if first:
                message = (getattr(error, "message", "") or str(error)).strip()
                self.lost[device] = message.splitlines()[0][:200] if message else "no details"
            self._last_error = error
            left = self.working()
            self._ready.notify_all()
        if not left:
            raise error
        if first:
            self.log(f"{short_name(device)} ran out of memory ({self.lost[device]}); the "
                     f"decode goes on on {', '.join(short_name(d) for d in left)}")


@functools.singledispatch
def copy_weights(model, copy) -> None:
    """`copy` (`copy_to_device`'s) takes `model`'s weights as they are now."""
    copy.set_weights(model.get_weights())
