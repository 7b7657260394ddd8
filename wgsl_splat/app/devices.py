"""``devices``: the wgpu adapters of this machine."""

from __future__ import annotations

import click


@click.command()
def devices():
    """List the wgpu adapters (GPU and software) this machine offers."""
    list_devices()


def list_devices() -> None:
    from ..gpu.runtime import adapter_summary, list_adapters

    adapters = list_adapters()
    if not adapters:
        click.echo("No wgpu adapter found: training and rendering use the NumPy CPU path. On Linux "
                   "without a GPU, install Mesa's lavapipe (Debian: mesa-vulkan-drivers).")
        return
    for i, adapter in enumerate(adapters):
        click.echo(f"[{i}] {adapter_summary(adapter)}")
