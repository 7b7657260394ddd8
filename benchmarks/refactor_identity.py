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
"""

from __future__ import annotations

import argparse
import filecmp
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("give OUT or --compare BEFORE AFTER")
    train(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
