"""Checkpoints: the file format, finding the one ``--resume`` names, reading and writing them.

A checkpoint ``checkpoints/ckpt_K.npz`` holds the parameters (``model.*``), the Adam state
(``adam.*``), the strategy's statistics by name (``stats.*``), the per-view parameters of
``--appearance`` and ``--pose-opt`` (``appearance.*``, ``pose.*``) and ``meta``: the run's step,
RNG state, view order, configuration, scene extent, the dataset's shape and the strategy's state
as JSON. They are written atomically and the last :data:`CHECKPOINTS_KEPT` kept; one folder holds
one run, so its checkpoints form one history.
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from ..atomic_io import make_dirs, save_npz
from ..contract.optim import AdamState
from ..contract.per_view import PerViewState
from ..contract.state import HostArrays
from ..model import PARAM_GROUPS, GaussianModel
from .errors import TrainingError

CHECKPOINTS_KEPT = 2
# 2: meta carries the run's data/resolution and the dataset's shape; 3: the strategy's name and
# state, statistics stored by name (format 2 is ADC's three)
CHECKPOINT_FORMAT = 3


def checkpoint_files(checkpoint_dir: str) -> list[str]:
    """The run's checkpoints, oldest first (their names sort by step)."""
    if not os.path.isdir(checkpoint_dir):
        return []
    return [os.path.join(checkpoint_dir, f) for f in sorted(os.listdir(checkpoint_dir))
            if f.startswith("ckpt_") and f.endswith(".npz")]


def read_checkpoint_meta(path: str) -> dict:
    """The metadata of a checkpoint written by :meth:`Trainer.save_checkpoint`, or a
    :class:`TrainingError` saying why ``path`` is not one (missing, a PLY, empty, truncated)."""
    hint = "--resume takes 'latest' or a checkpoints/ckpt_*.npz file written by train"
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise TrainingError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    if magic.startswith(b"ply"):
        raise TrainingError(f"{path} is a PLY model, not a checkpoint (it holds no optimiser "
                            f"state to continue from); {hint}")
    if magic != b"PK\x03\x04":
        what = "empty" if not magic else "not a checkpoint"
        raise TrainingError(f"{path} is {what}; {hint}")
    try:
        with np.load(path) as z:
            if "meta" not in z.files:
                raise TrainingError(f"{path} is not a wgsl_splat checkpoint (no meta); {hint}")
            return json.loads(bytes(z["meta"]).decode())
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise TrainingError(f"checkpoint {path} is damaged ({exc})") from None


def find_checkpoint(checkpoint_dir: str, resume: str, log) -> tuple[str, dict]:
    """``(path, meta)`` of the checkpoint ``--resume`` names.

    ``latest``: the newest intact checkpoint of ``checkpoint_dir``; a damaged newer one (truncated
    or empty, e.g. a disk that filled up, a copy cut short) is renamed ``*.damaged`` with a log line,
    so that it is neither picked again nor counted when old checkpoints are pruned. A path inside
    ``checkpoint_dir`` must be its newest checkpoint: continuing from an older one would mix two
    histories in one folder (resume it into a new folder instead).
    """
    if resume != "latest":
        meta = read_checkpoint_meta(resume)
        here = checkpoint_files(checkpoint_dir)
        if here and os.path.samefile(os.path.dirname(os.path.abspath(resume)), checkpoint_dir) \
                and not os.path.samefile(resume, here[-1]):
            raise TrainingError(f"{resume} is not the newest checkpoint of this run "
                                f"({os.path.basename(here[-1])} is): continue from it into a new "
                                f"--out, or use --resume latest")
        return resume, meta
    candidates = checkpoint_files(checkpoint_dir)
    if not candidates:
        raise TrainingError(f"--resume: no checkpoint in {checkpoint_dir}: the run stopped before "
                            f"writing one; start it again without --resume")
    for path in reversed(candidates):
        try:
            return path, read_checkpoint_meta(path)
        except TrainingError as exc:
            os.replace(path, path + ".damaged")
            log(f"{exc}; renamed it to {os.path.basename(path)}.damaged and trying the one before")
    raise TrainingError(f"--resume latest: every checkpoint in {checkpoint_dir} is damaged")


