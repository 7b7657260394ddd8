"""The training loop shared by both paths: schedules, SH growth, densification, evaluation,
outputs, checkpoints and resume.

The loop talks to a :class:`~wgsl_splat.contract.step.TrainStep` (NumPy or GPU) and to a dataset object with
``cameras``, ``train_indices``, ``test_indices``, ``load_image(i)``, ``load_target(i)`` (the image
with its masked pixels marked, ``reference/loss.py``), ``load_mask(i)``, ``points``, ``point_colors``,
``scene_extent()``, ``bounds()``, ``background`` and ``notes``.

Outputs in ``out_dir``: ``cfg.json``, ``cameras.json``, ``train.log``, ``metrics.json``,
``point_cloud/iteration_K/point_cloud.ply`` (3DGS layout), ``checkpoints/ckpt_K.npz``
(:mod:`.checkpoints`), and ``test/iteration_K/*.png`` renders of the evaluated views. One folder
holds one run (the CLI enforces it, :mod:`wgsl_splat.app.run_dir`), so the checkpoints in
``checkpoints/`` form one history and "the last two" and "latest" are well defined.

The run starts from :mod:`.startup` (the initial model, the scene's extent) and is watched by
:mod:`.health`: nothing non-finite is ever written, and a diverged run stops with its last good
checkpoint intact. SIGINT and SIGTERM finish the current step, write a checkpoint and a PLY, and
end the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass, field

import numpy as np

from ..atomic_io import make_dirs, note_written, write_json
from ..camera import CAMERAS_FILE, cameras_to_json
from ..contract.appearance import AppearanceState
from ..contract.pose import PoseState
from ..contract.rows import STREAM_NOISE, stream
from ..contract.state import HostArrays
from ..contract.step import StepSpec, TrainStep
from ..model import GaussianModel, floats_per_gaussian
from ..strategy import Strategy, StrategyContext, StrategyError, make_strategy
from .checkpoints import (
    CHECKPOINT_FORMAT,
    check_resumable,
    checkpoint_files,
    dataset_shape,
    find_checkpoint,
    load_checkpoint,
    load_per_view,
    write_checkpoint,
)
from .config import TrainConfig
from .errors import TrainingError
from .evaluation import Lpips, evaluate_views
from .health import check_loss, divergence, empty_image_loss
from .startup import (
    initial_model,
    scene_extent,
    training_edge_pixels,
    training_view_pixels,
)
from .views import TrainingViews

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Timing:
    """Wall time per phase, for the Amdahl view in the log: ``step (host)`` is computing the step on
    the NumPy path but only encoding and submitting it on the GPU path, whose device work shows up
    as ``device wait`` (the host blocked on the loss read-back); the rest is host bookkeeping."""

    totals: dict = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def split_step(self, blocked: float, waited: float = 0.0) -> None:
        """Split the ``step`` total into host work and the part spent blocked on the device;
        ``waited``: more device wait, outside the steps (before the densification rounds)."""
        step = self.totals.pop("step", 0.0)
        blocked = min(max(blocked, 0.0), step)
        self.totals["step (host)"] = step - blocked
        if blocked + waited:
            self.totals["device wait"] = blocked + waited

    def summary(self) -> str:
        total = sum(self.totals.values()) or 1.0
        return ", ".join(f"{k} {v:.1f}s ({100 * v / total:.0f}%)" for k, v in
                         sorted(self.totals.items(), key=lambda kv: -kv[1]))


def filter_3d_refresh_due(it: int, cfg: TrainConfig, strategy: Strategy) -> bool:
    """Antialiased mode: besides after every densification round, Mip-Splatting recomputes the 3D
    filter every 100 steps once densification has stopped, except in the last 100 steps."""
    return it % 100 == 0 and strategy.refine_stop < it < cfg.iters - 100


@dataclass
class Session:
    """One call of :meth:`Trainer.run`: where it started, the step it is at, what it wrote, and the
    signal that asked it to stop (None: none)."""

    start: int
    it: int
    last_good: str | None          # the newest intact checkpoint
    ply_path: str | None           # the newest PLY
    t_start: float
    blocked_at_start: float
    loss_every: int
    stop_signal: int | None = None
    saved: dict = field(default_factory=lambda: {"checkpoint": None, "ply": None})  # at which step
    profiled: bool = False
    round_waits: float = 0.0       # device waits before densification rounds (in blocked_seconds)
    stages: dict = field(default_factory=dict)


class Trainer:
    def __init__(self, dataset, cfg: TrainConfig, out_dir: str, step_factory, log=print,
                 run_info: dict | None = None, primary: bool = True):
        """``step_factory(arrays: HostArrays, spec: StepSpec) -> TrainStep``; ``run_info`` (data
        path, resolution, split, device) is recorded in cfg.json for ``eval``. ``primary=False``:
        a rank of a distributed run other than rank 0, which trains in step with it but evaluates
        and saves nothing (its ``out_dir`` takes only its log)."""
        self.primary = primary
        #: how to continue this run (the CLI sets the full command line)
        self.resume_command = "--resume latest"
        self.run_info = dict(run_info or {})
        self.dataset = dataset
        self.cfg = cfg
        self.out_dir = out_dir
        self.step_factory = step_factory
        self.log_fn = log
        self.timing = Timing()
        if not dataset.train_indices:
            raise TrainingError("the dataset has no training views")
        make_dirs(out_dir)
        log_path = os.path.join(out_dir, "train.log")
        note_written(log_path)
        self._log_file = open(log_path, "a", buffering=1)
        self.loss_first = self.loss_ema = None
        self.empty_loss = self.initial_n = None   # set up with the run (the collapse check)
        self.metrics: dict = {}
        self._disagreed_logged = 0
        self._clipped_logged = 0
        self._lpips: Lpips | None = None
        metrics_path = os.path.join(out_dir, "metrics.json")
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                self.metrics = json.load(f)

    # -- logging ------------------------------------------------------------------------------------
    def log(self, msg: str, echo: bool = True) -> None:
        if echo:
            self.log_fn(msg)
        try:
            self._log_file.write(time.strftime("%H:%M:%S ") + msg + "\n")
        except OSError as exc:   # a full disk: say which file
            exc.filename = exc.filename or self._log_file.name
            raise

    # -- data ---------------------------------------------------------------------------------------
    def train_target(self, i: int) -> np.ndarray | None:
        """View ``i``'s image for a step, or None when the step keeps it resident already (the GPU
        path uploads each view once): no float copy of the training images is kept on the host,
        the dataset holds them decoded as 8-bit (:meth:`~wgsl_splat.data.dataset.Dataset.preload`)."""
        return self.views.view(i).target

    def next_view(self, iteration: int) -> int:
        """The next view of a shuffled pass over the training views, less those the strategy
        withholds at this step."""
        withheld = self.strategy.withheld(iteration)
        while True:
            if not self.view_stack:
                self.view_stack = [int(v) for v in self.rng.permutation(self.dataset.train_indices)
                                   if int(v) not in withheld]
            i = self.view_stack.pop()
            if i not in withheld:
                return i

    # -- checkpoints --------------------------------------------------------------------------------
    def checkpoint_dir(self) -> str:
        return os.path.join(self.out_dir, "checkpoints")

    def require_sane(self, model: GaussianModel, iteration: int, what: str) -> None:
        """Refuse to write ``what`` from a diverged state (:func:`~.health.divergence`): the last
        good checkpoint stays the latest."""
        problem = divergence(model, self.extent, self.loss_first, self.loss_ema, self.empty_loss,
                             self.initial_n)
        if problem:
            raise TrainingError(f"{problem} at step {iteration}: training diverged and the {what} "
                                f"was not written; the last good checkpoint is "
                                f"{self.latest_checkpoint() or 'none'} (lower learning rates: "
                                f"--lr-scale)")

    def save_checkpoint(self, iteration: int) -> str:
        state = self.step.state.download()
        self.require_sane(state.model, iteration, "checkpoint")
        app = self.step.appearance_state()
        poses = self.step.pose_state()
        meta = dict(iteration=iteration, rng=self.rng.bit_generator.state, view_stack=self.view_stack,
                    config=self.cfg.to_dict(), extent=self.extent, run=self.run_info,
                    initial_gaussians=self.initial_n,
                    dataset=dataset_shape(self.dataset), format=CHECKPOINT_FORMAT,
                    strategy=dict(name=self.strategy.name, state=self.strategy.state_dict()))
        return write_checkpoint(self.checkpoint_dir(), iteration, state, app, poses, meta)

    def latest_checkpoint(self) -> str | None:
        found = checkpoint_files(self.checkpoint_dir())
        return found[-1] if found else None

    # -- outputs ------------------------------------------------------------------------------------
    def save_ply(self, iteration: int) -> str:
        from ..data.ply import save_ply

        model = self.step.get_model()
        self.require_sane(model, iteration, "PLY")
        d = os.path.join(self.out_dir, "point_cloud", f"iteration_{iteration}")
        make_dirs(d)
        path = os.path.join(d, "point_cloud.ply")
        save_ply(path, model, self.cfg.render_mode, self.step.filter_3d())
        return path

    def evaluate(self, iteration: int) -> dict:
        """Held-out metrics (evaluation.py); LPIPS only at the end of the run (a VGG per view)."""
        final = iteration == self.cfg.iters
        if final and self.cfg.lpips and self._lpips is None:
            self._lpips = Lpips()
        result = evaluate_views(self.dataset, lambda cam: self.step.render(cam, self.active_sh_degree(iteration)),
                                self.out_dir, iteration, lpips=self._lpips if final else None,
                                colour_fit=self.cfg.appearance)
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
        try:
            cfg.check()
        except ValueError as exc:
            raise TrainingError(str(exc)) from None
        self.rng = np.random.default_rng(cfg.seed)
        self.view_stack: list[int] = []
        meta = None
        if resume:
            path, _ = find_checkpoint(self.checkpoint_dir(), resume, self.log)
            meta, arrays = load_checkpoint(path)
            check_resumable(meta, path, self.dataset, cfg.strategy)
            self.rng.bit_generator.state = meta["rng"]
            self.view_stack = list(meta["view_stack"])
            self.extent = float(meta["extent"])
            start = int(meta["iteration"])
        else:
            self.extent = scene_extent(self.dataset)
            start = 0
        ctx = StrategyContext(self.extent, all(c >= 1.0 for c in cfg.background), cfg.seed,
                              view_pixels=training_view_pixels(self.dataset),
                              edge_pixels=training_edge_pixels(self.dataset),
                              params_per_gaussian=floats_per_gaussian(cfg.sh_degree),
                              iters=cfg.iters, log=self.log)
        try:
            self.strategy = make_strategy(cfg, ctx)
        except StrategyError as exc:
            raise TrainingError(str(exc)) from None
        if meta is not None:
            self.strategy.load_state_dict(meta["strategy"].get("state", {}))
            self.log(f"resumed from {path} at step {start} with {len(arrays)} Gaussians")
            self.initial_n = int(meta.get("initial_gaussians") or len(arrays))
        else:
            model = initial_model(self.dataset, cfg, self.rng, self.log, self.strategy)
            try:
                self.strategy.check(len(model))
            except StrategyError as exc:
                raise TrainingError(str(exc)) from None
            arrays = HostArrays.fresh(model, self.strategy.statistics)
            self.initial_n = len(model)
        self.empty_loss = empty_image_loss(self.dataset, cfg)
        try:
            self.optim = cfg.optim.with_scene(self.extent, cfg.iters).for_batch(cfg.batch_size)
        except ValueError as exc:
            raise TrainingError(str(exc)) from None
        spec = StepSpec(self.optim, tuple(cfg.background), cfg.loss,
                        tuple(s.name for s in self.strategy.statistics),
                        appearance_views=len(self.dataset.cameras) if cfg.appearance else 0,
                        pose_views=len(self.dataset.cameras) if cfg.pose_opt else 0)
        self.step: TrainStep = self.step_factory(arrays, spec)
        if meta is not None and cfg.appearance:
            self.step.load_appearance(load_per_view(path, AppearanceState, "appearance",
                                                    "appearance"))
        if meta is not None and cfg.pose_opt:
            self.step.load_pose(load_per_view(path, PoseState, "pose", "pose corrections"))
        ctx.max_gaussians = self.step.max_gaussians
        self.views = ctx.views = TrainingViews(self.dataset, self.step, self.active_sh_degree)
        # antialiased: the 3D filter from the training views (a resumed run recomputes it)
        self.step.set_filter_cameras([self.dataset.cameras[i] for i in self.dataset.train_indices])
        self.step.update_filter_3d()
        write_json(os.path.join(self.out_dir, "cfg.json"), dict(cfg.to_dict(), extent=self.extent,
                                                                run=self.run_info,
                                                                dataset_notes=list(self.dataset.notes)))
        # The cameras travel with the model (as 3DGS's): `view` of the PLY alone opens through one.
        write_json(os.path.join(self.out_dir, CAMERAS_FILE),
                   cameras_to_json(self.dataset.cameras, self.dataset.train_indices))
        return start

    # -- the loop: one session of training, in named phases -----------------------------------------
    def run(self, resume: str | None = None, progress=None, on_step=None,
            earlier_signal=None) -> dict:
        """Train to ``cfg.iters``; returns a summary. ``on_step(iteration, trainer)`` is called after
        every step (the live preview hooks in there).

        SIGINT or SIGTERM (Ctrl-C, ``kill``, ``timeout``, ``docker stop``, Slurm) finishes the
        current step, writes a checkpoint and the PLY of that step and returns early with
        ``summary["interrupted"]`` naming the signal and ``summary["signal"]`` its number.
        ``earlier_signal()``: a signal that arrived before training (None if none), which stops the
        run the same way after its first step (a distributed run: every rank after the same one).

        Each step: :meth:`train_step` → :meth:`read_losses` → :meth:`write_outputs` (evaluation
        and PLY before densification, as 3DGS) → :meth:`refine` (the strategy) →
        :meth:`report` → :meth:`save_state` (the checkpoint holds the refined state, so a resume
        continues exactly); then :meth:`end`, which evaluates the last step once its PLY and
        checkpoint are written."""
        s = self.begin(resume)
        with self._stop_signals(s, earlier_signal):
            if s.start < self.cfg.iters:     # logged once a signal would stop the run cleanly
                self.log(f"training steps {s.start + 1}..{self.cfg.iters}", echo=False)
            for it in range(s.start + 1, self.cfg.iters + 1):
                s.it = it
                self.train_step(s)
                self.read_losses(s)
                self.write_outputs(s)
                self.refine(s)
                self.report(s, on_step, progress)
                self.save_state(s)
                # A replicated step stops where its ranks agreed (all after the same step); a
                # single one on any signal so far.
                self.step.stop_requested = s.stop_signal is not None
                if self.step.stop_agreed:
                    break
        return self.end(s)

    def begin(self, resume: str | None) -> "Session":
        """Set the run up (:meth:`setup`) and open a session from its first step."""
        start = self.setup(resume)
        cfg = self.cfg
        ply_path = os.path.join(self.out_dir, "point_cloud", f"iteration_{start}", "point_cloud.ply")
        if start >= cfg.iters:
            self.log(f"the run is complete: step {start} of {cfg.iters}")
        self.loss_first = self.loss_ema = None   # this session's first batch of losses, their EMA
        return Session(start=start, it=start, last_good=self.latest_checkpoint(),
                       ply_path=ply_path if start and os.path.isfile(ply_path) else None,
                       t_start=time.perf_counter(), blocked_at_start=self.step.blocked_seconds,
                       # Losses are read in batches: the GPU path keeps them on the device (one
                       # read per batch), so a NaN is noticed at most this many steps late -- and
                       # always before a checkpoint.
                       loss_every=max(1, min(cfg.log_every, 25)))

    @contextlib.contextmanager
    def _stop_signals(self, s: "Session", earlier_signal):
        """SIGINT/SIGTERM during the block set ``s.stop_signal`` (the step finishes, then the run
        saves and stops); the previous handlers come back afterwards."""
        def on_stop_signal(signum, frame):
            s.stop_signal = signum

        old = {sig: signal.signal(sig, on_stop_signal) for sig in STOP_SIGNALS} \
            if _main_thread() else {}
        if earlier_signal is not None and s.stop_signal is None:
            s.stop_signal = earlier_signal()
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def train_step(self, s: "Session") -> None:
        """The step of iteration ``s.it``: its views, the strategy's position noise, forward,
        loss, backward and the update."""
        cfg, it = self.cfg, s.it
        t0 = time.perf_counter()
        factor = self.strategy.resolution(it)   # the strategy's resolution schedule
        batch = [self.views.view(self.next_view(it), factor) for _ in range(cfg.batch_size)]
        t1 = time.perf_counter()
        s.profiled = it % cfg.log_every == 0 and self.step.enable_profiling(True)
        noise_lr = self.strategy.noise_lr(it)
        noise = ((noise_lr * self.optim.lr_for("means", it), stream(cfg.seed, it, STREAM_NOISE))
                 if noise_lr else None)
        self.step.stop_requested = s.stop_signal is not None
        self.step.step_batch(batch, self.active_sh_degree(it), noise)
        if self.step.stop_agreed and s.stop_signal is None:   # another rank was signalled
            s.stop_signal = signal.SIGTERM
        self.timing.add("data", t1 - t0)
        self.timing.add("step", time.perf_counter() - t1)

    def _output_due(self, it: int) -> bool:
        cfg = self.cfg
        return (it in cfg.eval_at or it in cfg.save_at or it % cfg.checkpoint_every == 0
                or it == cfg.iters)

    def _log_due(self, it: int) -> bool:
        return it % self.cfg.log_every == 0 or it == self.cfg.iters

    def read_losses(self, s: "Session") -> None:
        """The losses of the steps since the last read, when due (a batch of steps, before any
        output, a log line or a stop): a non-finite one ends the run with the last good checkpoint
        named; the stage times of a profiled step."""
        it = s.it
        if (it % s.loss_every == 0 or self._output_due(it) or self._log_due(it)
                or s.stop_signal is not None):
            t = time.perf_counter()
            for loss in self.step.take_losses():
                check_loss(loss, it, s.last_good)
                self.loss_ema = loss if self.loss_ema is None else 0.9 * self.loss_ema + 0.1 * loss
            if self.loss_first is None and self.loss_ema is not None:
                self.loss_first = self.loss_ema
            self.timing.add("step", time.perf_counter() - t)
        s.stages = {}
        if s.profiled:
            s.stages = self.step.stage_times()
            self.step.enable_profiling(False)

    def write_outputs(self, s: "Session") -> None:
        """Evaluation and the PLY of iteration ``s.it`` when due, before this step's densification
        and opacity reset, as 3DGS does: a reset step would otherwise be judged on near-transparent
        Gaussians. The last step's evaluation waits for :meth:`end`, after the final PLY and
        checkpoint, so that no evaluation failure costs the run its outputs."""
        cfg, it = self.cfg, s.it
        t = time.perf_counter()
        if self.primary and it in cfg.eval_at and it < cfg.iters:
            self.evaluate(it)
        if self.primary and (it in cfg.save_at or it == cfg.iters):
            s.ply_path, s.saved["ply"] = self.save_ply(it), it
        self.timing.add("eval+io", time.perf_counter() - t)

    def refine(self, s: "Session") -> None:
        """The strategy's hook (densify, prune, relocate, reset), after the outputs as in 3DGS, and
        the 3D filter of a changed set (antialiased mode). Not after the last step: no step would
        train its result, and the final PLY, checkpoint and N must be one state."""
        cfg, it = self.cfg, s.it
        if it < cfg.iters and self.strategy.round_due(it):
            # the round reads the device back: the wait for the steps queued before it is
            # theirs ("device wait"), not the round's ("densify")
            before = self.step.blocked_seconds
            self.step.synchronize()
            s.round_waits += self.step.blocked_seconds - before
        t = time.perf_counter()
        version = self.step.state.rows_version
        # the room follows the device's memory as the views' buffers and the state grew
        self.strategy.ctx.max_gaussians = self.step.max_gaussians
        for line in self.strategy.after_step(it, self.step.state) if it < cfg.iters else ():
            self.log(line, echo=False)
        if (self.step.state.rows_version != version
                or filter_3d_refresh_due(it, cfg, self.strategy)):
            self.step.update_filter_3d()
        self.timing.add("densify", time.perf_counter() - t)

    def report(self, s: "Session", on_step=None, progress=None) -> None:
        """The log line when due (loss, N, speed, stage times, device memory) and the hooks."""
        cfg, it = self.cfg, s.it
        if self._log_due(it):
            elapsed = time.perf_counter() - s.t_start
            line = (f"step {it}/{cfg.iters} loss {self.loss_ema:.4f} N {self.step.num_gaussians} "
                    f"{(it - s.start) / elapsed:.2f} it/s")
            if s.stages:
                line += (f"; device ms {sum(s.stages.values()):.2f}: "
                         + ", ".join(f"{k} {v:.2f}" for k, v in s.stages.items()))
            memory = self.step.counters.get("peak_bytes")
            if memory:
                line += f"; peak device memory {memory / 2**20:.0f} MiB"
            self.log(line, echo=False)
            disagreed = self.step.counters.get("emission_disagreements", 0)
            if disagreed > self._disagreed_logged:
                # emit.wgsl: each pair stays in its cell. Said on the terminal the first time,
                # then in train.log at each increase (never silent; an H100 adds a few pairs
                # every 100 steps of a 325 k-Gaussian run, which on the terminal is noise)
                self.log(f"note: by step {it} the device's two emission passes disagreed on "
                         f"{disagreed} (tile, splat) pairs (its compiler rounded the tile test "
                         f"differently in each); the renders kept within what was counted"
                         + ("" if self._disagreed_logged else
                            " (later counts go to train.log only)"),
                         echo=not self._disagreed_logged)
                self._disagreed_logged = disagreed
            clipped = self.step.counters.get("clipped_renders", 0)
            if clipped > self._clipped_logged:
                self.log(f"note: by step {it}, {self.step.renderer.clip_note()}")
                self._clipped_logged = clipped
        if on_step is not None:
            on_step(it, self)
        if progress is not None:
            progress(it, self.loss_ema, self)

    def save_state(self, s: "Session") -> None:
        """The replicas' agreement and the checkpoint when due (after refinement: it resumes
        exactly)."""
        cfg, it = self.cfg, s.it
        t = time.perf_counter()
        due = it % cfg.checkpoint_every == 0 or it == cfg.iters
        check = getattr(self.step, "check_replicas", None)
        if check is not None and due:
            self.log(check(), echo=False)   # every rank: a collective
        if self.primary and due:
            s.last_good, s.saved["checkpoint"] = self.save_checkpoint(it), it
        self.timing.add("eval+io", time.perf_counter() - t)

    def end(self, s: "Session") -> dict:
        """The final evaluation (after the final PLY and checkpoint are on disk; also when a
        resumed complete run lacks it), an interrupted session's checkpoint and PLY (once), the
        time split, the summary and the ``done:`` line."""
        cfg, it = self.cfg, s.it
        if self.primary and it == cfg.iters and (it > s.start
                                                 or f"iteration_{it}" not in self.metrics):
            t = time.perf_counter()
            try:
                self.evaluate(it)
            except Exception:
                self.log(f"the final evaluation failed; the final model "
                         f"{s.ply_path or 'point_cloud/iteration_' + str(it)} and checkpoint "
                         f"{s.last_good} are written: score them with the eval command")
                raise
            self.timing.add("eval+io", time.perf_counter() - t)
        interrupted = s.stop_signal is not None and it < cfg.iters
        if interrupted and self.primary:
            if s.saved["checkpoint"] != it:
                s.last_good = self.save_checkpoint(it)
            if s.saved["ply"] != it:
                s.ply_path = self.save_ply(it)
            self.log(f"{signal.Signals(s.stop_signal).name} at step {it}: saved {s.last_good} and "
                     f"{s.ply_path}; continue with: {self.resume_command}")
        elapsed = time.perf_counter() - s.t_start
        exchange = getattr(self.step, "exchange_seconds", {})
        if exchange:   # a replicated step's reduction: inside "step", shown apart
            self.timing.totals["step"] = self.timing.totals.get("step", 0.0) - sum(exchange.values())
            self.timing.totals.update(exchange)
        self.timing.split_step(self.step.blocked_seconds - s.blocked_at_start - s.round_waits,
                               s.round_waits)
        summary = dict(iterations=it, seconds=elapsed, ply=s.ply_path, checkpoint=s.last_good,
                       interrupted=signal.Signals(s.stop_signal).name if interrupted else None,
                       signal=int(s.stop_signal) if interrupted else None,
                       it_per_s=(it - s.start) / elapsed if elapsed > 0 else 0.0,
                       num_gaussians=self.step.num_gaussians, final_loss=self.loss_ema,
                       timing=self.timing.totals, out_dir=self.out_dir,
                       peak_device_bytes=self.step.counters.get("peak_bytes"))
        steps = f"{it - s.start} steps" + (f" ({s.start + 1}..{it})" if s.start else "")
        self.log(f"done: {steps} in {elapsed:.1f}s ({summary['it_per_s']:.2f} it/s), "
                 f"N {summary['num_gaussians']}; time: {self.timing.summary()}")
        return summary

    def close(self) -> None:
        try:
            self._log_file.close()
        except OSError:   # the line that could not be flushed (a full disk) was reported already
            pass


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
