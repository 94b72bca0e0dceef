"""`t2t-bleu --translations_dir=DIR --event_dir=EVENTS`: tensor2tensor's mode.

As its bin/t2t_bleu.py: every file of DIR whose name ends in `-<steps>` (a
translation by the checkpoint of that step, as `t2t-translate-all` named
them), from the lowest step up, is scored against the reference, and
`BLEU_uncased<tag_suffix>` and `BLEU_cased<tag_suffix>` are written as
TensorBoard scalars at that step (wall time: the file's mtime) to an event
file in EVENTS; `last_evaluated_step.txt` there keeps the last step, where a
later run with `min_steps=-1` starts. With `report_zero` (the default when
it starts from step 0), BLEU 0 is written first at step 0, at the time of the
oldest file. With `wait_minutes`, it waits that long for each next file.
"""

from __future__ import annotations

import glob
import os
import socket
import time
from typing import Callable, Iterator, Sequence

from t2t_revival.errors import UserError
from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.metrics.bleu_score import BleuScore

LAST_STEP_FILE = "last_evaluated_step.txt"

_SLEEP_SECONDS = 10


def step_files(folder: str, min_steps: int) -> list[tuple[int, str]]:
    """(steps, path) of the files of `folder` named `*-<steps>`, lowest first,
    as bleu_hook's `_read_stepfiles_list` (steps below `min_steps` left out)."""
    found = []
    for path in glob.glob(os.path.join(folder, "*-[0-9]*")):
        try:
            steps = int(path.rsplit("-")[-1])
        except ValueError:  # the part after the last '-' is not a number
            continue
        if steps >= min_steps and os.path.isfile(path):
            found.append((steps, path))
    return sorted(found)


def _arriving(folder: str, wait_minutes: float, min_steps: int) -> Iterator[tuple[int, str]]:
    """Each step file once, lowest step first, waiting up to `wait_minutes`
    for the next (bleu_hook's `stepfiles_iterator`)."""
    deadline = time.time() + wait_minutes * 60
    while True:
        found = step_files(folder, min_steps)
        while not found and wait_minutes and time.time() < deadline:
            time.sleep(_SLEEP_SECONDS)
            found = step_files(folder, min_steps)
        if not found:
            return
        steps, path = found[0]
        deadline = os.path.getctime(path) + wait_minutes * 60
        min_steps = steps + 1
        yield steps, path


def evaluate_translations_dir(folder: str, event_dir: str,
                              score: Callable[[str], Sequence[BleuScore]], *,
                              tag_suffix: str = "", min_steps: int = -1,
                              wait_minutes: float = 0,
                              report_zero: bool | None = None) -> list[tuple[int, list]]:
    """Score every step file of `folder` (`score(path)`: T2T's figures) into
    TensorBoard events in `event_dir`. Returns [(steps, [BleuScore, ...])].

    A UserError, before any event file is written, when there is nothing to
    score: no step file at or above `min_steps` (after `wait_minutes`)."""
    if not os.path.isdir(folder):
        raise UserError(f"--translations_dir must be a folder of translations named "
                        f"'<name>-<steps>'. Received: translations_dir={folder!r}")
    last_step_file = os.path.join(event_dir, LAST_STEP_FILE)
    if min_steps == -1:
        min_steps = (int(open(last_step_file).read()) if os.path.exists(last_step_file)
                     else 0)
    if not wait_minutes and not step_files(folder, min_steps):
        raise UserError(_nothing_to_score(folder, min_steps))
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2
    from tensorflow.core.util import event_pb2

    os.makedirs(event_dir, exist_ok=True)
    if report_zero is None:
        report_zero = min_steps == 0
    events = os.path.join(event_dir, f"events.out.tfevents.{time.time():.6f}."
                                     f"{socket.gethostname()}")
    results = []
    with tf.io.TFRecordWriter(events) as writer:
        def write(step: int, wall_time: float, values: dict[str, float]) -> None:
            summary = summary_pb2.Summary(value=[
                summary_pb2.Summary.Value(tag=tag + tag_suffix, simple_value=value)
                for tag, value in values.items()])
            event = event_pb2.Event(wall_time=wall_time, step=step, summary=summary)
            writer.write(event.SerializeToString())
            writer.flush()

        writer.write(event_pb2.Event(wall_time=time.time(),
                                     file_version="brain.Event:2").SerializeToString())
        for steps, path in _arriving(folder, wait_minutes, min_steps):
            scores = list(score(path))
            if report_zero:
                start = min(os.path.getmtime(os.path.join(folder, name))
                            for name in os.listdir(folder)
                            if os.path.isfile(os.path.join(folder, name)))
                write(0, start, {s.label: 0.0 for s in scores})
                report_zero = False
            write(steps, os.path.getmtime(path), {s.label: s.score for s in scores})
            write_atomically(last_step_file, f"{steps}\n")
            results.append((steps, scores))
    if not results:   # none arrived within wait_minutes: no empty event file left
        os.remove(events)
        raise UserError(_nothing_to_score(folder, min_steps, wait_minutes))
    return results


def _nothing_to_score(folder: str, min_steps: int, wait_minutes: float = 0) -> str:
    """Why `folder` holds nothing to score, as a UserError's line."""
    found = step_files(folder, 0)
    waited = f" (waited {wait_minutes:g} minutes)" if wait_minutes else ""
    if found:
        return (f"no translation of {min_steps} steps or more in {folder}{waited}: its step "
                f"files go up to step {found[-1][0]} (lower --min_steps; -1 starts at the "
                f"step in --event_dir's {LAST_STEP_FILE}). Received: min_steps={min_steps}")
    return (f"no translations to score in {folder}{waited}: tensor2tensor's mode scores the "
            f"files named <name>-<steps> there, one per checkpoint (e.g. t2t-decoder "
            f"--decode_to_file={os.path.join(folder, 'test.de-2000')}). Received: translations_dir={folder!r}")
