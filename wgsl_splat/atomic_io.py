"""Atomic file output: every file the tool writes (PLY, checkpoints, PNGs, JSON) goes through here.

Data goes to a temp file in the target's directory (same filesystem, so ``os.replace`` is atomic),
is fsynced, then replaces the target: readers and a crash mid-write never see a half-written file,
and an existing file stays intact when writing fails.

A folder the tool owns for a while (a run's output folder, :mod:`wgsl_splat.app.run_dir`) keeps a
:class:`WriteRecord` of every file and folder written into it, each path appended *before* it is
created: the tool later removes only what the record names (``--overwrite``, a run that stopped
before its first checkpoint), never a user's file that happens to sit there under a name a run
also writes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import threading

import numpy as np

# ``.<target name>.<12 hex>.tmp``: what _open_temp creates; left behind only by a crash mid-write.
TEMP_FILE = re.compile(r"\.(.+)\.[0-9a-f]{12}\.tmp")
# The record of what the tool wrote into a folder (WriteRecord), one JSON string a line.
RECORD_FILE = ".wgsl_splat_written"


class WriteRecord:
    """The paths (relative, ``/``-separated) the tool wrote under ``folder``, kept in
    ``folder/RECORD_FILE``. :meth:`add` appends a path before the caller creates it, so a crash can
    leave a recorded path that does not exist, never an output that is not recorded."""

    def __init__(self, folder) -> None:
        self.folder = os.path.abspath(folder)
        self.path = os.path.join(self.folder, RECORD_FILE)
        self.exists = os.path.isfile(self.path)
        self.entries: set[str] = set()
        if self.exists:
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    with contextlib.suppress(ValueError):
                        entry = json.loads(line)
                        if isinstance(entry, str):
                            self.entries.add(entry)

    def relative(self, path) -> str | None:
        """``path`` relative to the folder, or None when it lies outside (or is the record)."""
        rel = os.path.relpath(os.path.abspath(path), self.folder)
        if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) \
                or os.path.isabs(rel):
            return None
        rel = rel.replace(os.sep, "/")
        return None if rel == RECORD_FILE else rel

    def add(self, path) -> None:
        rel = self.relative(path)
        if rel is None or rel in self.entries:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rel) + "\n")
        self.exists = True
        self.entries.add(rel)

    def owns(self, path) -> bool:
        return self.relative(path) in self.entries

    def rewrite(self) -> None:
        """Keep only the entries that still exist (after the tool removed some)."""
        self.entries = {e for e in self.entries if os.path.lexists(os.path.join(self.folder, e))}
        data = "".join(json.dumps(e) + "\n" for e in sorted(self.entries))
        write_bytes(self.path, data.encode("utf-8"))


_recording: list[WriteRecord] = []


def start_recording(record: WriteRecord) -> None:
    """From now on every write under ``record.folder`` is added to ``record`` (until
    :func:`stop_recording`)."""
    _recording.append(record)


def stop_recording(record: WriteRecord) -> None:
    if record in _recording:
        _recording.remove(record)


_recording_lock = threading.Lock()     # the evaluation writes its PNGs from worker threads


def note_written(path) -> None:
    """Record ``path`` in every active record whose folder holds it (call before creating it)."""
    with _recording_lock:
        for record in _recording:
            record.add(path)


def make_dirs(path) -> None:
    """``os.makedirs(path, exist_ok=True)``, recording each folder it creates."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        note_written(folder)
    if missing:
        os.makedirs(missing[0], exist_ok=True)


def _temp_path(path: str) -> str:
    """A fresh temp file name next to ``path`` (``TEMP_FILE``)."""
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")


def _open_temp(tmp: str):
    """Create ``tmp`` (it must not exist) for writing; a binary file object.

    ``os.open`` with mode 0o666 lets the umask decide the final permissions, as a plain ``open``
    would (``mkstemp`` would force 0o600).
    """
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    return os.fdopen(fd, "wb")


@contextlib.contextmanager
def atomic_open(path):
    """``with atomic_open(path) as f: f.write(...)`` — the file appears only if the block succeeds.
    Whatever ends the block (an error, SIGINT, SIGTERM as an exception: app/cli.py), the temp file
    goes, from the moment it may exist."""
    path = os.fspath(path)
    note_written(path)
    tmp, f = _temp_path(path), None
    try:
        f = _open_temp(tmp)
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # bytes on disk before the rename makes them visible
        os.replace(tmp, path)
    except BaseException as exc:
        if not (f is None and isinstance(exc, FileExistsError)):   # that name is not ours
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno is not None \
                and (f is None or exc.filename is None):
            exc.filename = path   # a failed write (a full disk) names the file, not its temp file
        raise


def safe_file_stem(name: str, fallback: str) -> str:
    """``name`` (a camera or image name, maybe with folders, maybe hostile) without its extension,
    as one file name inside the output folder: separators become ``_``, so ``../../x`` stays
    inside; ``fallback`` when nothing usable is left."""
    stem = re.sub(r"[\\/:]", "_", os.path.splitext(name)[0]).strip()
    return stem if stem.strip("._") else fallback


def remove_orphan_temps(record: WriteRecord) -> list[str]:
    """Delete the temp files that writes interrupted by a crash left under ``record.folder``
    (recursively), those of recorded targets only; returns their paths. Only safe while no other
    process writes there (the folder's lock)."""
    removed = []
    for dirpath, _dirnames, filenames in os.walk(record.folder):
        for name in filenames:
            temp = TEMP_FILE.fullmatch(name)
            if temp and record.owns(os.path.join(dirpath, temp.group(1))):
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
