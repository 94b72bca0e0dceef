"""File formats and how they are written.

- `atomic_file`: write to a temporary name, then rename (nothing half-written);
  the one rule for building a folder or file at a temporary name
  (`temporary_name`) and sweeping what killed processes left there.
- `disk_cache.DiskCache`: a folder of entries processes share (the compile
  caches): lock, manifest, size-limited eviction, sweep.
- `text_lines`: UTF-8 text files of lines (.gz too), one clear error a bad line.
- `json_record.JsonRecord`: a typed JSON record file (run.json, best.json).
- `protobuf_wire`: the few protobuf wire-format fields we read and write.

This `__init__` imports nothing: import the modules.
"""
