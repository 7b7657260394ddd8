"""The output folder of a training run: one run per folder, one process per folder at a time.

- :class:`RunLock` holds an exclusive lock on ``OUT/.lock`` for as long as a process works in the
  folder (``train`` for the whole run, ``eval`` while it writes). The operating system releases
  it when the process ends, however it ends, so a crash never leaves a stale lock behind; the
  file only records the holder's pid for the message a second process gets.
- While the lock is held every file and folder written into the folder is first recorded in
  ``OUT/.wgsl_splat_written`` (:class:`~wgsl_splat.atomic_io.WriteRecord`): the tool removes only
  what that record names, never a user's file, whatever its name.
- :func:`open_run_dir` refuses a folder that already holds files unless the run continues the run
  stored there (``--resume``) or replaces it (``--overwrite``, which deletes only the recorded
  outputs, and refuses when a name a run writes, :data:`RUN_OUTPUTS`, holds a file it did not
  write), so checkpoints, PLYs and metrics of two runs never mix.
- Once the lock is held, temp files left by recorded writes that a crash interrupted are removed.
- :func:`check_apart_from_data`: an output folder that is, holds or lies inside the training data
  is refused before anything is touched.
"""

from __future__ import annotations

import os

from ..atomic_io import (
    RECORD_FILE,
    WriteRecord,
    remove_orphan_temps,
    start_recording,
    stop_recording,
)

LOCK_FILE = ".lock"
# Everything a training run writes into its folder (the test/train folders hold evaluation renders).
RUN_OUTPUTS = ("cfg.json", "train.log", "metrics.json", "point_cloud", "checkpoints", "test",
               "train")


class RunDirError(RuntimeError):
    """The output folder cannot be used; the message is one line meant for the user."""


