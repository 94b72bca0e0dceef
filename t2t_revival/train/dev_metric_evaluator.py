"""`DevMetricEvaluator`: the problem's own metric on dev sentences, while training.

At each evaluation the trainer's chief decodes the first `num_sentences`
sentences of the dev split's plain-text source file
(`Problem.source_target_files("dev", data_dir)`) with the model in memory,
with `Decoder`'s beam search and the decode settings of the run's hparams
(those t2t-decoder uses by default), and scores them against the dev
references with `Problem.score_predictions`: sacreBLEU for translation, EVALB
F1 for parsing (`Problem.eval_metric` says which; the trainer does not guess),
or the metric --eval_metric chose among the problem's `eval_metrics` (chrF).
A problem of several target languages (`Problem.language_pairs`: own data of
several "target_lang"s) has its figure scored per language pair too.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from t2t_revival.data.problem import Problem
from t2t_revival.data.scored_predictions import ScoredPredictions, score_name
from t2t_revival.decode.decoder import Decoder
from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.process.device_memory import OutOfMemoryError
from t2t_revival.errors import UserError
from t2t_revival.models.trained_model import TrainedModel
from t2t_revival.files.text_lines import read_text_lines


class DevMetricEvaluator:
    """Decodes and scores the first `num_sentences` dev sentences.

    Args:
        problem: the run's problem (its dev files, its metric).
        data_dir: where its data is.
        trained: the trainer's model, hparams, run record and vocabulary; the
            weights are read as they are at each `evaluate` call.
        num_sentences: how many dev sentences, from the first (> 0).
        decode_hparams: the decode settings (--eval_decode_hparams resolved;
            t2t-decoder's defaults unless set).
        eval_metric: what to score with, one of the problem's `eval_metrics`
            ("" = its `eval_metric`).
        devices: the devices to decode on, one copy of the model each (the
            trainer's GPUs: `dev_decoding_devices`); none: where the model is.
    """

    def __init__(self, problem: Problem, data_dir: str, trained: TrainedModel,
                 num_sentences: int, decode_hparams: DecodeHParams, eval_metric: str = "",
                 devices: Sequence[str] = ()):
        source_file, target_file = problem.source_target_files("dev", data_dir)
        sources = read_text_lines(source_file, "dev source")[:num_sentences]
        references = read_text_lines(target_file, "dev target")[:num_sentences]
        if len(sources) != len(references) or not sources:
            raise UserError(
                f"the dev files of {problem.name} in {data_dir} hold {len(sources)} source "
                f"and {len(references)} target lines among the first {num_sentences}; "
                f"rerun t2t-datagen. Received: data_dir={data_dir!r}")
        # Over-long sentences would stop t2t-decoder; here they are left out
        # (and counted), so that one long dev line cannot stop a training run.
        max_length = trained.hparams.max_length
        keep = [i for i, s in enumerate(sources)
                if len(trained.vocab.encode(s)) + 1 <= max_length]  # + EOS
        self.skipped = len(sources) - len(keep)
        self.sources = [sources[i] for i in keep]
        self.references = [references[i] for i in keep]
        self.problem = problem
        self.eval_metric = problem.check_eval_metric(eval_metric)
        self.metric = score_name(self.eval_metric)
        """The headline figure's name: "bleu", "chrf" or "f1"."""
        self.pairs = problem.language_pairs(self.sources)
        """{pair name: (target language, indices of its dev sentences)}; {} for one pair."""
        self.pair_scores: dict[str, float] = {}
        """The last `evaluate`'s figure of each pair of `pairs`."""
        self.decoder = Decoder(trained, decode_hparams, devices)
        self.seconds = 0.0
        """How long the last `evaluate` took."""

    def __len__(self) -> int:
        return len(self.sources)

    def evaluate(self, compiling: Callable[[int], None] | None = None) -> ScoredPredictions:
        """Decode the dev sentences with the current weights and score them;
        `compiling` as `Decoder.translate`'s (called before XLA compiles)."""
        start = time.time()
        self.decoder.copy_weights()   # the other devices' copies: the weights of now
        try:
            predictions = self.decoder.translate(self.sources, compiling=compiling)
        except OutOfMemoryError as e:   # said with the trainer's flag
            raise OutOfMemoryError(
                "decoding the dev sentences", e.reason, self.decoder.out_of_memory_advice(
                    "--eval_decode_hparams'", then=", and rerun with them to resume")) from None
        scored = self.problem.score_predictions(predictions, self.references, self.sources,
                                                metric=self.eval_metric)
        self.pair_scores = {
            name: self.problem.score_predictions(
                [predictions[i] for i in indices], [self.references[i] for i in indices],
                [self.sources[i] for i in indices], language=language,
                metric=self.eval_metric).score
            for name, (language, indices) in self.pairs.items()}
        self.seconds = time.time() - start
        return scored


def dev_decoding_devices(worker_devices: Sequence[str]) -> list[str]:
    """The devices the dev sentences decode on: the strategy's local devices
    when they are GPUs, two or more (one model copy each); else none, where
    the model is (a CPU, split or not, decodes as one device)."""
    gpus = [d for d in worker_devices if "GPU" in d.upper()]
    return gpus if len(gpus) > 1 and len(gpus) == len(worker_devices) else []
