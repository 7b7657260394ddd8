"""An SfM run from start to finish: the inputs checked, the images written, the poses computed,
the COLMAP folder (``images/``, ``sparse/0/``, ``sfm.json``) written into a temporary sibling and
renamed into place, so that a folder is either a whole result or absent. ``sfm.json`` records the
inputs' fingerprint and the settings (the key): a later run on the same inputs reuses the folder,
one on other inputs refuses it or (``replace_other``, a cache) recomputes it with one line."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ...atomic_io import write_json
from ..images import is_writable_dir, user_cache_root
from ..scene import listing
from .inputs import (
    SfmError,
    SfmSettings,
    cache_key,
    fingerprint,
    list_folder,
    require_pycolmap,
    sfm_input_kind,
)
from .photos import DEFAULT_FOCAL_FACTOR, Group, write_photos
from .reconstruct import check_registered, reconstruct

RECORD = "sfm.json"
MIN_IMAGES = 3
# A result that places fewer than this fraction of the images is refused: its scene would miss
# most of what was photographed, and the usual cause (too little overlap) is the user's to fix.
LEAST_REGISTERED = 0.5


@dataclass
class SfmResult:
    """A COLMAP folder made (or reused) from photos or a video, and its summary (sfm.json)."""

    folder: Path
    reused: bool
    record: dict

    def lines(self) -> list[str]:
        s = self.record["summary"]
        out = [f"SfM: {s['registered']} of {s['total']} images registered, {s['points']} points, "
               f"mean reprojection error {s['reprojection_error']:.2f} px, {s['cameras']} "
               f"camera{'s' if s['cameras'] != 1 else ''} ("
               + ", ".join(f"{k} {v:.0f} s" for k, v in s["seconds"].items()) + ")"]
        if s["unregistered"]:
            out.append(f"not registered (left out of training): {listing(s['unregistered'], 8)}")
        for what in ("skipped", "unreadable", "blurred"):
            if s.get(what):
                out.append(f"{what}: {listing(s[what], 8)}")
        return out


def cached_scene_dir(source) -> Path:
    """Where ``train`` keeps the SfM result of ``source``: beside it (``.wgsl_splat_cache/``,
    as the processed images are), else in the user's cache folder when that is read-only."""
    import hashlib

    source = Path(source).expanduser().resolve()
    base = source if source.is_dir() else source.parent
    name = "sfm" if source.is_dir() else f"sfm-{source.name}"
    digest = hashlib.sha1(str(source).encode()).hexdigest()[:10]
    for candidate in (base / ".wgsl_splat_cache" / name,
                      user_cache_root() / f"{source.name}-{digest}" / name):
        if is_writable_dir(candidate.parent):
            return candidate
    raise SfmError(f"no writable folder for the SfM result of {source}")


def read_record(folder: Path) -> dict | None:
    try:
        with open(folder / RECORD) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _difference(old: dict, new: dict) -> str:
    """What differs between two records' inputs and settings, briefly."""
    if old.get("kind") != new["kind"]:
        return f"a {old.get('kind')} result, not a {new['kind']} one"
    parts = []
    a = {f[0]: f for f in old.get("files", [])}
    b = {f[0]: f for f in new["files"]}
    for label, names in (("added", b.keys() - a.keys()), ("removed", a.keys() - b.keys()),
                         ("changed", {n for n in a.keys() & b.keys() if a[n] != b[n]})):
        if names:
            parts.append(f"{len(names)} {label}: {listing(sorted(names), 3)}")
    settings = [k for k in new["settings"] if old.get("settings", {}).get(k) != new["settings"][k]]
    if settings:
        parts.append("settings " + ", ".join(settings))
    return "; ".join(parts) or "another key"


