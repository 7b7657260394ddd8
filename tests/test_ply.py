"""PLY reader/writer: exact 3DGS layout, round trips, foreign files and atomic writes."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import wgsl_splat.atomic_io as atomic_io
from wgsl_splat.data.ply import (
    NonFinitePlyError,
    PlyError,
    load_ply,
    ply_property_names,
    save_ply,
)
from wgsl_splat.model import GaussianModel


@pytest.fixture
def rng(request):
    """A freshly seeded generator; the seed is printed (shown on failure) so failures reproduce."""
    seed = int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.name}: seed={seed}")
    return np.random.default_rng(seed)


def split_header(raw: bytes) -> tuple[list[str], bytes]:
    head, sep, body = raw.partition(b"end_header\n")
    assert sep, "no end_header"
    return head.decode("ascii").splitlines(), body


def write_ply(path, fmt: str, columns: dict[str, np.ndarray], types: dict[str, str] | None = None,
              before: str = "", after: str = "", before_data: bytes = b"",
              after_data: bytes = b"") -> None:
    """Hand-write a PLY with one vertex element whose properties are ``columns`` (in dict order).

    ``before``/``after`` are extra header element blocks and ``before_data``/``after_data`` their
    payloads; used to feed the reader files that other tools could have written.
    """
    types = types or {}
    names = list(columns)
    n = len(columns[names[0]]) if names else 0
    lines = ["ply", f"format {fmt} 1.0", "comment written by a test"]
    if before:
        lines.append(before)
    lines.append(f"element vertex {n}")
    lines += [f"property {types.get(k, 'float')} {k}" for k in names]
    if after:
        lines.append(after)
    lines.append("end_header")
    header = ("\n".join(lines) + "\n").encode("ascii")
    if fmt == "ascii":
        rows = [" ".join(repr(float(columns[k][i])) for k in names) for i in range(n)]
        body = ("\n".join(rows) + "\n").encode("ascii")
    else:
        order = "<" if fmt == "binary_little_endian" else ">"
        code = {"float": "f4", "float32": "f4", "double": "f8", "uchar": "u1", "int": "i4"}
        dtype = np.dtype([(k, order + code[types.get(k, "float")]) for k in names])
        rec = np.zeros(n, dtype)
        for k in names:
            rec[k] = columns[k]
        body = rec.tobytes()
    with open(path, "wb") as f:
        f.write(header + before_data + body + after_data)


def model_columns(m: GaussianModel) -> dict[str, np.ndarray]:
    """The model as named PLY columns (3DGS layout, channel-major f_rest)."""
    n, k = m.num, m.sh.shape[1]
    rest = m.sh[:, 1:, :].transpose(0, 2, 1).reshape(n, -1)
    cols = {"x": m.means[:, 0], "y": m.means[:, 1], "z": m.means[:, 2]}
    cols.update({f"f_dc_{c}": m.sh[:, 0, c] for c in range(3)})
    cols.update({f"f_rest_{i}": rest[:, i] for i in range(3 * (k - 1))})
    cols["opacity"] = m.opacity_logits
    cols.update({f"scale_{i}": m.log_scales[:, i] for i in range(3)})
    cols.update({f"rot_{i}": m.quats[:, i] for i in range(4)})
    return cols


def assert_models_equal(a: GaussianModel, b: GaussianModel, **tol) -> None:
    for name, arr in a.arrays().items():
        other = b.arrays()[name]
        assert arr.shape == other.shape, name
        if tol:
            np.testing.assert_allclose(other, arr, err_msg=name, **tol)
        else:
            np.testing.assert_array_equal(other, arr, err_msg=name)


# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_round_trip(tmp_path, rng, degree):
    n = int(rng.integers(1, 500))
    m = GaussianModel.random(n, rng, sh_degree=degree, extent=3.0, dtype=np.float32)
    path = tmp_path / "model.ply"
    save_ply(path, m)
    back = load_ply(path)
    assert back.dtype == np.float32 and back.sh_degree == degree and back.num == n
    assert_models_equal(m, back)  # float32 in, float32 out: bit exact


def test_round_trip_float64_and_empty(tmp_path, rng):
    m = GaussianModel.random(37, rng, sh_degree=2, dtype=np.float64)
    save_ply(tmp_path / "a.ply", m)
    assert_models_equal(m.astype(np.float32), load_ply(tmp_path / "a.ply"))
    save_ply(tmp_path / "e.ply", GaussianModel.empty(3))
    empty = load_ply(tmp_path / "e.ply")
    assert empty.num == 0 and empty.sh.shape == (0, 16, 3)


def test_header_layout_degree3(tmp_path, rng):
    n = 11
    save_ply(tmp_path / "m.ply", GaussianModel.random(n, rng, sh_degree=3, dtype=np.float32))
    raw = (tmp_path / "m.ply").read_bytes()
    lines, body = split_header(raw)
    assert lines[:4] == ["ply", "format binary_little_endian 1.0",
                         "comment wgsl_splat render_mode classic", f"element vertex {n}"]
    props = [ln.split() for ln in lines[4:]]
    assert all(p[:2] == ["property", "float"] and len(p) == 3 for p in props)
    names = [p[2] for p in props]
    expected = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
                + [f"f_rest_{i}" for i in range(45)]
                + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])
    assert names == expected == ply_property_names(3)
    assert len(names) == 62
    assert len(body) == n * 62 * 4  # nothing but the vertex records after the header
    normals = np.frombuffer(body, "<f4").reshape(n, 62)[:, 3:6]
    assert not normals.any()
    assert [len(ply_property_names(d)) for d in range(4)] == [17, 26, 41, 62]


def test_f_rest_is_channel_major(tmp_path):
    # sh[0, k, c] = 10k + c, so the file must hold R (c=0) for k=1..3, then G, then B.
    sh = (10.0 * np.arange(4)[:, None] + np.arange(3)[None, :])[None].astype(np.float32)
    f32 = np.float32
    m = GaussianModel(np.array([[1.0, 2.0, 3.0]], f32), np.array([[-1.0, -2.0, -3.0]], f32),
                      np.array([[0.5, 0.1, 0.2, 0.3]], f32), np.array([0.7], f32), sh)
    save_ply(tmp_path / "m.ply", m)
    _, body = split_header((tmp_path / "m.ply").read_bytes())
    row = np.frombuffer(body, "<f4")
    assert row.tolist() == pytest.approx(
        [1, 2, 3, 0, 0, 0,                 # x y z nx ny nz
         0, 1, 2,                          # f_dc_0..2 = sh[0, 0, :]
         10, 20, 30, 11, 21, 31, 12, 22, 32,  # f_rest: R1 R2 R3 G1 G2 G3 B1 B2 B3
         0.7, -1, -2, -3, 0.5, 0.1, 0.2, 0.3])  # opacity logit, log scales, w x y z


def test_missing_properties_error(tmp_path, rng):
    cols = model_columns(GaussianModel.random(4, rng, sh_degree=0))
    del cols["rot_2"], cols["opacity"]
    write_ply(tmp_path / "m.ply", "binary_little_endian", cols)
    with pytest.raises(PlyError, match="opacity rot_2"):
        load_ply(tmp_path / "m.ply")


def test_bad_f_rest_count(tmp_path, rng):
    cols = model_columns(GaussianModel.random(4, rng, sh_degree=1))
    del cols["f_rest_8"]
    write_ply(tmp_path / "m.ply", "binary_little_endian", cols)
    with pytest.raises(PlyError, match="8 f_rest"):
        load_ply(tmp_path / "m.ply")


def test_truncated_and_not_ply(tmp_path, rng):
    path = tmp_path / "m.ply"
    save_ply(path, GaussianModel.random(20, rng, sh_degree=1, dtype=np.float32))
    raw = path.read_bytes()
    path.write_bytes(raw[:-5])
    with pytest.raises(PlyError, match="truncated"):
        load_ply(path)
    path.write_bytes(raw[:raw.index(b"end_header")])
    with pytest.raises(PlyError, match="truncated PLY header"):
        load_ply(path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + raw)
    with pytest.raises(PlyError, match="not a PLY"):
        load_ply(path)
    path.write_bytes(b"")
    with pytest.raises(PlyError):
        load_ply(path)


def test_ascii_any_order_types_and_extras(tmp_path, rng):
    m = GaussianModel.random(9, rng, sh_degree=1, dtype=np.float32)
    cols = model_columns(m)
    names = list(cols)
    order = [names[i] for i in rng.permutation(len(names))]
    cols = {k: cols[k] for k in order}
    cols["red"] = np.arange(9)  # extra property a viewer might add
    types = {k: "double" for k in order[::2]} | {"red": "uchar"}
    # An element before the vertex (fixed size, so skippable: its record is the first ascii token)
    # and a list element after it (never read).
    write_ply(tmp_path / "a.ply", "ascii", cols, types, before="element camera 1\nproperty float f",
              after="element face 2\nproperty list uchar int vertex_indices",
              before_data=b"42.0\n", after_data=b"3 0 1 2\n3 2 3 4\n")
    assert_models_equal(m, load_ply(tmp_path / "a.ply"), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fmt", ["binary_big_endian", "binary_little_endian"])
def test_binary_foreign_layout(tmp_path, rng, fmt):
    m = GaussianModel.random(17, rng, sh_degree=2, dtype=np.float32)
    cols = model_columns(m)
    names = list(cols)
    cols = {k: cols[k] for k in (names[i] for i in rng.permutation(len(names)))}
    cols["extra"] = np.full(17, 7.0)
    types = {k: "double" for k in list(cols)[1::3]}
    order = ">" if fmt == "binary_big_endian" else "<"
    # A fixed-size element before the vertex (skipped) and a list element after it (never read).
    before = np.array([(1, 2.5), (3, 4.5)], dtype=[("a", order + "i4"), ("b", order + "f8")])
    face = bytes([3]) + np.arange(3, dtype=order + "i4").tobytes()
    write_ply(tmp_path / "b.ply", fmt, cols, types,
              before="element camera 2\nproperty int a\nproperty double b",
              after="element face 1\nproperty list uchar int vertex_indices",
              before_data=before.tobytes(), after_data=face)
    assert_models_equal(m, load_ply(tmp_path / "b.ply"))


def test_list_before_vertex_is_a_clear_error(tmp_path, rng):
    cols = model_columns(GaussianModel.random(2, rng, sh_degree=0))
    write_ply(tmp_path / "m.ply", "binary_little_endian", cols,
              before="element face 1\nproperty list uchar int vertex_indices",
              before_data=bytes([1]) + np.int32(0).tobytes())
    with pytest.raises(PlyError, match="list properties"):
        load_ply(tmp_path / "m.ply")


def test_atomic_write_leaves_no_temp_and_overwrites(tmp_path, rng):
    path = tmp_path / "m.ply"
    a = GaussianModel.random(5, rng, sh_degree=1, dtype=np.float32)
    b = GaussianModel.random(8, rng, sh_degree=3, dtype=np.float32)
    save_ply(path, a)
    save_ply(str(path), b)
    assert os.listdir(tmp_path) == ["m.ply"]
    assert_models_equal(b, load_ply(path))


def test_failed_write_keeps_existing_file(tmp_path, rng, monkeypatch):
    path = tmp_path / "m.ply"
    save_ply(path, GaussianModel.random(50, rng, sh_degree=3, dtype=np.float32))
    before = path.read_bytes()

    class DiskFull:
        """Wraps the temp file: accepts the header, then fails part-way through the payload."""

        def __init__(self, f):
            self.f = f

        def write(self, data):
            if len(memoryview(data)) > 100:
                self.f.write(bytes(memoryview(data).cast("B")[:100]))
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    real_open_temp = atomic_io._open_temp

    def failing_open_temp(tmp):
        return DiskFull(real_open_temp(tmp))

    monkeypatch.setattr(atomic_io, "_open_temp", failing_open_temp)
    with pytest.raises(OSError, match="No space"):
        save_ply(path, GaussianModel.random(60, rng, sh_degree=3, dtype=np.float32))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.ply"]

    # A failure at the rename itself must not leave the temp file either.
    monkeypatch.setattr(atomic_io, "_open_temp", real_open_temp)
    def failing_replace(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(atomic_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="rename failed"):
        save_ply(path, GaussianModel.random(3, rng, sh_degree=0, dtype=np.float32))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.ply"]



def test_nonfinite_values_are_refused_or_dropped(tmp_path, rng):
    m = GaussianModel.random(10, rng, sh_degree=1, dtype=np.float32)
    m.means[2, 1] = np.nan
    m.opacity_logits[5] = np.inf
    m.sh[5, 2, 0] = -np.inf                     # channel-major: R of coefficient 2 is f_rest_1
    path = tmp_path / "m.ply"
    save_ply(path, m)
    with pytest.raises(NonFinitePlyError, match=r"m.ply: 2 of 10 Gaussians have NaN or infinite "
                                                r"values \(in y opacity f_rest_1\)"):
        load_ply(path)
    notes = []
    kept = load_ply(path, drop_nonfinite=True, notes=notes)
    assert_models_equal(m.subset([0, 1, 3, 4, 6, 7, 8, 9]), kept)
    assert notes == [f"{path}: dropped 2 of 10 Gaussians with NaN or infinite values "
                     f"(in y opacity f_rest_1)"]
