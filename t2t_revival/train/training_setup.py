"""`TrainingSetup`: what a run builds once: problem, strategy, model, optimizer."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import keras
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.models.build_model import build_model
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.train.optimizer import make_optimizer
from t2t_revival.train.run_preparation import check_cooldown_fits, check_resume_config
from t2t_revival.train.strategy import is_chief, make_strategy
from t2t_revival.train.time_budget import TimeBudget
from t2t_revival.settings.train_config import TrainConfig


@dataclasses.dataclass(frozen=True)
class TrainingSetup:
    """The parts of a run, built once by `build` (OpenNMT-tf's Runner).

    Attributes:
        config: the run options.
        problem: the registered problem, its data located.
        strategy: the tf.distribute strategy (`make_strategy` from config).
        chief: whether this worker writes checkpoints and summaries.
        model: the built model (in the strategy's scope).
        optimizer: `make_optimizer`'s, built for the model's variables.
        cooldown_end: the variable where the cooldown ends, moved by the time
            budget (`TimeBudget`); None when the run does not fit one.
    """

    config: TrainConfig
    problem: Any
    strategy: tf.distribute.Strategy
    chief: bool
    model: Any
    optimizer: Any
    cooldown_end: tf.Variable | None

    @classmethod
    def build(cls, config: TrainConfig, directory: TrainingDirectory,
              strategy: tf.distribute.Strategy | None = None,
              log: Callable[[str], None] = print) -> "TrainingSetup":
        """Check the run's config against its directory, then build its parts.

        User errors first (an unknown name, a resume with other hparams, a
        cooldown longer than the run), before TensorFlow sets up its
        devices. Sets the process-wide seed and dtype policy.
        """
        problem = registry.problems.get(config.problem)()
        problem.locate_data(config.data_dir, config.tmp_dir)
        registry.models.get(config.model)   # an unknown name is a UserError here
        check_resume_config(config, directory, log)
        check_cooldown_fits(config)
        strategy = strategy or make_strategy(config.cpu_devices, config.worker_gpu)
        keras.utils.set_random_seed(config.seed)
        keras.mixed_precision.set_global_policy(config.hparams.mixed_precision)
        with strategy.scope():
            model = build_model(config.hparams, config.model)
            cooldown_end = tf.Variable(config.train_steps, dtype=tf.int64, trainable=False,
                                       name="cooldown_end") \
                if TimeBudget.fits(config) else None
            optimizer = make_optimizer(config.hparams, config.train_steps, cooldown_end)
            optimizer.build(model.trainable_variables)
        return cls(config=config, problem=problem, strategy=strategy, chief=is_chief(strategy),
                   model=model, optimizer=optimizer, cooldown_end=cooldown_end)
