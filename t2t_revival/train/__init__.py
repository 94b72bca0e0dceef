"""Training: strategy, schedule, loss, the distributed XLA step, checkpoints."""
