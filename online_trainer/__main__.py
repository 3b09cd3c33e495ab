"""`python -m online_trainer`: the trainer process (tests and supervisors spawn it this way)."""

import logging

import typer

from online_trainer.train_cli import train

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
typer.run(train)
