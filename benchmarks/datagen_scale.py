"""Datagen at scale: `t2t-datagen --problem=translate_ende_wmt32k` on 0.5M-2M pairs.

Builds the official WMT14 En-De archives (the layout problems/translate_wmt.py
reads from --tmp_dir) holding N training pairs made from the shared 10k-pair
WMT sample (line i is sample line i % 10000 with a few words of another
sample line appended, so the text does not simply repeat), in a temporary
folder, never in the repository. Then runs the datagen in a subprocess for
each size and worker count and prints JSON: wall time, pairs/s, the
vocabulary's share of the time, and peak resident memory (the largest
process, and the whole tree of datagen and its workers, sampled with psutil).

Projection (printed too): with F the fixed seconds (start-up, the vocabulary
trained on a sample of at most 1M sentences, so constant past 500k pairs,
dev and test) and, per pair, s seconds of serial work (reading the corpus in
the parent process, twice) and p seconds that the workers share,
T(N, W) = F + N * (s + p / W) (Amdahl's law). F and s + p / W are fitted by
least squares over the sizes at the smallest and the largest worker count;
En-De (4.5M pairs) and En-Fr (36M) are projected on 16 and 64 cores. On a 2-core machine the parent competes with two workers, so
the fitted p is pessimistic and s optimistic: read the projection as a rough
guide.

    python -m benchmarks.datagen_scale                      # 0.5M, 1M, 2M at 1 and 2 workers
    python -m benchmarks.datagen_scale --sizes=20000 --workers=1,2   # smoke run
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import psutil

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "datagen_scale"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv=None):
    p = harness.argument_parser(PROG, __doc__)
    p.add_argument("--sizes", type=_ints, default=[500000, 1000000, 2000000],
                   help="training pairs per corpus, comma-separated")
    p.add_argument("--workers", type=_ints, default=[1, 2],
                   help="--num_workers values to run at each size")
    p.add_argument("--shared_data", default=str(harness.SHARED_DATA),
                   help="the shared data folder (wmt14/ is read)")
    p.add_argument("--work_dir", default=None,
                   help="where the archives and outputs go (default: a temporary folder, "
                        "deleted at the end)")
    p.add_argument("--project_pairs", type=_ints, default=[4500000, 36000000],
                   help="corpus sizes to project to (En-De, En-Fr)")
    p.add_argument("--project_cores", type=_ints, default=[16, 64],
                   help="worker counts to project to")
    return p.parse_args(argv)


SAMPLE = "wmt14/train_sample_tokenized"
# (archive, English member, German member, share of the pairs): the En-De corpora.
TRAIN = (("training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en.en",
          "training/europarl-v7.de-en.de", 0.42),
         ("training-parallel-commoncrawl.tgz", "commoncrawl.de-en.en",
          "commoncrawl.de-en.de", 0.53),
         ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en.en",
          "training/news-commentary-v9.de-en.de", 0.05))


def _lines(path: pathlib.Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _sgm(lines: list[str], kind: str) -> str:
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(lines, 1))
    return f'<{kind}set setid="x">\n<doc docid="d" origlang="en">\n{segs}</doc>\n</{kind}set>\n'


def _add(tar: tarfile.TarFile, name: str, path_or_text) -> None:
    if isinstance(path_or_text, str):
        data = path_or_text.encode("utf-8")
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.add(str(path_or_text), arcname=name)


def build_archives(shared: pathlib.Path, pairs: int, out: pathlib.Path) -> None:
    """The five En-De archives of translate_ende_wmt32k with `pairs` training pairs."""
    out.mkdir(parents=True, exist_ok=True)
    en, de = _lines(shared / SAMPLE / "src-train.txt"), _lines(shared / SAMPLE / "tgt-train.txt")
    rng = random.Random(pairs)
    first = 0
    for k, (archive, en_name, de_name, share) in enumerate(TRAIN):
        n = pairs - first if k == len(TRAIN) - 1 else int(pairs * share)
        files = out / (archive + ".parts")
        files.mkdir(exist_ok=True)
        with open(files / "en", "w", encoding="utf-8") as fe, \
                open(files / "de", "w", encoding="utf-8") as fd:
            for i in range(first, first + n):
                j, other = i % len(en), rng.randrange(len(en))
                cut = rng.randint(1, 4)
                fe.write(en[j] + " " + " ".join(en[other].split()[:cut]) + "\n")
                fd.write(de[j] + " " + " ".join(de[other].split()[:cut]) + "\n")
        with tarfile.open(out / archive, "w:gz", compresslevel=1) as tar:
            _add(tar, en_name, files / "en")
            _add(tar, de_name, files / "de")
        shutil.rmtree(files)
        first += n
    nt13, nt14 = shared / "wmt14/newstest2013.en-de", shared / "wmt14/newstest2014.en-de"
    with tarfile.open(out / "dev.tgz", "w:gz") as tar:
        _add(tar, "dev/newstest2013-src.en.sgm", _sgm(_lines(nt13 / "newstest2013.en"), "src"))
        _add(tar, "dev/newstest2013-src.de.sgm", _sgm(_lines(nt13 / "newstest2013.de"), "src"))
    with tarfile.open(out / "test-full.tgz", "w:gz") as tar:
        _add(tar, "test-full/newstest2014-deen-src.en.sgm",
             _sgm(_lines(nt14 / "newstest2014.en"), "src"))
        _add(tar, "test-full/newstest2014-deen-ref.de.sgm",
             _sgm(_lines(nt14 / "newstest2014.de"), "ref"))


def _extract(tmp_dir: pathlib.Path) -> None:
    """Extract the members once, untimed (datagen does it on its first run only)."""
    from t2t_revival.problems.translate_wmt import TranslateEndeWmt32k

    problem = TranslateEndeWmt32k(download=False)
    for split in ("train", "dev", "test"):
        problem.readers(split, str(tmp_dir))


class _MemorySampler(threading.Thread):
    """Peak resident memory of a process tree: its largest process and the sum."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak_process = self.peak_tree = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
                rss = []
                for p in procs:
                    try:
                        rss.append(p.memory_info().rss)
                    except psutil.Error:
                        pass
                if rss:
                    self.peak_process = max(self.peak_process, max(rss))
                    self.peak_tree = max(self.peak_tree, sum(rss))
            except psutil.Error:
                pass
            self.stop.wait(0.2)


