"""t2t-decoder's decodes of one file on several device counts, in one process.

    python tests/scripts/device_decodes.py RUN INPUT OUT_DIR COUNTS MODE=HPARAMS...

COUNTS: comma-separated --cpu_devices values, the largest first (the CPU is
split once, into the first count's devices; a later, smaller count decodes
on the first of them, and 1 on the CPU as a process does by default). Each
MODE's decode with each count writes OUT_DIR/<mode>.<count> (the output
file) and .err (its stderr). The CLI runs in this process (`conftest.run_cli`):
one TensorFlow start for every decode."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from conftest import run_cli  # noqa: E402


def main() -> int:
    run, source, out_dir, counts, *modes = sys.argv[1:]
    out_dir = pathlib.Path(out_dir)
    for count in counts.split(","):
        for mode in modes:
            name, _, hparams = mode.partition("=")
            out = out_dir / f"{name}.{count}"
            result = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                             f"--decode_to_file={out}", f"--decode_hparams={hparams}",
                             f"--cpu_devices={count}")
            pathlib.Path(f"{out}.err").write_text(result.stderr, encoding="utf-8")
            if result.returncode:
                print(f"{name} on {count} devices: exit {result.returncode}\n"
                      f"{result.stderr[-3000:]}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
