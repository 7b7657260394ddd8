"""Read and write a :class:`GaussianModel` as a PLY in the standard 3DGS layout (docs/design.md §2).

The file has one ``vertex`` element of float32 properties, in this order::

    x y z nx ny nz f_dc_0 f_dc_1 f_dc_2 f_rest_0 .. f_rest_{3(K-1)-1}
    opacity scale_0 scale_1 scale_2 rot_0 rot_1 rot_2 rot_3

``f_rest`` is channel-major (all R coefficients 1..K-1, then all G, then all B), opacity is the
logit, scale the log-scale and rot the quaternion w,x,y,z exactly as stored. This is what the
original 3DGS code and the common splat viewers read and write, so models interoperate.

The reader parses the header itself (no ``plyfile`` dependency), looks properties up by name, and
accepts ascii, binary little- and big-endian files with any numeric property types.

Render mode (docs/antialiasing.md): the header carries ``comment wgsl_splat render_mode MODE``
(``classic`` or ``antialiased``; a file without it is classic, one naming another mode is refused).
An antialiased model is written with its 3D filter fused into the standard fields (scales
``sqrt(s² + f²)``, opacity ``σ·c3``, as Mip-Splatting's fused export) so that other viewers show
the filtered model, and the header says so with ``comment wgsl_splat filter_3d fused``: our loader
then renders it with the 2D Mip filter and no further 3D filter, which is the trained model's image.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..atomic_io import atomic_open
from ..model import GaussianModel, num_sh_coeffs
from ..render_config import RENDER_MODES

__all__ = ["PlyError", "NonFinitePlyError", "save_ply", "load_ply", "load_ply_with_mode",
           "ply_property_names"]


class PlyError(ValueError):
    """The file is not a readable 3DGS PLY (bad header, truncated data, missing properties)."""


# PLY scalar type names (both the classic and the sized spellings) -> NumPy type codes.
_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}
_FORMATS = {"ascii": None, "binary_little_endian": "<", "binary_big_endian": ">"}
# A 3DGS header is ~1.5 KB; the cap only guards against scanning a huge non-PLY file for a header.
_MAX_HEADER_BYTES = 1 << 20
_F_REST = re.compile(r"f_rest_(\d+)$")
_REQUIRED = ("x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
             "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3")


def ply_property_names(sh_degree: int) -> list[str]:
    """The vertex property names, in file order, for a model of SH degree ``sh_degree``."""
    n_rest = 3 * (num_sh_coeffs(sh_degree) - 1)
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(n_rest)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])


# ------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------

_MODE_COMMENT = "wgsl_splat render_mode"
_FUSED_COMMENT = "wgsl_splat filter_3d fused"


def _encode(model: GaussianModel, comments=()) -> tuple[bytes, np.ndarray]:
    """Header bytes and the (N, P) little-endian float32 payload for ``model``."""
    n, k = model.num, model.sh.shape[1]
    sh = np.asarray(model.sh, dtype=np.float32)
    # Channel-major f_rest: (N, K-1, 3) -> (N, 3, K-1) -> (N, 3(K-1)).
    f_rest = sh[:, 1:, :].transpose(0, 2, 1).reshape(n, 3 * (k - 1))
    columns = [
        np.asarray(model.means, dtype=np.float32),
        np.zeros((n, 3), dtype=np.float32),  # normals: unused by 3DGS but part of the layout
        sh[:, 0, :],
        f_rest,
        np.asarray(model.opacity_logits, dtype=np.float32).reshape(n, 1),
        np.asarray(model.log_scales, dtype=np.float32),
        np.asarray(model.quats, dtype=np.float32),
    ]
    data = np.ascontiguousarray(np.concatenate(columns, axis=1), dtype="<f4")
    names = ply_property_names(model.sh_degree)
    assert data.shape[1] == len(names)
    header = "\n".join(["ply", "format binary_little_endian 1.0"]
                       + [f"comment {c}" for c in comments] + [f"element vertex {n}"]
                       + [f"property float {name}" for name in names] + ["end_header", ""])
    return header.encode("ascii"), data


def save_ply(path, model: GaussianModel, render_mode: str = "classic",
             filter_3d: np.ndarray | None = None) -> None:
    """Write ``model`` to ``path`` in the 3DGS PLY layout, atomically, marked with its render mode;
    an antialiased model's ``filter_3d`` is fused into the written scales and opacities.

    The data goes to a temp file in the same directory which then replaces ``path``, so readers
    (and a crash mid-write) never see a half-written file and an existing file stays intact when
    writing fails.
    """
    if render_mode not in RENDER_MODES:
        raise ValueError(f"unknown render mode {render_mode!r}")
    comments = [f"{_MODE_COMMENT} {render_mode}"]
    if render_mode == "antialiased" and filter_3d is not None:
        from ..contract.filter3d import fuse_filter_3d

        model = fuse_filter_3d(model, filter_3d)
        comments.append(_FUSED_COMMENT)
    header, data = _encode(model, comments)
    with atomic_open(path) as f:
        f.write(header)
        f.write(data.reshape(-1).view(np.uint8))  # the array's own buffer, no bytes copy


# ------------------------------------------------------------------------------------------------
# reading
# ------------------------------------------------------------------------------------------------

@dataclass
class _Property:
    name: str
    dtype: str | None          # NumPy code for a scalar property, None for a list
    list_types: tuple[str, str] | None = None  # (count type, item type) of a list property


@dataclass
class _Element:
    name: str
    count: int
    properties: list[_Property]

    @property
    def has_lists(self) -> bool:
        return any(p.dtype is None for p in self.properties)


def _parse_type(name: str, line: str) -> str:
    try:
        return _PLY_TYPES[name]
    except KeyError:
        raise PlyError(f"unknown PLY property type {name!r} in header line {line!r}") from None


def _read_header(f, comments: list | None = None) -> tuple[str, list[_Element]]:
    """Parse the header from ``f`` (left positioned at the first data byte); the text of its
    ``comment`` lines goes to ``comments``."""
    magic = f.readline(16)
    if magic.rstrip(b"\r\n") != b"ply":
        raise PlyError("not a PLY file (missing 'ply' magic line)")
    fmt = None
    elements: list[_Element] = []
    consumed = len(magic)
    while True:
        raw = f.readline(_MAX_HEADER_BYTES)
        consumed += len(raw)
        if not raw:
            raise PlyError("truncated PLY header (no 'end_header')")
        if consumed > _MAX_HEADER_BYTES:
            raise PlyError(f"PLY header longer than {_MAX_HEADER_BYTES} bytes")
        try:
            line = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise PlyError("PLY header contains non-ASCII bytes") from None
        words = line.split()
        if words and words[0] == "comment" and comments is not None:
            comments.append(" ".join(words[1:]))
        if not words or words[0] in ("comment", "obj_info"):
            continue
        key = words[0]
        if key == "end_header":
            break
        if key == "format":
            if len(words) != 3 or words[1] not in _FORMATS:
                raise PlyError(f"unsupported PLY format line {line!r}")
            fmt = words[1]
        elif key == "element":
            if len(words) != 3 or not words[2].isdigit():
                raise PlyError(f"bad element line {line!r}")
            elements.append(_Element(words[1], int(words[2]), []))
        elif key == "property":
            if not elements:
                raise PlyError(f"property before any element: {line!r}")
            if len(words) == 5 and words[1] == "list":
                prop = _Property(words[4], None, (_parse_type(words[2], line),
                                                  _parse_type(words[3], line)))
            elif len(words) == 3:
                prop = _Property(words[2], _parse_type(words[1], line))
            else:
                raise PlyError(f"bad property line {line!r}")
            elements[-1].properties.append(prop)
        else:
            raise PlyError(f"unexpected PLY header line {line!r}")
    if fmt is None:
        raise PlyError("PLY header has no 'format' line")
    return fmt, elements


def _read_vertices(f, fmt: str, elements: list[_Element]) -> dict[str, np.ndarray]:
    """Read the ``vertex`` element's properties as float32 columns keyed by name."""
    names = [e.name for e in elements]
    if "vertex" not in names:
        raise PlyError(f"PLY has no 'vertex' element (elements: {names})")
    index = names.index("vertex")
    vertex = elements[index]
    # Elements after the vertex are never read, so they can be anything. Elements before it must be
    # skipped, which only a fixed record size allows without parsing them item by item.
    for e in elements[:index + 1]:
        if e.has_lists:
            raise PlyError(f"cannot read PLY: element {e.name!r} (at or before 'vertex') has "
                           "list properties")
    n, props = vertex.count, vertex.properties
    dupes = sorted(name for name, c in Counter(p.name for p in props).items() if c > 1)
    if dupes:
        raise PlyError(f"duplicate vertex properties: {' '.join(dupes)}")
    if fmt == "ascii":
        # Whitespace-separated tokens; elements before the vertex are fixed-width records.
        skip = sum(e.count * len(e.properties) for e in elements[:index])
        need = n * len(props)
        tokens = f.read().split()
        if len(tokens) < skip + need:
            raise PlyError(f"truncated PLY: expected at least {skip + need} ascii values, "
                           f"found {len(tokens)}")
        try:
            table = np.array(tokens[skip:skip + need], dtype=np.float64).reshape(n, len(props))
        except ValueError as exc:
            raise PlyError(f"bad ascii value in PLY vertex data: {exc}") from None
        return {p.name: table[:, j].astype(np.float32) for j, p in enumerate(props)}
    order = _FORMATS[fmt]

    dtype = np.dtype([(p.name, order + p.dtype) for p in props])
    # Records are packed, so an element's size is the sum of its property sizes.
    skip = sum(e.count * sum(np.dtype(p.dtype).itemsize for p in e.properties)
               for e in elements[:index])
    start = f.tell() + skip
    available = os.fstat(f.fileno()).st_size - start
    if available < n * dtype.itemsize:
        raise PlyError(f"truncated PLY: vertex data needs {n * dtype.itemsize} bytes, "
                       f"file has {max(available, 0)}")
    f.seek(start)
    table = np.fromfile(f, dtype=dtype, count=n)
    if len(table) != n:
        raise PlyError(f"truncated PLY: read {len(table)} of {n} vertices")
    return {p.name: table[p.name].astype(np.float32) for p in props}


