"""Writes past a buffer's data (issue 33 item 4): Metal clamps an out-of-bounds write onto the
binding's last element, Vulkan drops it, so a kernel whose padding invocations write without a
bound corrupts data on one backend only. grid_2d pads a dispatch of more than MAX_WORKGROUPS_X
workgroups to whole rows of them (> 8.4 M rows of a page at 256 rows a workgroup); here
MAX_WORKGROUPS_X is made small, so every grid_2d dispatch of a small step has padding workgroups:
the per-workgroup partial sums of project_backward (the parameter terms', the pose gradient's)
are written for workgroups with rows only, and the poison past them survives a step.
"""

from __future__ import annotations

import numpy as np

from wgsl_splat.contract.losses import LossConfig
from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.contract.state import HostArrays
from wgsl_splat.contract.step import StepSpec
from wgsl_splat.gpu import sort
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.tools.random_scene import random_scene

POISON = 0x7FBADBAD          # a NaN no kernel computes
TERMS = LossConfig(opacity_reg=0.3, scale_reg=0.2)


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

