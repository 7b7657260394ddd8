"""The error a command raises for bad input: one clear line, exit code 1, no traceback.

Its own module so that the CLI (``cli.py``) and the command implementations (``commands.py``)
both import it without importing each other."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A problem with the user's input: printed as one clear line, exit code 1, no traceback."""
