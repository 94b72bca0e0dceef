"""Subword regularization (issue 74, part 1): with `source_sampling_alpha` /
`target_sampling_alpha`, training pairs are segmented anew each epoch,
sampled, the same for the same seed (across a stop and resume too); at
alpha 0 the on-the-fly ids are datagen's."""

import collections
import gzip
import itertools
import shutil

import numpy as np
import pytest

from conftest import SHARED_DATA, one_line_error, run_cli
from fake_update_step import FakeUpdateStep
from t2t_revival.data.data_error import DataError
from t2t_revival.data.input_pipeline import packed_dataset, token_bucketed_dataset
from t2t_revival.data.subword_sampling import SubwordSampling
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.settings.hparams import HParamsError, resolve
from tiny_runs import PROBLEM, TINY_HPARAMS, TinyMulti30k, trainer_args

SAMPLED = "source_sampling_alpha=0.3,target_sampling_alpha=0.3"


def _hparams(extra=SAMPLED):
    return resolve("transformer_tiny", f"{TINY_HPARAMS},{extra}" if extra else TINY_HPARAMS,
                   problem=TinyMulti30k(download=False))


def _batches(problem, data_dir, hparams, n, **kwargs):
    """The first `n` training batches, as {feature: numpy array}."""
    ds = problem.dataset("train", str(data_dir), hparams, **kwargs)
    return [{k: v.numpy() for k, v in b.items()} for b in itertools.islice(iter(ds), n)]


def _same(a, b):
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b))


def _padded(rows):
    out = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out, np.array([len(r) for r in rows], np.int32)


