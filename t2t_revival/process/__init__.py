"""The process: signals, stops, cores, memory, progress and compile caches.

- `stop_controller.StopController`, `save_then_stop.SaveThenStop`,
  `stopped_by_signal`: a run that stops on SIGINT/SIGTERM or its time budget,
  saving first.
- `usable_cores`, `device_memory`: what the process may use.
- `progress_bar.ProgressBar`, `phase_times`: what a long job shows and times.
- `xla_compile_cache.XlaCompileCache`: XLA's persistent compile cache.

This `__init__` imports nothing: import the modules.
"""
