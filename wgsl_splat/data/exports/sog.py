"""PlayCanvas SOG, version 2: lossless WebP images plus ``meta.json``, bundled in a zip (``.sog``)
or as a folder (an output path ending in ``meta.json``). The layout is splat-transform's
``write-sog.ts`` / ``read-sog.ts`` and PlayCanvas's SOG format page:

* every image is W x H texels, W = ceil(sqrt(N) / 4) * 4, H = ceil(N / W / 4) * 4; texel i holds
  splat i (row-major), splats in Morton order;
* ``means_l.webp`` / ``means_u.webp``: low and high bytes of 16-bit positions, each axis
  log-mapped (sign(v) * log(|v| + 1)) onto its [min, max] (``meta.means.mins/maxs``);
* ``quats.webp``: the three smallest components of the unit quaternion (rot_0..rot_3 order, the
  largest made positive) times sqrt(2), mapped to bytes; alpha = 252 + index of the largest;
* ``scales.webp``: per axis an index into ``meta.scales.codebook`` (256 log scales);
* ``sh0.webp``: per channel an index into ``meta.sh0.codebook`` (256 DC values); alpha =
  sigmoid(opacity) * 255;
* SH degree > 0: ``shN_labels.webp`` (16-bit index into a palette of ``meta.shN.count`` SH
  vectors, low byte in red) and ``shN_centroids.webp`` (64 palette entries per row, one texel per
  coefficient, r g b = indices into ``meta.shN.codebook``);
* ``meta.json``: ``{"version": 2, "count", "model"?, "means", "scales", "quats", "sh0", "shN"?}``;
  ``"model": "antialiased"`` marks Mip-Splatting models.

The codebooks are 1-D k-means fits (Lloyd iterations from quantiles) and the SH palette a k-means
clustering in NumPy, seeded, so an export is reproducible; PlayCanvas uses the same kinds of
fits. Pillow writes the lossless WebP.
"""

from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np

from ...model import GaussianModel
from ._common import (
    Encoded,
    ExportError,
    byte,
    morton_order,
    others,
    sigmoid,
    smallest_three,
    unit_quats,
)

MAX_SIDE = 16383            # WebP's largest image side
CODEBOOK = 256
MAX_PALETTE = 65536         # labels are 16-bit
SH_ITERATIONS = 10          # Lloyd iterations of the SH palette (splat-transform's default)


def image_size(n: int) -> tuple[int, int]:
    width = int(math.ceil(math.sqrt(n) / 4)) * 4
    return width, int(math.ceil(n / width / 4)) * 4


def default_palette(n: int) -> int:
    """Palette entries for ``n`` splats: splat-transform takes min(64, 2^floor(log2(n/1024))) K,
    up to 65 536 entries for n >= 64 K. Our k-means runs on the CPU (N x K x 45 per iteration):
    n/4 rounded down to a power of two, 256 to 8 192. On lego -r 8 (50 832 splats, lavapipe VM)
    8 192 entries cost 0.19 dB against the PLY in 134 s, 16 384 0.11 dB in 244 s (docs/exports.md)."""
    return int(min(8192, max(256, 2 ** int(math.floor(math.log2(max(n / 4, 1)))))))


def quantize_1d(values: np.ndarray, k: int = CODEBOOK, iterations: int = 16
                ) -> tuple[np.ndarray, np.ndarray]:
    """A codebook of ``k`` sorted values (k-means in 1-D, started from quantiles) and each value's
    index into it (uint8 for k <= 256). Exact Lloyd steps: with sorted centroids the nearest one is
    a search among the midpoints."""
    v = np.asarray(values, np.float64).ravel()
    centroids = np.unique(np.quantile(v, (np.arange(k) + 0.5) / k))
    for _ in range(iterations):
        labels = np.searchsorted(0.5 * (centroids[1:] + centroids[:-1]), v)
        counts = np.bincount(labels, minlength=len(centroids))
        sums = np.bincount(labels, weights=v, minlength=len(centroids))
        updated = np.where(counts > 0, sums / np.maximum(counts, 1), centroids)
        updated = np.unique(updated)
        if len(updated) == len(centroids) and np.allclose(updated, centroids, rtol=0, atol=1e-12):
            break
        centroids = updated
    centroids = centroids.astype(np.float32)
    labels = np.searchsorted(0.5 * (centroids[1:].astype(np.float64)
                                    + centroids[:-1].astype(np.float64)), v)
    book = np.concatenate([centroids, np.repeat(centroids[-1:], k - len(centroids))])
    return book, labels.astype(np.uint8 if k <= 256 else np.uint16).reshape(np.shape(values))


