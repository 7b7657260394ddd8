"""Exports (spz, splat, compressed-ply, sog): every format read back by a reader nobody here wrote
(PlayCanvas's splat-transform, converting it to a PLY) and compared Gaussian by Gaussian with the
model, each field within the format's own quantisation step; the render mode where the format
records it; bad input refused in one line with nothing written."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from external_tools import run_splat_transform

from wgsl_splat.app.cli import main
from wgsl_splat.data.exports import FORMAT_NAMES, FORMATS, export_model, get_format
from wgsl_splat.data.exports import sog as sog_module
from wgsl_splat.data.exports import spz as spz_module
from wgsl_splat.data.exports._common import morton_order
from wgsl_splat.data.ply import save_ply
from wgsl_splat.model import SH_C0, GaussianModel


@pytest.fixture
def rng(request):
    seed = int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed={seed}")
    return np.random.default_rng(seed)


def make_model(rng, n: int = 1500, degree: int = 3) -> GaussianModel:
    """Trained-model-like values plus the awkward ones: far-out means, huge and tiny scales,
    opacities near 0 and 1, negative w, SH beyond the formats' ranges."""
    means = rng.uniform(-3, 3, (n, 3))
    means[:20] *= 15.0
    log_scales = rng.uniform(-7.0, 0.5, (n, 3))
    log_scales[:5] = rng.uniform(-12.0, 7.0, (5, 3))
    opacity = rng.normal(0.0, 3.0, n)
    opacity[:5] = [-15.0, 15.0, 0.0, -8.0, 9.0]
    k = (degree + 1) ** 2
    sh = rng.normal(0.0, 0.15, (n, k, 3))
    sh[:, 0] = rng.normal(0.0, 0.9, (n, 3))
    sh[:8] *= 12.0                                   # beyond SPZ's ±1 and compressed PLY's ±4
    return GaussianModel(means=means.astype(np.float32), log_scales=log_scales.astype(np.float32),
                         quats=rng.normal(size=(n, 4)).astype(np.float32),
                         opacity_logits=opacity.astype(np.float32), sh=sh.astype(np.float32))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def unit(q):
    q = np.asarray(q, np.float64)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def quat_error(read, model_q):
    """Largest component difference of two unit quaternions, up to their common sign."""
    a, b = unit(read), unit(model_q)
    b = b * np.sign((a * b).sum(axis=1, keepdims=True))
    return np.abs(a - b).max(axis=1)


