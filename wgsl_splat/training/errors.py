"""The error that ends a run. Its own module so that the loop (``trainer.py``), the modules it is
built from and the replicas (``parallel.py``) raise it without importing one another."""

from __future__ import annotations


class TrainingError(RuntimeError):
    """Training cannot go on (diverged, bad data); the message says what to do."""
