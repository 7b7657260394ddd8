"""The roofline's work counts (roofline.step_work) follow the step's state, and the limits are measured."""

from __future__ import annotations

import math

import numpy as np

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.tools.gradcheck import make_problem
from wgsl_splat.tools.roofline import (
    ADAM_FLOP,
    LOSS_BYTES,
    RASTER_PIXEL_FLOP,
    Limits,
    measure_limits,
    roofline,
    step_work,
)


def test_limits_are_measured(gpu_ctx):
    lim = measure_limits(gpu_ctx, repeats=1, copy_bytes=1 << 20)
    for value in (lim.flops, lim.bandwidth, lim.dispatch_s, lim.copy_buffer_bandwidth):
        assert math.isfinite(value) and value > 0


def test_step_work_counts_what_the_step_holds(gpu_ctx):
    model, cam, target = make_problem(7, 300, 70, 50)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig())
    step.enable_profiling(True)
    step.step(cam, target, view_id=0)
    stages = step.stage_times()
    work = step_work(step)
    assert set(work) == set(stages)
    r = step.renderer
    n, k = r.num, r.sh_coeffs
    pairs = r.intersection_count()
    assert pairs > 0
    assert work["rasterize"].flop == RASTER_PIXEL_FLOP * 256 * pairs
    # a one-view step applies Adam inside the projection backward pass (one stage)
    adam = work.get("adam") or work["project backward + adam"]
    assert adam.flop >= ADAM_FLOP * n * (11 + 3 * k)
    assert work["loss"].bytes == LOSS_BYTES[step.loss.variant] * 3 * 70 * 50
    last = step.pool.read_array("last_contrib", np.uint32, 70 * 50)
    assert work["raster backward"].flop > 62 * int(last.sum())
    lim = Limits(1e10, 1e9, 1e-5, 1e10)
    table = roofline(work, stages, lim)
    for name, row in table.items():
        wk = work[name]
        assert row["floor_ms"] == 1000 * (max(wk.flop / 1e10, wk.bytes / 1e9) + wk.dispatches * 1e-5)
