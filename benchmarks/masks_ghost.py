"""A capture with a moving object, trained with and without its masks (docs/captures.md).

Builds a copy of the fox scene (instant-ngp's transforms.json) at 1/R size in which a red ball
stands in the middle of the scene during the first half of the capture and is gone in the second
(a person who walked off), painted into those training views with masks that black it out
(dilated by 2 px); the held-out views (every 8th) stay clean. Then trains the same short run
twice through the CLI, with the masks and with masks/ removed, and prints the held-out
PSNR/SSIM/L1. The unmasked run bakes the ball into the model as a ghost that the clean held-out
views show.

    python benchmarks/masks_ghost.py --data ../shared/data/fox --work /tmp/fox_blob -r 8 --iters 1500
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def build(src: Path, dst: Path, r: int) -> int:
    """The scene with a red ball standing at the middle of the scene during the first half of the
    capture (then gone: a transient object), painted into those training views with its masks."""
    from wgsl_splat.data.datasets import load_dataset

    meta = json.loads((src / "transforms.json").read_text())
    frames = sorted(meta["frames"], key=lambda f: f["file_path"])
    cams = {c.name: c for c in load_dataset(src, resolution=r).cameras}   # poses only
    first = cams[Path(frames[0]["file_path"]).name]
    lo, hi = load_dataset(src, resolution=r).bounds()
    ball = 0.5 * (lo + hi)
    z0 = (first.world_to_camera[:3, :3] @ ball + first.world_to_camera[:3, 3])[2]
    radius = 0.1 * first.width * z0 / first.fx      # a tenth of the first view's width
    (dst / "images").mkdir(parents=True, exist_ok=True)
    (dst / "masks").mkdir(exist_ok=True)
    painted = 0
    for k, frame in enumerate(frames):
        name = Path(frame["file_path"]).name
        im = Image.open(src / frame["file_path"]).convert("RGB")
        im = im.resize((im.width // r, im.height // r), Image.BOX)
        img = np.asarray(im).copy()
        keep = np.full(img.shape[:2], 255, np.uint8)
        if k % 8 != 0 and k < len(frames) // 2:   # training views of the first half
            cam = cams[name]
            pc = cam.world_to_camera[:3, :3] @ ball + cam.world_to_camera[:3, 3]
            u, v = cam.fx * pc[0] / pc[2] + cam.cx, cam.fy * pc[1] / pc[2] + cam.cy
            rad = cam.fx * radius / pc[2]
            yy, xx = np.mgrid[:img.shape[0], :img.shape[1]]
            d2 = (xx + 0.5 - u) ** 2 + (yy + 0.5 - v) ** 2
            shade = np.clip(1.0 - 0.5 * d2 / rad ** 2, 0, 1)[..., None]   # a shaded ball
            inside = d2 <= rad ** 2
            img[inside] = (np.array([230, 40, 30]) * shade[inside]).astype(np.uint8)
            keep[d2 <= (rad + 2) ** 2] = 0
            painted += 1
        out = Path(name).with_suffix(".png").name
        Image.fromarray(img).save(dst / "images" / out)
        Image.fromarray(keep).save(dst / "masks" / out)
        frame["file_path"] = f"images/{out}"
    meta["frames"] = frames
    (dst / "transforms.json").write_text(json.dumps(meta))
    return painted


def train(scene: Path, out: Path, r: int, iters: int, device: str, preset: str,
          extra: list) -> dict:
    cmd = [sys.executable, "-m", "wgsl_splat", "train", str(scene), "--out", str(out), "--eval",
           "-r", str(r), "--iters", str(iters), "--device", device, "--overwrite",
           "--eval-at", str(iters), "--preset", preset, *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "metrics.json").read_text())


def report(label: str, ev: dict) -> None:
    """One run's held-out line (an evaluation of metrics.json)."""
    print(f"{label:21s} held-out PSNR {ev['mean']['psnr']:.2f} dB, SSIM {ev['mean']['ssim']:.4f}, "
          f"L1 {ev['mean']['l1']:.4f}, N {ev['num_gaussians']}")


def picture(scene: Path, runs: list[Path], r: int, iters: int, out: Path) -> str:
    """The first held-out view: its photo, then each run's render of it side by side (here:
    unmasked | masked; it looks at the ball's place from the first half of the capture)."""
    from wgsl_splat.data.datasets import load_dataset

    d = load_dataset(scene, resolution=r, eval_split=True)
    i = d.test_indices[0]
    name = d.cameras[i].name
    tiles = [(np.clip(d.load_image(i), 0, 1) * 255 + 0.5).astype(np.uint8)]
    tiles += [np.asarray(Image.open(run / "test" / f"iteration_{iters}" / name).convert("RGB"))
              for run in runs]
    Image.fromarray(np.concatenate(tiles, axis=1)).save(out)
    return name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="the fox scene (transforms.json)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("-r", type=int, default=8)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--preset", default="smoke", help="smoke: 5000 random points, the schedule "
                                                      "compressed (a CPU-sized run)")
    ap.add_argument("--train-args", default="", help="more train flags, e.g. "
                                                     "'--densify-until 1200'")
    ap.add_argument("--picture", type=Path, default=None, help="write a comparison PNG here")
    args = ap.parse_args()
    masked, unmasked = args.work / "masked", args.work / "unmasked"
    for d in (masked, unmasked):
        shutil.rmtree(d, ignore_errors=True)
    painted = build(args.data, masked, args.r)
    shutil.copytree(masked, unmasked)
    shutil.rmtree(unmasked / "masks")
    print(f"{painted} training views painted with a transient ball")
    for label, scene in (("without masks", unmasked), ("with masks", masked)):
        m = train(scene, args.work / f"run_{scene.name}", args.r, args.iters, args.device,
                  args.preset, args.train_args.split())
        report(label, m[f"iteration_{args.iters}"])
    if args.picture:
        runs = [args.work / "run_unmasked", args.work / "run_masked"]
        name = picture(masked, runs, args.r, args.iters, args.picture)
        print(f"{args.picture}: photo | without masks | with masks, held-out view {name}")


if __name__ == "__main__":
    main()
