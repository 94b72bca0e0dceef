"""Tiny training runs for the fault tests: a synthetic corpus under
multi30k's file names (250 pairs of a 15-word language), the problem that
datagen makes of it, a model small enough that a step, a save and an
evaluation take seconds, and the CLIs run as subprocesses."""

import gzip
import hashlib
import json
import os
import random
import subprocess
import sys

from conftest import ROOT
from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k

PROBLEM = "translate_ende_multi30k"
# A model small enough that one step, a save and an evaluation take seconds.
TINY_HPARAMS = "num_hidden_layers=1,d_model=16,d_ff=32,num_heads=2,batch_size=256,max_length=32"
WORDS = ["ein", "mann", "hund", "a", "man", "dog", "runs", "läuft", "the", "der",
         "red", "rot", "ball", "house", "haus"]


class TinyMulti30k(TranslateEndeMulti30k):
    """The registered problem's files and shards, with a vocabulary the tiny corpus can fill."""
    vocab_size = 300


def write_corpus(raw_dir, pairs=(("train", 200), ("val", 40), ("test_2016_flickr", 10))):
    """The tiny corpus in `raw_dir`, as multi30k's gzipped files (seeded)."""
    rng = random.Random(0)
    os.makedirs(raw_dir, exist_ok=True)
    for stem, n in pairs:
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))
                 for _ in range(n)]
        for lang in ("en", "de"):
            with gzip.open(os.path.join(raw_dir, f"{stem}.{lang}.gz"), "wt",
                           encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)


def write_own_corpora(d, train_lines=(200, 200), dev_lines=(20, 20), blank_train=False):
    """corpora.json (translate_plain_text) over tiny corpora of the 15-word
    language in folder `d` (vocab_size 300): one training corpus, dev and
    test, the line counts of each side as given; with `blank_train` a second
    training corpus whose source lines are all blank (seeded)."""
    rng = random.Random(0)

    def sentences(n):
        return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]

    def write(path, lines):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    os.makedirs(d, exist_ok=True)
    for name, (n_src, n_tgt) in (("train", train_lines), ("dev", dev_lines), ("test", (10, 10))):
        write(os.path.join(d, f"{name}.en"), sentences(n_src))
        write(os.path.join(d, f"{name}.de"), sentences(n_tgt))
    write(os.path.join(d, "blank.en"), [""] * 50)
    write(os.path.join(d, "blank.de"), sentences(50))
    train = [{"source": "train.en", "target": "train.de"}]
    spec = {"vocab_size": 300,
            "train": train + [{"source": "blank.en", "target": "blank.de"}] * blank_train,
            "dev": {"source": "dev.en", "target": "dev.de"},
            "test": {"source": "test.en", "target": "test.de"}}
    with open(os.path.join(d, "corpora.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(spec))


def cli_subprocess(module, *args, stdin=None, timeout=240):
    """`python -m t2t_revival.cli.<module> ARGS` in a fresh process (bytes out)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", f"t2t_revival.cli.{module}", *args],
                          input=stdin, capture_output=True, env=env, timeout=timeout)


# The run directory's lock file (`RunLock`): it records its last holder's pid.
LOCK = ".lock"


def cli_popen(module, *args, stdin=subprocess.DEVNULL, unbuffered=True):
    """`python -m t2t_revival.cli.<module> ARGS` started in a fresh process,
    its stdout and stderr pipes (bytes) to read as it runs. `unbuffered`: its
    lines reach the pipe as they are printed (a killed run's lines are not
    lost in a buffer); else as a user's pipe, in blocks of 8 KiB."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    else:
        env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen([sys.executable, "-m", f"t2t_revival.cli.{module}", *args],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)


def run_files(directory):
    """`digests` of a run directory without its lock file (a refusal leaves
    every other file byte-identical)."""
    return {k: v for k, v in digests(directory).items() if os.path.basename(k) != LOCK}


def digests(directory):
    """{relative path: sha256} of every file under `directory`."""
    result = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                result[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return result


def trainer_args(data, out, steps, *extra):
    """t2t-trainer's flags for a tiny run of `steps` updates (no XLA, no
    evaluation on the way)."""
    return [f"--problem={PROBLEM}", "--hparams_set=transformer_tiny",
            f"--hparams={TINY_HPARAMS}", f"--data_dir={data}", f"--output_dir={out}",
            f"--train_steps={steps}", "--noxla", "--local_eval_frequency=0", "--eval_steps=1",
            "--eval_decode_sentences=0", *extra]
