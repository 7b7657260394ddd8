"""Command-line interface: ``python -m wgsl_splat COMMAND``.

Each command lives in a small function here and imports its heavy modules lazily so that
``--help`` stays fast and a missing GPU never breaks unrelated commands.
"""

from __future__ import annotations

import sys

import click


class UserError(click.ClickException):
    """A problem with the user's input: printed as one clear line, exit code 1, no traceback."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wgsl_splat")
def main() -> None:
    """3D Gaussian Splatting on WGSL compute shaders (wgpu), with a NumPy reference path."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
