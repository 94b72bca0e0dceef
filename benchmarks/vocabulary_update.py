"""Fine-tuning the tiny Multi30k run on WMT news with its old vocabulary, or
with a new one (`--warm_start_vocab`): the dev loss per word after the same
updates. Prints JSON.

    python -m benchmarks.vocabulary_update [--source_run t2t_train/tiny]

The figures of issue 74, part 2:

1. the source run: the README's run (transformer_tiny on Multi30k, its
   8,192-piece SentencePiece vocabulary), given by --source_run, or else
   trained here for --source_steps updates (the README trains 2,000);
2. the second corpus: the shared WMT En-De sample (`train_sample_tokenized`,
   10,000 news pairs, their `&apos;`-style escapes undone): its first pairs
   to train on, its last --dev_pairs pairs (up to 40 words a side) as dev;
3. three fine-tunings from it, --updates updates each, the same hparams
   (the source run's, no --hparams_set; `--hparams` --fine_tune_hparams):
   `old_vocabulary` (corpora.json "vocab": the source run's), `new_vocabulary`
   (`--warm_start_vocab=update`: a --vocab_size vocabulary datagen trains on
   the WMT sample, new rows the mean of their old pieces' rows) and
   `new_vocabulary_random` (`--warm_start_vocab=update_random`, new rows as
   from scratch), and the source run itself before fine-tuning;
4. each scored on the same dev pairs (t2t-decoder --score_file, the summed
   log-probability of each target, EOS included). A loss per token is not
   comparable across vocabularies (another vocabulary cuts the same text
   into other tokens), so the figures are the negative log-probability per
   target word (whitespace-separated, as the sample is tokenized) and per
   target character: `nll_per_word`, `nll_per_char`.

Every CLI runs as a fresh process; `loadavg_before`/`loadavg_after` come with
the figures (the machine may be shared).
"""

from __future__ import annotations

import html
import json
import os
import re
import time

from benchmarks import harness
from benchmarks.harness import cli

PROG = "vocabulary_update"
MULTI30K = harness.SHARED_DATA / "multi30k"
WMT = harness.SHARED_DATA / "wmt14" / "train_sample_tokenized"
KEPT = re.compile(r"Vocabulary update .*: (kept .*)")


