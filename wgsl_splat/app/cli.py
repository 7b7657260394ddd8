"""Command-line interface: ``python -m wgsl_splat COMMAND``, one module per command in this
package (``train``, ``render``, ``eval``, ``view``, ``export``, ``bench``, ``gradcheck``,
``devices``, ``sfm``). Each
imports its heavy modules lazily so that ``--help`` stays fast and a missing GPU never breaks
unrelated commands."""

from __future__ import annotations

import sys

import click

from . import bench, devices, evaluate, export, gradcheck, render, sfm, train, view


class SplatGroup(click.Group):
    """Turns GPU runtime errors (validation, lost device, out of memory) into one clear line."""

    def invoke(self, ctx):
        restore = _terminate_cleanly()
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 - only GpuError and a full disk are converted
            import errno

            from ..gpu.runtime import GpuError

            if isinstance(exc, GpuError):
                raise click.ClickException(f"GPU error: {exc}\n(--device cpu runs the NumPy path)") from None
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", 0)):
                # any command's output (render's PNGs, eval's metrics); writes are atomic
                raise click.ClickException(f"the disk is full: writing {exc.filename} failed; "
                                           f"files written before it are intact") from None
            raise
        finally:
            restore()


def _terminate_cleanly():
    """SIGTERM (``kill``, ``timeout``, a scheduler) ends a command as SIGINT does, by an exception:
    Python's default would end the process at once, leaving the temp file of a write under way
    (atomic_io removes it on the way out). ``train`` sets its own handlers around the loop (a
    checkpoint first). The exit status stays the shell's 143. Returns what puts the previous
    handler back."""
    import signal
    import threading

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return lambda: None
    signal.signal(signal.SIGTERM, terminated)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


@click.group(cls=SplatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wgsl_splat")
def main() -> None:
    """3D Gaussian Splatting on WGSL compute shaders (wgpu), with a NumPy reference path."""


for command in (render.render, train.train, evaluate.eval_cmd, view.view, export.export,
                bench.bench, gradcheck.gradcheck, devices.devices, sfm.sfm):
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
