"""What an SfM input is (a folder of photos, a video file), the settings a result depends on, and
the fingerprint of the inputs a cached result is keyed on."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..images import IMAGE_EXTENSIONS

VIDEO_EXTENSIONS = (".mp4", ".mov", ".m4v", ".avi", ".mkv", ".webm")
INSTALL_HINT = "pip install 'wgsl_splat[sfm]'"
MATCHERS = ("auto", "exhaustive", "sequential")
MAPPERS = ("incremental", "global")


class SfmError(ValueError):
    """SfM cannot run or failed; the message is one readable line, meant for the user."""


@dataclass(frozen=True)
class SfmSettings:
    """What a result depends on besides its inputs (part of the cache key).

    ``max_side``: the longest side of the images written into ``images/`` (what the trainer
    reads; larger photos are downscaled once). ``sfm_side``: the longest side features are
    extracted at (COLMAP rescales the keypoints to ``images/``' size); ``max_features``: SIFT
    features kept per image (exhaustive matching's cost grows with their square: 2 048 instead
    of COLMAP's 8 192 halves fox's matching time at the same accuracy, docs/sfm.md; mouse's photos
    average ~960). ``frames``: how many video
    frames to keep. ``matcher``: ``auto`` is exhaustive for photos, sequential for video frames.
    ``loop_every``: sequential matching also matches every ``loop_every``-th frame with the
    others (loop closure: a capture that comes back to where it was ties up; 0: off).
    """

    max_side: int = 1600
    sfm_side: int = 1024
    max_features: int = 2048
    frames: int = 120
    matcher: str = "auto"
    mapper: str = "incremental"
    loop_every: int = 10
    seed: int = 0

    def check(self) -> None:
        if self.max_side < 64 or self.sfm_side < 64:
            raise SfmError("image sizes for SfM must be at least 64 px")
        if self.loop_every < 0:
            raise SfmError(f"loop_every {self.loop_every}: 0 (off) or a frame count")
        if self.frames < 3:
            raise SfmError(f"--frames {self.frames}: SfM needs at least 3 frames")
        if self.matcher not in MATCHERS or self.mapper not in MAPPERS:
            raise SfmError(f"unknown matcher or mapper: {self.matcher}, {self.mapper}")

    def matcher_for(self, kind: str) -> str:
        if self.matcher != "auto":
            return self.matcher
        return "sequential" if kind == "video" else "exhaustive"

    def for_kind(self, kind: str) -> dict:
        """The settings that matter for this kind of input (``frames`` only for a video)."""
        d = asdict(self)
        d["matcher"] = self.matcher_for(kind)
        if kind != "video":
            d.pop("frames")
        if d["matcher"] != "sequential":
            d.pop("loop_every")
        return d


def is_image_file(p: Path) -> bool:
    return p.suffix.lower() in IMAGE_EXTENSIONS


def sfm_input_kind(p: Path) -> str | None:
    """``"video"`` for a video file, ``"photos"`` for a folder with image files in it (and no
    scene of a known format: callers ask the scene formats first), else None."""
    p = Path(p)
    if p.is_file():
        return "video" if p.suffix.lower() in VIDEO_EXTENSIONS else None
    if p.is_dir():
        try:
            return "photos" if any(is_image_file(f) and f.is_file() for f in p.iterdir()) else None
        except OSError:
            return None
    return None


def list_folder(folder: Path) -> tuple[list[Path], list[str]]:
    """The image files of ``folder`` (sorted by name) and the names of the other files, which
    are skipped (hidden files and subfolders are left alone)."""
    images, other = [], []
    for f in sorted(folder.iterdir(), key=lambda f: f.name):
        if f.name.startswith(".") or not f.is_file():
            continue
        (images if is_image_file(f) else other).append(f if is_image_file(f) else f.name)
    return images, other


def fingerprint(files: list[Path]) -> list:
    """Name, size and modification time of each input file: what changes when a photo is added,
    removed, replaced or edited (without hashing gigabytes of video)."""
    out = []
    for f in files:
        st = f.stat()
        out.append([f.name, st.st_size, st.st_mtime_ns])
    return out


def cache_key(kind: str, files: list, settings: dict) -> str:
    text = json.dumps({"kind": kind, "files": files, "settings": settings}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def require_pycolmap():
    """pycolmap, or the one line that says how to install it."""
    try:
        import pycolmap
    except ImportError:
        raise SfmError(f"computing camera poses needs pycolmap: {INSTALL_HINT}") from None
    return pycolmap
