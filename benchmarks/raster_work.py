"""How much of the tiled rasteriser's work composites: the (pixel, splat) evaluations of a trained
model's training views, counted on the NumPy reference (docs/benchmarks.md, "Where the rasteriser's
work goes").

    python benchmarks/raster_work.py CHECKPOINT_OR_PLY SCENE [-r 8] [--white-background] [--views 5]

Per view, every 16×16 tile's pixels walk the tile's depth-sorted list until they stop (T would drop
below T_MIN) or the list ends; each step of that walk is one evaluation of the splat's falloff
(what raster.wgsl and raster_backward.wgsl pay per pixel). Reported: the pairs in the tile lists
(× the tile's pixels), the evaluations, the candidates among them (α ≥ 1/255 inside the ellipse) and
the composited ones; then the evaluations the same walk would make if each pixel only met the splats
whose α ellipse reaches its 8×8 quarter of the tile, or its band of 4 rows (the same exact
ellipse-rectangle test the emission uses, ``tile_pairs_kept``): the work a finer binning could save.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wgsl_splat.data.datasets import load_dataset  # noqa: E402
from wgsl_splat.data.ply import load_ply  # noqa: E402
from wgsl_splat.reference import raster as R  # noqa: E402
from wgsl_splat.reference.projection import project, rect_min_q, tile_q_bound  # noqa: E402


def load_model(path: str):
    if path.endswith(".npz"):
        from wgsl_splat.training.checkpoints import load_checkpoint
        return load_checkpoint(path)[1].model
    return load_ply(path)


def reaches(proj, ids, x0, y0, w, h) -> np.ndarray:
    """Which splats' α ellipse reaches the w×h pixel rectangle at (x0, y0) (emission's test)."""
    xa, ya = x0 + 0.5, y0 + 0.5
    q = rect_min_q(proj.means2d[ids], proj.conics[ids], xa, ya,
                   min(xa + (w - 1), proj.width - 0.5), min(ya + (h - 1), proj.height - 0.5))
    return q <= tile_q_bound(proj.opacities[ids], proj.config)


def view_work(proj, config) -> dict:
    _, gid, ranges = R.bin_and_sort(proj)
    size = config.tile_size
    out = dict(listed=0, evaluated=0, candidates=0, composited=0, quarter=0, band=0)
    for t, (s, e) in enumerate(ranges):
        if e <= s:
            continue
        ids = gid[s:e]
        px, py = R._tile_pixels(t, proj)
        _, _, power, _, alpha_raw = R._tile_alpha(proj, ids, px, py)
        composited, _, _ = R._decide(power, alpha_raw, config)
        candidate = (power <= 0) & (np.minimum(alpha_raw, config.alpha_max) >= config.alpha_min)
        n = len(ids)
        # a pixel walks up to its last composited splat, plus the one that stopped it (if any)
        last = np.where(composited.any(1), n - np.argmax(composited[:, ::-1], 1), 0)
        stopped = candidate & ~composited
        stop = np.where(stopped.any(1), np.argmax(stopped, 1) + 1, n)
        walked = np.minimum(np.maximum(last, stop), n)
        reach = np.arange(n)[None, :] < walked[:, None]          # (pixels, n) evaluated
        out["listed"] += len(px) * n
        out["evaluated"] += int(reach.sum())
        out["candidates"] += int((candidate & reach).sum())
        out["composited"] += int(composited.sum())
        ty, tx = divmod(t, proj.tiles_x)
        for key, (w, h) in (("quarter", (size // 2, size // 2)), ("band", (size, 4))):
            sub_x = (px - tx * size) // w
            sub_y = (py - ty * size) // h
            for sx in range(size // w):
                for sy in range(size // h):
                    sel = (sub_x == sx) & (sub_y == sy)
                    if sel.any():
                        hit = reaches(proj, ids, tx * size + sx * w, ty * size + sy * h, w, h)
                        out[key] += int((reach[sel] & hit[None, :]).sum())
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a checkpoint (.npz) or a PLY")
    ap.add_argument("scene")
    ap.add_argument("-r", "--resolution", type=float, default=1.0)
    ap.add_argument("--white-background", action="store_true")
    ap.add_argument("--views", type=int, default=5, help="the first N training views")
    args = ap.parse_args(argv)
    bg = (1.0, 1.0, 1.0) if args.white_background else (0.0, 0.0, 0.0)
    ds = load_dataset(args.scene, resolution=args.resolution, eval_split=True, background=bg)
    model = load_model(args.model)
    total: dict = {}
    for i in ds.train_indices[:args.views]:
        proj = project(model, ds.cameras[i])
        for k, v in view_work(proj, proj.config).items():
            total[k] = total.get(k, 0) + v
    ev = total["evaluated"]
    print(f"{len(model.means)} Gaussians, {args.views} views of {proj.width}x{proj.height}")
    print(f"  (pixel, splat) pairs in the 16x16 tile lists: {total['listed']:,}")
    print(f"  evaluated before the pixels stop:             {ev:,}")
    print(f"  candidates (alpha >= 1/255):                  {total['candidates']:,} "
          f"({total['candidates'] / ev:.1%} of the evaluations)")
    print(f"  composited:                                   {total['composited']:,} "
          f"({total['composited'] / ev:.1%})")
    print(f"  evaluations with per-8x8-quarter lists:       {total['quarter']:,} "
          f"({total['quarter'] / ev:.1%})")
    print(f"  evaluations with per-4-row-band lists:        {total['band']:,} "
          f"({total['band'] / ev:.1%})")


if __name__ == "__main__":
    main()
