"""Shared pytest fixtures: the GPU adapter and the real test scenes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Real scenes (photographs with their poses) are not in the repository: they live beside the
# checkout by default, as ../shared/data/{mouse,fox,lego}.
DATA_ENV = "WGSL_SPLAT_DATA"
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption("--data-dir", default=None,
                     help=f"folder holding the real test scenes mouse/, fox/, lego/ (default: "
                          f"${DATA_ENV}, else ../shared/data beside the checkout)")


def data_dir(config) -> Path:
    """Where the real test scenes are: --data-dir, else $WGSL_SPLAT_DATA, else ../shared/data."""
    chosen = config.getoption("--data-dir") or os.environ.get(DATA_ENV)
    return Path(chosen).expanduser().resolve() if chosen else DEFAULT_DATA


def real_scene(config, name: str) -> Path:
    """The folder of real scene ``name``. Missing: the test is skipped with one line that says
    what is missing and how to get it -- except under CI (CI=true), where the quality tests must
    never silently stop running, so it fails."""
    path = data_dir(config) / name
    if path.is_dir():
        return path
    msg = (f"real test scene '{name}' not found at {path}: set {DATA_ENV} (or pytest --data-dir) to "
           f"the folder holding mouse/, fox/, lego/ (where to get them: README.md, 'Test data')")
    if os.environ.get("CI", "").strip().lower() in ("true", "1"):
        pytest.fail(f"{msg}; CI=true, so a missing data folder fails the run", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def mouse_dir(request) -> Path:
    return real_scene(request.config, "mouse")


@pytest.fixture(scope="session")
def fox_dir(request) -> Path:
    return real_scene(request.config, "fox")


@pytest.fixture(scope="session")
def lego_dir(request) -> Path:
    return real_scene(request.config, "lego")


GPU_FIXTURES = {"gpu_ctx", "small_ctx"}


def numpy_side_only(config) -> bool:
    """``pytest -m "not gpu"``: the run is the NumPy side alone."""
    return "not gpu" in (config.getoption("-m") or "")


def pytest_configure(config):
    """Record every shader variant the tests create (tests/test_portability.py checks that the
    portability tour covers them all). Under ``-m "not gpu"`` no adapter may be opened: a test
    that reaches the GPU path without the ``gpu`` mark (or a GPU fixture) fails instead of
    passing for the wrong reason, and ``--device auto`` falls back to the NumPy path."""
    from wgsl_splat.gpu import runtime
    from wgsl_splat.gpu.shaders import start_recording

    config.addinivalue_line("markers", "last: runs after every other test of the session")
    config.wgsl_variants = start_recording()
    if numpy_side_only(config):
        # subprocesses (the CLI, mpirun) see no Vulkan driver either
        os.environ["VK_ICD_FILENAMES"] = os.environ["VK_DRIVER_FILES"] = os.devnull

        def no_adapter(*args, **kwargs):
            raise runtime.GpuError("pytest -m 'not gpu' runs the NumPy side alone: mark a test "
                                   "that needs an adapter with @pytest.mark.gpu")
        for name in ("select_device", "create_context", "open_devices"):
            setattr(runtime, name, no_adapter)


def pytest_collection_modifyitems(config, items):
    for item in items:   # a test that takes a GPU fixture needs the GPU
        if GPU_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.gpu)
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


SMALL_BINDING = 1 << 16   # bytes per storage binding of small_ctx


@pytest.fixture(scope="module")
def small_ctx(gpu_ctx):
    """A second device on the same adapter whose storage bindings hold 64 KiB: per-Gaussian data
    spans several pages (gpu/pages.py) at test sizes."""
    import os

    from wgsl_splat.gpu.runtime import BINDING_ENV, create_context

    old = os.environ.get(BINDING_ENV)
    os.environ[BINDING_ENV] = str(SMALL_BINDING)
    try:
        ctx = create_context(gpu_ctx.adapter)
    finally:
        if old is None:
            del os.environ[BINDING_ENV]
        else:
            os.environ[BINDING_ENV] = old
    assert ctx.max_binding_bytes == SMALL_BINDING
    yield ctx
    ctx.close()
