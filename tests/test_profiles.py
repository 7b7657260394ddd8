"""Device profiles (WGSL_SPLAT_DEVICE_PROFILE): each platform's features and limits on this adapter,
the fall-backs they force giving the reference's gradients and training result, bench without
timestamps, one-line errors for bad names and missing features, and the DX12 compiler choice."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_gpu_step import (
    assert_all_ok,
    assert_same_means,
    fit_on_both_paths,
    fresh_seed,
)

from wgsl_splat.contract.optim import OptimConfig
from wgsl_splat.gpu import runtime
from wgsl_splat.gpu.profiles import PROFILES
from wgsl_splat.gpu.runtime import ProfileError, create_context, select_device
from wgsl_splat.gpu.step import GpuTrainStep
from wgsl_splat.tools.gradcheck import compare, make_problem

pytestmark = pytest.mark.gpu   # every test here needs an adapter

NAMES = ("webgpu", "metal-apple7", "dx12")


@pytest.fixture(scope="module", params=NAMES)
def profiled(request, gpu_ctx):
    ctx = create_context(gpu_ctx.adapter, profile=request.param)
    yield ctx
    ctx.close()


def test_profile_exposes_only_the_platforms_features_and_limits(profiled):
    p = profiled.profile
    assert profiled.profile_name == p.name and p.name in profiled.describe()
    optional = set(runtime.OPTIONAL_FEATURES)
    assert set(profiled.features) & optional == set(p.features)
    for limit, value in p.limits.items():
        got = profiled.limits[limit]
        assert (got >= value) if limit.startswith("min-") else (got <= value), limit
    if p.name == "webgpu":
        assert profiled.limits["max-storage-buffers-per-shader-stage"] == 8
        assert profiled.limits["max-compute-workgroup-storage-size"] == 16384
        assert profiled.limits["max-compute-invocations-per-workgroup"] == 256
        assert profiled.limits["min-uniform-buffer-offset-alignment"] == 256
        assert not (profiled.has_float_atomics or profiled.has_subgroups or profiled.has_timestamps)
    if p.name == "dx12":
        assert not profiled.has_float_atomics and not profiled.has_subgroups
        assert profiled.has_timestamps
    if p.name == "metal-apple7":
        assert profiled.has_float_atomics and profiled.has_subgroups and profiled.has_timestamps


def test_webgpu_limits_are_enforced(gpu_ctx):
    """The device really has WebGPU's limits: a 9th storage buffer in a stage is refused."""
    ctx = create_context(gpu_ctx.adapter, profile="webgpu")
    code = "".join(f"@group(0) @binding({i}) var<storage, read_write> b{i}: array<u32>;\n"
                   for i in range(9))
    code += "@compute @workgroup_size(1) fn main() {" + "".join(
        f"b{i}[0] = 1u;" for i in range(9)) + "}\n"
    mod = ctx.device.create_shader_module(code=code)
    with pytest.raises(Exception, match="(?i)storage"):
        ctx.device.create_compute_pipeline(layout="auto", compute={"module": mod,
                                                                   "entry_point": "main"})
    ctx.close()


def test_gradients_match_reference_under_profile(profiled):
    """gradcheck under the profile: the variant it forces (CAS + workgroup reduction on webgpu
    and dx12) against the float64 reference, at the existing tolerance."""
    seed = fresh_seed()
    model, cam, target = make_problem(seed, 150, 70, 50, background=(0.1, 0.2, 0.3))
    step = GpuTrainStep(profiled, model, OptimConfig(), (0.1, 0.2, 0.3))
    assert step.layout.float_atomics == profiled.has_float_atomics
    assert step.layout.subgroups == profiled.has_subgroups
    assert_all_ok(compare(step, model, cam, target), f"seed {seed} {profiled.profile_name} "
                                                     f"{step.backward.variant}")


def test_short_fit_matches_the_reference_under_profile(profiled):
    """A 200-step fit under the profile ends where the NumPy path does, with the bounds of
    tests/test_gpu_step.py::test_200_step_fit_reaches_the_same_loss_on_both_paths."""
    seed = fresh_seed()
    cpu, gpu = fit_on_both_paths(profiled, seed)
    lc, lg = cpu.take_losses(), gpu.take_losses()
    assert abs(lg[0] - lc[0]) <= 1e-5 * lc[0], f"seed {seed}: first losses {lg[0]} vs {lc[0]}"
    gap = abs(lg[-1] - lc[-1])
    assert gap <= 0.01 * lc[0] and gap <= 0.1 * lc[-1], f"seed {seed}: {lg[-1]} vs {lc[-1]}"
    assert_same_means(gpu, cpu, seed)


