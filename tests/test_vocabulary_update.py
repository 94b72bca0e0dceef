"""--warm_start_vocab=update (issue 74, part 2): fine-tuning with another
vocabulary keeps the rows of the pieces both vocabularies have, bit for bit,
and starts the others as `vocabulary_update` documents."""

import re
import shutil

import numpy as np
import pytest

from conftest import one_line_error, run_cli
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.errors import UserError
from t2t_revival.models.build_model import build_model
from t2t_revival.run_dir.checkpoint_folder import restore_model_weights
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint, model_variables
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.settings.hparams import resolve
from t2t_revival.train.vocabulary_update import row_map
from t2t_revival.train.warm_start import UPDATE, UPDATE_RANDOM, warm_start

OLD_TEXT = ["a man runs with the red ball", "the dog runs to the house",
            "a red house and a man"] * 30
NEW_TEXT = ["the Lufthansa flight lands in Frankfurt", "a man flies to Frankfurt",
            "the flight of the red plane"] * 30


def _vocab(path, text, size=300):
    return SubwordVocabulary.train(text, str(path), size)


def _model(vocab_size, **overrides):
    text = ",".join(f"{k}={v}" for k, v in {"vocab_size": vocab_size, "d_model": 16,
                                             "d_ff": 32, "num_heads": 2,
                                             "num_hidden_layers": 1, **overrides}.items())
    return build_model(resolve("transformer_tiny", text))


def _source_run(tmp_path, model, vocab_file, name="vocab.model"):
    run = tmp_path / "source"
    run.mkdir()
    shutil.copy(vocab_file, run / name)
    (run / "run.json").write_text(RunRecord(problem="p", vocab_file=name).to_json())
    model.hparams.save(str(run / "hparams.json"))
    TrainingDirectory(run, keep=3).checkpoints.save(make_checkpoint(model), 7)
    return run


def _values(model):
    return {k: v.numpy() for k, v in model_variables(model).items()}


def test_kept_rows_are_the_old_ones_bit_for_bit_and_new_rows_the_mean_of_their_pieces(
        tmp_path):
    old_vocab, new_vocab = (_vocab(tmp_path / "old.model", OLD_TEXT),
                            _vocab(tmp_path / "new.model", NEW_TEXT, 320))
    source = _model(300)
    run = _source_run(tmp_path, source, old_vocab.model_file)
    target, lines = _model(320), []
    warm_start(target, str(run), new_vocab.model_file, log=lines.append, vocab=UPDATE)
    old, new = _values(source)["shared_embedding.embeddings"], \
        _values(target)["shared_embedding.embeddings"]
    assert new.shape == (320, 16)
    old_ids = {old_vocab.id_to_piece(i): i for i in range(3, 300)}
    kept = added = 0
    for i in range(320):
        piece = new_vocab.id_to_piece(i)
        if i < 3 or piece in old_ids:   # PAD, EOS, UNK by id; the others by their text
            np.testing.assert_array_equal(new[i], old[i if i < 3 else old_ids[piece]])
            kept += 1
            continue
        added += 1
        parts = [j for j in old_vocab.encode(new_vocab.decode_pieces([piece])) if j >= 3]
        expected = old[parts].mean(axis=0) if parts else old.mean(axis=0)
        np.testing.assert_allclose(new[i], expected, rtol=1e-6, atol=1e-7)
    assert 0 < added < 320 and kept > 100
    # ▁Frankfurt is new, and starts as the mean of the old pieces of "Frankfurt".
    frankfurt = new_vocab.encode("Frankfurt")
    assert len(frankfurt) == 1 and "▁Frankfurt" not in old_ids
    summary = [line for line in lines if line.startswith("Vocabulary update")]
    assert len(summary) == 1, lines
    assert f"kept {kept} rows, dropped {300 - kept}, added {added} (new rows initialized " \
           f"as the mean of the old rows of the pieces" in summary[0], summary[0]
    # Every other weight is the source run's.
    for key, value in _values(source).items():
        if key != "shared_embedding.embeddings":
            np.testing.assert_array_equal(value, _values(target)[key], err_msg=key)


