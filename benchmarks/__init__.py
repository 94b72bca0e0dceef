"""Harnesses that measure the product and print JSON; `RESULTS.md` records what
they measured. Each runs from the repository root as a module:

    python -m benchmarks.train_step --shapes tiny --skip_peer

What they share (the shared folder, machine facts, the JSON result, user
errors, peer runs) is `benchmarks.harness`. Not installed with the package.
"""
