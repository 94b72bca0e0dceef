"""Pictures of RESULTS.md's figures, drawn from the benchmark outputs it quotes.

    python -m benchmarks.plots                # writes docs/images/*.png
    python -m benchmarks.plots --out_dir=/tmp/plots --recipe_log=multi30k_recipe.log

Two PNGs, shown in `benchmarks/RESULTS.md` and the docs:

- `multi30k_recipe.png`: the Multi30k recipe's dev BLEU and dev loss against
  the update, the learning-rate cooldown shaded, the test figure in the
  title. From `figures/multi30k_recipe.json` (run 13: its dev table and its
  final JSON line), or with `--recipe_log` from the `eval at step N: loss ...`
  lines of a log (what `python -m benchmarks.multi30k_recipe` prints, or a
  `t2t-trainer` log; the recipe's last line, its JSON, gives the title and
  the cooldown). A log's loss is the logged one; the kept table's is the log
  of its perplexity (the trainer's perplexity is exp(loss)).
- `speed_ratios.png`: our speed over the peer's, each measured in one run:
  decoding beside CTranslate2 at batch 32 and 1 (`figures/decode_speed.json`,
  its rounds as the error bar), the training step beside PyTorch on the
  2-core CPU (`figures/train_step_cpu.json`) and on a GPU, eager and
  `torch.compile`d (`figures/train_step_gpu.json`).

`figures/*.json` hold the outputs RESULTS quotes, each with the date and the
RESULTS section it is from; where a run's JSON was not kept, the figures
RESULTS' tables give, said so in the file. To picture a new measurement,
put its JSON there and rerun.

Same bytes on a rerun with the same matplotlib: the Agg backend, the fonts
matplotlib ships, and no time in the PNG's metadata (its one text entry is
matplotlib's version). Needs matplotlib: `pip install -e ".[docs]"`.
Prints one JSON line: the files written.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
from typing import Any

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "plots"
FIGURES = pathlib.Path(__file__).resolve().parent / "figures"
IMAGES = harness.ROOT / "docs" / "images"
RECIPE_PNG = "multi30k_recipe.png"
RATIOS_PNG = "speed_ratios.png"

_EVAL = re.compile(r"eval at step (\d+): loss ([\d.]+)\s+accuracy [\d.]+\s+perplexity ([\d.]+)"
                   r"(?:\s+bleu ([\d.]+))?")
_MINUTES = re.compile(r"^\[\s*([\d.]+) min\]")
_COOLDOWN = re.compile(r"learning_rate_cooldown_steps=(\d+)")


def parse_args(argv=None):
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--figures_dir", default=str(FIGURES),
                        help="the benchmark outputs the pictures are drawn from")
    parser.add_argument("--out_dir", default=str(IMAGES), help="where the PNGs go")
    parser.add_argument("--recipe_log", default="",
                        help="draw the recipe's curve from this log's eval lines instead")
    return parser.parse_args(argv)


# ------------------------------------------------------------ the data
def load_figure(figures_dir: pathlib.Path, name: str) -> dict:
    path = figures_dir / name
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise UserError(f"{name} is not in --figures_dir; point it at benchmarks/figures. "
                        f"Received: --figures_dir={figures_dir}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not JSON ({e.msg}, line {e.lineno}); restore it from git. "
                        f"Received: {path}") from None


def recipe_from_figure(figure: dict) -> dict:
    """{"evals": [{step, loss, bleu, minutes}], "output": the recipe's JSON}."""
    evals = [{"step": row["step"], "loss": math.log(row["perplexity"]), "bleu": row.get("bleu"),
              "minutes": row.get("minutes")} for row in figure["evals"]]
    return {"evals": evals, "output": figure.get("output")}


def recipe_from_log(path: str) -> dict:
    """The eval lines of a recipe's (or a trainer's) log, the last of each step
    (a resumed run evaluates a step again), and the recipe's JSON line if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UserError(f"cannot read the recipe's log ({e.strerror}); give the file "
                        f"`python -m benchmarks.multi30k_recipe` wrote. Received: "
                        f"--recipe_log={path}") from None
    evals, output = {}, None
    for line in lines:
        found = _EVAL.search(line)
        if found:
            minutes = _MINUTES.match(line)
            evals[int(found.group(1))] = {
                "step": int(found.group(1)), "loss": float(found.group(2)),
                "bleu": float(found.group(4)) if found.group(4) else None,
                "minutes": float(minutes.group(1)) if minutes else None}
        elif line.startswith('{"benchmark": "multi30k_recipe"'):
            output = json.loads(line)
    if not evals:
        raise UserError("the log has no 'eval at step N: loss ...' lines; give the log of a "
                        "multi30k_recipe or t2t-trainer run that evaluated. Received: "
                        f"--recipe_log={path}")
    return {"evals": [evals[step] for step in sorted(evals)], "output": output}


def speed_ratios(figures_dir: pathlib.Path) -> list[dict[str, Any]]:
    """One bar a comparison: label, ratio (ours / the peer, one run), the
    rounds' range where there were rounds, the goal where there is one, group."""
    bars = []
    decode = load_figure(figures_dir, "decode_speed.json")
    out = decode["output"]
    cores = re.search(r"(\d+) cores", out["machine"]).group(1)
    goals = {32: 1.0, 1: 0.5}   # issue 16's goals
    for entry in out["ratios"]:
        rounds = entry.get("xla_round_ratios") or [entry["xla_vs_ctranslate2_float32"]]
        bars.append({"label": f"decoding, batch {entry['batch_size']}, vs CTranslate2\n"
                              f"CPU ({cores} cores), {decode['date']}",
                     "ratio": entry["xla_vs_ctranslate2_float32"],
                     "range": (min(rounds), max(rounds)),
                     "goal": goals.get(entry["batch_size"]), "group": "decoding"})
    cpu = load_figure(figures_dir, "train_step_cpu.json")
    for run in cpu["runs"]:
        note = f"\n{run['note']}" if run.get("note") else ""
        bars.append({"label": f"training step, {run['shape']} shape, vs PyTorch\n"
                              f"CPU (2 cores), {run['date']}{note}",
                     "ratio": run["peer_step_s"] / run["ours_step_s"], "group": "training"})
    gpu = load_figure(figures_dir, "train_step_gpu.json")
    shape = next(iter(gpu["output"]["shapes"].values()))
    device = shape["peer"].get("device_name", "GPU").replace("NVIDIA ", "")
    precision = gpu["output"]["mixed_precision"].replace("mixed_", "")
    bars.append({"label": f"training step, big shape, {precision}, vs eager PyTorch\n"
                          f"{device}, {gpu['date']}",
                 "ratio": shape["ratio"], "group": "training"})
    compiled = gpu["compiled_peer"]
    bars.append({"label": f"training step, big shape, {precision}, vs torch.compile\n"
                          f"{device}, {gpu['date']}",
                 "ratio": compiled["peer_step_s"] / compiled["ours_step_s"], "group": "training"})
    return bars


# ------------------------------------------------------------ the pictures
def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UserError('matplotlib is not installed; install the docs extra: '
                        'pip install -e ".[docs]". Received: no module named matplotlib') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.family": "DejaVu Sans", "font.size": 9,
                         "axes.spines.top": False, "axes.spines.right": False})
    return matplotlib, plt


