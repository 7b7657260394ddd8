"""Device selection, shader loading (includes, defines, error locations) and error conversion."""

from __future__ import annotations

import logging

import pytest

from wgsl_splat.gpu import kernels, runtime
from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.runtime import (
    OPTIONAL_FEATURES,
    GpuValidationError,
    NoAdapterError,
    ShaderCompileError,
    select_device,
)
from wgsl_splat.gpu.shaders import SHADER_DIR, ShaderLibrary, load_source

pytestmark = pytest.mark.gpu   # every test here needs an adapter


def test_context_reports_adapter_and_features(gpu_ctx):
    assert gpu_ctx.name and gpu_ctx.backend
    assert gpu_ctx.describe().startswith("Using GPU adapter: ")
    assert set(gpu_ctx.features) >= {f for f in OPTIONAL_FEATURES if f in gpu_ctx.adapter.features}
    assert gpu_ctx.has_float_atomics == ("shader-float32-atomic" in gpu_ctx.features)
    assert gpu_ctx.has_timestamps == ("timestamp-query" in gpu_ctx.features)
    assert gpu_ctx.limits["max-compute-workgroup-storage-size"] >= 16384


def test_cpu_kind_returns_none():
    assert select_device("cpu") is None


def test_select_device_logs_and_echoes_the_adapter(caplog):
    lines = []
    with caplog.at_level(logging.INFO, logger="wgsl_splat.gpu"):
        ctx = select_device("auto", echo=lines.append)
    assert ctx is not None
    assert lines == [ctx.describe()]
    assert any("Using GPU adapter:" in r.getMessage() for r in caplog.records)
    ctx.close()


def test_no_matching_adapter_fails_for_gpu_and_falls_back_for_auto(caplog):
    with pytest.raises(NoAdapterError, match="--device gpu"):
        select_device("gpu", adapter_filter="no-such-adapter-xyz")
    lines = []
    with caplog.at_level(logging.WARNING, logger="wgsl_splat.gpu"):
        assert select_device("auto", adapter_filter="no-such-adapter-xyz", echo=lines.append) is None
    assert lines and "falling back" in lines[0] and "NumPy" in lines[0]


@pytest.mark.parametrize("name, text", [("WGSL_SPLAT_MAX_BINDING", "nan"),
                                        ("WGSL_SPLAT_MAX_BINDING", "garbage"),
                                        ("WGSL_SPLAT_DEVICE_MEMORY", "inf"),
                                        ("WGSL_SPLAT_DEVICE_MEMORY", "-1"),
                                        ("WGSL_SPLAT_DEVICE_MEMORY", "1K")])
def test_a_bad_setting_is_an_error_on_every_path_not_a_fall_back(monkeypatch, name, text):
    """Read before an adapter is looked for: the same one line with or without an adapter; auto
    does not fall back to the NumPy path over it (nan and inf were a traceback)."""
    monkeypatch.setenv(name, text)
    for kind in ("auto", "gpu"):
        with pytest.raises(runtime.EnvSettingError) as exc:
            select_device(kind)
        assert str(exc.value).startswith(f"{name}={text!r} ") and "\n" not in str(exc.value)
    assert select_device("cpu") is None       # the NumPy path reads neither


def test_a_binding_limit_set_by_the_environment_is_recorded(gpu_ctx, small_ctx):
    from wgsl_splat.app.common import image_limit

    assert small_ctx.binding_setting == "WGSL_SPLAT_MAX_BINDING=65536"
    assert gpu_ctx.binding_setting is None
    assert image_limit(small_ctx)[2] == ("this adapter binds at most 64 KiB per buffer "
                                         "(WGSL_SPLAT_MAX_BINDING=65536), 12 bytes a pixel")


def test_a_memory_budget_set_by_the_environment_is_named(gpu_ctx, monkeypatch):
    monkeypatch.setenv("WGSL_SPLAT_DEVICE_MEMORY", "512K")
    assert gpu_ctx.memory_bytes == 512 << 10
    assert gpu_ctx.memory_setting == "WGSL_SPLAT_DEVICE_MEMORY=512K"
    monkeypatch.delenv("WGSL_SPLAT_DEVICE_MEMORY")
    assert gpu_ctx.memory_setting is None


def test_adapter_filter_matches(gpu_ctx):
    ctx = select_device("gpu", adapter_filter=gpu_ctx.name.split()[0].upper())
    assert ctx.name == gpu_ctx.name
    ctx.close()


def test_features_can_be_restricted():
    ctx = select_device("gpu", features=())
    assert not ctx.has_float_atomics and not ctx.has_timestamps
    ctx.close()


def test_bad_kind():
    with pytest.raises(ValueError):
        select_device("tpu")