def lines(path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_lines(path: str, text: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in text)
    return path


def wmt_corpora(folder: str, train_pairs: int, dev_pairs: int) -> tuple[str, int, int]:
    """The WMT sample as own corpora in `folder` (no corpora.json yet);
    returns (the dev pairs' score file, target words, target characters)."""
    source = [html.unescape(s) for s in lines(WMT / "src-train.txt")]
    target = [html.unescape(s) for s in lines(WMT / "tgt-train.txt")]
    pairs = [(s, t) for s, t in zip(source, target) if s.strip() and t.strip()]
    dev = [(s, t) for s, t in pairs[-2000:] if len(s.split()) <= 40 and len(t.split()) <= 40]
    dev = dev[-dev_pairs:]
    train = pairs[:min(train_pairs, len(pairs) - 2000)]
    os.makedirs(folder)
    for name, part in (("train", train), ("dev", dev), ("test", dev[:10])):
        write_lines(os.path.join(folder, f"{name}.en"), [s for s, _ in part])
        write_lines(os.path.join(folder, f"{name}.de"), [t for _, t in part])
    score = write_lines(os.path.join(folder, "dev.tsv"), [f"{s}\t{t}" for s, t in dev])
    return score, sum(len(t.split()) for _, t in dev), sum(len(t) for _, t in dev)


def corpora_json(folder: str, vocab: dict) -> str:
    """`folder`'s corpora.json with the "vocab" or "vocab_size" of `vocab`."""
    with open(os.path.join(folder, "corpora.json"), "w", encoding="utf-8") as f:
        json.dump({**vocab, **{split: {"source": f"{split}.en", "target": f"{split}.de"}
                               for split in ("train", "dev", "test")}}, f)
    return folder


def score(run: str, pairs: str, words: int, chars: int) -> dict:
    out = cli("decoder", f"--output_dir={run}", f"--score_file={pairs}")
    nll = -sum(float(line.split("\t")[0]) for line in out.stdout.strip().splitlines())
    return {"nll": round(nll, 1), "nll_per_word": round(nll / words, 4),
            "nll_per_char": round(nll / chars, 4)}


def main():
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--source_run", help="a trained tiny Multi30k run (default: train one)")
    parser.add_argument("--source_steps", type=int, default=400,
                        help="updates of the source run trained here")
    parser.add_argument("--updates", type=int, default=150, help="fine-tuning updates")
    parser.add_argument("--train_pairs", type=int, default=8000,
                        help="WMT sample pairs fine-tuned on")
    parser.add_argument("--dev_pairs", type=int, default=300, help="WMT sample pairs scored")
    parser.add_argument("--vocab_size", type=int, default=8192,
                        help="pieces of the new vocabulary, trained on the WMT sample")
    parser.add_argument("--fine_tune_hparams", default="learning_rate_warmup_steps=100",
                        help="--hparams of the fine-tunings")
    parser.add_argument("--seed", type=int, default=0,
                        help="the fine-tunings' --seed (0: the trainer's default)")
    parser.add_argument("--work_dir", help="keep the data and runs here (default: a "
                        "temporary folder, removed)")
    args = parser.parse_args()
    load_before = harness.load_average()
    start = time.time()
    with harness.work_folder(args.work_dir, PROG) as work:
        source, source_seconds = args.source_run, 0.0
        if not source:
            source = os.path.join(work, "source")
            cli("trainer", "--problem=translate_ende_multi30k",
                "--hparams_set=transformer_tiny", f"--tmp_dir={MULTI30K}",
                f"--data_dir={os.path.join(work, 'multi30k_data')}", f"--output_dir={source}",
                f"--train_steps={args.source_steps}", "--local_eval_frequency=0",
                "--eval_decode_sentences=0", "--eval_steps=1",
                f"--save_checkpoints_steps={args.source_steps}")
            source_seconds = time.time() - start
        pairs, words, chars = wmt_corpora(os.path.join(work, "wmt"), args.train_pairs,
                                          args.dev_pairs)
        results = {"source_run": score(source, pairs, words, chars)}
        runs = (("old_vocabulary", {"vocab": os.path.join(source, "vocab.model")}, "same"),
                ("new_vocabulary", {"vocab_size": args.vocab_size}, "update"),
                ("new_vocabulary_random", {"vocab_size": args.vocab_size}, "update_random"))
        for name, vocab, choice in runs:
            corpora = os.path.join(work, f"corpora_{name}")
            os.makedirs(corpora)
            for file in os.listdir(os.path.join(work, "wmt")):
                os.link(os.path.join(work, "wmt", file), os.path.join(corpora, file))
            corpora_json(corpora, vocab)
            fine = os.path.join(work, name)
            began = time.time()
            out = cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                      f"--data_dir={os.path.join(work, f'data_{name}')}",
                      f"--output_dir={fine}", f"--warm_start_from={source}",
                      f"--warm_start_vocab={choice}", f"--train_steps={args.updates}",
                      f"--hparams={args.fine_tune_hparams}", "--local_eval_frequency=0",
                      "--eval_decode_sentences=0", "--eval_steps=1",
                      f"--save_checkpoints_steps={args.updates}",
                      *([f"--seed={args.seed}"] if args.seed else []))
            results[name] = {**score(fine, pairs, words, chars),
                             "train_seconds": round(time.time() - began, 1)}
            kept = KEPT.search(out.stdout)
            if kept:
                results[name]["rows"] = kept.group(1)
    harness.print_result({
        "source_run": args.source_run or f"trained here, {args.source_steps} updates",
        "updates": args.updates, "train_pairs": args.train_pairs,
        "dev_pairs": args.dev_pairs, "dev_target_words": words, "dev_target_chars": chars,
        "vocab_size": args.vocab_size, "fine_tune_hparams": args.fine_tune_hparams,
        "seed": args.seed,
        **results, "source_seconds": round(source_seconds, 1),
        "seconds": round(time.time() - start, 1),
        "loadavg_before": load_before, "loadavg_after": harness.load_average(),
        "date": time.strftime("%Y-%m-%d")})


if __name__ == "__main__":
    harness.run(main, PROG)
