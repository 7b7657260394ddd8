"""Pack a NeRF-synthetic scene small enough to travel to a lent GPU machine, and unpack it there.

The device tool sends the working tree and at most 64 MiB with it; lego is 123 MiB (100 training
and 200 test PNGs). Lossless WebP is about 27 % smaller than those PNGs and decodes back to the
same pixels, so ``pack`` writes the training views and every ``--test-every``-th test view as
WebP (and the matching transforms files) into a git-ignored folder to name in ``carry``;
``unpack``, run first on the device machine, turns them back into PNGs in place.

    python benchmarks/pack_for_device.py pack ../shared/data/lego .gpudata/lego --test-every 5
    python benchmarks/pack_for_device.py unpack .gpudata/lego        # on the device machine

(Pillow is needed on both sides; the device image has it.) Evaluations on the packed scene score
that subset of the test views: say so next to the figures.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from PIL import Image


def _to_webp(job: tuple[str, str]) -> None:
    src, dst = job
    with Image.open(src) as im:
        im.save(dst, lossless=True, quality=100, method=4, exact=True)


def _to_png(path: str) -> None:
    with Image.open(path) as im:
        im.save(path[: -len(".webp")] + ".png", compress_level=1)
    Path(path).unlink()


def pack(scene: Path, out: Path, test_every: int, jobs: int) -> int:
    work = []
    for split, every in (("train", 1), ("test", test_every)):
        meta = json.loads((scene / f"transforms_{split}.json").read_text())
        meta["frames"] = meta["frames"][::every]
        (out / split).mkdir(parents=True, exist_ok=True)
        (out / f"transforms_{split}.json").write_text(json.dumps(meta))
        for frame in meta["frames"]:
            rel = frame["file_path"].removeprefix("./")
            work.append((str(scene / f"{rel}.png"), str(out / f"{rel}.webp")))
    with ProcessPoolExecutor(jobs) as ex:
        list(ex.map(_to_webp, work))
    return len(work)


def unpack(out: Path, jobs: int) -> int:
    files = [str(p) for p in out.rglob("*.webp")]
    with ProcessPoolExecutor(jobs) as ex:
        list(ex.map(_to_png, files))
    return len(files)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack")
    a.add_argument("scene", type=Path)
    a.add_argument("out", type=Path)
    a.add_argument("--test-every", type=int, default=5)
    a.add_argument("--jobs", type=int, default=2)
    b = sub.add_parser("unpack")
    b.add_argument("out", type=Path)
    b.add_argument("--jobs", type=int, default=16)
    args = p.parse_args(argv)
    if args.cmd == "pack":
        n = pack(args.scene, args.out, args.test_every, args.jobs)
    else:
        n = unpack(args.out, args.jobs)
    print(f"{args.cmd}: {n} images")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