def test_a_batch_is_sampled_by_its_key_and_decodes_to_its_text(tiny_data):
    problem = TinyMulti30k(download=False)
    vocab = problem.vocabulary(str(tiny_data))
    texts = [" ".join(["der mann läuft", "a red ball", "the dog runs"][i % 3] for _ in range(2))
             for i in range(30)]
    ids = [row + [1] for row in vocab.encode_batch(texts)]
    inputs, lengths = _padded(ids)
    sampling = SubwordSampling(vocab.model_file, source_alpha=0.4, target_alpha=0.0)

    def resegmented(epoch):
        key = np.array([7, epoch, 3, 0, 0], np.int64)
        flat, lens, target_flat, target_lens = sampling.resegmented_batch(
            inputs, lengths, inputs, lengths, key)
        return (np.split(flat, np.cumsum(lens)[:-1]),
                np.split(target_flat, np.cumsum(target_lens)[:-1]))

    first, targets = resegmented(0)
    assert [vocab.decode(row) for row in first] == texts        # the same text, EOS last
    assert all(row[-1] == 1 for row in first)
    assert [r.tolist() for r in targets] == ids                 # alpha 0: datagen's ids
    assert [r.tolist() for r in first] != ids                   # sampled
    again, _ = resegmented(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    later, _ = resegmented(1)
    changed = sum(not np.array_equal(a, b) for a, b in zip(first, later))
    assert changed > len(texts) // 2, changed


def test_the_same_seed_gives_the_same_sampled_batches(tiny_data):
    problem = TinyMulti30k(download=False)
    files = problem.data_files("train", str(tiny_data))
    sampling = SubwordSampling(problem.vocab_file(str(tiny_data)), 0.3, 0.3)

    def batches(seed, sampling=sampling, packed=False):
        if packed:
            ds = packed_dataset(files, batch_size=256, max_length=32, seed=seed,
                                shuffle_buffer=64, pack_window=16, sampling=sampling)
        else:
            ds = token_bucketed_dataset(files, batch_size=256, max_length=32, seed=seed,
                                        shuffle_buffer=64, sampling=sampling)
        return [{k: v.numpy() for k, v in b.items()} for b in itertools.islice(iter(ds), 40)]

    first = batches(5)
    assert _same(first, batches(5))
    assert not _same(first, batches(6))
    # The same shuffle without sampling gives other ids: datagen's, in other buckets.
    assert not _same(first, batches(5, sampling=None))
    assert _same(batches(5, packed=True), batches(5, packed=True))


def test_each_epoch_samples_every_pair_anew(tiny_data):
    """Three epochs of the 200 pairs (in file order): each source sentence comes
    with several segmentations, each decoding to it."""
    problem = TinyMulti30k(download=False)
    vocab = problem.vocabulary(str(tiny_data))
    seen = collections.defaultdict(set)
    pairs = 0
    for batch in _batches(problem, tiny_data, _hparams(), 200, shuffle=False, seed=1):
        for row in batch["inputs"]:
            seen[vocab.decode(row)].add(tuple(row[row != 0]))
            pairs += 1
        if pairs > 3 * 200:
            break
    assert pairs > 3 * 200 and len(seen) > 150
    with gzip.open(tiny_data.parent / "raw" / "train.en.gz", "rt", encoding="utf-8") as f:
        assert set(seen) <= set(f.read().splitlines())
    varied = sum(len(segmentations) > 1 for segmentations in seen.values())
    assert varied > 0.8 * len(seen), (varied, len(seen))


class RecordingUpdateStep(FakeUpdateStep):
    """FakeUpdateStep that keeps the source ids of every batch it takes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sources = []

    def run(self, iterator):
        return self.run_many(iterator, 1)

    def run_many(self, iterator, n):
        n = int(n)
        for _ in range(n):
            batch = next(iterator)
            self.sources.append(self.strategy.experimental_local_results(
                batch["inputs"])[0].numpy())
        self.optimizer.iterations.assign_add(n)
        return self.loss, self.tokens * n, self.grad_norm


def _stopped_and_resumed(tiny_data, out):
    """Source batches of a sampled run trained to step 3, stopped (its
    checkpoint saved), then resumed to step 6."""
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    def trainer(steps):
        config = resolve_train_config(
            problem=PROBLEM, hparams_set="transformer_tiny", hparams=f"{TINY_HPARAMS},{SAMPLED}",
            data_dir=str(tiny_data), output_dir=str(out), train_steps=steps, xla=False,
            local_eval_frequency=0, eval_steps=1, eval_decode_sentences=0)
        return Trainer(config, log=lambda line: None, update_step=RecordingUpdateStep)

    before = trainer(3)
    assert before.train().step == 3
    after = trainer(6)
    assert after.train().step == 6   # 3 updates: resumed at ckpt-3
    return before.update_step.sources, after.update_step.sources


def test_a_stopped_and_resumed_run_sees_the_same_samples_as_another(tiny_data, tmp_path):
    """Two runs of one seed, each stopped at step 3 and resumed: the resumed
    parts take the same sampled batches (the pipeline rebuilt at step 3)."""
    one = _stopped_and_resumed(tiny_data, tmp_path / "one")
    other = _stopped_and_resumed(tiny_data, tmp_path / "other")
    for a, b in zip(one, other):
        assert len(a) == len(b) == 3 and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(x.shape == y.shape and np.array_equal(x, y)
                   for x, y in zip(one[0], one[1]))


@pytest.mark.parametrize("num_files", [10, 1])
def test_input_pipelines_share_the_sampled_pairs_out(tiny_data, num_files):
    """Two input pipelines (by files, or every other record of one file) read
    disjoint pairs that together are all of them, each sampled."""
    import tensorflow as tf

    problem = TinyMulti30k(download=False)
    vocab = problem.vocabulary(str(tiny_data))
    files = problem.data_files("train", str(tiny_data))[:num_files]
    sampling = SubwordSampling(vocab.model_file, source_alpha=0.3, target_alpha=0.3)

    def pairs(sampling, ctx=None):
        ds = token_bucketed_dataset(files, batch_size=1024, max_length=64, training=False,
                                    input_context=ctx, sampling=sampling, seed=2)
        return [(vocab.decode(x), tuple(x[x != 0])) for b in ds for x in b["inputs"].numpy()]

    every = sorted(text for text, _ in pairs(None))
    got = [pairs(sampling, tf.distribute.InputContext(num_input_pipelines=2,
                                                      input_pipeline_id=worker))
           for worker in range(2)]
    assert got[0] and got[1] and sorted(t for part in got for t, _ in part) == every
    datagen = {ids for _, ids in pairs(None)}
    resampled = [ids not in datagen for part in got for _, ids in part]
    assert sum(resampled) > len(resampled) // 2


def test_weighted_corpora_are_sampled_too(tiny_data):
    """translate_plain_text's weighted corpora (here the shards in two groups)."""
    from t2t_revival.data.input_pipeline import weighted_token_bucketed_dataset

    problem = TinyMulti30k(download=False)
    vocab = problem.vocabulary(str(tiny_data))
    files = problem.data_files("train", str(tiny_data))
    sampling = SubwordSampling(vocab.model_file, source_alpha=0.3, target_alpha=0.3)

    def rows(sampling, seed):
        ds = weighted_token_bucketed_dataset([files[:5], files[5:]], [3, 1], batch_size=256,
                                             max_length=32, seed=seed, sampling=sampling,
                                             shuffle_buffer=64)
        return [tuple(x[x != 0]) for b in itertools.islice(iter(ds), 30)
                for x in b["inputs"].numpy()]

    sampled = rows(sampling, 4)
    assert sampled == rows(sampling, 4)
    datagen = set(rows(None, 4))
    assert sum(ids not in datagen for ids in sampled) > len(sampled) // 2


def test_sampling_a_subword_text_encoder_vocabulary_is_one_line(tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    shutil.copy(SHARED_DATA / "t2t_legacy" / "vocab.translate_ende_wmt8k.8192.subwords",
                data / "vocab.translate_ende_multi30k.subwords")
    args = trainer_args(data, tmp_path / "run", 2)
    args = [a + ",source_sampling_alpha=0.1" if a.startswith("--hparams=") else a
            for a in args]
    one_line_error(run_cli("trainer", *args), "t2t-trainer", "SubwordTextEncoder",
                   "cannot sample", "source_sampling_alpha=0.1")


def test_bad_sampling_hparams_are_refused(tiny_data):
    with pytest.raises(HParamsError, match=r"source_sampling_alpha' must be in \[0, 1\]"):
        _hparams("source_sampling_alpha=1.5")
    with pytest.raises(HParamsError, match="target_sampling_nbest_size 0 or 1 samples nothing"):
        _hparams("target_sampling_alpha=0.1,target_sampling_nbest_size=1")
    problem = TinyMulti30k(download=False)
    hp = _hparams("source_sampling_alpha=0.1,source_sampling_nbest_size=8")
    with pytest.raises(DataError, match=r"is bpe, sampled by BPE-dropout .* "
                                        r"Received: source_sampling_nbest_size=8"):
        problem.dataset("train", str(tiny_data), hp)
    assert SubwordSampling.requested(hp) and not SubwordSampling.requested(_hparams(""))


@pytest.mark.slow
def test_on_the_fly_ids_at_alpha_0_are_datagens_on_every_multi30k_line(multi30k_data_dir):
    """Every train and dev pair of Multi30k: its ids turned back into text
    and segmented on the fly (no sampling) are the ids datagen wrote."""
    import t2t_revival.problems  # noqa: F401  (registration)
    from t2t_revival.registry import problems

    data_dir, _ = multi30k_data_dir
    problem = problems.get("translate_ende_multi30k")(download=False)
    on_the_fly = SubwordSampling(problem.vocab_file(str(data_dir)))
    assert isinstance(problem.vocabulary(str(data_dir)), SubwordVocabulary)
    for split, count in (("train", 29_000), ("dev", 1_014)):
        longest = max(int(n) for n in problem.stats(split, str(data_dir))["length_histogram"])

        def pairs(sampling):
            ds = token_bucketed_dataset(problem.data_files(split, str(data_dir)),
                                        batch_size=64 * longest, max_length=longest,
                                        training=False, sampling=sampling)
            return sorted((tuple(x[x != 0]), tuple(y[y != 0]))
                          for b in ds for x, y in zip(b["inputs"].numpy(),
                                                      b["targets"].numpy()))

        datagen = pairs(None)
        assert len(datagen) == count
        assert pairs(on_the_fly) == datagen


def test_a_unigram_model_samples_from_its_n_best(tmp_path):
    """An imported unigram SentencePiece model: nbest_size is taken, and the
    samples come from the n best, the same for the same seed."""
    import random

    import sentencepiece as spm

    from tiny_runs import WORDS

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(300)]
    model = tmp_path / "unigram.model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(tmp_path / "unigram"),
        model_type="unigram", vocab_size=36, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        minloglevel=2)
    vocab = SubwordVocabulary(str(model))
    assert vocab.model_type == "unigram"
    hp = _hparams("source_sampling_alpha=0.5,source_sampling_nbest_size=4")
    sampling = SubwordSampling.from_hparams(hp, vocab)
    assert (sampling.source_alpha, sampling.source_nbest_size) == (0.5, 4)
    texts = lines[:40]
    first = vocab.sample_encode_batch(texts, 0.5, 4, seed=3)
    assert first == vocab.sample_encode_batch(texts, 0.5, 4, seed=3)
    assert first != vocab.sample_encode_batch(texts, 0.5, 4, seed=4)
    assert [vocab.decode(ids) for ids in first] == texts
    best = vocab.encode_batch(texts)
    assert first != best