class NonFinitePlyError(PlyError):
    """Some Gaussians of the file hold NaN or infinity (``load_ply(drop_nonfinite=True)`` drops them)."""


def _render_mode(comments: list[str]) -> str:
    modes = [c[len(_MODE_COMMENT):].strip() for c in comments if c.startswith(_MODE_COMMENT + " ")]
    mode = modes[-1] if modes else "classic"
    if mode not in RENDER_MODES:
        raise PlyError(f"the header declares render mode {mode!r}, which this version does not "
                       f"know (it renders {', '.join(RENDER_MODES)})")
    if mode == "classic" and _FUSED_COMMENT in comments:
        raise PlyError("the header marks a fused 3D filter on a classic model")
    return mode


def load_ply(path, *, drop_nonfinite: bool = False, notes: list | None = None) -> GaussianModel:
    """Read a 3DGS PLY written by :func:`save_ply` or by other 3DGS tools (float32 model).

    The SH degree is inferred from the number of ``f_rest_*`` properties (0, 9, 24 or 45).
    Extra vertex properties (normals, anything else) are ignored. Gaussians with a NaN or infinite
    parameter raise :class:`NonFinitePlyError` (how many, in which properties) or, with
    ``drop_nonfinite``, are dropped with a line appended to ``notes``.
    """
    return load_ply_with_mode(path, drop_nonfinite=drop_nonfinite, notes=notes)[0]


