"""Every shader variant the host creates through the platforms' compilers (Tint, naga -> MSL and
HLSL, DXC; wgsl_splat/tools/portability.py), and that the tour which enumerates the variants
covers every variant the test suite creates.

The compiler test needs Node with the npm packages, Wine and mingw-w64 (``.ci/run`` installs
them); it skips without them on a developer's machine and FAILS under ``CI=true``."""

from __future__ import annotations

import json
import os

import pytest

from wgsl_splat.tools import portability as port

CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def tour_variants(gpu_ctx):
    assert gpu_ctx.has_float_atomics and gpu_ctx.has_subgroups, \
        "the tour needs an adapter with float atomics and subgroups (lavapipe has both)"
    return port.tour(gpu_ctx, log=lambda *_: None)


@pytest.fixture(scope="module")
def tools():
    t = port.find_tools()
    if t.missing:
        msg = ("portability tools missing: " + "; ".join(t.missing)
               + " (.ci/run installs them)")
        if CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return t


def test_override_resolution_and_constants():
    code = ("override A: u32 = 16u;\noverride B: bool = true;\n@id(3) override C: f32 = 0.5;\n"
            "override D = 2i;\n")
    assert port.full_constants(code, (("A", 4),)) == (("A", 4), ("B", 1), ("C", 0.5), ("D", 2))
    out = port.resolve_overrides(code, (("A", 4), ("B", 0), ("C", 1.25)))
    assert "const A: u32 = 4u;" in out and "const B: bool = false;" in out
    assert "const C: f32 = 1.25f;" in out and "const D = 2i;" in out and "override" not in out
    with pytest.raises(KeyError, match="Z"):
        port.resolve_overrides(code, (("Z", 1),))
    hlsl = "[numthreads(64, 1, 1)]\nvoid copy_vec4_(uint3 g : SV_DispatchThreadID)\n"
    assert port.hlsl_entry(hlsl, "copy_vec4") == "copy_vec4_"
    assert port.needs("var<storage> a: array<atomic<f32>>;") == {"float-atomics"}
    assert port.needs("let s = subgroupShuffleXor(v, 1u);") == {"subgroups"}
    assert port.needs("let s = 1u;  // as subgroupAdd(1u) would say\n") == set()


def test_tour_reaches_every_kind_of_variant(tour_variants):
    """Both render modes, both atomics, every reduction (the emulated subgroups too), every raster
    layout, densification, the 3D filter, both losses, sorts, limits, Adam and the viewer's render
    shader."""
    by_module = {}
    for v in tour_variants:
        by_module.setdefault(v.module, set()).add(v)
    assert {"raster_backward", "raster", "project", "project_backward", "grow", "relocation",
            "loss_terms", "state_rows", "opacity_reset", "filter3d", "loss", "loss_lines", "radix",
            "prefix", "sort", "limits", "adam", "present", "emit", "scan"} <= set(by_module)
    rb = by_module["raster_backward"]
    assert {v.config.mode for v in rb} == {"classic", "antialiased"}
    combos = {(dict(v.defines)["ATOMICS"], dict(v.defines)["PARTIALS"],
               dict(v.defines).get("LANE_WIDTH"), dict(v.defines)["ROWS"], dict(v.defines)["COLS"])
              for v in rb}
    # atomics x reductions (subgroup, workgroup, emulated 32 and 64 lanes) x (rows, cols) layouts
    assert len(combos) == 2 * 4 * 4
    assert {w for _, p, w, _, _ in combos if p == "partials_emulated.wgsl"} == {"32", "64"}
    sh = {(dict(v.constants)["SH_COEFFS"], dict(v.constants)["SH_ACTIVE"])
          for v in by_module["project"]}
    assert sh == {((d + 1) ** 2, a) for d in range(4) for a in range(d + 1)}
    assert {v.stage for v in by_module["present"]} == {"vertex", "fragment"}


def test_every_variant_passes_tint_naga_and_dxc(tour_variants, tools, tmp_path):
    report = port.check(tour_variants, tmp_path / "dump", tools, jobs=2)
    print(report.summary())
    assert report.ok, report.summary()
    n = report.variants
    float_atomic = sum(1 for v in tour_variants if v.stage == "compute"
                       and "atomic_float" in dict(v.defines).get("ATOMICS", ""))
    # everything is translated to MSL; only the float-atomic variants are left out of WebGPU and
    # DX12, by design (their CAS twins are compiled)
    assert report.compiled["naga-msl"] == n
    assert report.compiled["tint"] == n - float_atomic
    assert report.compiled["dxc"] == sum(1 for v in tour_variants if v.stage == "compute") \
        - float_atomic
    assert {why for _, _, why in report.unavailable} <= {
        "float atomics: not on DX12 (wgpu)", "subgroups need shader model 6 (DXC)",
        "atomic<f32> is not in WebGPU (the CAS variant is the WebGPU path)"}


def test_failures_name_variant_backend_and_message(tools, tmp_path):
    """A broken WGSL and a broken HLSL come back as failures with the compilers' own words."""
    (tmp_path / "bad.wgsl").write_text(
        "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }\n")
    manifest = [{"id": "bad", "module_id": "bad", "describe": "bad.wgsl main()", "entry": "main",
                 "stage": "compute", "constants": {}, "needs": [], "wgsl": "bad.wgsl",
                 "resolved": "bad.wgsl"}]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    import subprocess

    subprocess.run([tools.node, str(port.NODE_SCRIPT), str(tools.root / "node_modules"),
                    str(tmp_path)], check=True, capture_output=True, timeout=300)
    res = json.loads((tmp_path / "results.json").read_text())["variants"][0]
    assert res["tint"]["status"] == "fail" and "bad.wgsl:1:" in res["tint"]["message"]
    assert res["naga-msl"]["status"] == "fail" and "1.5" in res["naga-msl"]["message"]
    hlsl = tmp_path / "bad.hlsl"
    hlsl.write_text("[numthreads(1, 1, 1)]\nvoid main() { undeclared_thing = 1; }\n")
    ok, msg, _ = port.run_hlslc(tools, [("dxc", hlsl, "main", "cs_6_0")], parallel=1)[0]
    assert not ok and "undeclared_thing" in msg


@pytest.mark.last
def test_tour_covers_every_variant_the_tests_create(request, tour_variants):
    """Runs last: every shader variant any test of this session created is one the tour (and so
    the compiler check) covers. A new define, override set or module the host starts using
    fails here until wgsl_splat/gpu/kernels.py declares it."""
    created = port.variants_of(request.config.wgsl_variants)
    missing = sorted(set(port.uncovered(created, tour_variants)), key=lambda v: v.describe())
    assert not missing, ("variants created by the tests but not declared for the portability "
                         "tour (declare them in wgsl_splat/gpu/kernels.py):\n"
                         + "\n".join(v.describe() for v in missing))
