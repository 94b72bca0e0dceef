"""Fine-tuning an imported run on Multi30k as own data, for the importers'
tests (test_t2t_imported_run, test_marian_import): the corpora, the dev
pairs' log-probability, the fine-tuned run's decode."""

from __future__ import annotations

import json

from conftest import SHARED_DATA, run_cli
from wmt_archives import lines


def multi30k_corpora(folder, vocab, train: int, dev: int, test: int = 5):
    """`folder` holding the first `train` Multi30k training pairs, `dev` and
    `test` validation pairs and a corpora.json naming `vocab`; returns the
    dev pairs' tab-separated file (t2t-decoder --score_file)."""
    folder.mkdir()
    m30k = SHARED_DATA / "multi30k"
    for name, stem, count in (("train", "train", train), ("dev", "val", dev),
                              ("test", "val", test)):
        for lang in ("en", "de"):
            (folder / f"{name}.{lang}").write_text("".join(
                s + "\n" for s in lines(m30k / f"{stem}.{lang}.gz")[:count]), encoding="utf-8")
    (folder / "corpora.json").write_text(json.dumps({
        "vocab": str(vocab),
        **{split: {"source": f"{split}.en", "target": f"{split}.de"}
           for split in ("train", "dev", "test")}}))
    pairs = folder / "dev.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(
        lines(folder / "dev.en"), lines(folder / "dev.de"))), encoding="utf-8")
    return pairs


def dev_log_prob(output_dir, pairs) -> float:
    """The summed log-probability of the pairs under the run's model."""
    out = run_cli("decoder", f"--output_dir={output_dir}", f"--score_file={pairs}")
    assert out.returncode == 0, out.stderr[-2000:]
    return sum(float(line.split("\t")[0]) for line in out.stdout.strip().splitlines())


def decodes_one_line(output_dir, folder) -> str:
    """The run's translation of one sentence (t2t-decoder, exit 0, one line)."""
    source = folder / "in.txt"
    source.write_text("A dog runs in the snow.\n", encoding="utf-8")
    out = run_cli("decoder", f"--output_dir={output_dir}", f"--decode_from_file={source}",
                  f"--decode_to_file={folder / 'out.txt'}")
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = (folder / "out.txt").read_text(encoding="utf-8").splitlines()
    return line
