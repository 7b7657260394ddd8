"""A behaviour-preserving change leaves the NumPy path's outputs byte for byte the same.

Trains three short runs on the NumPy path (the embedded scene, ``-r 8``, ADC, MCMC and the fast
strategy, each through its densification rounds) into ``OUT/<strategy>/`` with the installed
code, and with ``--compare BEFORE AFTER`` compares two such folders: the final PLY and checkpoint
must be equal bytes (``cmp``). Usage, around a refactor::

    git stash; python benchmarks/refactor_identity.py /tmp/before; git stash pop
    python benchmarks/refactor_identity.py /tmp/after
    python benchmarks/refactor_identity.py --compare /tmp/before /tmp/after

The runs of BEFORE can also be resumed by the new code (``train --out BEFORE/adc --resume
latest``): checkpoints and cfg.json written before the change must still load.

The GPU path is not byte-reproducible (float atomics), so ``--gpu OUT`` trains short GPU runs on
two scenes with two seeds each and records the held-out PSNR at three steps, and ``--compare-gpu
BEFORE AFTER`` prints them side by side with each side's seed-to-seed spread: a change that
preserves behaviour stays within it.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys

ITERS = 160
RUNS = {
    "adc": ["--strategy", "adc"],
    "mcmc": ["--strategy", "mcmc", "--cap-max", "4000"],
    "fast": ["--strategy", "fast"],
}


def train(out: str) -> None:
    for name, flags in RUNS.items():
        folder = os.path.join(out, name)
        cmd = [sys.executable, "-m", "wgsl_splat", "train", "--preset", "smoke", "--iters",
               str(ITERS), "-r", "8", "--device", "cpu", "--seed", "7", "--out", folder,
               "--overwrite", *flags]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def outputs(folder: str) -> list[str]:
    return [os.path.join("point_cloud", f"iteration_{ITERS}", "point_cloud.ply"),
            os.path.join("checkpoints", f"ckpt_{ITERS:06d}.npz")]


def compare(before: str, after: str) -> int:
    bad = 0
    for name in RUNS:
        for rel in outputs(name):
            a, b = (os.path.join(d, name, rel) for d in (before, after))
            same = filecmp.cmp(a, b, shallow=False)
            bad += not same
            print(f"{name:5s} {rel}: {'identical' if same else 'DIFFERENT'}")
    return 1 if bad else 0


DATA = os.environ.get("WGSL_SPLAT_DATA", os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "shared", "data"))
GPU_SCENES = {"default": ["default", "-r", "8"], "mouse": [os.path.join(DATA, "mouse"), "-r", "8"]}
GPU_STEPS = (100, 200, 300)
SEEDS = (0, 1)


def train_gpu(out: str) -> None:
    results = {}
    for scene, args in GPU_SCENES.items():
        for seed in SEEDS:
            folder = os.path.join(out, f"{scene}_seed{seed}")
            cmd = [sys.executable, "-m", "wgsl_splat", "train", *args, "--preset", "smoke",
                   "--strategy", "adc", "--eval", "--device", "gpu", "--seed", str(seed),
                   "--eval-at", ",".join(map(str, GPU_STEPS)), "--out", folder, "--overwrite"]
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(folder, "metrics.json")) as f:
                metrics = json.load(f)
            results[f"{scene}_seed{seed}"] = {
                str(s): metrics[f"iteration_{s}"]["mean"]["psnr"] for s in GPU_STEPS}
    with open(os.path.join(out, "gpu_psnr.json"), "w") as f:
        json.dump(results, f, indent=1)


def compare_gpu(before: str, after: str) -> int:
    sides = []
    for folder in (before, after):
        with open(os.path.join(folder, "gpu_psnr.json")) as f:
            sides.append(json.load(f))
    print(f"{'scene':8s} {'step':>5s}  {'before (seeds)':>22s}  {'after (seeds)':>22s}")
    for scene in GPU_SCENES:
        for step in map(str, GPU_STEPS):
            cols = []
            for side in sides:
                vals = [side[f"{scene}_seed{seed}"][step] for seed in SEEDS]
                cols.append(" / ".join(f"{v:.2f}" for v in vals)
                            + f" (±{(max(vals) - min(vals)) / 2:.2f})")
            print(f"{scene:8s} {step:>5s}  {cols[0]:>22s}  {cols[1]:>22s}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--gpu", action="store_true", help="train the GPU runs into OUT instead")
    ap.add_argument("--compare-gpu", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.compare_gpu:
        return compare_gpu(*args.compare_gpu)
    if not args.out:
        ap.error("give OUT or --compare BEFORE AFTER")
    (train_gpu if args.gpu else train)(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
