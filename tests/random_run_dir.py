"""Training directories of tiny random-weight Transformers, for fast decoder tests.

A directory as t2t-trainer writes it (hparams.json, run.json, vocab.model,
a `checkpoint` index and ckpt-<step>), without training: the weights are a
seeded random initialization, so decoding is fast and deterministic but the
outputs are nonsense. EOS's output row is scaled up so that hypotheses end
within a few tokens, as a trained model's do.
"""

from __future__ import annotations

import gzip
import pathlib

import keras

from conftest import SHARED_DATA

EOS_BOOST = 2.0
HPARAMS = dict(num_hidden_layers=2, d_model=32, d_ff=64, num_heads=2, max_length=64,
               dropout=0.0, attention_dropout=0.0, relu_dropout=0.0,
               beam_size=4, alpha=0.6, extra_length=12)


def make_vocab(path: pathlib.Path, vocab_size: int = 320, lines: int = 200) -> str:
    """A SentencePiece vocabulary trained on the first Multi30k lines."""
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    sentences = []
    for name in ("train.en.gz", "train.de.gz"):
        with gzip.open(SHARED_DATA / "multi30k" / name, "rt", encoding="utf-8") as f:
            sentences += [next(f).strip() for _ in range(lines)]
    SubwordVocabulary.train(sentences, str(path), vocab_size=vocab_size)
    return str(path)


def make_random_run_dir(path: pathlib.Path, vocab_file: str, seed: int, step: int = 1,
                        boost: dict[int, float] | None = None, **overrides) -> str:
    """Write a training directory at `path` whose checkpoint ckpt-<step> holds
    random weights drawn with `seed`; `boost` scales more output rows ({id:
    factor}: the model says those ids often). Returns its path."""
    from t2t_revival.data.vocabulary_file import load_vocabulary
    from t2t_revival.settings.hparams import HParams
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
    from t2t_revival.run_dir.run_record import RunRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    vocab = load_vocabulary(vocab_file)   # SentencePiece, or a tensor2tensor .subwords
    vocab_size = vocab.vocab_size
    hparams = HParams(**{**HPARAMS, "vocab_size": vocab_size, **overrides})
    run_dir = TrainingDirectory(path, keep=5)
    run_dir.write_run_files(hparams, RunRecord(problem="translate_ende_multi30k",
                                               model="transformer",
                                               hparams_set="random_tiny",
                                               vocab_file=vocab.RUN_FILE_NAME), vocab_file)
    keras.utils.set_random_seed(seed)
    model = build_model(hparams)
    embedding = model.shared_embedding.weights[0]
    boosted = embedding.numpy()
    boosted[1] *= EOS_BOOST                    # EOS: ends hypotheses within a few tokens
    for i, factor in (boost or {}).items():
        boosted[i] *= factor
    embedding.assign(boosted)
    run_dir.checkpoints.save(make_checkpoint(model), step)
    return str(path)


def piece_boost(vocab_file: str, pieces: tuple[str, ...], factor: float,
                eos: float) -> dict[int, float]:
    """`make_random_run_dir`'s boost that makes a model say `pieces` often
    (their rows scaled by `factor`) and EOS by `eos`: outputs of several words."""
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    vocab = SubwordVocabulary(vocab_file)
    return {1: eos, **{i: factor for i in range(vocab.vocab_size)
                       if vocab.id_to_piece(i) in pieces}}


def saying_run_dir(root: pathlib.Path, seed: int, pieces: tuple[str, ...], factor: float,
                   eos: float) -> str:
    """A vocabulary (`make_vocab`) and a random run in `root` whose model says
    `pieces` often (`piece_boost`): a module fixture's run of a few words an output."""
    vocab = make_vocab(root / "vocab.model")
    return make_random_run_dir(root / "run", vocab, seed=seed,
                               boost=piece_boost(vocab, pieces, factor, eos=eos))
