"""Buffer pool: capacity growth, bind-group caching, and no allocation or read-back in steady state."""

from __future__ import annotations

import numpy as np
import pytest

from wgsl_splat.camera import Camera
from wgsl_splat.gpu.pool import BufferPool
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.gpu.shaders import ShaderLibrary
from wgsl_splat.reference import render
from wgsl_splat.tools.random_scene import random_scene


def test_get_reuses_and_grows_geometrically(gpu_ctx):
    pool = BufferPool(gpu_ctx, growth=1.5)
    a = pool.get("x", 1000)
    assert pool.buffers_created == 1 and pool.size("x") >= 1000
    assert pool.get("x", 1000) is a and pool.get("x", 10) is a       # never shrinks
    assert pool.buffers_created == 1
    size0 = pool.size("x")
    b = pool.get("x", size0 + 4)
    assert b is not a and pool.size("x") >= 1.5 * size0 and pool.generation("x") == 1
    assert pool.buffers_created == 2
    assert pool.current_bytes == pool.size("x") and pool.peak_bytes >= pool.current_bytes
    assert pool.bytes_allocated == size0 + pool.size("x")


def test_grow_keeps_contents_when_asked(gpu_ctx):
    pool = BufferPool(gpu_ctx)
    pool.get("v", 16)
    pool.write("v", np.arange(4, dtype=np.uint32))
    pool.get("v", 4096, keep_contents=True)
    assert pool.read_array("v", np.uint32, 4).tolist() == [0, 1, 2, 3]
    assert pool.readbacks == 1


def test_bind_groups_cached_and_invalidated_on_growth(gpu_ctx):
    pool = BufferPool(gpu_ctx)
    mod = ShaderLibrary(gpu_ctx).module("scan")
    for name, size in (("p", 176), ("t", 64), ("r", 64), ("c", 32), ("s", 16)):
        usage = None
        if name == "p":
            import wgpu

            usage = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        pool.get(name, size, usage)
    entries = {"rp": "p", "table": "t", "ranges": "r", "counters": "c", "scan_sums": "s"}
    bg = pool.bind_group(mod, 0, entries)
    assert pool.bind_group(mod, 0, entries) is bg and pool.bind_groups_created == 1
    pool.get("t", 1 << 16)  # regrow a referenced buffer
    bg2 = pool.bind_group(mod, 0, entries)
    assert bg2 is not bg and pool.bind_groups_created == 2


def test_no_new_buffers_across_100_renders(gpu_ctx):
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % (1 << 32)))
    model, cam = random_scene(rng, 300, 64, 48, dtype=np.float32)
    r = GpuRenderer(gpu_ctx)
    r.upload_model(model)
    first = r.render(cam, (0.1, 0.1, 0.1))            # warm-up: sizes everything, checks capacity
    # a second camera of the same size, as a training loop over views would use
    other = Camera.look_at(cam.center * 1.1, (0, 0, 0), width=64, height=48, fov_x_deg=55)
    r.render(other, readback=False)
    pool, lib = r.pool, r.lib
    before = pool.counters()
    pipelines = lib.pipelines_created
    renders = r.renders
    for i in range(100):
        r.render(cam if i % 2 else other, (0.1, 0.1, 0.1), readback=False)
    after = pool.counters()
    assert after == before, f"steady-state renders allocated or read back: {before} -> {after}"
    assert lib.pipelines_created == pipelines
    assert r.renders == renders + 100                  # one submit each, no redo
    # reading the image back costs exactly one (blocking) read-back per render, nothing else
    img = r.render(cam, (0.1, 0.1, 0.1))
    assert pool.readbacks == before["readbacks"] + 1
    assert pool.buffers_created == before["buffers_created"]
    assert np.array_equal(img, first)


def test_new_image_size_and_model_grow_once(gpu_ctx):
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % (1 << 32)))
    model, cam = random_scene(rng, 200, 40, 30, dtype=np.float32)
    r = GpuRenderer(gpu_ctx)
    r.upload_model(model)
    r.render(cam)
    big, cam2 = random_scene(rng, 900, 90, 70, dtype=np.float32)
    r.upload_model(big)
    img = r.render(cam2)
    created = r.pool.buffers_created
    for _ in range(5):
        r.render(cam2, readback=False)
    assert r.pool.buffers_created == created
    ref = render(big.astype(np.float64), cam2)
    assert np.abs(img - ref.image).max() < 1e-4


@pytest.mark.parametrize("growth", [0.5, 1.0, 5.0])
def test_bad_growth_rejected(gpu_ctx, growth):
    with pytest.raises(ValueError):
        BufferPool(gpu_ctx, growth=growth)


def test_growth_stops_at_the_binding_limit(gpu_ctx, monkeypatch):
    """Buffers are bound whole: growing 1.5x past the adapter's binding limit would fail at the
    next bind (lavapipe's training died near 0.45M Gaussians of its 0.57M limit that way)."""
    from wgsl_splat.gpu.runtime import GpuContext, GpuOutOfMemoryError

    monkeypatch.setattr(GpuContext, "max_binding_bytes", property(lambda self: 1 << 20))
    pool = BufferPool(gpu_ctx)
    pool.get("b", 800_000)
    pool.get("b", 900_000)                     # 1.5x growth would ask for 1.2 MB
    assert pool.size("b") == 1 << 20
    with pytest.raises(GpuOutOfMemoryError, match="needs 2 MiB; this adapter binds at most 1 MiB"):
        pool.get("b", 2 << 20)


def test_a_binding_limit_set_by_the_environment_is_named_with_it(gpu_ctx, small_ctx):
    """small_ctx's 64 KiB bindings come from WGSL_SPLAT_MAX_BINDING (conftest): the refusal says
    so, in units that show it (it read "needs 0 MiB; binds at most 0 MiB")."""
    from wgsl_splat.gpu.runtime import GpuOutOfMemoryError

    with pytest.raises(GpuOutOfMemoryError) as exc:
        BufferPool(small_ctx).get("b", 100_000)
    assert str(exc.value) == ("buffer 'b' needs 97.7 KiB; this adapter binds at most 64 KiB "
                              "(max-storage-buffer-binding-size, set by "
                              "WGSL_SPLAT_MAX_BINDING=65536)")
    with pytest.raises(GpuOutOfMemoryError) as exc:      # the adapter's own limit: no variable
        BufferPool(gpu_ctx).get("b", gpu_ctx.max_binding_bytes + 1)
    assert "WGSL_SPLAT_MAX_BINDING" not in str(exc.value)
