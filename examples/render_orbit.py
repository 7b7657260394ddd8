"""Render a trained model (.ply) from a circle of cameras around it with the GPU forward pipeline.

    python examples/render_orbit.py MODEL.ply [--frames 36] [--size 480x360] [--out orbit/]

Frames are PNGs (``frame_000.png`` ...); turn them into a video with any tool, e.g.
``ffmpeg -i orbit/frame_%03d.png orbit.mp4``.
"""

from __future__ import annotations

import argparse
import math
import os

from wgsl_splat.app.view_camera import OrbitCamera
from wgsl_splat.atomic_io import save_png
from wgsl_splat.data.ply import load_ply_with_mode
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.gpu.runtime import select_device
from wgsl_splat.render_config import render_config


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--frames", type=int, default=36)
    ap.add_argument("--size", default="480x360")
    ap.add_argument("--out", default="orbit")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.split("x"))

    model, mode = load_ply_with_mode(args.model)     # rendered in the mode it was trained in
    renderer = GpuRenderer(select_device("gpu", echo=print), config=render_config(mode))
    renderer.upload_model(model)                    # the model stays on the device
    orbit = OrbitCamera.for_points(model.means)
    os.makedirs(args.out, exist_ok=True)
    paths = []
    for i in range(args.frames):
        image = renderer.render(orbit.camera(width, height))
        paths.append(os.path.join(args.out, f"frame_{i:03d}.png"))
        save_png(paths[-1], image)
        orbit.orbit(2 * math.pi / args.frames, 0.0)
    print(f"{len(paths)} frames of {len(model)} Gaussians in {args.out}/")
    return paths


if __name__ == "__main__":
    main()
