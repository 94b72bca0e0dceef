"""tensor2tensor's own checkpoint, imported, on the whole Multi30k test set:
how often the CTranslate2 export agrees with t2t-decoder, and what 100
fine-tuning updates do to the dev log-probability. Prints JSON.

    python -m benchmarks.t2t_imported_run

The README's figures of the imported run (issue 59 item 4): t2t-import of
`t2t_legacy/transformer_test_ckpt` and its 8k SubwordTextEncoder vocabulary
(`--checkpoint=all`), then

- `ctranslate2_same` of `sentences`: t2t-decoder (the run's settings, beam 4,
  alpha 0.6) on the first --sentences lines of Multi30k's test_2016_flickr
  (1,000), and the CTranslate2 export of the same run
  (`CTranslate2Translator`, --intra_threads) on the same lines: how many
  translations are the same (`ctranslate2_differ`: the 0-based lines that
  differ). The checkpoint had one training step, so its translations are
  noise and the engines are compared with each other, never with references;
- `dev_log_prob_imported` and `dev_log_prob_fine_tuned`: the summed
  log-probability (t2t-decoder --score_file) of Multi30k's first
  --dev_pairs validation pairs under the imported run and under a run
  fine-tuned from it (`--warm_start_from`, its own hparams, no
  --hparams_set) for --updates updates (batch_size=1024,
  learning_rate_warmup_steps=50, no XLA) on Multi30k's first --train_lines
  training pairs, encoded with the imported 8k vocabulary (corpora.json
  "vocab"); `fine_tuned_decodes`: the fine-tuned run translates a line.

tests/test_t2t_imported_run.py runs the same steps on a few lines and updates
(each engine and each tool once); the figures over the whole set are here.
Every CLI runs as a fresh process, as a user runs it. The machine may be
shared: `loadavg_before`/`loadavg_after` come with the figures.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time

from benchmarks import harness
from benchmarks.harness import cli

PROG = "t2t_imported_run"
T2T_RUN = harness.SHARED_DATA / "t2t_legacy" / "transformer_test_ckpt"
VOCAB_8K = harness.SHARED_DATA / "t2t_legacy" / "vocab.translate_ende_wmt8k.8192.subwords"
MULTI30K = harness.SHARED_DATA / "multi30k"


def lines(path) -> list[str]:
    """The lines of a text file (.gz too), without their newlines."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_lines(path: str, text: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in text)
    return path


def dev_log_prob(output_dir: str, pairs: str) -> float:
    """The summed log-probability of the pairs file under the run (t2t-decoder --score_file)."""
    out = cli("decoder", f"--output_dir={output_dir}", f"--score_file={pairs}")
    return round(sum(float(line.split("\t")[0]) for line in out.stdout.strip().splitlines()), 1)


def ctranslate2_agreement(run: str, work: str, sentences: int, intra_threads: int) -> dict:
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator

    source = lines(MULTI30K / "test_2016_flickr.en.gz")[:sentences]
    source_file = write_lines(os.path.join(work, "test.en"), source)
    hyp = os.path.join(work, "test.hyp")
    start = time.time()
    cli("decoder", f"--output_dir={run}", f"--decode_from_file={source_file}",
        f"--decode_to_file={hyp}")
    decoder_seconds = time.time() - start
    ours = lines(hyp)
    export = os.path.join(work, "ct2")
    cli("exporter", f"--output_dir={run}", "--format=ctranslate2", f"--export_dir={export}")
    (version,) = os.listdir(export)
    translator = CTranslate2Translator(os.path.join(export, version),
                                       intra_threads=intra_threads)
    start = time.time()
    theirs = translator.translate(source)
    return {"sentences": len(source),
            "ctranslate2_same": sum(a == b for a, b in zip(ours, theirs)),
            "ctranslate2_differ": [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b],
            "decoder_seconds": round(decoder_seconds, 1),
            "ctranslate2_seconds": round(time.time() - start, 1)}


def fine_tuning(run: str, work: str, train_lines: int, dev_pairs: int, updates: int) -> dict:
    corpora = os.path.join(work, "corpora")
    os.makedirs(corpora)
    for name, stem, count in (("train", "train", train_lines), ("dev", "val", dev_pairs),
                              ("test", "val", 10)):
        for lang in ("en", "de"):
            write_lines(os.path.join(corpora, f"{name}.{lang}"),
                        lines(MULTI30K / f"{stem}.{lang}.gz")[:count])
    with open(os.path.join(corpora, "corpora.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab": os.path.join(run, "vocab.subwords"),
                   "train": {"source": "train.en", "target": "train.de"},
                   "dev": {"source": "dev.en", "target": "dev.de"},
                   "test": {"source": "test.en", "target": "test.de"}}, f)
    pairs = write_lines(os.path.join(work, "dev.tsv"), [
        f"{s}\t{t}" for s, t in zip(lines(os.path.join(corpora, "dev.en")),
                                    lines(os.path.join(corpora, "dev.de")))])
    before = dev_log_prob(run, pairs)
    fine = os.path.join(work, "fine")
    start = time.time()
    cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
        f"--data_dir={os.path.join(work, 'data')}", f"--output_dir={fine}",
        f"--warm_start_from={run}", f"--train_steps={updates}",
        "--hparams=batch_size=1024,learning_rate_warmup_steps=50",
        "--local_eval_frequency=0", "--eval_decode_sentences=0", "--noxla")
    train_seconds = time.time() - start
    one = write_lines(os.path.join(work, "in.txt"), ["A dog runs in the snow."])
    cli("decoder", f"--output_dir={fine}", f"--decode_from_file={one}",
        f"--decode_to_file={os.path.join(work, 'out.txt')}")
    return {"updates": updates, "train_lines": train_lines, "dev_pairs": dev_pairs,
            "dev_log_prob_imported": before, "dev_log_prob_fine_tuned": dev_log_prob(fine, pairs),
            "fine_tuned_decodes": len(lines(os.path.join(work, "out.txt"))) == 1,
            "train_seconds": round(train_seconds, 1)}


def main():
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--sentences", type=int, default=1000,
                        help="Multi30k test lines decoded by both engines (default all 1,000)")
    parser.add_argument("--intra_threads", type=int, default=2,
                        help="CTranslate2's intra_threads")
    parser.add_argument("--updates", type=int, default=100, help="fine-tuning updates")
    parser.add_argument("--train_lines", type=int, default=5000,
                        help="Multi30k training pairs fine-tuned on")
    parser.add_argument("--dev_pairs", type=int, default=100,
                        help="Multi30k validation pairs scored")
    args = parser.parse_args()
    load_before = harness.load_average()
    report = {"benchmark": PROG, "machine": harness.describe(), "t2t_dir": str(T2T_RUN)}
    with tempfile.TemporaryDirectory(prefix=f"{PROG}.") as work:
        run = os.path.join(work, "imported")
        cli("t2t_import", f"--t2t_dir={T2T_RUN}", f"--vocab_file={VOCAB_8K}",
            f"--output_dir={run}", "--checkpoint=all")
        report.update(ctranslate2_agreement(run, work, args.sentences, args.intra_threads))
        report.update(fine_tuning(run, work, args.train_lines, args.dev_pairs, args.updates))
    report["loadavg_before"], report["loadavg_after"] = load_before, harness.load_average()
    harness.print_result(report)


if __name__ == "__main__":
    harness.run(main, PROG)
