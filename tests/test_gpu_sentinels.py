"""Writes past a buffer's data (issue 33 item 4): Metal clamps an out-of-bounds write onto the
binding's last element, Vulkan drops it, so a kernel whose padding invocations write without a
bound corrupts data on one backend only. grid_2d pads a dispatch of more than MAX_WORKGROUPS_X
workgroups to whole rows of them (> 8.4 M rows of a page at 256 rows a workgroup); here
MAX_WORKGROUPS_X is made small, so every grid_2d dispatch of a small step has padding workgroups.

- the per-workgroup partial sums of project_backward (the parameter terms', the pose gradient's)
  are written for workgroups with rows only: the poison past them survives a step;
- the sentinel mode (gpu/pool.py, WGSL_SPLAT_SENTINELS): every storage buffer gets a tail of
  sentinel words inside its read-write bindings; training steps with densification, padding
  workgroups everywhere, leave every tail as it was in both layouts, and a write into a tail (by
  the host, or by a kernel bounded by its binding instead of its data) is named.
"""

from __future__ import annotations

import numpy as np
import pytest

from wgsl_splat.contract.losses import LossConfig
from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.contract.step import StepSpec
from wgsl_splat.gpu import sort
from wgsl_splat.gpu.kernels import LIMITS
from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.pool import SENTINEL_BYTES, SENTINEL_WORD, BufferPool, SentinelError
from wgsl_splat.gpu.shaders import ShaderLibrary
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.strategy.adc import ADCRound, adc_round
from wgsl_splat.tools.random_scene import random_scene

POISON = 0x7FBADBAD          # a NaN no kernel computes
TERMS = LossConfig(opacity_reg=0.3, scale_reg=0.2, opacity_entropy=0.25)


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (1 << 32))


def problem(seed: int, n: int, width: int = 48, height: int = 40):
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, n=n, width=width, height=height, sh_degree=1,
                              edge_cases=False, dtype=np.float32)
    target = rng.uniform(0, 1, (height, width, 3)).astype(np.float32)
    return model, cam, target