def load_ply_with_mode(path, *, drop_nonfinite: bool = False,
                       notes: list | None = None) -> tuple[GaussianModel, str]:
    """:func:`load_ply` and the render mode the header declares (``classic`` without one; an
    antialiased model comes with its 3D filter fused in, see the module docstring)."""
    path = os.fspath(path)
    comments: list[str] = []
    with open(path, "rb") as f:
        try:
            fmt, elements = _read_header(f, comments)
            mode = _render_mode(comments)
        except PlyError as exc:
            raise PlyError(f"{path}: {exc}") from None
        try:
            cols = _read_vertices(f, fmt, elements)
        except PlyError as exc:
            raise PlyError(f"{path}: {exc}") from None

    missing = [name for name in _REQUIRED if name not in cols]
    if missing:
        raise PlyError(f"{path}: not a 3DGS PLY, vertex element lacks properties: "
                       f"{' '.join(missing)}")
    rest_ids = sorted(int(m.group(1)) for name in cols if (m := _F_REST.match(name)))
    n_rest = len(rest_ids)
    if n_rest not in (0, 9, 24, 45):
        raise PlyError(f"{path}: {n_rest} f_rest_* properties match no SH degree "
                       "(expected 0, 9, 24 or 45)")
    if rest_ids != list(range(n_rest)):
        raise PlyError(f"{path}: f_rest_* properties are not numbered 0..{n_rest - 1}")

    used = list(_REQUIRED) + [f"f_rest_{i}" for i in range(n_rest)]
    bad_rows = np.zeros(len(cols["x"]), bool)
    bad_props = []
    for name in used:
        bad = ~np.isfinite(cols[name])
        if bad.any():
            bad_rows |= bad
            bad_props.append(name)
    if bad_props:
        what = (f"{int(bad_rows.sum())} of {len(bad_rows)} Gaussians have NaN or infinite values "
                f"(in {' '.join(bad_props[:8])}{' …' if len(bad_props) > 8 else ''})")
        if not drop_nonfinite:
            raise NonFinitePlyError(f"{path}: {what}")
        cols = {name: cols[name][~bad_rows] for name in used}
        if notes is not None:
            notes.append(f"{path}: dropped {what.replace(' have ', ' with ')}")

    n = len(cols["x"])
    k = n_rest // 3 + 1

    def stack(names):
        if not names:
            return np.zeros((n, 0), np.float32)
        return np.stack([cols[name] for name in names], axis=1)

    sh = np.empty((n, k, 3), dtype=np.float32)
    sh[:, 0, :] = stack(["f_dc_0", "f_dc_1", "f_dc_2"])
    # Undo the channel-major layout: (N, 3(K-1)) -> (N, 3, K-1) -> (N, K-1, 3).
    rest = stack([f"f_rest_{i}" for i in range(n_rest)])
    sh[:, 1:, :] = rest.reshape(n, 3, k - 1).transpose(0, 2, 1)
    return GaussianModel(
        means=stack(["x", "y", "z"]),
        log_scales=stack(["scale_0", "scale_1", "scale_2"]),
        quats=stack(["rot_0", "rot_1", "rot_2", "rot_3"]),
        opacity_logits=cols["opacity"],
        sh=sh,
    ), mode
