"""Imperfect poses: a NeRF-synthetic scene whose training poses are perturbed, trained with and
without ``--pose-opt`` against the unperturbed run (docs/captures.md).

Builds a copy of the scene (images linked, ``transforms_test.json`` kept) in which every training
camera is rotated by ``--deg`` degrees about a random axis and moved by ``--shift`` × the scene
size (the largest distance of a training camera centre from their mean) in a random direction,
fixed seed. Trains three short runs through the CLI (unperturbed; perturbed; perturbed with
``--pose-opt``), prints their held-out PSNR/SSIM/L1 and, for the ``--pose-opt`` run, the mean
rotation and camera-centre error of the training poses before and after refinement (from the
checkpoint's ``pose.params``). Held-out views are rendered from their given (unperturbed) poses:
they are never refined.

    python benchmarks/pose_perturbed.py --data ../shared/data/lego --work /tmp/lego_pose -r 16
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def rotation(axis: np.ndarray, deg: float) -> np.ndarray:
    from wgsl_splat.contract.pose import so3_exp

    return so3_exp(axis / np.linalg.norm(axis) * np.radians(deg))


def build(src: Path, dst: Path, deg: float, shift: float, seed: int = 0) -> None:
    """The perturbed copy: each training camera-to-world ``C`` becomes ``C·[R_p | t_p]``."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        if name != "transforms_train.json" and not (dst / name).exists():
            os.symlink((src / name).resolve(), dst / name)
    meta = json.loads((src / "transforms_train.json").read_text())
    c2w = np.array([f["transform_matrix"] for f in meta["frames"]], np.float64)
    centres = c2w[:, :3, 3]
    size = float(np.linalg.norm(centres - centres.mean(0), axis=1).max())
    rng = np.random.default_rng(seed)
    for frame, c in zip(meta["frames"], c2w):
        p = np.eye(4)
        p[:3, :3] = rotation(rng.normal(size=3), deg)
        d = rng.normal(size=3)
        p[:3, 3] = d / np.linalg.norm(d) * shift * size
        frame["transform_matrix"] = (c @ p).tolist()
    (dst / "transforms_train.json").write_text(json.dumps(meta))


def pose_errors(truth, cameras, indices, deltas=None, align=False) -> tuple[float, float]:
    """Mean rotation error (degrees) and camera-centre error (world units) of ``cameras[i]``
    (corrected by ``deltas[i]``) against ``truth[i]`` over ``indices``. ``align``: after the
    rigid motion that best maps the corrected centres onto the true ones (Kabsch), which the
    training photos cannot tell apart from a motion of the model."""
    from wgsl_splat.contract.pose import refined_w2c, rotation_angle_deg

    ws = [cameras[i].world_to_camera if deltas is None else
          refined_w2c(cameras[i].world_to_camera, deltas[i]) for i in indices]
    centres = np.array([-w[:3, :3].T @ w[:3, 3] for w in ws])
    true_c = np.array([truth[i].center for i in indices])
    q, s = np.eye(3), np.zeros(3)
    if align:
        a, b = centres - centres.mean(0), true_c - true_c.mean(0)
        u, _, vt = np.linalg.svd(a.T @ b)
        d = np.sign(np.linalg.det(vt.T @ u.T))
        q = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
        s = true_c.mean(0) - q @ centres.mean(0)
    rot = [rotation_angle_deg(w[:3, :3] @ q.T @ truth[i].rotation.T) for w, i in zip(ws, indices)]
    pos = np.linalg.norm(centres @ q.T + s - true_c, axis=1)
    return float(np.mean(rot)), float(np.mean(pos))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="a NeRF-synthetic scene (lego)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("-r", type=int, default=16)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--deg", type=float, default=1.0)
    ap.add_argument("--shift", type=float, default=0.01)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--extra", default="", help="more train flags for every run (e.g. --pose-lr)")
    ap.add_argument("--only-pose-opt", action="store_true",
                    help="train the --pose-opt run only (the others from an earlier call)")
    args = ap.parse_args()
    from wgsl_splat.app.common import load_training_data

    scene = args.work / "scene"
    if not args.only_pose_opt:
        shutil.rmtree(scene, ignore_errors=True)
        build(args.data, scene, args.deg, args.shift)
    runs = (("unperturbed", args.data, []), ("perturbed", scene, []),
            ("perturbed --pose-opt", scene, ["--pose-opt"]))[2 if args.only_pose_opt else 0:]
    for label, data, extra in runs:
        out = args.work / label.replace(" --", "_").replace("-", "_")
        subprocess.run([sys.executable, "-m", "wgsl_splat", "train", str(data), "--out", str(out),
                        "--eval", "-r", str(args.r), "--iters", str(args.iters), "--device",
                        args.device, "--overwrite", "--eval-at", str(args.iters), "--preset",
                        args.preset, "--white-background", *args.extra.split(), *extra],
                       check=True, stdout=subprocess.DEVNULL)
        ev = json.loads((out / "metrics.json").read_text())[f"iteration_{args.iters}"]
        print(f"{label:21s} held-out PSNR {ev['mean']['psnr']:.2f} dB, SSIM "
              f"{ev['mean']['ssim']:.4f}, L1 {ev['mean']['l1']:.4f}, N {ev['num_gaussians']}",
              flush=True)
    truth = load_training_data(str(args.data), args.r, True, (1.0, 1.0, 1.0))
    bent = load_training_data(str(scene), args.r, True, (1.0, 1.0, 1.0))
    ckpts = sorted((out / "checkpoints").glob("ckpt_*.npz"))
    with np.load(ckpts[-1]) as z:
        deltas = z["pose.params"].astype(np.float64)
    idx = truth.train_indices
    for align in (False, True):
        before = pose_errors(truth.cameras, bent.cameras, idx, align=align)
        after = pose_errors(truth.cameras, bent.cameras, idx, deltas, align)
        print(f"training poses{' (rigidly aligned)' if align else ''}: rotation error "
              f"{before[0]:.3f}° -> {after[0]:.3f}°, centre error {before[1]:.4f} -> "
              f"{after[1]:.4f} (mean over {len(idx)} views)")


if __name__ == "__main__":
    main()