def dataset_shape(dataset) -> dict:
    """What a checkpoint must agree with to continue on ``dataset``: its views and image sizes."""
    return dict(views=len(dataset.cameras), train=len(dataset.train_indices),
                test=len(dataset.test_indices),
                sizes=sorted({f"{c.width}x{c.height}" for c in dataset.cameras}))


def check_resumable(meta: dict, path: str, dataset, strategy: str) -> None:
    """The checkpoint at ``path`` (its ``meta``) must come from a run on this dataset at this
    resolution, with this ``strategy``."""
    theirs, ours = meta.get("dataset"), dataset_shape(dataset)
    if theirs is not None and theirs != ours:
        def show(d):
            return (f"{d['train']} training + {d['test']} test views of "
                    f"{', '.join(d['sizes'][:3])} px")
        raise TrainingError(f"{path} was trained on {show(theirs)}, this dataset has "
                            f"{show(ours)}: a different scene, -r or --eval split")
    theirs = meta.get("strategy", {}).get("name", "adc")
    if theirs != strategy:
        raise TrainingError(f"{path} was trained with --strategy {theirs}, not "
                            f"{strategy}: continue it with its own strategy, or train "
                            f"into a new --out")
    stack = meta.get("view_stack", [])
    if any(not 0 <= int(v) < len(dataset.cameras) for v in stack):
        raise TrainingError(f"{path} refers to views this dataset does not have")


def load_checkpoint(path: str) -> tuple[dict, HostArrays]:
    """``(meta, arrays)`` of the checkpoint at ``path``; a :class:`TrainingError` says why it
    cannot be read."""
    read_checkpoint_meta(path)   # a clear message for what is not a checkpoint at all
    try:
        with np.load(path) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            model = GaussianModel(**{k: z[f"model.{k}"] for k in PARAM_GROUPS})
            adam = AdamState.from_arrays({k[5:]: z[k] for k in z.files if k.startswith("adam.")})
            stats = {k[6:]: z[k] for k in z.files if k.startswith("stats.")}
            arrays = HostArrays(model, adam, stats)
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TrainingError(f"cannot read checkpoint {path}: {exc}") from None
    meta.setdefault("strategy", dict(name="adc", state={}))   # format 2: ADC
    return meta, arrays


def load_per_view(path: str, state: type[PerViewState], prefix: str, what: str):
    """The per-view parameters (``state``'s kind, saved as ``prefix.*``) a checkpoint holds."""
    try:
        with np.load(path) as z:
            return state.from_arrays(
                {k[len(prefix) + 1:]: z[k] for k in z.files if k.startswith(prefix + ".")})
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TrainingError(f"cannot read the {what} of checkpoint {path}: {exc}") from None


def write_checkpoint(checkpoint_dir: str, iteration: int, state, appearance, poses,
                     meta: dict) -> str:
    """Write the checkpoint of ``iteration`` (the training ``state``, the per-view states or None,
    the run's ``meta``) into ``checkpoint_dir`` atomically and prune the old ones; its path."""
    arrays = {f"model.{k}": v for k, v in state.model.arrays().items()}
    arrays.update({f"adam.{k}": v for k, v in state.adam.to_arrays().items()})
    arrays.update({f"stats.{k}": v for k, v in state.stats.items()})
    if appearance is not None:   # --appearance: training-only, in the checkpoint, never the PLY
        arrays.update({f"appearance.{k}": v for k, v in appearance.to_arrays().items()})
    if poses is not None:   # --pose-opt: training-only, in the checkpoint, never the PLY
        arrays.update({f"pose.{k}": v for k, v in poses.to_arrays().items()})
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    make_dirs(checkpoint_dir)
    path = os.path.join(checkpoint_dir, f"ckpt_{iteration:06d}.npz")
    save_npz(path, **arrays)
    for old in checkpoint_files(checkpoint_dir)[:-CHECKPOINTS_KEPT]:
        os.remove(old)
    return path
