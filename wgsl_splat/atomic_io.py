"""Atomic file output: every file the tool writes (PLY, checkpoints, PNGs, JSON) goes through here.

Data goes to a temp file in the target's directory (same filesystem, so ``os.replace`` is atomic),
is fsynced, then replaces the target: readers and a crash mid-write never see a half-written file,
and an existing file stays intact when writing fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets

import numpy as np

# ``.<target name>.<12 hex>.tmp``: what _open_temp creates; left behind only by a crash mid-write.
TEMP_FILE = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")


def _open_temp(path: str):
    """Create a fresh temp file next to ``path``; returns ``(temp_path, binary file object)``.

    ``os.open`` with mode 0o666 lets the umask decide the final permissions, as a plain ``open``
    would (``mkstemp`` would force 0o600).
    """
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    return tmp, os.fdopen(fd, "wb")


@contextlib.contextmanager
def atomic_open(path):
    """``with atomic_open(path) as f: f.write(...)`` — the file appears only if the block succeeds."""
    path = os.fspath(path)
    try:
        tmp, f = _open_temp(path)
    except OSError as exc:   # name the file being written, not its temp file
        exc.filename = path
        raise
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # bytes on disk before the rename makes them visible
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno is not None and exc.filename is None:
            exc.filename = path   # a failed write (a full disk) says which file it was writing
        raise


def safe_file_stem(name: str, fallback: str) -> str:
    """``name`` (a camera or image name, maybe with folders, maybe hostile) without its extension,
    as one file name inside the output folder: separators become ``_``, so ``../../x`` stays
    inside; ``fallback`` when nothing usable is left."""
    stem = re.sub(r"[\\/:]", "_", os.path.splitext(name)[0]).strip()
    return stem if stem.strip("._") else fallback


def remove_orphan_temps(folder) -> list[str]:
    """Delete the temp files that writes interrupted by a crash left under ``folder`` (recursively);
    returns their paths. Only safe while no other process writes there (the run's lock)."""
    removed = []
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            if TEMP_FILE.fullmatch(name):
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    removed.append(path)
    return removed


def write_bytes(path, data: bytes) -> None:
    with atomic_open(path) as f:
        f.write(data)


def write_json(path, obj) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def save_png(path, image: np.ndarray) -> None:
    """Save an (H,W,3) float image in [0,1] (clipped) as an 8-bit PNG."""
    import imageio.v3 as iio

    img = np.asarray(image)
    if img.dtype != np.uint8:
        img = (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    buf = io.BytesIO()
    iio.imwrite(buf, img, extension=".png")
    write_bytes(path, buf.getvalue())


def save_npz(path, **arrays) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes(path, buf.getvalue())