def read_back(tmp_path, path) -> GaussianModel:
    """The export as splat-transform decodes it (written out as a float PLY, parsed here: it may
    hold -inf opacity logits, which our own PLY reader refuses)."""
    out = tmp_path / "read_back.ply"
    run_splat_transform("-w", path, out)
    raw = out.read_bytes()
    head, _, body = raw.partition(b"end_header\n")
    lines = head.decode("ascii").splitlines()
    assert "format binary_little_endian 1.0" in lines
    n = int(next(l for l in lines if l.startswith("element vertex")).split()[2])
    names = [l.split()[2] for l in lines if l.startswith("property float")]
    assert len(names) == sum(l.startswith("property") for l in lines), "only float properties"
    table = np.frombuffer(body, np.dtype([(name, "<f4") for name in names]), count=n)
    col = lambda *keys: np.stack([table[k] for k in keys], axis=1)
    n_rest = sum(name.startswith("f_rest_") for name in names)
    rest = col(*[f"f_rest_{i}" for i in range(n_rest)]) if n_rest else np.zeros((n, 0), np.float32)
    sh = np.concatenate([col("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :],
                         rest.reshape(n, 3, n_rest // 3).transpose(0, 2, 1)], axis=1)
    return GaussianModel(means=col("x", "y", "z"), log_scales=col("scale_0", "scale_1", "scale_2"),
                         quats=col("rot_0", "rot_1", "rot_2", "rot_3"),
                         opacity_logits=np.array(table["opacity"]), sh=sh)


def assert_within(name, got, want, tol):
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    tol = np.broadcast_to(tol, err.shape)
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    assert (err <= tol).all(), (f"{name}: error {err[worst]:.3g} > {tol[worst]:.3g} at {worst} "
                                f"(read {np.asarray(got)[worst]}, model {np.asarray(want)[worst]})")


# -- per format: what the reader must give back, from the format's published quantisation ------

def check_spz(model, back, path, tmp_path):
    flip = spz_module.RDF_TO_RUB                          # SPZ stores right-up-back axes
    assert_within("position", back.means, model.means * flip, 0.5 / 4096 + 1e-6)
    assert_within("log scale", back.log_scales, np.clip(model.log_scales, -10, 255 / 16 - 10),
                  0.5 / 16 + 1e-6)
    assert_within("opacity", sigmoid(back.opacity_logits), sigmoid(model.opacity_logits),
                  0.5 / 255 + 1e-5)
    q = unit(model.quats) * np.array([1, 1, -1, -1])     # (w, x, -y, -z)
    # 9 bits of |q| / sqrt(1/2) per small component; the largest rebuilt from them
    assert quat_error(back.quats, q).max() <= 0.003
    scale = 0.15 * 255
    assert_within("DC", back.sh[:, 0], np.clip(model.sh[:, 0], -127.5 / scale, 127.5 / scale),
                  0.5 / scale + 1e-5)
    signs = spz_module.sh_axis_signs(flip)[None, :, None]
    want = np.clip(model.sh[:, 1:] * signs, -1.0, 127 / 128)
    bucket = np.where(np.arange(want.shape[1]) < 3, 8, 16)[None, :, None]  # 5 bits, then 4
    assert_within("SH", back.sh[:, 1:], want, (bucket / 2 + 0.5) / 128 + 1e-6)


def check_splat(model, back, path, tmp_path):
    assert back.sh_degree == 0
    np.testing.assert_array_equal(back.means, model.means)
    assert_within("log scale", back.log_scales, model.log_scales, 1e-5 * (1 + np.abs(model.log_scales)))
    assert_within("opacity", sigmoid(back.opacity_logits), sigmoid(model.opacity_logits),
                  0.5 / 255 + 1e-5)
    colour = np.clip(0.5 + SH_C0 * model.sh[:, 0], 0.0, 1.0)
    assert_within("DC", back.sh[:, 0], (colour - 0.5) / SH_C0, 0.5 / 255 / SH_C0 + 1e-5)
    # bytes round(128 q + 128); splat-transform decodes b / 255 * 2 - 1 (antimatter15: (b-128)/128)
    assert quat_error(back.quats, model.quats).max() <= 1.5 / 128


def check_compressed_ply(model, back, path, tmp_path):
    def step(values, bits):   # a chunk's range is at most the whole model's
        return 0.5 * (values.max(axis=0) - values.min(axis=0)) / ((1 << np.asarray(bits)) - 1)

    assert_within("position", back.means, model.means, step(model.means, [11, 10, 11]) + 1e-5)
    scales = np.clip(model.log_scales, -20, 20)
    assert_within("log scale", back.log_scales, scales, step(scales, [11, 10, 11]) + 1e-5)
    assert quat_error(back.quats, model.quats).max() <= 0.003        # 10 bits per component
    colour = SH_C0 * model.sh[:, 0] + 0.5
    assert_within("DC", back.sh[:, 0], model.sh[:, 0], step(colour, 8) / SH_C0 + 1e-5)
    assert_within("opacity", sigmoid(back.opacity_logits), sigmoid(model.opacity_logits),
                  0.5 / 255 + 1e-5)
    want = np.clip(model.sh[:, 1:], -4.0, 4.0)
    # byte centres (b + 0.5) / 256 of the range [-4, 4]; the reader maps bytes 0 and 255 to the ends
    at_end = (want < -4 + 8 / 256) | (want >= 4 - 8 / 256)
    assert_within("SH", back.sh[:, 1:], want, np.where(at_end, 8 / 256, 4 / 256) + 1e-5)


def nearest_in(book, values):
    book = np.asarray(book, np.float64)
    return np.abs(np.asarray(values, np.float64)[..., None] - book).min(axis=-1)


def check_sog(model, back, path, tmp_path):
    meta = json.loads(zipfile.ZipFile(path).read("meta.json"))
    assert meta["version"] == 2 and meta["count"] == model.num

    def log_map(v):
        return np.sign(v) * np.log(np.abs(v) + 1.0)

    span = np.subtract(meta["means"]["maxs"], meta["means"]["mins"])
    assert_within("position (log-mapped)", log_map(back.means.astype(np.float64)),
                  log_map(model.means.astype(np.float64)), 0.5 * span / 65535 + 1e-5)
    # 256-entry codebooks: each value reads back as the codebook entry nearest to it
    assert_within("log scale", back.log_scales, model.log_scales,
                  nearest_in(meta["scales"]["codebook"], model.log_scales) + 1e-6)
    assert_within("DC", back.sh[:, 0], model.sh[:, 0],
                  nearest_in(meta["sh0"]["codebook"], model.sh[:, 0]) + 1e-6)
    assert_within("opacity", sigmoid(back.opacity_logits), sigmoid(model.opacity_logits),
                  0.5 / 255 + 1e-5)
    assert quat_error(back.quats, model.quats).max() <= 0.012     # 8 bits of q * sqrt(2)
    # SH: a palette of meta.shN.count vectors; every splat reads back as the palette entry
    # nearest to its own SH, up to the codebook rounding of the palette itself
    rest = lambda m: m.sh[:, 1:, :].transpose(0, 2, 1).reshape(m.num, -1).astype(np.float64)
    got, want = rest(back), rest(model)
    palette = np.unique(got, axis=0)
    assert len(palette) <= meta["shN"]["count"] and meta["shN"]["bands"] == model.sh_degree
    book = np.sort(np.asarray(meta["shN"]["codebook"], np.float64))
    rounding = np.sqrt(got.shape[1]) * np.diff(book).max()      # 2 * sqrt(D) * half the widest gap
    d_read = np.linalg.norm(got - want, axis=1)
    d_best = np.sqrt(((want[:, None, :] - palette[None]) ** 2).sum(-1)).min(axis=1)
    assert (d_read <= d_best + rounding + 1e-6).all()
    assert np.isin(got, book.astype(np.float32)).all(), "SH values outside the codebook"


CHECKS = {"spz": check_spz, "splat": check_splat, "compressed-ply": check_compressed_ply,
          "sog": check_sog}


def test_every_registered_format_has_a_check():
    assert set(CHECKS) == set(FORMAT_NAMES)


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_export_read_back_by_splat_transform(tmp_path, rng, name):
    model = make_model(rng)
    fmt = get_format(name)
    result = export_model(model, "classic", fmt, tmp_path / f"model{fmt.suffix}")
    order = result.encoded.order
    assert sorted(order) == list(range(model.num))      # every Gaussian exactly once
    back = read_back(tmp_path, result.path)
    assert back.num == model.num
    with np.errstate(over="ignore", divide="ignore"):
        CHECKS[name](model.subset(order), back, result.path, tmp_path)


def test_render_mode_travels_where_the_format_records_it(tmp_path, rng):
    """splat-transform's --info reports the model tag: antialiased for spz (flag), sog
    (meta.json) and compressed-ply (Brush's comment); .splat cannot say, and the CLI notes it."""
    model = make_model(rng, n=300, degree=1)
    ply = tmp_path / "aa.ply"
    save_ply(ply, model, "antialiased")
    for fmt in FORMATS:
        for mode in ("antialiased", "classic"):
            out = tmp_path / f"{mode}{fmt.suffix}"
            export_model(model, mode, fmt, out)
            info = json.loads(run_splat_transform("-q", out, "--info", "json", "null"))
            expect = mode if (mode == "antialiased" and fmt.name != "splat") else "default"
            assert info["model"] == expect, (fmt.name, mode, info)
    res = CliRunner().invoke(main, ["export", str(ply), "--format", "splat"])
    assert res.exit_code == 0, res.output
    assert "note: .splat has no place for the render mode" in res.output


def test_sog_folder_and_bundle_hold_the_same_files(tmp_path, rng):
    model = make_model(rng, n=700, degree=2)
    bundle = export_model(model, "classic", "sog", tmp_path / "m.sog")
    folder = export_model(model, "classic", "sog", tmp_path / "unbundled" / "meta.json")
    names = sorted(os.listdir(tmp_path / "unbundled"))
    assert names == sorted(zipfile.ZipFile(bundle.path).namelist())
    for name in names:
        assert (tmp_path / "unbundled" / name).read_bytes() == zipfile.ZipFile(bundle.path).read(name)
    a = read_back(tmp_path, folder.path)
    np.testing.assert_array_equal(a.means, read_back(tmp_path, bundle.path).means)


# -- the command line and bad input (no external reader needed) -----------------------------------

def test_export_command_writes_next_to_the_model(tmp_path, rng):
    model = make_model(rng, n=200, degree=0)
    ply = tmp_path / "point_cloud.ply"
    save_ply(ply, model)
    for fmt in FORMATS:
        res = CliRunner().invoke(main, ["export", str(ply), "--format", fmt.name])
        assert res.exit_code == 0, res.output
        target = tmp_path / f"point_cloud{fmt.suffix}"
        assert target.is_file() and target.stat().st_size > 0
        assert f"Exported 200 Gaussians (classic) as {fmt.name} to {target}" in res.output


def only_files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_nonfinite_rows_refused_or_dropped(tmp_path, rng):
    model = make_model(rng, n=100, degree=1)
    model.means[3, 1] = np.nan
    model.sh[7, 2, 0] = np.inf
    ply = tmp_path / "bad.ply"
    save_ply(ply, model)
    out = tmp_path / "bad.spz"
    res = CliRunner().invoke(main, ["export", str(ply), "--format", "spz", "--out", str(out)])
    assert res.exit_code == 1
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(lines) == 1 and "2 of 100 Gaussians have NaN or infinite values" in lines[0] \
        and "--drop-nonfinite" in lines[0], res.output
    assert only_files(tmp_path) == ["bad.ply"]          # nothing written, no temp file left
    res = CliRunner().invoke(main, ["export", str(ply), "--format", "spz", "--out", str(out),
                                    "--drop-nonfinite"])
    assert res.exit_code == 0, res.output
    assert "dropped 2 of 100 Gaussians" in res.output and out.is_file()
    # the library refuses them too (a model built in memory)
    with pytest.raises(ValueError, match="2 of 100 Gaussians hold NaN or infinity"):
        export_model(model, "classic", "splat", tmp_path / "x.splat")


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_a_model_with_no_gaussians_is_one_line_and_writes_nothing(tmp_path, rng, name):
    """A PLY of no vertices, or one whose every row --drop-nonfinite leaves out, is one line
    (not a reshape's traceback) and writes nothing: no file, no folder of --out."""
    empty = tmp_path / "empty.ply"
    save_ply(empty, GaussianModel.empty(3))
    model = make_model(rng, n=10, degree=1)
    model.means[:, 0] = np.nan
    nans = tmp_path / "nans.ply"
    save_ply(nans, model)
    for ply, extra in ((empty, []), (empty, ["--drop-nonfinite"]), (nans, ["--drop-nonfinite"])):
        out = tmp_path / "new" / f"m{get_format(name).suffix}"
        res = CliRunner().invoke(main, ["export", str(ply), "--format", name, "--out", str(out)]
                                 + extra)
        assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.exception
        lines = [l for l in res.output.splitlines()
                 if l.strip() and not l.startswith("note: ")]
        assert lines == [f"Error: cannot export as {name}: the model has no Gaussians: "
                         f"nothing to export"], res.output
        assert only_files(tmp_path) == ["empty.ply", "nans.ply"]
    with pytest.raises(ValueError, match="the model has no Gaussians"):
        export_model(GaussianModel.empty(0), "classic", name, tmp_path / "x")
    assert only_files(tmp_path) == ["empty.ply", "nans.ply"]


def test_unknown_format_is_one_line(tmp_path, rng):
    ply = tmp_path / "m.ply"
    save_ply(ply, make_model(rng, n=10, degree=0))
    res = CliRunner().invoke(main, ["export", str(ply), "--format", "ksplat"])
    assert res.exit_code == 2
    assert "'ksplat' is not one of 'spz', 'splat', 'compressed-ply', 'sog'" in res.output
    with pytest.raises(ValueError, match="unknown export format 'ksplat'"):
        get_format("ksplat")


def test_too_large_for_the_format_is_one_line_and_writes_nothing(tmp_path, rng, monkeypatch):
    model = make_model(rng, n=50, degree=0)
    model.means[0] = (9.0e6, 0.0, 0.0)          # beyond SPZ's 24-bit positions at any precision
    ply = tmp_path / "far.ply"
    save_ply(ply, model)
    target = tmp_path / "far.spz"
    target.write_bytes(b"an older export")
    res = CliRunner().invoke(main, ["export", str(ply), "--format", "spz", "--out", str(target)])
    assert res.exit_code == 1
    assert res.output.strip().count("\n") == 0 and "24-bit fixed-point" in res.output, res.output
    assert target.read_bytes() == b"an older export"    # the old file intact
    assert only_files(tmp_path) == ["far.ply", "far.spz"]
    # a scene a little beyond ±2048 units still fits, with fewer fractional bits (noted)
    model.means[0] = (5000.0, 0.0, 0.0)
    enc = spz_module.encode(model)
    assert enc.data and any("fractional bits" in note for note in enc.notes)
    # counts: the reference SPZ loader reads at most 10 M points; SOG's images 16383 a side
    monkeypatch.setattr(spz_module, "MAX_POINTS", 49)
    with pytest.raises(ValueError, match="exceed the 49 that the reference SPZ loader reads"):
        export_model(model, "classic", "spz", tmp_path / "x.spz")
    monkeypatch.setattr(sog_module, "MAX_SIDE", 4)
    with pytest.raises(ValueError, match="beyond WebP's 4 per side"):
        export_model(model, "classic", "sog", tmp_path / "x.sog")
    assert only_files(tmp_path) == ["far.ply", "far.spz"]


def test_morton_order_is_a_locality_preserving_permutation(rng):
    pts = rng.uniform(-5, 5, (4000, 3))
    order = morton_order(pts)
    assert sorted(order) == list(range(len(pts)))
    # consecutive points along the curve are far closer than random pairs
    step = np.linalg.norm(np.diff(pts[order], axis=0), axis=1).mean()
    assert step < 0.2 * np.linalg.norm(pts[1:] - pts[:-1], axis=1).mean()


def test_quantize_1d_assigns_each_value_its_nearest_entry(rng):
    values = np.concatenate([rng.normal(0, 1, 5000), rng.uniform(-30, 30, 50)])
    book, labels = sog_module.quantize_1d(values)
    assert len(book) == 256 and (np.diff(book) >= 0).all()
    err = np.abs(values - book[labels])
    np.testing.assert_allclose(err, nearest_in(book, values), atol=1e-6)


def test_spz_sh_signs_of_the_axis_change():
    # RDF -> RUB negates y and z: degree 1 (y, z, x) -> (-, -, +), degree 2 (xy, yz, zz, xz,
    # xx-yy) -> (-, +, +, -, +), degree 3 odd in y+z -> signs of (y, xyz, y, z, x, z, x) terms
    signs = spz_module.sh_axis_signs(spz_module.RDF_TO_RUB)
    np.testing.assert_array_equal(signs, [-1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, 1, -1, 1])


def test_train_export_writes_each_format_next_to_the_final_ply(tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "20", "-r", "4",
                                    "--device", "cpu", "--out", str(out), "--export", "splat",
                                    "--export", "compressed-ply", "--export", "splat"])
    assert res.exit_code == 0, res.output
    folder = out / "point_cloud" / "iteration_20"
    assert only_files(folder) == ["point_cloud.compressed.ply", "point_cloud.ply",
                                  "point_cloud.splat"]
    assert res.output.count("as splat to") == 1          # a repeated format is written once
    n = int(next(l for l in (folder / "point_cloud.compressed.ply").read_bytes()
                 .split(b"end_header")[0].decode().splitlines() if l.startswith("element vertex"))
            .split()[2])
    assert (folder / "point_cloud.splat").stat().st_size == 32 * n


def test_docs_hold_the_registry_table():
    from wgsl_splat.data.exports import format_table

    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                        "exports.md")
    with open(docs) as f:
        assert format_table() in f.read(), ("docs/exports.md is out of date: paste the output of "
                                            "python -m wgsl_splat.data.exports")
