"""The subgroup reduction of the backward pass (partials_subgroup.wgsl) at 4, 8 and 16 lanes, and
its logic at 32 and 64 lanes through an emulated subgroup (partials_emulated.wgsl).

Lavapipe's subgroups are as wide as its SIMD vectors: LP_NATIVE_VECTOR_WIDTH=128 gives 4 lanes,
256 (the default on AVX2) 8 and 512 16 (1024 reports 32 but sums only 16 lanes: not usable). The
width is fixed when the driver loads, so each width runs the gradient checks in a subprocess,
which first measures the width it got. Both layouts: the CPU one (8 threads per tile: one
subgroup, or half of a 16-lane one) and the GPU one (64 threads: 16, 8 or 4 subgroups).

The widths of real GPUs (32: Apple, NVIDIA; 64: AMD) are emulated: W consecutive invocations
exchanging through workgroup memory, with the same slot, mask and butterfly
(partials_butterfly.wgsl). In the CPU layout the subgroup is wider than the workgroup (8 active
lanes of 32 or 64, as on hardware); in the GPU layout 64 threads are two 32-lane subgroups or
one 64-lane one."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from test_gpu_step import assert_all_ok, fresh_seed

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.gpu import kernels
from wgsl_splat.gpu.layout import EMULATED_SUBGROUPS, Layout
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.reference import render
from wgsl_splat.render_config import render_config
from wgsl_splat.tools.gradcheck import compare, make_problem
from wgsl_splat.tools.random_scene import filter_cameras

pytestmark = pytest.mark.gpu   # every test here needs an adapter

VECTOR_WIDTH = {4: "128", 8: "256", 16: "512"}
EXPECT = "WGSL_SPLAT_EXPECT_SUBGROUP_LANES"
# both layouts forced, whatever the adapter's default (Layout.of's kinds)
LAYOUTS = ("cpu", "gpu")


def measured_subgroup_size(ctx) -> int:
    """The subgroup size a compute shader sees (the adapter info of wgpu-py 0.32 does not say)."""
    device = ctx.device
    code = ("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
            "@compute @workgroup_size(64) fn main(@builtin(subgroup_size) n: u32,"
            " @builtin(local_invocation_index) i: u32) { if (i == 0u) { out[0] = n; } }\n")
    import wgpu

    buf = device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    pipe = device.create_compute_pipeline(layout="auto", compute={
        "module": device.create_shader_module(code=code), "entry_point": "main"})
    bg = device.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                  entries=[{"binding": 0, "resource": {"buffer": buf}}])
    enc = device.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(1)
    cp.end()
    device.queue.submit([enc.finish()])
    return int(np.frombuffer(device.queue.read_buffer(buf), np.uint32)[0])


def is_lavapipe(ctx) -> bool:
    return "lavapipe" in ctx.name.lower() or "llvmpipe" in ctx.name.lower()


@pytest.mark.parametrize("lanes", sorted(VECTOR_WIDTH))
def test_subgroup_gradients_at_width(gpu_ctx, lanes):
    if not is_lavapipe(gpu_ctx):
        pytest.skip(f"LP_NATIVE_VECTOR_WIDTH sets lavapipe's width; {gpu_ctx.name} runs "
                    f"test_subgroup_gradients_at_the_adapters_own_width instead")
    # the checkout's package, not whichever an editable install points at (cwd is tests/)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env = dict(os.environ, LP_NATIVE_VECTOR_WIDTH=VECTOR_WIDTH[lanes], PYTHONPATH=path,
               **{EXPECT: str(lanes)})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{__file__}::test_subgroup_reduction_here"], env=env,
                       capture_output=True, text=True, timeout=900, cwd=os.path.dirname(__file__))
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]


def test_subgroup_reduction_here(gpu_ctx):
    lanes = os.environ.get(EXPECT)
    if lanes is None:
        pytest.skip("runs in the subprocesses of test_subgroup_gradients_at_width")
    if not is_lavapipe(gpu_ctx):
        pytest.skip(f"LP_NATIVE_VECTOR_WIDTH sets lavapipe's width; this adapter is {gpu_ctx.name}")
    assert gpu_ctx.has_subgroups
    assert measured_subgroup_size(gpu_ctx) == int(lanes)
    check_subgroup_reduction(gpu_ctx, f"{lanes} lanes")


def test_subgroup_gradients_at_the_adapters_own_width(gpu_ctx):
    """A GPU's own width (32 on NVIDIA and Apple, 64 on AMD): the gradient checks with real
    subgroups there (lavapipe's widths run in test_subgroup_gradients_at_width)."""
    if is_lavapipe(gpu_ctx):
        pytest.skip("lavapipe's widths run in test_subgroup_gradients_at_width")
    if not gpu_ctx.has_subgroups:
        pytest.skip(f"{gpu_ctx.name} has no subgroups")
    check_subgroup_reduction(gpu_ctx, f"{measured_subgroup_size(gpu_ctx)} lanes ({gpu_ctx.name})")


def check_subgroup_reduction(gpu_ctx, lanes: str) -> None:
    """Fresh random problems through the subgroup reduction at the adapter's width: both layouts
    and atomics, a faint scene's many backward rounds, the antialiased mode."""
    for layout in LAYOUTS:
        for fa in (False, True)[:1 + gpu_ctx.has_float_atomics]:
            seed = fresh_seed()
            model, cam, target = make_problem(seed, 150, 70, 50, background=(0.1, 0.2, 0.3))
            step = GpuTrainStep(gpu_ctx, model, OptimConfig(), (0.1, 0.2, 0.3),
                                layout=Layout.of(gpu_ctx, layout, float_atomics=fa,
                                                 subgroups=True))
            assert_all_ok(compare(step, model, cam, target),
                          f"{lanes}, seed {seed}, {layout}, {step.backward.variant}")
    seed = fresh_seed()     # many backward rounds per tile, at this width's round size
    model, cam, target = make_faint(seed)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), FAINT_KW["background"],
                        layout=Layout.of(gpu_ctx, "gpu", subgroups=True))
    assert_all_ok(compare(step, model, cam, target), f"{lanes}, faint, seed {seed}")
    config = render_config("antialiased")
    seed = fresh_seed()
    model, cam, target = make_problem(seed, 150, 70, 50, config=config)
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), layout=Layout.of(gpu_ctx, subgroups=True),
                        render_config=config)
    step.set_filter_cameras(filter_cameras(cam))
    step.update_filter_3d()
    assert_all_ok(compare(step, model, cam, target), f"{lanes}, antialiased, seed {seed}")


