"""The training loop shared by both paths: schedules, SH growth, densification, evaluation,
outputs, checkpoints and resume.

The loop talks to a :class:`~wgsl_splat.step.TrainStep` (NumPy or GPU) and to a dataset object with
``cameras``, ``train_indices``, ``test_indices``, ``load_image(i)``, ``points``, ``point_colors``,
``scene_extent()``, ``bounds()``, ``background`` and ``notes``.

Outputs in ``out_dir``: ``cfg.json``, ``train.log``, ``metrics.json``,
``point_cloud/iteration_K/point_cloud.ply`` (3DGS layout), ``checkpoints/ckpt_K.npz`` (parameters,
Adam state, densification statistics, RNG state, camera order — written atomically, the last two
kept), and ``test/iteration_K/*.png`` renders of the evaluated views.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from dataclasses import dataclass, field

import numpy as np

from .atomic_io import save_npz, save_png, write_json
from .config import TrainConfig
from .densify import densify_and_prune, reset_opacity
from .evaluation import Lpips, evaluate_views
from .model import PARAM_GROUPS, SH_C0, GaussianModel
from .optim import AdamState
from .step import DensifyStats, TrainStep

CHECKPOINTS_KEPT = 2


class TrainingError(RuntimeError):
    """Training cannot go on (diverged, bad data); the message says what to do."""


@dataclass
class Timing:
    """Wall time per phase, for the Amdahl view in the log: ``step (host)`` is computing the step on
    the NumPy path but only encoding and submitting it on the GPU path, whose device work shows up
    as ``device wait`` (the host blocked on the loss read-back); the rest is host bookkeeping."""

    totals: dict = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def split_step(self, blocked: float) -> None:
        """Split the ``step`` total into host work and the part spent blocked on the device."""
        step = self.totals.pop("step", 0.0)
        blocked = min(max(blocked, 0.0), step)
        self.totals["step (host)"] = step - blocked
        if blocked:
            self.totals["device wait"] = blocked

    def summary(self) -> str:
        total = sum(self.totals.values()) or 1.0
        return ", ".join(f"{k} {v:.1f}s ({100 * v / total:.0f}%)" for k, v in
                         sorted(self.totals.items(), key=lambda kv: -kv[1]))


def initial_model(dataset, cfg: TrainConfig, rng: np.random.Generator, log) -> GaussianModel:
    """SfM points when the scene has them, otherwise random points inside the scene bounds.

    Random points get 3DGS's "random colours" (``readNerfSyntheticInfo``): SH DC coefficients drawn
    from [0, 1/255), i.e. a faint grey of 0.5 — a neutral fog that the first steps carve away,
    rather than saturated colours that must first be unlearned.
    """
    if dataset.points is not None and len(dataset.points) > 0:
        log(f"init: {len(dataset.points)} points from the scene's point cloud")
        return GaussianModel.from_points(dataset.points, dataset.point_colors, sh_degree=cfg.sh_degree)
    lo, hi = (np.asarray(b, dtype=np.float64) for b in dataset.bounds())
    n = cfg.random_init_points
    log(f"init: no point cloud, {n} random points in the scene bounds {np.round(lo, 3)}..{np.round(hi, 3)}")
    points = rng.uniform(lo, hi, size=(n, 3))
    colors = 0.5 + SH_C0 * rng.uniform(0.0, 1.0 / 255.0, size=(n, 3))
    return GaussianModel.from_points(points, colors, sh_degree=cfg.sh_degree)


def scene_extent(dataset) -> float:
    extent = float(dataset.scene_extent())
    if not math.isfinite(extent) or extent <= 1e-6:  # a single view: use the bounds instead
        lo, hi = (np.asarray(b, dtype=np.float64) for b in dataset.bounds())
        extent = max(float(np.linalg.norm(hi - lo)) / 2, 1e-3)
    return extent


def filter_3d_refresh_due(it: int, cfg: TrainConfig) -> bool:
    """Antialiased mode: besides after every densification round, Mip-Splatting recomputes the 3D
    filter every 100 steps once densification has stopped, except in the last 100 steps."""
    return it % 100 == 0 and cfg.densify.stop < it < cfg.iters - 100


class Trainer:
    def __init__(self, dataset, cfg: TrainConfig, out_dir: str, step_factory, log=print,
                 run_info: dict | None = None):
        """``step_factory(model, optim_config, background, lambda_dssim, adam) -> TrainStep``;
        ``run_info`` (data path, resolution, split, device) is recorded in cfg.json for ``eval``."""
        self.run_info = dict(run_info or {})
        self.dataset = dataset
        self.cfg = cfg
        self.out_dir = out_dir
        self.step_factory = step_factory
        self.log_fn = log
        self.timing = Timing()
        if not dataset.train_indices:
            raise TrainingError("the dataset has no training views")
        os.makedirs(out_dir, exist_ok=True)
        self._log_file = open(os.path.join(out_dir, "train.log"), "a", buffering=1)
        self._image_cache: dict[int, np.ndarray] = {}
        self._cache_bytes = 0
        self.metrics: dict = {}
        self._lpips: Lpips | None = None
        metrics_path = os.path.join(out_dir, "metrics.json")
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                self.metrics = json.load(f)

    # -- logging ------------------------------------------------------------------------------------
    def log(self, msg: str, echo: bool = True) -> None:
        self._log_file.write(time.strftime("%H:%M:%S ") + msg + "\n")
        if echo:
            self.log_fn(msg)

    # -- data ---------------------------------------------------------------------------------------
    def train_image(self, i: int, budget_bytes: int = 2 << 30) -> np.ndarray:
        """Training images stay cached in memory up to a budget (3DGS keeps them all on the GPU);
        test images are never cached."""
        img = self._image_cache.get(i)
        if img is None:
            img = np.ascontiguousarray(self.dataset.load_image(i), dtype=np.float32)
            if self._cache_bytes + img.nbytes <= budget_bytes:
                self._image_cache[i] = img
                self._cache_bytes += img.nbytes
        return img

    def next_view(self) -> int:
        if not self.view_stack:
            self.view_stack = [int(v) for v in self.rng.permutation(self.dataset.train_indices)]
        return self.view_stack.pop()

    # -- checkpoints --------------------------------------------------------------------------------
    def checkpoint_dir(self) -> str:
        return os.path.join(self.out_dir, "checkpoints")

    def save_checkpoint(self, iteration: int) -> str:
        model, adam, stats = self.step.get_state()
        bad = [k for k, v in model.arrays().items() if not np.all(np.isfinite(v))]
        if bad:  # never overwrite a good checkpoint with a diverged state
            raise TrainingError(f"parameters {', '.join(bad)} are not finite at step {iteration}: training "
                                f"diverged; the last good checkpoint is {self.latest_checkpoint() or 'none'}")
        arrays = {f"model.{k}": v for k, v in model.arrays().items()}
        arrays.update({f"adam.{k}": v for k, v in adam.to_arrays().items()})
        arrays.update({"stats.grad_accum": stats.grad_accum, "stats.denom": stats.denom,
                       "stats.max_radii": stats.max_radii})
        meta = dict(iteration=iteration, rng=self.rng.bit_generator.state, view_stack=self.view_stack,
                    config=self.cfg.to_dict(), extent=self.extent, format=1)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        os.makedirs(self.checkpoint_dir(), exist_ok=True)
        path = os.path.join(self.checkpoint_dir(), f"ckpt_{iteration:06d}.npz")
        save_npz(path, **arrays)
        for old in sorted(self._checkpoints())[:-CHECKPOINTS_KEPT]:
            os.remove(old)
        return path

    def _checkpoints(self) -> list[str]:
        d = self.checkpoint_dir()
        if not os.path.isdir(d):
            return []
        return [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith("ckpt_") and f.endswith(".npz")]

    @staticmethod
    def load_checkpoint(path: str):
        try:
            with np.load(path) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                model = GaussianModel(**{k: z[f"model.{k}"] for k in PARAM_GROUPS})
                adam = AdamState.from_arrays({k[5:]: z[k] for k in z.files if k.startswith("adam.")})
                stats = DensifyStats(z["stats.grad_accum"], z["stats.denom"], z["stats.max_radii"])
        except (OSError, KeyError, ValueError) as exc:
            raise TrainingError(f"cannot read checkpoint {path}: {exc}") from None
        return meta, model, adam, stats

    def latest_checkpoint(self) -> str | None:
        found = self._checkpoints()
        return found[-1] if found else None

    # -- outputs ------------------------------------------------------------------------------------
    def save_ply(self, iteration: int) -> str:
        from .ply import save_ply

        d = os.path.join(self.out_dir, "point_cloud", f"iteration_{iteration}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "point_cloud.ply")
        save_ply(path, self.step.get_model(), self.cfg.render_mode, self.step.filter_3d())
        return path

    def evaluate(self, iteration: int) -> dict:
        """Held-out metrics (evaluation.py); LPIPS only at the end of the run (a VGG per view)."""
        final = iteration == self.cfg.iters
        if final and self.cfg.lpips and self._lpips is None:
            self._lpips = Lpips()
        result = evaluate_views(self.dataset, lambda cam: self.step.render(cam, self.active_sh_degree(iteration)),
                                self.out_dir, iteration, lpips=self._lpips if final else None)
        result["num_gaussians"] = self.step.num_gaussians
        self.metrics[f"iteration_{iteration}"] = result
        write_json(os.path.join(self.out_dir, "metrics.json"), self.metrics)
        self.log(result["line"])
        return result

    # -- the loop -----------------------------------------------------------------------------------
    def active_sh_degree(self, iteration: int) -> int:
        return min(self.cfg.sh_degree, iteration // self.cfg.sh_increase_every)

    def setup(self, resume: str | None) -> int:
        cfg = self.cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.view_stack: list[int] = []
        if resume:
            path = self.latest_checkpoint() if resume == "latest" else resume
            if path is None:
                raise TrainingError(f"--resume: no checkpoint in {self.checkpoint_dir()}")
            meta, model, adam, stats = self.load_checkpoint(path)
            self.rng.bit_generator.state = meta["rng"]
            self.view_stack = list(meta["view_stack"])
            self.extent = float(meta["extent"])
            start = int(meta["iteration"])
            self.log(f"resumed from {path} at step {start} with {len(model)} Gaussians")
        else:
            self.extent = scene_extent(self.dataset)
            model = initial_model(self.dataset, cfg, self.rng, self.log)
            adam, stats, start = AdamState.zeros_for(model), DensifyStats.zeros(len(model)), 0
        optim = cfg.optim.with_scene(self.extent, cfg.iters)
        self.step: TrainStep = self.step_factory(model, optim, cfg.background, cfg.lambda_dssim, adam)
        self.step.set_state(model, adam, stats)
        # antialiased: the 3D filter from the training views (a resumed run recomputes it)
        self.step.set_filter_cameras([self.dataset.cameras[i] for i in self.dataset.train_indices])
        self.step.update_filter_3d()
        write_json(os.path.join(self.out_dir, "cfg.json"), dict(cfg.to_dict(), extent=self.extent,
                                                                run=self.run_info,
                                                                dataset_notes=list(self.dataset.notes)))
        return start

    def run(self, resume: str | None = None, progress=None, on_step=None) -> dict:
        """Train to ``cfg.iters``; returns a summary. ``on_step(iteration, trainer)`` is called after
        every step (the live preview hooks in there)."""
        cfg, dcfg = self.cfg, self.cfg.densify
        start = self.setup(resume)
        last_good = None
        interrupted = False

        def on_sigint(signum, frame):  # finish the step, save, stop
            nonlocal interrupted
            interrupted = True

        old_handler = signal.signal(signal.SIGINT, on_sigint) if _main_thread() else None
        t_start = time.perf_counter()
        blocked_at_start = getattr(self.step, "blocked_seconds", 0.0)
        it = start
        loss_ema = None
        zero_grad_warned = False
        # Losses are read in batches: the GPU path keeps them on the device (one read per batch),
        # so a NaN is noticed at most this many steps late -- and always before a checkpoint.
        loss_every = max(1, min(cfg.log_every, 25))
        can_profile = hasattr(self.step, "enable_profiling")
        white_reset = dcfg.white_background_reset and all(c >= 1.0 for c in cfg.background)

        def check_losses(upto: int):
            nonlocal loss_ema
            t = time.perf_counter()
            for loss in self.step.take_losses():
                if not math.isfinite(loss):
                    raise TrainingError(
                        f"the loss became {loss} by step {upto}: training diverged. The last good "
                        f"checkpoint is {last_good or 'none (diverged before the first checkpoint)'}; "
                        f"resume from it with lower learning rates or report the scene.")
                loss_ema = loss if loss_ema is None else 0.9 * loss_ema + 0.1 * loss
            self.timing.add("step", time.perf_counter() - t)

        try:
            for it in range(start + 1, cfg.iters + 1):
                t0 = time.perf_counter()
                view = self.next_view()
                target = self.train_image(view)
                t1 = time.perf_counter()
                profile = can_profile and it % cfg.log_every == 0 and self.step.enable_profiling(True)
                self.step.step(self.dataset.cameras[view], target, self.active_sh_degree(it),
                               view_id=view)
                t2 = time.perf_counter()
                self.timing.add("data", t1 - t0)
                self.timing.add("step", t2 - t1)
                densify_now = it < dcfg.stop and it > dcfg.start and it % dcfg.every == 0
                reset_now = it < dcfg.stop and (it % dcfg.opacity_reset_every == 0
                                                 or (it == dcfg.start and white_reset))
                output_now = (it in cfg.eval_at or it in cfg.save_at or it % cfg.checkpoint_every == 0
                              or it == cfg.iters)
                log_now = it % cfg.log_every == 0 or it == cfg.iters
                if it % loss_every == 0 or densify_now or reset_now or output_now or log_now or interrupted:
                    check_losses(it)
                stages = {}
                if profile:
                    stages = self.step.stage_times()
                    self.step.enable_profiling(False)

                # Evaluate and save before this step's densification and opacity reset, as 3DGS
                # does: a reset step would otherwise be judged on near-transparent Gaussians.
                t4 = time.perf_counter()
                if it in cfg.eval_at or it == cfg.iters:
                    self.evaluate(it)
                if it in cfg.save_at or it == cfg.iters:
                    self.save_ply(it)
                self.timing.add("eval+io", time.perf_counter() - t4)

                if densify_now:
                    t3 = time.perf_counter()
                    model, adam, stats = self.step.get_state()
                    if not np.any(stats.grad_accum > 0) and not zero_grad_warned:
                        self.log("WARNING: densification statistics are all zero — no gradient "
                                 "reached the screen-space means; no Gaussian can densify.")
                        zero_grad_warned = True
                    model, adam, stats, report = densify_and_prune(
                        model, adam, stats, dcfg, self.extent, it > dcfg.opacity_reset_every, self.rng)
                    self.step.set_state(model, adam, stats)
                    self.step.update_filter_3d()    # antialiased: the new set's 3D filter
                    self.log(f"step {it}: {report.line()}", echo=False)
                    self.timing.add("densify", time.perf_counter() - t3)
                if reset_now:
                    model, adam, stats = self.step.get_state()
                    reset_opacity(model, adam, dcfg.reset_opacity, self.step.filter_3d())
                    self.step.set_state(model, adam, stats)
                    self.log(f"step {it}: opacity reset to ≤ {dcfg.reset_opacity}", echo=False)
                if filter_3d_refresh_due(it, cfg):
                    self.step.update_filter_3d()

                if log_now:
                    elapsed = time.perf_counter() - t_start
                    n = self.step.num_gaussians
                    line = (f"step {it}/{cfg.iters} loss {loss_ema:.4f} N {n} "
                            f"{(it - start) / elapsed:.2f} it/s")
                    if stages:
                        line += (f"; device ms {sum(stages.values()):.2f}: "
                                 + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
                    memory = getattr(self.step, "counters", {}).get("peak_bytes")
                    if memory:
                        line += f"; peak device memory {memory / 2**20:.0f} MiB"
                    self.log(line, echo=False)
                if on_step is not None:
                    on_step(it, self)
                if progress is not None:
                    progress(it, loss_ema, self)
                t4 = time.perf_counter()
                if it % cfg.checkpoint_every == 0 or it == cfg.iters:
                    last_good = self.save_checkpoint(it)   # after densification: resumes exactly
                self.timing.add("eval+io", time.perf_counter() - t4)
                if interrupted:
                    break
        finally:
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
        if interrupted:
            path = self.save_checkpoint(it)
            self.log(f"interrupted at step {it}: checkpoint saved to {path}; continue with --resume latest")
        elapsed = time.perf_counter() - t_start
        self.timing.split_step(getattr(self.step, "blocked_seconds", 0.0) - blocked_at_start)
        summary = dict(iterations=it, interrupted=interrupted, seconds=elapsed,
                       it_per_s=(it - start) / elapsed if elapsed > 0 else 0.0,
                       num_gaussians=self.step.num_gaussians, final_loss=loss_ema,
                       timing=self.timing.totals, out_dir=self.out_dir,
                       peak_device_bytes=getattr(self.step, "counters", {}).get("peak_bytes"))
        self.log(f"done: {it} steps in {elapsed:.1f}s ({summary['it_per_s']:.2f} it/s), "
                 f"N {summary['num_gaussians']}; time: {self.timing.summary()}")
        return summary

    def close(self) -> None:
        self._log_file.close()


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