def kmeans(points: np.ndarray, k: int, iterations: int = SH_ITERATIONS, seed: int = 0
           ) -> tuple[np.ndarray, np.ndarray]:
    """k-means of ``points`` (N, D) from k distinct random points; returns (centroids (k, D),
    labels (N,)). Distances by matrix products in blocks of rows (bounded memory); an empty
    cluster keeps its centroid."""
    x = np.ascontiguousarray(points, np.float32)
    n = len(x)
    k = min(k, n)
    rng = np.random.default_rng(seed)
    centroids = x[rng.choice(n, size=k, replace=False)].copy()
    labels = np.zeros(n, np.int64)
    block = max(64, (1 << 23) // k)        # 32 MiB of distances at a time
    for it in range(iterations + 1):
        c_sq = np.einsum("ij,ij->i", centroids, centroids)
        for s in range(0, n, block):
            xb = x[s:s + block]
            # |x - c|² = |x|² - 2 x·c + |c|²; |x|² is the same for every c of a row
            labels[s:s + block] = np.argmin(c_sq[None, :] - 2.0 * (xb @ centroids.T), axis=1)
        if it == iterations:
            break
        counts = np.bincount(labels, minlength=k)
        sums = np.stack([np.bincount(labels, weights=x[:, d], minlength=k)
                         for d in range(x.shape[1])], axis=1)
        live = counts > 0
        centroids[live] = (sums[live] / counts[live, None]).astype(np.float32)
    return centroids, labels


def _webp(texels: np.ndarray, width: int, height: int) -> bytes:
    """RGBA bytes (width * height * 4, or fewer: the rest zero) as a lossless WebP."""
    from PIL import Image

    buf = np.zeros(width * height * 4, np.uint8)
    flat = texels.reshape(-1)
    buf[:len(flat)] = flat
    out = io.BytesIO()
    # exact: keep the RGB of texels whose alpha is 0 (they are data, not colour)
    Image.fromarray(buf.reshape(height, width, 4), "RGBA").save(
        out, format="WEBP", lossless=True, quality=100, method=4, exact=True)
    return out.getvalue()


def _log_map(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.log(np.abs(v) + 1.0)


def encode(model: GaussianModel, render_mode: str = "classic", *, palette: int | None = None,
           sh_iterations: int = SH_ITERATIONS) -> Encoded:
    n = model.num
    width, height = image_size(n)
    if width > MAX_SIDE or height > MAX_SIDE:
        raise ExportError(f"{n} Gaussians need {width}x{height} texel images, beyond WebP's "
                          f"{MAX_SIDE} per side: SOG holds at most about 268 million")
    order = morton_order(model.means)
    files: dict[str, bytes] = {}
    meta: dict = {"version": 2, "asset": {"generator": "wgsl_splat"}, "count": n}
    if render_mode == "antialiased":
        meta["model"] = "antialiased"

    means = _log_map(np.asarray(model.means, np.float64)[order])
    lo, hi = means.min(axis=0), means.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    m16 = np.clip(np.floor((means - lo) / span * 65535.0 + 0.5), 0, 65535).astype(np.uint32)
    lo_tex = np.full((n, 4), 255, np.uint8)
    hi_tex = np.full((n, 4), 255, np.uint8)
    lo_tex[:, :3] = m16 & 0xFF
    hi_tex[:, :3] = m16 >> 8
    files["means_l.webp"] = _webp(lo_tex, width, height)
    files["means_u.webp"] = _webp(hi_tex, width, height)
    meta["means"] = {"mins": lo.tolist(), "maxs": hi.tolist(),
                     "files": ["means_l.webp", "means_u.webp"]}

    largest, q = smallest_three(unit_quats(model.quats[order]))
    quats = np.empty((n, 4), np.uint8)
    quats[:, :3] = byte(255.0 * (others(largest, q) * np.sqrt(2.0) * 0.5 + 0.5))
    quats[:, 3] = 252 + largest
    files["quats.webp"] = _webp(quats, width, height)
    meta["quats"] = {"files": ["quats.webp"]}

    book, labels = quantize_1d(np.asarray(model.log_scales, np.float64)[order])
    scales = np.full((n, 4), 255, np.uint8)
    scales[:, :3] = labels
    files["scales.webp"] = _webp(scales, width, height)
    meta["scales"] = {"codebook": book.tolist(), "files": ["scales.webp"]}

    sh = np.asarray(model.sh, np.float64)[order]
    book, labels = quantize_1d(sh[:, 0, :])
    sh0 = np.empty((n, 4), np.uint8)
    sh0[:, :3] = labels
    sh0[:, 3] = byte(sigmoid(model.opacity_logits[order]) * 255.0)
    files["sh0.webp"] = _webp(sh0, width, height)
    meta["sh0"] = {"codebook": book.tolist(), "files": ["sh0.webp"]}

    notes = []
    coeffs = sh.shape[1] - 1
    if coeffs:
        size = min(palette or default_palette(n), n, MAX_PALETTE)
        # channel-major vectors, as the PLY's f_rest and the reader's palette
        rest = sh[:, 1:, :].transpose(0, 2, 1).reshape(n, 3 * coeffs)
        centroids, sh_labels = kmeans(rest, size, sh_iterations)
        size = len(centroids)
        book, cb_labels = quantize_1d(centroids)          # (size, 3 * coeffs) indices
        rows = -(-size // 64)
        cen = np.zeros((rows * 64, coeffs, 4), np.uint8)
        cen[:size, :, :3] = cb_labels.reshape(size, 3, coeffs).transpose(0, 2, 1)
        cen[:size, :, 3] = 255
        files["shN_centroids.webp"] = _webp(cen, 64 * coeffs, rows)
        lab = np.zeros((n, 4), np.uint8)
        lab[:, 0] = sh_labels & 0xFF
        lab[:, 1] = sh_labels >> 8
        lab[:, 3] = 255
        files["shN_labels.webp"] = _webp(lab, width, height)
        meta["shN"] = {"count": size, "bands": model.sh_degree, "codebook": book.tolist(),
                       "files": ["shN_centroids.webp", "shN_labels.webp"]}
        notes.append(f"SH as a palette of {size} entries ({sh_iterations} k-means iterations)")
    files = {"meta.json": json.dumps(meta).encode(), **files}

    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_STORED) as z:   # WebP is compressed already
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))   # reproducible
            z.writestr(info, data)
    return Encoded(bundle.getvalue(), order, notes, members=files)