def test_bench_reports_what_it_cannot_time(gpu_ctx):
    from wgsl_splat.tools.bench import Config, format_report, run_bench

    ctx = create_context(gpu_ctx.adapter, profile="webgpu")
    report = run_bench([Config("tiny", 300, 48, 32)], ("gpu",), steps=2, warmup=1, ctx=ctx,
                       echo=lambda *_: None)
    g = report["results"][0]["gpu"]
    assert "stages_unavailable" in g and not g["stages"]
    assert g["step"]["median_ms"] > 0
    assert "stages: not timed (no timestamp-query on this device, device profile webgpu)" \
        in format_report(report)
    assert report["machine"]["device_profile"] == "webgpu"
    ctx.close()


def test_unknown_profile_is_one_line(monkeypatch):
    monkeypatch.setenv(runtime.PROFILE_ENV, "metal-m9")
    for kind in ("auto", "gpu"):   # never a silent fall-back to the NumPy path
        with pytest.raises(ProfileError) as exc:
            select_device(kind)
        msg = str(exc.value)
        assert "\n" not in msg and "metal-m9" in msg and "webgpu" in msg
    from wgsl_splat.app.cli import main

    res = CliRunner().invoke(main, ["gradcheck", "-n", "5"])
    assert res.exit_code == 1 and "metal-m9" in res.output and "Traceback" not in res.output


def test_profile_needing_a_missing_feature_is_one_line():
    prof = PROFILES["metal-apple7"]
    with pytest.raises(ProfileError) as exc:
        runtime.profile_request(prof, {"subgroup", "timestamp-query"}, {}, runtime.OPTIONAL_FEATURES,
                                "SomeGPU (DiscreteGPU, Vulkan)")
    msg = str(exc.value)
    assert "\n" not in msg and "shader-float32-atomic" in msg and "SomeGPU" in msg


def test_full_and_unset_are_the_adapter(monkeypatch):
    monkeypatch.delenv(runtime.PROFILE_ENV, raising=False)
    assert runtime.device_profile() is None
    monkeypatch.setenv(runtime.PROFILE_ENV, "FULL")
    assert runtime.device_profile() is None
    feats, limits = runtime.profile_request(None, {"subgroup", "x"}, {"max-buffer-size": 7},
                                            ("subgroup", "shader-f16"))
    assert feats == ["subgroup"] and limits == {"max-buffer-size": 7}


def test_dx12_uses_dxc_when_a_dll_is_there(monkeypatch, tmp_path):
    """On Windows the instance is told to use DXC (through wgpu-py's set_instance_extras) when
    WGSL_SPLAT_DXC names a dxcompiler.dll; elsewhere, or with no DLL, nothing changes."""
    import sys
    import types

    calls = []
    extras = types.ModuleType("wgpu.backends.wgpu_native.extras")
    extras.set_instance_extras = lambda **kw: calls.append(kw)
    monkeypatch.setitem(sys.modules, "wgpu.backends.wgpu_native.extras", extras)
    dll = tmp_path / "dxcompiler.dll"
    dll.write_bytes(b"MZ")
    fake_wgpu = types.SimpleNamespace(__file__=str(tmp_path / "wgpu" / "__init__.py"))

    monkeypatch.setattr(runtime, "_dx12_configured", False)
    monkeypatch.setenv("WGSL_SPLAT_DXC", str(dll))
    assert runtime._configure_dx12_compiler(fake_wgpu, platform="linux") is None
    assert runtime._configure_dx12_compiler(fake_wgpu, platform="win32") == str(dll)
    assert calls == [{"dx12_compiler": "dxc", "dxc_path": str(dll)}]
    assert runtime._configure_dx12_compiler(fake_wgpu, platform="win32") is None   # once

    monkeypatch.setattr(runtime, "_dx12_configured", False)
    monkeypatch.delenv("WGSL_SPLAT_DXC")
    assert runtime._configure_dx12_compiler(fake_wgpu, platform="win32") is None  # FXC
    monkeypatch.setattr(runtime, "_dx12_configured", False)
    (tmp_path / "wgpu" / "resources").mkdir(parents=True)
    (tmp_path / "wgpu" / "resources" / "dxcompiler.dll").write_bytes(b"MZ")
    assert runtime._configure_dx12_compiler(fake_wgpu, platform="win32").endswith("dxcompiler.dll")

    monkeypatch.setattr(runtime, "_dx12_configured", False)
    monkeypatch.setenv("WGSL_SPLAT_DXC", str(tmp_path / "nope.dll"))
    with pytest.raises(runtime.GpuError, match="nope.dll"):
        runtime._configure_dx12_compiler(fake_wgpu, platform="win32")