def test_random_init_leaves_the_new_rows_as_a_fresh_model_has_them(tmp_path):
    old_vocab, new_vocab = (_vocab(tmp_path / "old.model", OLD_TEXT),
                            _vocab(tmp_path / "new.model", NEW_TEXT))
    run = _source_run(tmp_path, source := _model(300), old_vocab.model_file)
    target = _model(300)
    fresh = _values(target)["shared_embedding.embeddings"]
    lines = []
    warm_start(target, str(run), new_vocab.model_file, log=lines.append, vocab=UPDATE_RANDOM)
    assert any("as a run from scratch initializes them" in line for line in lines), lines
    rows = row_map(old_vocab, new_vocab, True, 300, 300)
    new = _values(target)["shared_embedding.embeddings"]
    old = _values(source)["shared_embedding.embeddings"]
    for i, j in enumerate(rows.old_ids):
        np.testing.assert_array_equal(new[i], old[j] if j >= 0 else fresh[i])


def test_separate_matrices_and_the_softmax_bias_are_updated_on_their_axis(tmp_path):
    """Imported layouts (tensor2tensor's, Marian's): source and target
    embeddings, an untied projection [d_model, vocab] and final_logits_bias."""
    old_vocab, new_vocab = (_vocab(tmp_path / "old.model", OLD_TEXT),
                            _vocab(tmp_path / "new.model", NEW_TEXT, 310))
    layout = dict(shared_embedding="false", final_logits_bias="true")
    source = _model(300, **layout)
    model_variables(source)["final_logits_bias"].assign(np.arange(300, dtype="float32"))
    run = _source_run(tmp_path, source, old_vocab.model_file)
    target, lines = _model(310, **layout), []
    warm_start(target, str(run), new_vocab.model_file, log=lines.append, vocab=UPDATE)
    rows = row_map(old_vocab, new_vocab, True, 300, 310)
    before, after = _values(source), _values(target)
    for key, axis in (("source_embedding.embeddings", 0), ("target_embedding.embeddings", 0),
                      ("output_projection.kernel", 1), ("final_logits_bias", 0)):
        old, new = np.moveaxis(before[key], axis, 0), np.moveaxis(after[key], axis, 0)
        assert new.shape[0] == 310, key
        for i, j in enumerate(rows.old_ids):
            if j >= 0:
                np.testing.assert_array_equal(new[i], old[j], err_msg=key)
            elif rows.parts[i]:
                np.testing.assert_allclose(new[i], old[list(rows.parts[i])].mean(axis=0),
                                           rtol=1e-6, atol=1e-6, err_msg=key)
    assert sum("Vocabulary update" in line for line in lines) == 1, lines


def test_refusals_say_how_to_opt_in_and_what_is_wrong(tmp_path):
    old_vocab, new_vocab = (_vocab(tmp_path / "old.model", OLD_TEXT),
                            _vocab(tmp_path / "new.model", NEW_TEXT))
    run = _source_run(tmp_path, _model(300), old_vocab.model_file)
    with pytest.raises(UserError, match="pass --warm_start_vocab=update"):
        warm_start(_model(300), str(run), new_vocab.model_file, log=lambda _: None)
    # Another architecture is refused still; only the vocabulary sizes may differ.
    with pytest.raises(UserError, match="d_ff 32 there and 64 here"):
        warm_start(_model(300, d_ff=64), str(run), new_vocab.model_file,
                   log=lambda _: None, vocab=UPDATE)
    # A bare checkpoint has no vocabulary to carry rows from.
    prefix = TrainingDirectory(run).checkpoints.latest()
    (run / "run.json").unlink()
    with pytest.raises(UserError, match="needs the vocabulary of the run warm-started from"):
        warm_start(_model(300), prefix, new_vocab.model_file, log=lambda _: None,
                   vocab=UPDATE)
    # An unreadable new vocabulary: one line naming it.
    (tmp_path / "b").mkdir()
    run2 = _source_run(tmp_path / "b", _model(300), old_vocab.model_file)
    broken = tmp_path / "broken.model"
    broken.write_bytes(b"not a vocabulary")
    with pytest.raises(UserError, match="broken.model is corrupt"):
        warm_start(_model(300), str(run2), str(broken), log=lambda _: None, vocab=UPDATE)
    # The same vocabulary with --warm_start_vocab=update: every row kept, said.
    lines = []
    warm_start(_model(300), str(run2), old_vocab.model_file, log=lines.append, vocab=UPDATE)
    assert any("so every row is kept" in line for line in lines), lines


