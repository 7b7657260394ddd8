"""Tiled front-to-back rasterisation of projected Gaussians and its exact backward pass.

Vectorised per 16×16 tile: for one tile, every (pixel, Gaussian) pair is a row/column of a
(P × n) matrix, transmittance is a cumulative product along the depth-sorted columns. The discrete
decisions of the forward pass (which pairs composite, which alphas hit the 0.99 clamp, where a
pixel saturates) are kept in a ``RasterStructure`` so the backward pass — and finite-difference
checks — differentiate exactly the same piecewise-smooth function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .projection import Projection, tile_pairs_kept


@dataclass
class TileStructure:
    tile_id: int
    ids: np.ndarray         # (n,) Gaussian indices in depth order
    pixel_x: np.ndarray     # (P,) pixel column indices of this tile inside the image
    pixel_y: np.ndarray     # (P,)
    composited: np.ndarray  # (P, n) bool: pair took part in compositing
    clamped: np.ndarray     # (P, n) bool: alpha was clamped to alpha_max


@dataclass
class RasterStructure:
    """Sorted intersections and per-tile compositing decisions of one forward pass."""

    tile_ids: np.ndarray    # (M,) tile id of each sorted intersection
    gauss_ids: np.ndarray   # (M,) Gaussian of each sorted intersection
    tile_ranges: np.ndarray  # (tiles, 2) [start, end) into the sorted intersections
    tiles: list[TileStructure]


@dataclass
class RasterResult:
    image: np.ndarray        # (H, W, 3)
    final_T: np.ndarray      # (H, W) transmittance after the last composited Gaussian
    last_contrib: np.ndarray  # (H, W) int32: 1 + position in the tile's range of the last composited one
    structure: RasterStructure
    background: np.ndarray


def bin_and_sort(proj: Projection) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intersections (tile, Gaussian) sorted by (tile id, depth, Gaussian index), and tile ranges:
    the tiles of each visible Gaussian's rectangle that its α ellipse reaches (tile_pairs_kept)."""
    vis = np.flatnonzero(proj.visible)
    rect = proj.tile_rect[vis]
    w = rect[:, 2] - rect[:, 0]
    counts = w * (rect[:, 3] - rect[:, 1])
    total = int(counts.sum())
    gid = np.repeat(vis, counts)
    local = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    wr = np.repeat(w, counts)
    tx = np.repeat(rect[:, 0], counts) + local % np.maximum(wr, 1)
    ty = np.repeat(rect[:, 1], counts) + local // np.maximum(wr, 1)
    keep = tile_pairs_kept(proj, gid, tx, ty)
    gid, tx, ty = gid[keep], tx[keep], ty[keep]
    tile = ty * proj.tiles_x + tx
    order = np.lexsort((gid, proj.depths[gid], tile))
    tile, gid = tile[order], gid[order]
    num_tiles = proj.tiles_x * proj.tiles_y
    starts = np.searchsorted(tile, np.arange(num_tiles), side="left")
    ends = np.searchsorted(tile, np.arange(num_tiles), side="right")
    return tile, gid, np.stack([starts, ends], axis=1)


def _tile_pixels(tile_id: int, proj: Projection):
    ty, tx = divmod(tile_id, proj.tiles_x)
    size = proj.config.tile_size
    xs = np.arange(tx * size, min((tx + 1) * size, proj.width))
    ys = np.arange(ty * size, min((ty + 1) * size, proj.height))
    px, py = np.meshgrid(xs, ys)
    return px.ravel(), py.ravel()


def _tile_alpha(proj: Projection, ids, px, py):
    """Gaussian falloff terms of every (pixel, Gaussian) pair of one tile."""
    mean = proj.means2d[ids]
    dx = (px + 0.5)[:, None] - mean[None, :, 0]
    dy = (py + 0.5)[:, None] - mean[None, :, 1]
    a, b, c = (proj.conics[ids, i][None, :] for i in range(3))
    power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
    gauss = np.exp(np.minimum(power, 0.0))
    alpha_raw = proj.opacities[ids][None, :] * gauss
    return dx, dy, power, gauss, alpha_raw


def _transmittance(alpha: np.ndarray, t_start: np.ndarray | None = None) -> np.ndarray:
    """(P, n+1): the transmittance of each pixel before each pair and after the last, entering
    with ``t_start`` (P,) (1 by default). One sequential product per pixel, so splitting a tile's
    pairs into consecutive chunks (carrying the last column) gives the same values bit for bit."""
    start = np.ones_like(alpha[:, :1]) if t_start is None else t_start[:, None].astype(alpha.dtype)
    return np.cumprod(np.concatenate([start, 1.0 - alpha], axis=1), axis=1)