def test_a_multilingual_source_keeps_its_language_token_whole_and_first(tmp_path):
    """Issue 74, parts 1 and 3 together: a source line's `>>xx<<` is one id
    (datagen's), never sampled into pieces; at alpha 0 both sides are
    datagen's ids again (the target side's text has no token split off)."""
    import random

    rng = random.Random(3)
    words = "ein mann hund läuft der rote ball a red dog runs the big house".split()
    lines = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(300)]
    vocab = SubwordVocabulary.train([f">>de<< {l}" for l in lines] + lines,
                                    str(tmp_path / "v.model"), 320,
                                    language_tokens=(">>de<<", ">>fr<<"))
    sources = [f">>{'de' if i % 2 else 'fr'}<< {line}" for i, line in enumerate(lines[:40])]
    targets = lines[40:80]
    source_ids = [row + [1] for row in vocab.encode_batch(sources)]
    target_ids = [row + [1] for row in vocab.encode_target_batch(targets)]
    inputs, input_lengths = _padded(source_ids)
    outputs, output_lengths = _padded(target_ids)
    key = np.array([5, 0, 0, 0, 0], np.int64)

    def split(flat, lengths):
        return [r.tolist() for r in np.split(flat, np.cumsum(lengths)[:-1])]

    plain = SubwordSampling(vocab.model_file, source_alpha=0.0, target_alpha=0.0)
    flat, lens, target_flat, target_lens = plain.resegmented_batch(
        inputs, input_lengths, outputs, output_lengths, key)
    assert split(flat, lens) == source_ids and split(target_flat, target_lens) == target_ids

    sampled = SubwordSampling(vocab.model_file, source_alpha=0.5, target_alpha=0.5)
    flat, lens, target_flat, target_lens = sampled.resegmented_batch(
        inputs, input_lengths, outputs, output_lengths, key)
    rows = split(flat, lens)
    assert rows != source_ids                                   # sampled
    assert [row[0] for row in rows] == [row[0] for row in source_ids]   # the token's one id
    assert [vocab.decode(row) for row in rows] == [vocab.decode(r) for r in source_ids]
    assert [vocab.decode(r) for r in split(target_flat, target_lens)] == targets
