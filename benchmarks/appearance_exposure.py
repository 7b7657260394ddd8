"""A capture whose exposure and white balance change from photo to photo, trained with and without
``--appearance`` (docs/captures.md).

Builds a copy of the fox scene at 1/R size in which every training photo is scaled by a random
exposure factor (×2^U(-1, 1)) and tinted per channel (×U(0.85, 1.15)), clipped to [0, 1]; the
held-out views (every 8th) keep their original colours. Then trains the same short run twice
through the CLI and prints the held-out PSNR/SSIM/L1 (held-out views are scored without a
transform, the protocol of docs/captures.md).

    python benchmarks/appearance_exposure.py --data ../shared/data/fox --work /tmp/fox_exposure -r 8
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from masks_ghost import (  # benchmarks/ is the script's folder, on sys.path
    picture,
    report,
    train,
)
from PIL import Image


def build(src: Path, dst: Path, r: int, seed: int = 0) -> None:
    meta = json.loads((src / "transforms.json").read_text())
    frames = sorted(meta["frames"], key=lambda f: f["file_path"])
    (dst / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for k, frame in enumerate(frames):
        im = Image.open(src / frame["file_path"]).convert("RGB")
        img = np.asarray(im.resize((im.width // r, im.height // r), Image.BOX), np.float32) / 255
        if k % 8 != 0:   # training views only
            img = img * 2.0 ** rng.uniform(-1, 1) * rng.uniform(0.85, 1.15, 3)
        out = Path(frame["file_path"]).with_suffix(".png").name
        Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).save(dst / "images" / out)
        frame["file_path"] = f"images/{out}"
    meta["frames"] = frames
    (dst / "transforms.json").write_text(json.dumps(meta))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="the fox scene (transforms.json)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("-r", type=int, default=8)
    ap.add_argument("--iters", type=int, default=1500)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--picture", type=Path, default=None, help="write a comparison PNG here")
    args = ap.parse_args()
    scene = args.work / "scene"
    shutil.rmtree(scene, ignore_errors=True)
    build(args.data, scene, args.r)
    for label, extra in (("without --appearance", []), ("with --appearance", ["--appearance"])):
        out = args.work / ("run_app" if extra else "run_plain")
        m = train(scene, out, args.r, args.iters, args.device, args.preset, extra)
        report(label, m[f"iteration_{args.iters}"])
    if args.picture:
        runs = [args.work / "run_plain", args.work / "run_app"]
        name = picture(scene, runs, args.r, args.iters, args.picture)
        print(f"{args.picture}: photo | without --appearance | with it, held-out view {name}")


if __name__ == "__main__":
    main()