def _composite_weights(alpha: np.ndarray, t_start: np.ndarray | None = None):
    """Transmittance before each pair (P,n) and after all of them (P,) for masked alphas."""
    t = _transmittance(alpha, t_start)
    return t[:, :-1], t[:, -1]


def _composited_alpha(composited, clamped, alpha_raw, cfg) -> np.ndarray:
    """The alphas that composite (clamped to ``cfg.alpha_max``), zero elsewhere."""
    return np.where(composited, np.where(clamped, cfg.alpha_max, alpha_raw), 0.0)


def _decide(power: np.ndarray, alpha_raw: np.ndarray, cfg, t_start: np.ndarray | None = None):
    """The design's discrete decisions for (P, n) pairs in depth order: ``(composited, clamped,
    t_decision)``. A pair is a candidate when inside the ellipse with alpha ≥ ``cfg.alpha_min``
    (alpha clamped to ``cfg.alpha_max``); a pixel stops at the first candidate that would push T
    below ``cfg.t_min`` (not composited), and T never increases, so the composited set is a prefix
    of the candidates. ``t_decision`` (P,) is T after the last pair counting that stopping
    candidate: what a next chunk starts from."""
    clamped = alpha_raw > cfg.alpha_max
    alpha = np.minimum(alpha_raw, cfg.alpha_max)
    candidate = (power <= 0.0) & (alpha >= cfg.alpha_min)
    t = _transmittance(np.where(candidate, alpha, 0.0), t_start)
    return candidate & (t[:, 1:] >= cfg.t_min), clamped, t[:, -1]


def rasterize(proj: Projection, background, structure: RasterStructure | None = None) -> RasterResult:
    """Composite the projected Gaussians. With ``structure`` the discrete decisions of an earlier
    pass are reused (for finite differences); otherwise they follow the design's thresholds."""
    h, w = proj.height, proj.width
    dtype = proj.means2d.dtype
    cfg = proj.config
    bg = np.asarray(background, dtype=dtype).reshape(3)
    image = np.empty((h, w, 3), dtype=dtype)
    image[:] = bg
    final_t = np.ones((h, w), dtype=dtype)
    last = np.zeros((h, w), dtype=np.int32)
    if structure is None:
        tile_ids, gauss_ids, ranges = bin_and_sort(proj)
        tiles = None
    else:
        tile_ids, gauss_ids, ranges = structure.tile_ids, structure.gauss_ids, structure.tile_ranges
        tiles = structure.tiles
    new_tiles = []
    todo = tiles if tiles is not None else [
        t for t in range(len(ranges)) if ranges[t, 1] > ranges[t, 0]]
    for entry in todo:
        if tiles is None:
            ids = gauss_ids[ranges[entry, 0]:ranges[entry, 1]]
            px, py = _tile_pixels(entry, proj)
        else:
            ids, px, py = entry.ids, entry.pixel_x, entry.pixel_y
        _, _, power, _, alpha_raw = _tile_alpha(proj, ids, px, py)
        if tiles is None:
            composited, clamped, _ = _decide(power, alpha_raw, cfg)
            new_tiles.append(TileStructure(entry, ids, px, py, composited, clamped))
        else:
            composited, clamped = entry.composited, entry.clamped
        alpha = _composited_alpha(composited, clamped, alpha_raw, cfg)
        t_before, t_final = _composite_weights(alpha)
        weight = alpha * t_before
        image[py, px] = weight @ proj.colors[ids] + t_final[:, None] * bg
        final_t[py, px] = t_final
        any_c = composited.any(axis=1)
        last_idx = composited.shape[1] - np.argmax(composited[:, ::-1], axis=1)
        last[py, px] = np.where(any_c, last_idx, 0)
    struct = structure if structure is not None else RasterStructure(tile_ids, gauss_ids, ranges, new_tiles)
    return RasterResult(image, final_t, last, struct, bg)


