"""Shared pytest fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gpu_ctx():
    """A GpuContext on the default adapter (lavapipe in CI).

    Fails -- never skips -- when no adapter is found: CI must run the GPU tests for real
    (docs/design.md §4). Install Mesa's lavapipe (Debian: mesa-vulkan-drivers) to get one.
    """
    from wgsl_splat.gpu.runtime import GpuError, select_device

    try:
        ctx = select_device("gpu")
    except GpuError as exc:
        pytest.fail(f"GPU tests need a wgpu adapter and none was found ({exc}). On Linux without a "
                    f"GPU install Mesa's lavapipe (Debian: mesa-vulkan-drivers).", pytrace=False)
    yield ctx
    ctx.close()