def make_scene(source, out, settings: SfmSettings = SfmSettings(), log=print, progress=None,
               replace_other: bool = False) -> SfmResult:
    """The COLMAP folder ``out`` computed from ``source`` (a folder of photos or a video), or
    reused when it already holds the result of the same inputs and settings. ``log``: lines for
    the user; ``progress(stage, done, total)``. Raises :class:`SfmError` (one line) for anything
    unusable; nothing is left half-written."""
    source, out = Path(source).expanduser(), Path(out).expanduser()
    settings.check()
    if not source.exists():
        raise SfmError(f"{source} does not exist")
    kind = sfm_input_kind(source)
    if kind is None:
        raise SfmError(f"{source} is neither a folder of photos nor a video file")
    skipped = []
    if kind == "photos":
        files, skipped = list_folder(source)
        if len(files) < MIN_IMAGES:
            raise SfmError(f"{source} has {len(files)} photo{'s' if len(files) != 1 else ''}: "
                           f"SfM needs at least {MIN_IMAGES}, overlapping")
    else:
        files = [source]
    record = {"kind": kind, "files": fingerprint(files), "settings": settings.for_kind(kind)}
    record["key"] = cache_key(kind, record["files"], record["settings"])

    old = read_record(out) if out.is_dir() else None
    if old is not None and old.get("key") == record["key"] and (out / "sparse" / "0").is_dir():
        log(f"reusing the SfM result in {out} (same inputs and settings)")
        return SfmResult(out, True, old)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if old is None:
            raise SfmError(f"{out} exists and is not an SfM result: choose another --out")
        if not replace_other:
            raise SfmError(f"{out} holds the SfM result of other inputs "
                           f"({_difference(old, record)}): pass --overwrite to recompute it, or "
                           f"another --out")
        log(f"the SfM result in {out} is of other inputs ({_difference(old, record)}); "
            f"recomputing it")
    require_pycolmap()   # before anything is written
    if kind == "video":
        from .video import _ffmpeg
        _ffmpeg()
    if skipped:
        log(f"skipping {len(skipped)} file{'s' if len(skipped) != 1 else ''} that "
            f"{'are' if len(skipped) != 1 else 'is'} not images: {listing(skipped, 8)}")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{secrets.token_hex(6)}.tmp"
    try:
        record["summary"] = _compute(source, kind, files, tmp, settings, log, progress)
        record["summary"]["skipped"] = skipped
        write_json(tmp / RECORD, record)
        _swap_into_place(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return SfmResult(out, False, record)


def _compute(source, kind, files, tmp: Path, settings, log, progress) -> dict:
    images = tmp / "images"
    work = tmp / ".work"   # the database and the mapper's models: removed before the rename
    work.mkdir(parents=True)
    t, c = time.perf_counter(), time.process_time()
    summary = {"unreadable": [], "blurred": []}
    if kind == "photos":
        count = [0]

        def one(n):
            count[0] += n
            if progress:
                progress("images", count[0], len(files))

        groups, bad = write_photos(files, images, settings.max_side, one)
        summary["unreadable"] = bad
        if bad:
            log(f"cannot read {len(bad)} file{'s' if len(bad) != 1 else ''}, left out: "
                f"{listing(bad, 5)}")
        total = sum(len(g.names) for g in groups)
        if total < MIN_IMAGES:
            raise SfmError(f"{source} has {total} readable photos: SfM needs at least "
                           f"{MIN_IMAGES}, overlapping")
        sizes = ", ".join(f"{len(g.names)} × {g.width}x{g.height}"
                          + (" (EXIF focal length)" if g.prior else "") for g in groups)
        log(f"{total} photos, {len(groups)} camera{'s' if len(groups) != 1 else ''}: {sizes}")
    else:
        from .video import write_frames

        def frame(n, _count=[0]):
            _count[0] += n
            if progress:
                progress("frames", _count[0], settings.frames)

        names, blurred, seen, (w, h) = write_frames(source, images, settings.frames,
                                                    settings.max_side, frame)
        summary["blurred"] = blurred
        total = len(names)
        log(f"{total} frames of {seen} kept ({w}x{h})"
            + (f", {len(blurred)} dropped as blurred" if blurred else ""))
        groups = [Group(w, h, DEFAULT_FOCAL_FACTOR * max(w, h), False, tuple(names))]
        if total < MIN_IMAGES:
            raise SfmError(f"{source}: only {total} sharp frames: SfM needs at least "
                           f"{MIN_IMAGES}")
    prepare, prepare_cpu = time.perf_counter() - t, time.process_time() - c
    rec = reconstruct(images, work, groups, settings, kind, log, progress)
    check_registered(rec, total, LEAST_REGISTERED)
    sparse = tmp / "sparse" / "0"
    sparse.mkdir(parents=True)
    rec.model.write_binary(str(sparse))
    shutil.rmtree(work)
    return dict(summary, registered=len(rec.registered), total=total,
                unregistered=rec.unregistered, points=rec.points,
                reprojection_error=rec.reprojection_error, cameras=len(groups),
                models=rec.models, first_octave=rec.first_octave,
                seconds={"images": prepare, **rec.seconds},
                cpu_seconds={"images": prepare_cpu, **rec.cpu_seconds})


def _swap_into_place(tmp: Path, out: Path) -> None:
    """``tmp`` renamed to ``out``; an ``out`` already there (a result of other inputs) is moved
    aside first and removed after."""
    aside = None
    if out.exists():
        aside = out.parent / f".{out.name}.{secrets.token_hex(6)}.old"
        os.replace(out, aside)
    try:
        os.replace(tmp, out)
    except OSError:
        if aside is not None:
            os.replace(aside, out)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