def test_t2t_subtokens_to_sentencepiece_keep_pad_eos_and_the_pieces_of_the_same_text(
        shared_data, tmp_path):
    """Across kinds, only PAD, EOS and the pieces spelled alike are kept (a
    SentencePiece "s" inside a word is tensor2tensor's "s"); a word-initial
    "▁the" starts as the mean of the old subtokens of "the"."""
    old = T2TSubwordVocabulary(shared_data / "t2t_legacy/vocab.translate_ende_wmt8k.8192.subwords")
    new = _vocab(tmp_path / "new.model", NEW_TEXT)
    rows = row_map(old, new, True, old.vocab_size, new.vocab_size)
    assert rows.old_ids[:3] == (0, 1, -1)   # T2T has no UNK
    the = new.encode("the")[0]
    assert rows.old_ids[the] == -1 and rows.parts[the] == tuple(old.encode("the"))
    assert rows.kept + rows.added == new.vocab_size and rows.dropped == old.vocab_size - rows.kept


def _own_corpora(folder, source_lines, target_lines, vocab_size):
    """corpora.json over the given lines (train, and its first 20 as dev and
    test) with a vocabulary of `vocab_size` pieces trained on them."""
    import json

    folder.mkdir()
    for name, count in (("train", None), ("dev", 20), ("test", 5)):
        for lang, text in (("en", source_lines), ("de", target_lines)):
            (folder / f"{name}.{lang}").write_text("".join(s + "\n" for s in text[:count]),
                                                    encoding="utf-8")
    (folder / "corpora.json").write_text(json.dumps({
        "vocab_size": vocab_size,
        **{split: {"source": f"{split}.en", "target": f"{split}.de"}
           for split in ("train", "dev", "test")}}))
    return folder


def _fine_tune(source_run, corpora, out, *more):
    return run_cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                   f"--data_dir={out}_data", f"--output_dir={out}",
                   f"--warm_start_from={source_run}", "--train_steps=2", "--noxla",
                   "--local_eval_frequency=0", "--eval_steps=1", "--eval_decode_sentences=0",
                   *more)


def test_the_trainer_fine_tunes_the_tiny_run_with_a_vocabulary_of_new_corpora(
        tiny_trained, tmp_path):
    """The session's tiny run (a 300-piece vocabulary of a 15-word language)
    fine-tuned on corpora of other words, whose 300-piece vocabulary datagen
    trains: refused without the flag (saying how to opt in), then 2 updates
    with it, the counts said in one line."""
    import random

    from tiny_runs import WORDS

    rng = random.Random(1)
    words = WORDS[:5] + ["flug", "flight", "plane", "flugzeug", "lands", "landet", "city"]
    text = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(200)]
    corpora = _own_corpora(tmp_path / "corpora", text, text, 300)
    refused = _fine_tune(tiny_trained, corpora, tmp_path / "refused")
    one_line_error(refused, "t2t-trainer", "differs from this run's",
                   "pass --warm_start_vocab=update")
    out = _fine_tune(tiny_trained, corpora, tmp_path / "fine", "--warm_start_vocab=update")
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [s for s in out.stdout.splitlines() if s.startswith("Vocabulary update")]
    # The tiny run's model has the registered problem's 8,192 rows, its vocabulary 300 pieces.
    counts = re.search(r"kept (\d+) rows, dropped (\d+) \(and 7,892 rows no piece owned\), "
                       r"added (\d+)", line)
    assert counts, line
    kept, dropped, added = map(int, counts.groups())
    assert kept + added == 300 and kept + dropped == 300 and 0 < added < 100, line
    assert "Done: step 2" in out.stdout
    alone = run_cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                    f"--data_dir={tmp_path / 'x'}", f"--output_dir={tmp_path / 'y'}",
                    "--warm_start_vocab=update")
    one_line_error(alone, "t2t-trainer", "give that flag too")