def _save(fig, path: pathlib.Path, matplotlib) -> None:
    # Only matplotlib's version in the metadata: no time, so a rerun gives the same bytes.
    fig.savefig(path, dpi=100, metadata={"Software": f"matplotlib {matplotlib.__version__}"})


def draw_recipe(recipe: dict, path: pathlib.Path) -> None:
    matplotlib, plt = _pyplot()
    evals, output = recipe["evals"], recipe["output"] or {}
    steps = [e["step"] for e in evals]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7.0, 5.0))
    with_bleu = [e for e in evals if e["bleu"] is not None]
    top.plot([e["step"] for e in with_bleu], [e["bleu"] for e in with_bleu], marker="o",
             color="tab:blue")
    top.set_ylabel("dev BLEU\n(200 dev sentences)")
    bottom.plot(steps, [e["loss"] for e in evals], marker="o", color="tab:orange")
    bottom.set_ylabel("dev loss\n(per target token)")
    bottom.set_xlabel("update")
    for e in with_bleu[-1:]:
        top.annotate(f"{e['bleu']:.2f}", (e["step"], e["bleu"]), textcoords="offset points",
                     xytext=(0, 6), ha="center")
    bottom.annotate(f"{evals[-1]['loss']:.3f}", (steps[-1], evals[-1]["loss"]),
                    textcoords="offset points", xytext=(0, 6), ha="center")
    cooldown = _COOLDOWN.search(output.get("hparams") or "")
    if cooldown and output.get("final_step"):
        end = output["final_step"]
        for axis in (top, bottom):
            axis.axvspan(end - int(cooldown.group(1)), end, color="0.85", zorder=0)
        top.text(end - int(cooldown.group(1)) / 2, top.get_ylim()[0], "learning-rate\ncooldown",
                 ha="center", va="bottom", color="0.35")
    timed = [e for e in evals if e["minutes"] is not None]
    if len(timed) >= 2:   # minutes on the top axis: a straight fit of the evaluations' times
        n = len(timed)
        mean_s = sum(e["step"] for e in timed) / n
        mean_m = sum(e["minutes"] for e in timed) / n
        slope = (sum((e["step"] - mean_s) * (e["minutes"] - mean_m) for e in timed)
                 / sum((e["step"] - mean_s) ** 2 for e in timed))
        offset = mean_m - slope * mean_s
        minutes_axis = top.secondary_xaxis(
            "top", functions=(lambda s: offset + slope * s, lambda m: (m - offset) / slope))
        minutes_axis.set_xlabel("minutes since the start (fitted to the evaluations' times)")
    title = "Multi30k recipe: the dev set during training"
    if output.get("sacrebleu") is not None:
        title = (f"Multi30k recipe, {output.get('date', '')}: test_2016_flickr sacreBLEU "
                 f"{output['sacrebleu']:.2f} in {output.get('total_minutes', 0):.1f} minutes")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path, matplotlib)
    plt.close(fig)