class RunLock:
    """An exclusive, non-blocking lock on ``folder/.lock`` (see the module docstring)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.path = os.path.join(folder, LOCK_FILE)
        self._file = None

    def acquire(self) -> "RunLock":
        f = open(self.path, "a+")
        f.seek(0)   # msvcrt locks from the current position: every process locks byte 0
        try:
            _lock(f)
        except OSError:
            try:
                holder = f.read().strip() or "unknown"
            except OSError:   # Windows: the locked byte cannot be read either
                holder = "unknown"
            f.close()
            raise RunDirError(f"{self.folder} is in use by another wgsl_splat process (pid "
                              f"{holder}); wait for it to finish or choose another --out") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f
        self.record = WriteRecord(self.folder)
        start_recording(self.record)
        return self

    def release(self) -> None:
        if self._file is not None:
            stop_recording(self.record)
            self._file.close()   # closing the descriptor releases the lock
            self._file = None

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _lock(f) -> None:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def lock_folder(folder: str, log=print) -> RunLock:
    """Create ``folder`` if needed and lock it (``eval`` locks the run it writes metrics into):
    from then until the lock's release every write into it is recorded, and the temp files of
    recorded outputs that an interrupted write left there are removed."""
    try:
        os.makedirs(folder, exist_ok=True)
        lock = RunLock(folder).acquire()
    except OSError as exc:
        raise RunDirError(f"cannot use {folder} as the output folder: "
                          f"{exc.strerror or exc}") from None
    try:
        for path in remove_orphan_temps(lock.record):
            log(f"removed {os.path.relpath(path, folder)}, left by an interrupted write")
    except OSError as exc:
        lock.release()
        raise RunDirError(f"cannot prepare {folder}: {exc.strerror or exc}") from None
    return lock


def _unowned(record: WriteRecord, path: str) -> str | None:
    """The first file or folder at or under ``path`` that ``record`` does not name (None: the tool
    wrote all of it)."""
    if not record.owns(path):
        return path
    if os.path.isdir(path) and not os.path.islink(path):
        for dirpath, dirnames, filenames in os.walk(path):
            for name in sorted(dirnames) + sorted(filenames):
                if not record.owns(os.path.join(dirpath, name)):
                    return os.path.join(dirpath, name)
    return None


def _has_results(folder: str) -> bool:
    """A checkpoint or a PLY lies in the folder: what a stopped run leaves to resume or to keep."""
    for sub in ("checkpoints", "point_cloud"):
        for _dirpath, _dirnames, filenames in os.walk(os.path.join(folder, sub)):
            if filenames:
                return True
    return False


def _remove_recorded(record: WriteRecord, names: list[str]) -> None:
    """Remove what ``record`` names under the top-level entries ``names``: its files, then its
    folders once empty (a folder that still holds a user's file stays, with that file)."""
    folders = []
    for name in names:
        top = os.path.join(record.folder, name)
        if not os.path.isdir(top) or os.path.islink(top):
            if record.owns(top):
                os.remove(top)
            continue
        folders.append(top)
        for dirpath, dirnames, filenames in os.walk(top):
            folders += [os.path.join(dirpath, d) for d in dirnames]
            for f in filenames:
                if record.owns(os.path.join(dirpath, f)):
                    os.remove(os.path.join(dirpath, f))
    for path in sorted(folders, key=len, reverse=True):   # the deepest first
        if record.owns(path) and not os.listdir(path):
            os.rmdir(path)
    record.rewrite()


def check_apart_from_data(folder: str, data: str) -> None:
    """Refuse an output folder that is, holds or lies inside the training data ``data`` (a folder
    or a file): a run there would write among the user's images, and replacing it could remove
    them. Symbolic links are followed on both sides."""
    out, src = os.path.realpath(folder), os.path.realpath(data)
    try:
        common = os.path.commonpath([out, src])
    except ValueError:   # Windows: on different drives
        return
    if common == src or common == out:
        where = ("is" if out == src else "lies inside" if common == src else "holds")
        raise RunDirError(f"--out {folder} {where} the training data {data}: choose an output "
                          f"folder apart from the data")


def open_run_dir(folder: str, *, continues_run: bool, overwrite: bool, log=print) -> RunLock:
    """Create and lock ``folder`` for a training run; returns the held lock.

    ``continues_run``: the run resumes the run stored in ``folder`` (``--resume latest`` or one of
    its checkpoints), so its files are expected. Otherwise the folder must be empty, hold only a run
    that stopped before its first checkpoint (:func:`wrote_no_results`: trained there anew), or
    ``overwrite`` removes the previous run's outputs (and nothing else) first.
    """
    lock = lock_folder(folder, log)
    try:
        record = lock.record
        present = sorted(e for e in os.listdir(folder) if e not in (LOCK_FILE, RECORD_FILE))
        foreign = {e: _unowned(record, os.path.join(folder, e)) for e in present}
        if present and not continues_run and not overwrite and not any(foreign.values()) \
                and not _has_results(folder):
            # A run that stopped before its first checkpoint (a refused flag, a crash) wrote all
            # of this: nothing can be resumed or would be lost, so it must not block its own
            # --out. Its log stays and goes on; the rest described a model that was never saved.
            log(f"note: {folder} holds a run that stopped before its first checkpoint; "
                f"training there anew (its train.log continues)")
            _remove_recorded(record, [e for e in present if e != "train.log"])
        elif present and not continues_run:
            if not overwrite:
                shown = ", ".join(present[:4]) + (", …" if len(present) > 4 else "")
                raise RunDirError(f"--out {folder} is not empty ({shown}): pass --resume latest to "
                                  f"continue the run stored there, --overwrite to replace it, or "
                                  f"choose another --out")
            # Checked before anything is removed: a run's own name holding a file no run wrote
            # would mix the user's files with the new run's (or, before this record existed,
            # be deleted with them).
            blocking = [foreign[e] for e in present if e in RUN_OUTPUTS and foreign[e]]
            if blocking:
                why = ("" if record.exists else
                       f" (the folder has no {RECORD_FILE}: no run of this version wrote there)")
                raise RunDirError(f"--overwrite removes only what wgsl_splat wrote into {folder}, "
                                  f"and {os.path.relpath(blocking[0], folder)} was not written by "
                                  f"it{why}: move it away or choose another --out")
            _remove_recorded(record, present)
    except OSError as exc:
        lock.release()
        raise RunDirError(f"cannot prepare {folder}: {exc.strerror or exc}") from None
    except RunDirError:
        lock.release()
        raise
    return lock
