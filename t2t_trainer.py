"""Thin entry point: `python t2t_trainer.py --problem=... --hparams_set=...`."""

from t2t_revival.cli.trainer import run

if __name__ == "__main__":
    run()
