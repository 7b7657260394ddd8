"""Niantic SPZ, version 3: a gzip stream of a 16-byte header and one array per attribute.

Layout (the SPZ v3 specification and the reference ``load-spz.cc`` of nianticlabs/spz)::

    header  <u32 magic 0x5053474e "NGSP"> <u32 version 3> <u32 num_points>
            <u8 sh_degree> <u8 fractional_bits> <u8 flags (0x1 antialiased)> <u8 0>
    positions  3 x signed 24-bit fixed point per splat (value * 2^fractional_bits)
    alphas     u8  sigmoid(opacity) * 255
    colors     3 x u8  DC * 0.15 * 255 + 127.5 (0.15, not SH_C0: keeps some range beyond [0,1])
    scales     3 x u8  (log scale + 10) * 16
    rotations  u32 smallest three: 2-bit index of the largest of x,y,z,w, then per other
               component a sign bit and 9 bits of |q| / sqrt(1/2), the first at the top
    sh         per splat, coefficient by coefficient, r g b: round(x * 128) + 128 snapped to
               buckets of 8 (degree 1: 5 bits) or 16 (degrees 2-3: 4 bits)

SPZ stores right-up-back axes (OpenGL, three.js) and 3DGS PLYs right-down-front (OpenCV), so the
writer turns the model 180° about x as Niantic's converters do by default (``ply_to_spz``
assumes RDF input): y and z of positions negated, quaternion (w, x, -y, -z), and the SH
coefficients whose basis function is odd in y·z flipped. PlayCanvas's reader does not convert
(it reads the axes as stored), so there an SPZ shows turned 180° about x relative to the PLY.
"""

from __future__ import annotations

import gzip
import struct

import numpy as np

from ...model import GaussianModel
from ._common import Encoded, ExportError, byte, sigmoid, smallest_three, unit_quats

MAGIC = 0x5053474E
VERSION = 3
FLAG_ANTIALIASED = 0x1
COLOR_SCALE = 0.15
# The reference loader refuses files with more points (deserializePackedGaussians).
MAX_POINTS = 10_000_000
FRACTIONAL_BITS = 12          # the reference writer's choice: 1/4096 units
FIXED_MAX = (1 << 23) - 1
RDF_TO_RUB = np.array([1.0, -1.0, -1.0])


def sh_axis_signs(flip: np.ndarray, degree: int = 3) -> np.ndarray:
    """Sign of each SH basis function (coefficients 1..K-1) under the axis flip ``flip``
    (diagonal): Y_k(F d) = s_k Y_k(d). Computed from our own basis, so it matches its order."""
    from ...contract.sh import sh_basis

    d = np.random.default_rng(0).normal(size=(64, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    ratio = sh_basis(d * flip, degree)[:, 1:] / sh_basis(d, degree)[:, 1:]
    signs = np.sign(np.median(ratio, axis=0))
    assert np.allclose(ratio, signs, atol=1e-6), "an axis flip maps each SH basis to ±itself"
    return signs


def _fractional_bits(positions: np.ndarray) -> int:
    """12 bits as the reference writer, fewer where the scene reaches past ±2048 units (the
    header carries the number, readers apply it); refused past the 24 bits themselves."""
    extent = float(np.abs(positions).max()) if len(positions) else 0.0
    for bits in range(FRACTIONAL_BITS, -1, -1):
        if np.floor(extent * (1 << bits) + 0.5) <= FIXED_MAX:
            return bits
    raise ExportError(f"coordinates up to {extent:.6g} do not fit SPZ's 24-bit fixed-point "
                      f"positions (at most ±{FIXED_MAX} units): scale the scene down first")


def encode(model: GaussianModel, render_mode: str = "classic") -> Encoded:
    n = model.num
    if n > MAX_POINTS:
        raise ExportError(f"{n} Gaussians exceed the {MAX_POINTS} that the reference SPZ loader "
                          f"reads: prune the model or use another format (sog, compressed-ply)")
    notes = []
    positions = np.asarray(model.means, np.float64) * RDF_TO_RUB
    bits = _fractional_bits(positions)
    if bits < FRACTIONAL_BITS:
        notes.append(f"positions reach {np.abs(positions).max():.4g} units: stored with "
                     f"{bits} fractional bits (resolution {2.0 ** -bits:.3g}) instead of 12")
    fixed = np.floor(positions * (1 << bits) + 0.5).astype(np.int64)
    pos_bytes = (fixed.astype(np.uint32) & 0xFFFFFF).reshape(-1)   # two's complement, low 24 bits
    pos_bytes = np.stack([(pos_bytes >> s) & 0xFF for s in (0, 8, 16)], axis=1).astype(np.uint8)

    alphas = byte(sigmoid(model.opacity_logits) * 255.0)
    sh = np.asarray(model.sh, np.float64)
    colors = byte(sh[:, 0, :] * (COLOR_SCALE * 255.0) + 127.5)
    scales = byte((np.asarray(model.log_scales, np.float64) + 10.0) * 16.0)

    # w,x,y,z -> x,y,z,w (SPZ's component indices), then the axis change (w, x, -y, -z).
    q = unit_quats(model.quats)[:, [1, 2, 3, 0]] * np.array([1.0, -1.0, -1.0, 1.0])
    largest, q = smallest_three(q)
    packed = largest.astype(np.uint32)
    for i in range(4):
        mag = np.floor(511.0 * np.abs(q[:, i]) / np.sqrt(0.5) + 0.5).astype(np.uint32)
        field = (((q[:, i] < 0).astype(np.uint32) << 9) | np.minimum(mag, 511))
        packed = np.where(largest == i, packed, (packed << 10) | field)
    rotations = packed.astype("<u4")

    k = sh.shape[1]
    rest = sh[:, 1:, :] * sh_axis_signs(RDF_TO_RUB, model.sh_degree)[None, :, None]
    q_sh = np.sign(rest * 128.0) * np.floor(np.abs(rest * 128.0) + 0.5) + 128.0
    bucket = np.where(np.arange(k - 1) < 3, 8, 16)[None, :, None]     # degree 1: 5 bits
    q_sh = np.floor((q_sh + bucket // 2) / bucket) * bucket
    sh_bytes = np.clip(q_sh, 0, 255).astype(np.uint8).reshape(n, -1)

    flags = FLAG_ANTIALIASED if render_mode == "antialiased" else 0
    header = struct.pack("<IIIBBBB", MAGIC, VERSION, n, model.sh_degree, bits, flags, 0)
    raw = b"".join([header, pos_bytes.tobytes(), alphas.tobytes(), colors.tobytes(),
                    scales.tobytes(), rotations.tobytes(), sh_bytes.tobytes()])
    # mtime 0: the same model gives the same bytes
    return Encoded(gzip.compress(raw, compresslevel=6, mtime=0), np.arange(n), notes)