def draw_ratios(bars: list[dict], path: pathlib.Path) -> None:
    matplotlib, plt = _pyplot()
    colors = {"decoding": "tab:blue", "training": "tab:green"}
    fig, axis = plt.subplots(figsize=(9.0, 0.8 * len(bars) + 1.4))
    rows = list(range(len(bars)))[::-1]   # the first bar on top
    for row, bar in zip(rows, bars):
        low, high = bar.get("range") or (bar["ratio"], bar["ratio"])
        axis.barh(row, bar["ratio"], color=colors[bar["group"]], height=0.6,
                  xerr=[[bar["ratio"] - low], [high - bar["ratio"]]] if high > low else None,
                  capsize=3)
        axis.text(low - 0.03, row, f"{bar['ratio']:.2f}x", va="center", ha="right",
                  color="white", fontweight="bold")
        if bar.get("goal"):
            axis.plot([bar["goal"]], [row], marker="|", markersize=22, color="black",
                      markeredgewidth=2)
    axis.axvline(1.0, color="0.3", linestyle="--", linewidth=1)
    axis.set_yticks(rows, [bar["label"] for bar in bars])
    axis.set_xlim(0, max(max(b["ratio"] for b in bars) * 1.08, 1.2))
    axis.set_xlabel("our speed / the peer's, measured in the same run\n"
                    "(dashed: the peer's speed; black mark: the goal; error bar: the rounds)")
    fig.suptitle("Speed against the peers")
    fig.tight_layout()
    _save(fig, path, matplotlib)
    plt.close(fig)


def main(argv=None) -> None:
    args = parse_args(argv)
    figures_dir = pathlib.Path(args.figures_dir)
    recipe = (recipe_from_log(args.recipe_log) if args.recipe_log
              else recipe_from_figure(load_figure(figures_dir, "multi30k_recipe.json")))
    bars = speed_ratios(figures_dir)
    out_dir = pathlib.Path(args.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot make --out_dir ({e.strerror}); give a folder you can write. "
                        f"Received: --out_dir={out_dir}") from None
    written = [out_dir / RECIPE_PNG, out_dir / RATIOS_PNG]
    draw_recipe(recipe, written[0])
    draw_ratios(bars, written[1])
    harness.print_result({"benchmark": PROG, "wrote": [str(p) for p in written]})


if __name__ == "__main__":
    harness.run(main, PROG)