def rasterize_image(proj: Projection, background, depth_chunk: int = 1024) -> np.ndarray:
    """The image :func:`rasterize` composites, in memory bounded by one row of tiles and
    ``depth_chunk`` Gaussians per tile at a time (no structure kept for a backward pass): what
    rendering large models on the NumPy path needs. Transmittance and decisions are bit-identical
    to :func:`rasterize`; colours differ by float rounding where a tile holds more than
    ``depth_chunk`` Gaussians (its sum is accumulated chunk by chunk)."""
    h, w = proj.height, proj.width
    cfg = proj.config
    dtype = proj.means2d.dtype
    bg = np.asarray(background, dtype=dtype).reshape(3)
    image = np.empty((h, w, 3), dtype=dtype)
    image[:] = bg
    rect = proj.tile_rect
    for ty in range(proj.tiles_y):
        row = np.flatnonzero(proj.visible & (rect[:, 1] <= ty) & (rect[:, 3] > ty))
        if len(row) == 0:
            continue
        # (tile x, Gaussian) pairs of this row, sorted as bin_and_sort does: tile, depth, index
        counts = rect[row, 2] - rect[row, 0]
        gid = np.repeat(row, counts)
        tx = np.repeat(rect[row, 0], counts) + np.arange(len(gid)) - np.repeat(
            np.cumsum(counts) - counts, counts)
        keep = tile_pairs_kept(proj, gid, tx, np.full(len(gid), ty))
        gid, tx = gid[keep], tx[keep]
        order = np.lexsort((gid, proj.depths[gid], tx))
        tx, gid = tx[order], gid[order]
        bounds = np.searchsorted(tx, np.arange(proj.tiles_x + 1))
        for x in range(proj.tiles_x):
            ids = gid[bounds[x]:bounds[x + 1]]
            if len(ids) == 0:
                continue
            px, py = _tile_pixels(ty * proj.tiles_x + x, proj)
            color = 0.0
            t_decision = t_composite = np.ones(len(px), dtype)
            for s in range(0, len(ids), depth_chunk):
                sub = ids[s:s + depth_chunk]
                _, _, power, _, alpha_raw = _tile_alpha(proj, sub, px, py)
                composited, clamped, t_decision = _decide(power, alpha_raw, cfg, t_decision)
                alpha = _composited_alpha(composited, clamped, alpha_raw, cfg)
                t_before, t_composite = _composite_weights(alpha, t_composite)
                color = color + (alpha * t_before) @ proj.colors[sub]
                if np.all(t_decision < cfg.t_min):   # every pixel of the tile has stopped
                    break
            image[py, px] = color + t_composite[:, None] * bg
    return image


@dataclass
class ScreenGrads:
    """Gradients w.r.t. the projected quantities (N rows)."""

    means2d: np.ndarray
    conics: np.ndarray
    colors: np.ndarray
    opacities: np.ndarray


def rasterize_backward(proj: Projection, result: RasterResult, dL_dimage: np.ndarray) -> ScreenGrads:
    """Exact gradients of the composited image w.r.t. the projected Gaussians."""
    n = len(proj.means2d)
    dtype = proj.means2d.dtype
    g_m2d = np.zeros((n, 2), dtype)
    g_conic = np.zeros((n, 3), dtype)
    g_col = np.zeros((n, 3), dtype)
    g_opa = np.zeros(n, dtype)
    bg = result.background
    for tile in result.structure.tiles:
        ids, px, py = tile.ids, tile.pixel_x, tile.pixel_y
        dx, dy, _, gauss, alpha_raw = _tile_alpha(proj, ids, px, py)
        comp, clamped = tile.composited, tile.clamped
        alpha = _composited_alpha(comp, clamped, alpha_raw, proj.config)
        t_before, t_final = _composite_weights(alpha)
        g_pix = dL_dimage[py, px]                      # (P,3)
        colors = proj.colors[ids]                      # (n,3)
        weight = alpha * t_before                      # (P,n)
        g_col_t = weight.T @ g_pix                     # (n,3)
        s = g_pix @ colors.T                           # (P,n): c_j · dL/dC
        contrib = weight * s
        # Σ_{k>j} c_k α_k T_k · g  (suffix sum excluding j) plus the background term
        suffix = np.cumsum(contrib[:, ::-1], axis=1)[:, ::-1] - contrib
        bg_term = t_final * (g_pix @ bg)
        g_alpha = t_before * s - (suffix + bg_term[:, None]) / (1.0 - alpha)
        g_alpha = np.where(comp & ~clamped, g_alpha, 0.0)
        # alpha = o·exp(power)
        g_o = np.sum(g_alpha * gauss, axis=0)
        g_power = g_alpha * alpha_raw
        a, b, c = (proj.conics[ids, i][None, :] for i in range(3))
        g_a = np.sum(-0.5 * dx * dx * g_power, axis=0)
        g_b = np.sum(-dx * dy * g_power, axis=0)
        g_c = np.sum(-0.5 * dy * dy * g_power, axis=0)
        g_mx = np.sum((a * dx + b * dy) * g_power, axis=0)
        g_my = np.sum((b * dx + c * dy) * g_power, axis=0)
        # a Gaussian appears at most once per tile, so plain fancy-index accumulation is exact
        g_col[ids] += g_col_t
        g_opa[ids] += g_o
        g_conic[ids] += np.stack([g_a, g_b, g_c], axis=1)
        g_m2d[ids] += np.stack([g_mx, g_my], axis=1)
    return ScreenGrads(g_m2d, g_conic, g_col, g_opa)
