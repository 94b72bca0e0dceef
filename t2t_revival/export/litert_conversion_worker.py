"""The child process of `LiteRTProgramCache.convert`: `export_litert` of one
checkpoint at one beam setting, TensorFlow imported here and not in the
decoding process.

    python -m t2t_revival.export.litert_conversion_worker '{"output_dir": ...,
        "checkpoint_path": ..., "export_dir": ..., "usr_dir": "", "beam": {...}}'

Writes `<export_dir>/1/`. A failure exits non-zero with its one line last on
stderr (`run_exporter` makes it `ConversionFailed`). With "parent_pid" in the
request, it ends when that process (the decoder) dies, killed or not
(`parent_death.die_with_parent`), before it imports TensorFlow.
"""

from __future__ import annotations

import json
import sys


def convert(request: dict) -> str:
    """Import the run's usr_dir (the request's, else run.json's), then
    `export_litert` as version 1 of `request["export_dir"]`; return its folder."""
    from t2t_revival.export.litert_export import export_litert
    from t2t_revival.run_dir.restore_warnings import hide_restore_warnings
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    from t2t_revival.usr_dir import import_usr_dir

    hide_restore_warnings()
    usr_dir = request.get("usr_dir") or \
        TrainingDirectory(request["output_dir"]).read_run_record().usr_dir
    import_usr_dir(usr_dir)   # (one that no longer exists: a one-line error)
    return export_litert(request["output_dir"], request["checkpoint_path"],
                         dict(request["beam"]), request["export_dir"], 1)


def main(argv: list[str]) -> int:
    request = json.loads(argv[1])
    if request.get("parent_pid"):
        from t2t_revival.process.parent_death import die_with_parent
        die_with_parent(int(request["parent_pid"]))
    from t2t_revival.errors import UserError

    try:
        convert(request)
    except UserError as e:
        sys.stderr.write(f"{e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