def run_datagen(tmp_dir: pathlib.Path, data_dir: pathlib.Path, workers: int) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    cmd = [sys.executable, "-m", "t2t_revival.cli.datagen", "--problem=translate_ende_wmt32k",
           f"--data_dir={data_dir}", f"--tmp_dir={tmp_dir}", "--nodownload",
           f"--num_workers={workers}"]
    load_before = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    sampler = _MemorySampler(proc.pid)
    sampler.start()
    out, err = proc.communicate()
    wall = time.time() - start
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        sys.stderr.write(err[-3000:])
        raise UserError(f"datagen failed with exit code {proc.returncode} (its error "
                        f"output is above). Received: {' '.join(cmd)}")
    vocab = re.search(r"vocabulary \S+ done in ([\d.]+) s", err)
    train = json.loads((data_dir / "translate_ende_wmt32k-train.stats.json").read_text())
    return {"workers": workers, "wall_s": round(wall, 1),
            "vocab_s": float(vocab.group(1)) if vocab else None,
            "train_pairs": train["examples"],
            "pairs_per_s": round(train["examples"] / wall),
            "peak_rss_largest_process_mb": round(sampler.peak_process / 2**20),
            "peak_rss_tree_mb": round(sampler.peak_tree / 2**20),
            # The 1-minute load average before and at the end: a figure counts only
            # from a run that had the machine to itself (about `workers` at the end).
            "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of wall time over pairs; one point: (0, t/N)."""
    if len({n for n, _ in points}) < 2:
        n, t = points[0]
        return 0.0, t / n
    mean_n = sum(n for n, _ in points) / len(points)
    mean_t = sum(t for _, t in points) / len(points)
    slope = (sum((n - mean_n) * (t - mean_t) for n, t in points)
             / sum((n - mean_n) ** 2 for n, _ in points))
    return mean_t - slope * mean_n, slope


def project(runs: list[dict], targets: list[int], cores: list[int]) -> dict:
    """Fit T(N, W) = F + N (s + p / W) (Amdahl's law per pair) and project it.

    For each worker count, a line over the sizes gives F (fixed: start-up,
    the vocabulary, dev and test) and the seconds per pair r(W) = s + p / W;
    s and p come from r at the smallest and largest worker count.
    """
    by_w: dict[int, list[tuple[int, float]]] = {}
    for r in runs:
        by_w.setdefault(r["workers"], []).append((r["size"], r["wall_s"]))
    lo, hi = min(by_w), max(by_w)
    model = {"model": "T(N, W) = F + N * (s + p / W): F fixed seconds (start-up, the "
                      "vocabulary on at most 1M sentences, dev/test), s serial and p "
                      "parallel seconds per pair; F and s + p / W fitted over the sizes "
                      f"at W={lo} and W={hi}"}
    if lo == hi:
        return dict(model, error="needs two worker counts")
    (f_lo, r_lo), (f_hi, r_hi) = _line(by_w[lo]), _line(by_w[hi])
    if len({n for n, _ in by_w[lo]}) < 2:
        model["warning"] = "one size only: F is taken as 0, so s holds the fixed costs"
    p = (r_lo - r_hi) / (1 / lo - 1 / hi)
    s = r_lo - p / lo
    f = (f_lo + f_hi) / 2
    model.update(F_s=round(f, 1), s_us_per_pair=round(s * 1e6, 2),
                 p_us_per_pair=round(p * 1e6, 2), projected_minutes={
                     f"{n}_pairs_{w}_cores": round((f + n * (s + p / w)) / 60, 1)
                     for n in targets for w in cores})
    return model


def main(argv=None) -> None:
    a = parse_args(argv)
    shared = pathlib.Path(a.shared_data)
    work = pathlib.Path(a.work_dir or tempfile.mkdtemp(prefix="datagen_scale."))
    runs = []
    try:
        for size in a.sizes:
            tmp_dir = work / f"wmt_{size}"
            build_archives(shared, size, tmp_dir)
            _extract(tmp_dir)
            for workers in a.workers:
                data_dir = work / f"data_{size}_{workers}"
                result = dict(size=size, **run_datagen(tmp_dir, data_dir, workers))
                print(json.dumps(result), file=sys.stderr, flush=True)
                runs.append(result)
                shutil.rmtree(data_dir)
            shutil.rmtree(tmp_dir)
    finally:
        if not a.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    harness.print_result({"machine_cores": psutil.cpu_count(), "runs": runs,
                          "projection": project(runs, a.project_pairs, a.project_cores)},
                         indent=1)


if __name__ == "__main__":
    harness.run(main, PROG)