def test_padding_workgroups_write_no_partial_sum_past_the_rows(gpu_ctx, monkeypatch):
    """700 rows are 3 workgroups of project_backward; with 2 workgroups a grid row they are a 2×2
    grid whose 4th workgroup has no rows. The parameter terms' partials (one float a workgroup)
    and the pose gradient's (12) past the 3rd keep the poison written there before the step
    (unguarded, the padding workgroup wrote its zero sum into the 4th slot)."""
    monkeypatch.setattr(sort, "MAX_WORKGROUPS_X", 2)
    assert sort.grid_2d(3) == (2, 2)
    seed = fresh_seed()
    model, cam, target = problem(seed, 700)
    step = GpuTrainStep(gpu_ctx, HostArrays.fresh(model, ()),
                        spec=StepSpec(OptimConfig(), loss=TERMS, pose_views=1))
    step.step(cam, target, view_id=0)       # sizes every buffer
    pool = step.pool
    partials = {"term_partials": 1, "pose_partials": 12}
    for name in partials:
        pool.write(name, np.full(pool.size(name) // 4, POISON, np.uint32))
    step.step(cam, target, view_id=0)
    for name, floats in partials.items():
        words = pool.read_array(name, np.uint32, pool.size(name) // 4)
        rows = 3 * floats
        assert words.size > rows, f"{name}: no room past the rows' partials to poison"
        assert not np.any(words[:rows] == POISON), f"seed {seed}: {name} of a workgroup unwritten"
        past = np.flatnonzero(words[rows:] != POISON)
        assert past.size == 0, (f"seed {seed}: {name} written past the rows' {rows} floats at "
                                f"{(rows + past).tolist()}")
    assert np.all(np.isfinite(step.take_losses()))


# Rows per layout: 16 300 are 64 workgroups of project_backward, so the parameter terms'
# partials fill their 256 bytes and the padding workgroup's slot is the tail's first word (without
# the kernel's bound the test fails there). The GPU layout's step at that size costs ~1.2 s on
# lavapipe, so it runs at 2 000 rows (its own dispatches pad all the same).
# both layouts whatever the adapter (Layout.of's kinds); the GPU layout's step at 16 K rows costs
# about 1.2 s on lavapipe, and its own dispatches pad at 2 000 too
ROWS = {"cpu": 16300, "gpu": 2000}


@pytest.mark.parametrize("layout", sorted(ROWS))
def test_training_steps_leave_every_sentinel_tail_in_both_layouts(gpu_ctx, monkeypatch, layout):
    """The sentinel mode on, the parameter terms active, 5 workgroups a grid row: steps, an ADC
    round (clones and prunes: buffers re-made at new sizes, each old one's tail checked as it
    goes), steps. Every step checks the tails (a SentinelError otherwise); then they are read
    back here and compared with the pattern."""
    monkeypatch.setenv("WGSL_SPLAT_SENTINELS", "on")
    monkeypatch.setattr(sort, "MAX_WORKGROUPS_X", 5)
    seed = fresh_seed()
    n = ROWS[layout]
    model, cam, target = problem(seed, n, 32, 24)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), loss=TERMS,
                        layout=Layout.of(gpu_ctx, layout))
    pool = step.pool
    assert pool.sentinel_bytes == SENTINEL_BYTES
    if n == 16300:
        assert pool.size("term_partials") == 4 * -(-n // 256) == 256
    for _ in range(2):
        step.step(cam, target, view_id=0)
    before = step.num_gaussians
    report = adc_round(step.state, ADCRound(1e-9, 1e9, 2, 1.6, 0.2, None, 0.0, 300, key=seed))
    assert report.cloned and report.pruned and step.num_gaussians != before, report
    for _ in range(2):
        step.step(cam, target, view_id=0)
    assert np.all(np.isfinite(step.take_losses()))
    checked = pool.check_sentinels()
    names = pool.sentinel_names()
    assert checked == len(names) > 10 and {"params", "grad2d", "term_partials"} <= set(names)
    for name in names:
        tail = pool.read_array(name, np.uint32, SENTINEL_BYTES // 4, offset=pool.size(name))
        assert np.all(tail == SENTINEL_WORD), f"seed {seed}: the tail of {name!r}"


def test_a_write_into_a_tail_is_named(gpu_ctx):
    """A host write past a buffer's size, and a kernel bounded by its binding (limits.wgsl
    copy_vec4 copies arrayLength(dst) vec4s: a read-write binding covers the tail) are caught,
    naming the buffer; with the mode off nothing has a tail."""
    assert BufferPool(gpu_ctx, sentinels=False).sentinel_bytes == 0
    pool = BufferPool(gpu_ctx, sentinels=True)
    pool.get("kept", 1000)
    pool.get("hit", 512)
    assert pool.check_sentinels() == 2 and pool.sentinel_names() == ["hit", "kept"]
    gpu_ctx.queue.write_buffer(pool["hit"], pool.size("hit") + 8, np.zeros(1, np.uint32))
    with pytest.raises(SentinelError, match=r"^written past the end of buffer 'hit' \(1 of 64 "
                                            r"words, the first at byte 520: 0x00000000\)"):
        pool.check_sentinels()

    pool = BufferPool(gpu_ctx, sentinels=True)
    module = LIMITS.variant().module(ShaderLibrary(gpu_ctx))
    pool.get("src", 512)       # as long as dst with its tail: every read is of data
    pool.get("dst", 256)
    pool.write("src", np.ones(128, np.float32))
    enc = gpu_ctx.device.create_command_encoder()
    cpass = enc.begin_compute_pass()
    cpass.set_pipeline(module.pipeline("copy_vec4"))
    cpass.set_bind_group(0, pool.bind_group(module, 0, {"src": "src", "dst": "dst"}))
    cpass.dispatch_workgroups(1)
    cpass.end()
    gpu_ctx.queue.submit([enc.finish()])
    np.testing.assert_array_equal(pool.read_array("dst", np.float32, 64), 1.0)
    with pytest.raises(SentinelError, match=r"buffer 'dst' \(64 of 64 words"):
        pool.check_sentinels()
    with pytest.raises(SentinelError, match="'dst'"):     # and when it is freed
        pool.free("dst")
    assert "dst" not in pool and pool.check_sentinels() == 1
