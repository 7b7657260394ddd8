"""The output folder of a training run: one run per folder, one process per folder at a time.

- :class:`RunLock` holds an exclusive lock on ``OUT/.lock`` for as long as a process works in the
  folder (``train`` for the whole run, ``eval`` while it writes). The operating system releases
  it when the process ends, however it ends, so a crash never leaves a stale lock behind; the
  file only records the holder's pid for the message a second process gets.
- :func:`open_run_dir` refuses a folder that already holds files unless the run continues the run
  stored there (``--resume``) or replaces it (``--overwrite``, which deletes only what a run
  writes, :data:`RUN_OUTPUTS`), so checkpoints, PLYs and metrics of two runs never mix.
- Once the lock is held, temp files left by writes that a crash interrupted are removed.
"""

from __future__ import annotations

import os
import shutil

from ..atomic_io import remove_orphan_temps

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
        return self

    def release(self) -> None:
        if self._file is not None:
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


def lock_folder(folder: str) -> RunLock:
    """Create ``folder`` if needed and lock it (``eval`` locks the run it writes metrics into)."""
    try:
        os.makedirs(folder, exist_ok=True)
        return RunLock(folder).acquire()
    except OSError as exc:
        raise RunDirError(f"cannot use {folder} as the output folder: "
                          f"{exc.strerror or exc}") from None


def wrote_no_results(folder: str, present: list[str]) -> bool:
    """``present`` (the folder's entries) are only what a run writes, without any checkpoint or
    PLY among them."""
    if not set(present) <= set(RUN_OUTPUTS):
        return False
    for sub in ("checkpoints", "point_cloud"):
        for _dirpath, _dirnames, filenames in os.walk(os.path.join(folder, sub)):
            if filenames:
                return False
    return True


def _remove(folder: str, names: list[str]) -> None:
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def open_run_dir(folder: str, *, continues_run: bool, overwrite: bool, log=print) -> RunLock:
    """Create and lock ``folder`` for a training run; returns the held lock.

    ``continues_run``: the run resumes the run stored in ``folder`` (``--resume latest`` or one of
    its checkpoints), so its files are expected. Otherwise the folder must be empty, hold only a run
    that stopped before its first checkpoint (:func:`wrote_no_results`: trained there anew), or
    ``overwrite`` removes the previous run's outputs (and nothing else) first.
    """
    lock = lock_folder(folder)
    try:
        for path in remove_orphan_temps(folder):
            log(f"removed {os.path.relpath(path, folder)}, left by an interrupted write")
        present = sorted(e for e in os.listdir(folder) if e != LOCK_FILE)
        if present and not continues_run and not overwrite and wrote_no_results(folder, present):
            # A run that stopped before its first checkpoint (a refused flag, a crash): nothing
            # there can be resumed or would be lost, so it must not block its own --out. Its log
            # stays and goes on; the rest described a model that was never saved.
            log(f"note: {folder} holds a run that stopped before its first checkpoint; "
                f"training there anew (its train.log continues)")
            _remove(folder, [e for e in present if e != "train.log"])
        elif present and not continues_run:
            if not overwrite:
                shown = ", ".join(present[:4]) + (", …" if len(present) > 4 else "")
                raise RunDirError(f"--out {folder} is not empty ({shown}): pass --resume latest to "
                                  f"continue the run stored there, --overwrite to replace it, or "
                                  f"choose another --out")
            _remove(folder, [e for e in present if e in RUN_OUTPUTS])
    except OSError as exc:
        lock.release()
        raise RunDirError(f"cannot prepare {folder}: {exc.strerror or exc}") from None
    except RunDirError:
        lock.release()
        raise
    return lock
