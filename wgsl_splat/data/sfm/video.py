"""Frames of a video for SfM: the video cut into ``count`` equal windows, the sharpest frame of
each kept (sharpness: the variance of the Laplacian of the grey image), frames still far blurrier
than the others dropped, each frame written once. ffmpeg (imageio-ffmpeg's binary) decodes and
downscales, and applies the video's rotation, so the frames are upright."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .inputs import INSTALL_HINT, SfmError

# A kept frame whose sharpness is below this fraction of the median of the kept ones is dropped:
# every frame of its window was blurred (a fast pan); a third is where motion blur shows at a
# glance in the tests' clips and phone videos alike.
BLUR_FRACTION = 0.3


def sharpness(rgb: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of the grey image at half resolution (blur lowers
    it; half resolution keeps it cheap and less sensitive to sensor noise)."""
    g = rgb[::2, ::2].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4 * g[1:-1, 1:-1]
    return float(lap.var())


def _ffmpeg():
    try:
        import imageio_ffmpeg
    except ImportError:
        raise SfmError(f"reading a video needs imageio-ffmpeg: {INSTALL_HINT}") from None
    return imageio_ffmpeg


def _open(video: Path, max_side: int):
    """The frame generator and its metadata (one line for an unreadable video)."""
    ffmpeg = _ffmpeg()
    # the longest side at most max_side, the other even (codecs' need), upright (autorotate)
    scale = (f"scale='if(gt(iw,ih),min({max_side},iw),-2)':'if(gt(iw,ih),-2,min({max_side},ih))'")
    # imageio-ffmpeg warns that the frames differ from the source's size: that is the downscale
    quiet = logging.getLogger("imageio_ffmpeg")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        reader = ffmpeg.read_frames(str(video), output_params=["-vf", scale])
        meta = next(reader)
    except (OSError, RuntimeError, StopIteration, ValueError, IndexError) as exc:
        raise SfmError(f"cannot read the video {video}: {_first_line(exc)}") from None
    finally:
        quiet.setLevel(level)
    return reader, meta


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def frame_count(video: Path, meta) -> int:
    """The video's number of frames: from its duration and rate, else by decoding it."""
    n = int(round(meta.get("fps", 0) * meta.get("duration", 0)))
    if n > 0:
        return n
    try:
        return int(_ffmpeg().count_frames_and_secs(str(video))[0])
    except (OSError, RuntimeError, ValueError) as exc:
        raise SfmError(f"cannot read the video {video}: {_first_line(exc)}") from None


def write_frames(video: Path, images: Path, count: int, max_side: int, progress=None):
    """The sharpest frame of each of ``count`` equal windows of ``video`` as
    ``images/frame_NNNNN.jpg``: ``(names kept, names dropped as blurred, frames in the video,
    (width, height))``."""
    from PIL import Image

    reader, meta = _open(video, max_side)
    total = frame_count(video, meta)
    if total < count:
        reader.close()
        raise SfmError(f"{video.name} has {total} frames, fewer than --frames {count}: pass "
                       f"--frames {total} or fewer")
    w, h = meta["size"]
    edges = np.linspace(0, total, count + 1)
    images.mkdir(parents=True, exist_ok=True)
    kept, best, window = {}, None, 0

    def flush():
        if best is not None:
            name = f"frame_{best[1]:05d}.jpg"
            Image.fromarray(best[2]).save(images / name, quality=95)
            kept[name] = best[0]
            if progress:
                progress(1)

    seen = 0
    try:
        for i, raw in enumerate(reader):
            seen = i + 1
            k = min(int(np.searchsorted(edges, i, side="right")) - 1, count - 1)
            if k != window:
                flush()
                best, window = None, k
            rgb = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
            s = sharpness(rgb)
            if best is None or s > best[0]:
                best = (s, i, rgb.copy())
        flush()
    except (OSError, RuntimeError, ValueError) as exc:
        raise SfmError(f"cannot read the video {video}: {_first_line(exc)}") from None
    finally:
        reader.close()
    if seen == 0:
        raise SfmError(f"cannot read the video {video}: no frame could be decoded")
    med = float(np.median(list(kept.values())))
    blurred = sorted(n for n, s in kept.items() if s < BLUR_FRACTION * med)
    for n in blurred:
        (images / n).unlink()
    names = sorted(n for n in kept if n not in blurred)
    return names, blurred, seen, (w, h)
