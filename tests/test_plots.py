"""benchmarks/plots.py: both pictures drawn from the committed figures, the
same bytes on a rerun (no time in them), the committed PNGs up to date with
the figures, the figures those RESULTS.md quotes, and a recipe's log read
for its curve. Skipped without matplotlib (the `docs` extra)."""

import json
import struct
import zlib

import pytest

from benchmarks import plots
from conftest import ROOT
from t2t_revival.errors import UserError

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The (type, payload) chunks of a PNG, each CRC checked."""
    assert data.startswith(PNG_SIGNATURE)
    chunks, at = [], len(PNG_SIGNATURE)
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        payload = data[at + 8:at + 8 + length]
        assert struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0] == \
            zlib.crc32(kind + payload)
        chunks.append((kind, payload))
        at += 12 + length
    return chunks


def png_text(data: bytes) -> dict[str, str]:
    """The PNG's text metadata (tEXt chunks)."""
    return dict(payload.decode("latin-1").split("\0", 1)
                for kind, payload in png_chunks(data) if kind == b"tEXt")


def test_plots_draws_both_pictures_from_the_committed_figures_the_same_bytes_twice(tmp_path):
    import matplotlib

    for run in ("first", "second"):
        plots.main([f"--out_dir={tmp_path / run}"])
    for name in (plots.RECIPE_PNG, plots.RATIOS_PNG):
        first = (tmp_path / "first" / name).read_bytes()
        kinds = [kind for kind, _ in png_chunks(first)]
        assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
        assert len(first) > 20_000, name   # a picture, not an empty canvas
        # No time anywhere: no tIME chunk, one text entry, matplotlib's version.
        assert b"tIME" not in kinds and b"zTXt" not in kinds and b"iTXt" not in kinds
        assert png_text(first) == {"Software": f"matplotlib {matplotlib.__version__}"}
        assert first == (tmp_path / "second" / name).read_bytes(), name


def test_the_committed_pictures_are_those_the_committed_figures_draw(tmp_path):
    """RESULTS.md and the docs show docs/images/*.png: redrawn from
    benchmarks/figures/ with the matplotlib that drew them, they are the same
    bytes (a figure changed without `python -m benchmarks.plots` fails here)."""
    import matplotlib

    made_with = png_text((ROOT / "docs" / "images" / plots.RECIPE_PNG).read_bytes())["Software"]
    if made_with != f"matplotlib {matplotlib.__version__}":
        pytest.skip(f"the pictures were drawn with {made_with}, this is "
                    f"{matplotlib.__version__}: not the same bytes")
    plots.main([f"--out_dir={tmp_path}"])
    for name in (plots.RECIPE_PNG, plots.RATIOS_PNG):
        assert (tmp_path / name).read_bytes() == (ROOT / "docs" / "images" / name).read_bytes(), \
            f"docs/images/{name} is stale: run python -m benchmarks.plots"


def test_the_speed_ratios_are_those_results_quotes():
    bars = plots.speed_ratios(plots.FIGURES)
    assert [round(bar["ratio"], 2) for bar in bars] == [0.67, 0.44, 2.42, 1.29, 1.55, 1.2]
    assert bars[0]["range"] == (0.66, 0.71) and bars[1]["range"] == (0.41, 0.47)
    assert [bar["goal"] for bar in bars[:2]] == [1.0, 0.5]
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    for bar in bars:
        assert f"**{bar['ratio']:.2f}x**" in results, bar["label"]


def test_the_recipe_curve_is_run_13s():
    figure = json.loads((plots.FIGURES / "multi30k_recipe.json").read_text(encoding="utf-8"))
    recipe = plots.recipe_from_figure(figure)
    assert [e["step"] for e in recipe["evals"]][-1] == recipe["output"]["final_step"] == 9150
    # The kept table's loss is the log of its perplexity; the run's own final line agrees.
    assert recipe["evals"][-1]["loss"] == pytest.approx(1.5937, abs=2e-3)
    assert recipe["output"]["final_dev"].startswith("eval at step 9150: loss 1.5937")
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert f"**sacreBLEU {recipe['output']['sacrebleu']:.2f}**" in results


RECIPE_LOG = """\
[   0.0 min] host: x86_64 2 cores, AMD EPYC; numpy float32 matmul 0.19 TFLOP/s
[  10.1 min] train: step 800/9600  loss 3.1
[  12.7 min] train: eval at step 1000: loss 2.7000  accuracy 0.5000  perplexity 14.88  bleu 26.07 (200 dev sentences, 2 s)
[  24.4 min] train: eval at step 2000: loss 2.1000  accuracy 0.6000  perplexity 8.17  bleu 37.39 (200 dev sentences, 2 s)
[  30.0 min] train: eval at step 2000: loss 2.0500  accuracy 0.6100  perplexity 7.77  bleu 37.50 (200 dev sentences, 2 s)
[  36.0 min] train: eval at step 3000: loss 1.9000  accuracy 0.6500  perplexity 6.69
{"benchmark": "multi30k_recipe", "date": "2026-11-28", "sacrebleu": 30.5, "hparams": "learning_rate_cooldown_steps=1000", "final_step": 3000, "total_minutes": 40.2}
"""


def test_a_recipe_log_gives_its_eval_lines_the_last_of_each_step(tmp_path):
    log = tmp_path / "multi30k_recipe.log"
    log.write_text(RECIPE_LOG, encoding="utf-8")
    recipe = plots.recipe_from_log(str(log))
    assert recipe["evals"] == [
        {"step": 1000, "loss": 2.7, "bleu": 26.07, "minutes": 12.7},
        {"step": 2000, "loss": 2.05, "bleu": 37.5, "minutes": 30.0},   # resumed: the last
        {"step": 3000, "loss": 1.9, "bleu": None, "minutes": 36.0}]
    assert recipe["output"]["sacrebleu"] == 30.5
    plots.main([f"--out_dir={tmp_path / 'out'}", f"--recipe_log={log}"])
    assert (tmp_path / "out" / plots.RECIPE_PNG).read_bytes().startswith(PNG_SIGNATURE)


def test_a_log_without_eval_lines_or_a_missing_figure_is_one_user_error(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("[   0.1 min] train: step 10/9600  loss 9.0\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"no 'eval at step N: loss \.\.\.' lines.*"
                                        r"Received: --recipe_log=.*empty\.log"):
        plots.main([f"--out_dir={tmp_path}", f"--recipe_log={log}"])
    with pytest.raises(UserError, match=r"multi30k_recipe\.json is not in --figures_dir.*"
                                        r"Received: --figures_dir="):
        plots.main([f"--out_dir={tmp_path}", f"--figures_dir={tmp_path / 'none'}"])