def test_the_imported_tensor2tensor_run_fine_tunes_with_a_sentencepiece_vocabulary(
        shared_data, tmp_path):
    """tensor2tensor's own checkpoint (8k SubwordTextEncoder vocabulary),
    imported, then 2 updates on Multi30k with a 1,000-piece SentencePiece
    vocabulary trained on it; the run decodes."""
    from fine_tuning import decodes_one_line
    from wmt_archives import lines

    run = tmp_path / "imported"
    out = run_cli("t2t_import", f"--t2t_dir={shared_data / 't2t_legacy/transformer_test_ckpt'}",
                  f"--vocab_file={shared_data / 't2t_legacy/vocab.translate_ende_wmt8k.8192.subwords'}",
                  f"--output_dir={run}")
    assert out.returncode == 0, out.stderr[-3000:]
    m30k = shared_data / "multi30k"
    corpora = _own_corpora(tmp_path / "corpora", lines(m30k / "train.en.gz")[:1000],
                           lines(m30k / "train.de.gz")[:1000], 1000)
    fine = tmp_path / "fine"
    out = _fine_tune(run, corpora, fine, "--warm_start_vocab=update",
                     "--hparams=batch_size=1024")
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [s for s in out.stdout.splitlines() if s.startswith("Vocabulary update")]
    kept = int(re.search(r"kept (\d+) rows", line).group(1))
    assert re.search(rf"dropped {8190 - kept:,}, added {1000 - kept:,} ", line), line
    assert 2 <= kept < 1000, line   # PAD, EOS and the pieces spelled alike
    import json
    hparams = json.loads((fine / "hparams.json").read_text())
    assert (hparams["vocab_size"], hparams["d_model"]) == (1000, 16)
    decodes_one_line(fine, tmp_path)   # exit 0, one line


def test_the_imported_marian_run_keeps_its_shared_rows_and_softmax_bias(shared_data, tmp_path):
    """OPUS-MT's layout (Marian's SentencePiece pieces, a shared embedding
    and final_logits_bias) to a SentencePiece vocabulary of Multi30k: the
    pieces spelled alike (`▁a`, `▁dog`) keep their rows and their bias."""
    from t2t_revival.data.marian_vocabulary import MarianVocabulary
    from t2t_revival.marian_import.marian_importer import import_marian_run
    from wmt_archives import lines

    run = tmp_path / "marian"
    import_marian_run(str(shared_data / "opus_mt/tiny-en-de"), str(run), log=lambda _: None)
    m30k = shared_data / "multi30k"
    new = _vocab(tmp_path / "new.model", lines(m30k / "train.en.gz")[:2000]
                 + lines(m30k / "train.de.gz")[:2000], 1000)
    directory = TrainingDirectory(run)
    source = build_model(directory.read_hparams())
    restore_model_weights(source, directory.checkpoints.latest())
    target = build_model(directory.read_hparams().replace(vocab_size=1000))
    lines_said = []
    warm_start(target, str(run), new.model_file, log=lines_said.append, vocab=UPDATE)
    old = MarianVocabulary(run / "vocab.marian.json")
    rows = row_map(old, new, True, old.vocab_size, 1000)
    before, after = _values(source), _values(target)
    dog = new.encode_pieces("a dog")
    assert dog == ["▁a", "▁dog"], dog
    for piece in dog:
        i, j = new.encode(piece.replace("▁", ""))[0], old.pieces.index(piece)
        assert rows.old_ids[i] == j
        for key in ("shared_embedding.embeddings", "final_logits_bias"):
            np.testing.assert_array_equal(after[key][i], before[key][j], err_msg=key)
    assert after["final_logits_bias"].shape == (1000,)
    assert any(f"kept {rows.kept:,} rows" in line for line in lines_said), lines_said