def test_include_once_and_defines(tmp_path):
    (tmp_path / "a.wgsl").write_text('#include "c.wgsl"\nconst A: u32 = {{N}}u;\n')
    (tmp_path / "b.wgsl").write_text('#include "c.wgsl"\nconst B: u32 = 2u;\n')
    (tmp_path / "c.wgsl").write_text("const C: u32 = 3u;\n")
    (tmp_path / "main.wgsl").write_text('#include "a.wgsl"\n#include "b"\nconst M: u32 = 1u;\n')
    src = load_source("main", {"N": 7}, shader_dir=tmp_path)
    assert src.code.count("const C") == 1 and "const A: u32 = 7u;" in src.code
    assert src.line_map[-1] == ("main.wgsl", 3)
    with pytest.raises(KeyError, match="a.wgsl:2"):
        load_source("main", {}, shader_dir=tmp_path)


def test_define_chooses_the_included_file(tmp_path):
    (tmp_path / "x.wgsl").write_text("const X: u32 = 1u;\n")
    (tmp_path / "y.wgsl").write_text("const Y: u32 = 2u;\n")
    (tmp_path / "main.wgsl").write_text('#include "{{PICK}}"\n')
    assert "const Y" in load_source("main", {"PICK": "y.wgsl"}, shader_dir=tmp_path).code
    assert "const X" in load_source("main", {"PICK": "x"}, shader_dir=tmp_path).code


def test_compile_error_names_file_and_line(gpu_ctx, tmp_path):
    (tmp_path / "inc.wgsl").write_text("const X: f32 = 1.0;\n\n")
    (tmp_path / "broken.wgsl").write_text(
        '#include "inc.wgsl"\n'
        "@group(0) @binding(0) var<storage, read_write> b: array<f32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
        "    b[g.x] = X + undefined_name;\n"
        "}\n")
    lib = ShaderLibrary(gpu_ctx, shader_dir=tmp_path)
    with pytest.raises(ShaderCompileError, match=r"shaders/broken\.wgsl:5"):
        lib.module("broken")


def test_validation_error_is_a_gpu_error(gpu_ctx):
    import wgpu

    with pytest.raises(GpuValidationError, match="while binding"):
        with gpu_ctx.guard("binding"):
            mod = ShaderLibrary(gpu_ctx).module("scan")
            small = gpu_ctx.device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE)
            gpu_ctx.device.create_bind_group(layout=mod.layouts[0], entries=[
                {"binding": 0, "resource": {"buffer": small}}])   # storage buffer as uniform


def test_uncaptured_errors_are_raised_by_check(gpu_ctx):
    gpu_ctx._pending_errors.append("something failed")
    with pytest.raises(GpuValidationError, match="something failed"):
        gpu_ctx.check()
    gpu_ctx._lost_message = None


def test_all_pipelines_compile(gpu_ctx):
    lib = ShaderLibrary(gpu_ctx)
    for name, entries in {"project": ["project"], "emit": ["emit_count", "emit_keys"],
                          "scan": ["scan_counts"], "sort": ["sort_local", "sort_merge"]}.items():
        for e in entries:
            lib.pipeline(name, e)
    layouts = [(4, 1), (8, 1), (16, 1), (16, 2)]   # (rows, columns) per raster thread
    for rows, cols in layouts:   # every raster variant compiles
        for skip in ("true", "false"):
            lib.pipeline("raster", "rasterize", defines={
                "ROWS": rows, "COLS": cols, "THREADS_X": 16 // cols, "THREADS_Y": 16 // rows,
                "BATCH": 256, "SKIP": skip})
    # every backward variant the adapter can run compiles (float atomics, subgroups: features)
    atomics_variants = ("atomic_float.wgsl",) * gpu_ctx.has_float_atomics + ("atomic_cas.wgsl",)
    partials_variants = ("partials_subgroup.wgsl",) * gpu_ctx.has_subgroups + ("partials_workgroup.wgsl",)
    for atomics in atomics_variants:
        for partials in partials_variants:
            for rows, cols in layouts:
                lib.pipeline("raster_backward", "rasterize_backward", defines={
                    "ROWS": rows, "COLS": cols, "THREADS_X": 16 // cols, "THREADS_Y": 16 // rows,
                    "BATCH": kernels.BACKWARD_BATCH, "ATOMICS": atomics, "PARTIALS": partials,
                    "PART_CELLS": kernels.backward_cells(
                        Layout.of(gpu_ctx, raster_rows=rows, raster_cols=cols))})
    from wgsl_splat.gpu.backward import project_includes
    for sink in ("grads_sink.wgsl", "adam_sink.wgsl"):   # gradients out, or Adam fused in
        lib.pipeline("project_backward", "project_backward", defines={"SINK": sink},
                     generated=project_includes())
    lib.pipeline("adam", "adam_step")
    from wgsl_splat.gpu.kernels import window_defines
    lib.pipeline("loss", "ssim_forward", defines=window_defines())
    lib.pipeline("loss_lines", "lines_h_ssim", defines=window_defines())
    assert lib.pipelines_created == 6 + 8 + 4 * len(atomics_variants) * len(partials_variants) + 5
    assert {p.name for p in SHADER_DIR.iterdir()} >= {"common.wgsl", "raster.wgsl"}
    assert runtime.convert_wgpu_error(ValueError("x"), "y") is None
