"""Frame extraction + SfM of a 30-second 1080p video (issue 34's video figure).

    python benchmarks/sfm_video.py [--seconds 30] [--fps 30] [--frames 120] [--work DIR]
        [--json out.json]

No real phone video of a shared scene is at hand, so the clip is made from fox's 67 photos
(1080×1920, instant-ngp's capture order): each photo held, then cross-faded into the next, over
``--seconds`` at ``--fps`` (H.264 through imageio-ffmpeg). It has no motion blur, rolling shutter
or compressed motion, so it measures the pipeline's time (decode, sharpness, SIFT, sequential
matching, mapping of ``--frames`` frames at 1080p), not what a hand-held video does to accuracy;
the cross-fades are the frames that the sharpest-per-window choice has to pass over. Prints and
writes the summary: frames kept, registered, points, time and CPU time per stage, and the
recovered cameras against the published ones (each kept frame shows one photo: its published
pose is that photo's; aligned as in sfm_accuracy.py). The photos' order is instant-ngp's, which
sweeps the fox back and forth and around (the cameras come back to views seen 30–60 photos
earlier), so ``--loop-every 0`` against the default measures loop closure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wgsl_splat.data.datasets import load_dataset  # noqa: E402
from wgsl_splat.data.sfm import SfmSettings, make_scene  # noqa: E402
from wgsl_splat.data.sfm.compare import error_summary, pose_errors  # noqa: E402

DATA = Path(os.environ.get("WGSL_SPLAT_DATA", ROOT.parent / "shared" / "data"))


def frame_mix(f: int, frames: int, photos: int) -> tuple[int, float]:
    """Clip frame ``f``: photo ``i`` faded by ``a`` into the next (t = f / frames × (photos − 1):
    photo floor(t) for the first half of its interval, then the fade)."""
    t = f / max(frames - 1, 1) * (photos - 1)
    i = min(int(t), photos - 2)
    return i, max(0.0, (t - i - 0.5) * 2.0)


def make_clip(photos: list[Path], path: Path, seconds: float, fps: int) -> tuple[int, int]:
    """The clip: frame f shows photo floor(t) for the first half of its interval and fades into
    the next over the second half (t = f / frames × (photos − 1))."""
    import imageio_ffmpeg
    from PIL import Image

    imgs = [np.asarray(Image.open(p).convert("RGB")) for p in photos]
    h, w = imgs[0].shape[:2]
    frames = int(round(seconds * fps))
    writer = imageio_ffmpeg.write_frames(str(path), (w, h), fps=fps, codec="libx264",
                                         quality=8, macro_block_size=8)
    writer.send(None)
    for f in range(frames):
        i, a = frame_mix(f, frames, len(imgs))
        frame = imgs[i] if a <= 0.0 else ((1 - a) * imgs[i] + a * imgs[i + 1]).astype(np.uint8)
        writer.send(np.ascontiguousarray(frame))
    writer.close()
    return frames, len(imgs)


def photo_of_frame(f: int, frames: int, photos: int) -> int | None:
    """The photo clip frame ``f`` shows unmixed (make_clip), None for a cross-fade."""
    i, a = frame_mix(f, frames, photos)
    return i if a <= 0.0 else (i + 1 if a >= 1.0 else None)


def accuracy(folder: Path, photos: list[Path], frames: int) -> dict:
    """The recovered frames' cameras against the published poses of the photos they show."""
    published = {c.name: c.world_to_camera for c in load_dataset(DATA / "fox").cameras}
    ours, truth = {}, {}
    for c in load_dataset(folder).cameras:
        i = photo_of_frame(int(c.name[6:11]), frames, len(photos))
        if i is not None and photos[i].name in published:
            ours[c.name], truth[c.name] = c.world_to_camera, published[photos[i].name]
    e = pose_errors(ours, truth)
    return {"compared": len(e["names"]), **error_summary(e)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--frames", type=int, default=SfmSettings().frames)
    ap.add_argument("--loop-every", type=int, default=SfmSettings().loop_every,
                    help="loop closure's keyframe spacing (0: off)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="sfm_video"))
    work.mkdir(parents=True, exist_ok=True)
    clip = work / f"fox_{args.seconds:g}s_{args.fps}fps.mp4"
    photos = sorted((DATA / "fox" / "images").glob("*.jpg"))
    t = time.perf_counter()
    if clip.exists():     # a second run (another --loop-every) on the same clip
        frames, n = int(round(args.seconds * args.fps)), len(photos)
    else:
        frames, n = make_clip(photos, clip, args.seconds, args.fps)
    made = time.perf_counter() - t
    print(f"clip: {frames} frames of {n} photos, {clip.stat().st_size / 2**20:.1f} MiB, "
          f"made in {made:.0f} s")
    load = os.getloadavg()[0]
    t = time.perf_counter()
    result = make_scene(clip, work / f"scene_loop{args.loop_every}",
                        SfmSettings(frames=args.frames, loop_every=args.loop_every), log=print)
    wall = time.perf_counter() - t
    s = result.record["summary"]
    row = {"clip_frames": frames, "photos": n, "kept": s["total"], "blurred": len(s["blurred"]),
           "registered": s["registered"], "points": s["points"],
           "reprojection_error_px": s["reprojection_error"], "first_octave": s.get("first_octave"),
           "seconds": s["seconds"], "cpu_seconds": s["cpu_seconds"], "wall_s": wall,
           "load_average": [load, os.getloadavg()[0]], "loop_every": args.loop_every,
           "against_published": accuracy(result.folder, photos, frames)}
    print(json.dumps(row, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
