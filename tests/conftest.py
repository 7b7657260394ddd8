"""Shared pytest fixtures."""

from __future__ import annotations

import pytest


def pytest_configure(config):
    """Record every shader variant the tests create (tests/test_portability.py checks that the
    portability tour covers them all)."""
    from wgsl_splat.gpu.shaders import start_recording

    config.addinivalue_line("markers", "last: runs after every other test of the session")
    config.wgsl_variants = start_recording()


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)   # stable


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