@pytest.mark.parametrize("width", EMULATED_SUBGROUPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_emulated_subgroup_gradients(gpu_ctx, layout, width):
    """The gradient checks with the subgroup reduction's logic at `width` lanes, both atomics where
    the adapter has float atomics (fresh random problems, the reference's tolerances)."""
    for fa in (False, True)[:1 + gpu_ctx.has_float_atomics]:
        seed = fresh_seed()
        model, cam, target = make_problem(seed, 150, 70, 50, background=(0.1, 0.2, 0.3))
        step = GpuTrainStep(gpu_ctx, model, OptimConfig(), (0.1, 0.2, 0.3),
                            layout=Layout.of(gpu_ctx, layout, float_atomics=fa,
                                             emulated_subgroup=width))
        threads = (16 // step.layout.raster_cols) * (16 // step.layout.raster_rows)
        layout_used = step.backward.layout
        assert layout_used.emulated_subgroup == width and not layout_used.subgroups
        assert_all_ok(compare(step, model, cam, target),
                      f"{width} emulated lanes on {threads} threads per tile, seed {seed}, "
                      f"{step.backward.variant}")


# A faint scene: 600 splats of 0.7-5 % opacity over 40x24 pixels, whose tiles composite up to ~360
# (checked below): the backward pass walks them in several rounds (64, or 4 to 32 splats each,
# kernels.backward_round), so round boundaries, a first round shorter than the rest (not a multiple
# of the lanes) and the next round's prefetched records are all exercised.
FAINT = (600, 40, 24)
FAINT_KW = {"opacity_logits": (-5.0, -3.0), "background": (0.1, 0.2, 0.3)}


def make_faint(seed):
    return make_problem(seed, *FAINT, **FAINT_KW)


@pytest.mark.parametrize("reduction", ["workgroup", "subgroup", "emulated 32", "emulated 64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_rounds_in_every_reduction(gpu_ctx, layout, reduction):
    """Gradients against the reference where every tile takes several backward rounds."""
    if reduction == "subgroup" and not gpu_ctx.has_subgroups:
        pytest.skip(f"{gpu_ctx.name} has no subgroups")
    choice = ({"emulated_subgroup": int(reduction.split()[1])} if reduction.startswith("emulated")
              else {"subgroups": reduction == "subgroup"})
    seed = fresh_seed()
    model, cam, target = make_faint(seed)
    lc = render(model.astype(np.float64), cam, np.array(FAINT_KW["background"])).last_contrib
    step = GpuTrainStep(gpu_ctx, model, OptimConfig(), FAINT_KW["background"],
                        layout=Layout.of(gpu_ctx, layout, **choice))
    most = max(kernels.backward_round(step.layout, lanes) for lanes in (1, 4, 8, 16, 32, 64))
    assert lc.max() > 3 * most, f"seed {seed}: the tiles' walks ({lc.max()}) fit in 3 rounds"
    assert_all_ok(compare(step, model, cam, target),
                  f"faint, seed {seed}, {layout} layout, {step.backward.variant}")


def test_an_emulated_subgroup_is_one_of_the_declared_widths_and_replaces_subgroups(gpu_ctx):
    with pytest.raises(ValueError, match="emulated_subgroup must be"):
        Layout.of(gpu_ctx, emulated_subgroup=16)
    if gpu_ctx.has_subgroups:
        with pytest.raises(ValueError, match="subgroups=False"):
            Layout.of(gpu_ctx, subgroups=True, emulated_subgroup=32)
    assert not Layout.of(gpu_ctx, emulated_subgroup=64).subgroups
    assert Layout.of(gpu_ctx).emulated_subgroup == 0
