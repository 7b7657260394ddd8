"""``train``: the command, the run folder, resume, the live preview; the run-level flags are one
declared record (:class:`~.run_request.RunRequest`), the configuration flags are generated from
the training configuration's declarations (:mod:`.config_cli`), the path is chosen by
:mod:`.step_factory`."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field

import click

from ..data.datasets import scene_formats_text
from ..errors import UserError
from ..render_config import render_config
from .common import load_training_data
from .config_cli import add_config_flags, configure, given_config_flags
from .flags import add_flags, split_request
from .run_request import ResumeCheck, RunRequest, resume_command
from .step_factory import make_step_factory

TRAIN_HELP = f"""Train on DATA: {scene_formats_text()}, a folder of photos or a video (camera
poses computed by SfM first: needs wgsl_splat[sfm]), or 'default' (the embedded procedural scene). Writes a .ply, checkpoints, metrics.json and a log into --out, which holds one run: an
existing run is continued (--resume latest) or replaced (--overwrite).

SIGINT (Ctrl-C) and SIGTERM finish the current step, save a checkpoint and the PLY, and exit with
130 / 143."""


@click.command(help=TRAIN_HELP)
@add_flags(RunRequest)
@add_config_flags
@click.pass_context
def train(ctx, **values):
    request, flags = split_request(RunRequest, values)
    given = given_config_flags(ctx)
    cfg = configure(request.preset, flags.get("strategy"), given, flags,
                    resuming=request.resume is not None)
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    given_run = {name for name in RunRequest.resume_rules()
                 if ctx.get_parameter_source(name) in sources}
    run_training(request, cfg, ResumeCheck(given_run, {cf: flags[cf.param] for cf in given}))


@dataclass(frozen=True)
class _Run:
    """A run in its locked folder: the request as the run continues it, its configuration and run
    info, the checkpoint it continues from (None: a new run), and the lines printed while opening
    it (for the run's log)."""

    request: RunRequest
    cfg: object
    run_info: dict
    resume: str | None = None
    notes: list = field(default_factory=list)

    def settled(self, given: ResumeCheck, echo) -> "_Run":
        """A resumed run continues with its own data, -r, split and device (the one place that
        says so, for both the one-process and the MPI path)."""
        if not self.resume:
            return self
        request, run_info = self.request.resumed(self.run_info, given, echo)
        return dataclasses.replace(self, request=request, run_info=run_info)


def _resumed_settings(meta: dict, run: dict, given: ResumeCheck) -> tuple:
    """The configuration and run info a resumed run continues with: the checkpoint's own. Flags
    given again must agree with it (one line naming the first that does not)."""
    from ..training.config import TrainConfig

    try:
        old_cfg = TrainConfig.from_dict(meta["config"])
    except (ValueError, TypeError) as exc:
        raise UserError(f"the checkpoint's configuration cannot be read by this version ({exc}); "
                        f"train into a new --out") from None
    stored = meta.get("run") or {}
    old_run = {**run, **stored}   # checkpoints before format 2 lack run info
    device_key = RunRequest.resume_rules()["device"][2]
    if device_key not in stored:   # before it was recorded: the path the run named
        described = stored.get("device")
        old_run[device_key] = ("cpu" if isinstance(described, str)
                               and described.startswith("cpu") else None)
    for name, (_, _, key) in RunRequest.resume_rules().items():   # recorded after the run
        old_run.setdefault(key, getattr(RunRequest, name))
    given.check(old_cfg, old_run, run)
    return old_cfg, old_run


def run_training(request: RunRequest = RunRequest(), cfg=None,
                 given: ResumeCheck | None = None) -> None:
    """The ``train`` command with its configuration settled (``cfg``: the preset's when None)."""
    from ..training.config import make_config

    cfg = cfg or make_config(request.preset)
    given = given or ResumeCheck()
    if request.web:   # fail fast (no viser, port taken), before any image is decoded
        from .web_viewer import check_port, import_viser

        import_viser()
        check_port(*request.web)
    try:   # what needs no data is refused before the run folder is touched
        cfg.check()
        cfg.optim.for_batch(cfg.batch_size)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    parallel = request.devices is not None or request.distributed
    if cfg.appearance and parallel:
        raise UserError("--appearance keeps each view's colour transform on one device: it does "
                        "not combine with --devices or --distributed")
    if cfg.pose_opt and parallel:
        raise UserError("--pose-opt keeps each view's pose correction on one device: it does not "
                        "combine with --devices or --distributed")
    if request.resume and request.overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it: pass one")
    request = dataclasses.replace(
        request, out_dir=request.out_dir or _default_out_dir(request.data, request.resume))
    if not request.resume and request.data != "default":
        from .run_dir import RunDirError, check_apart_from_data

        try:
            check_apart_from_data(request.out_dir, request.data)
        except RunDirError as exc:
            raise UserError(str(exc)) from None
    if request.distributed:
        return _train_distributed(request, cfg, given)
    _train_locked(request, cfg, given)


def _default_out_dir(data: str, resume: str | None) -> str:
    """A checkpoint's own run folder when resuming from one, else ``runs/<scene name>``."""
    if resume and resume != "latest":
        folder = os.path.dirname(os.path.abspath(resume))
        if os.path.basename(folder) == "checkpoints":
            return os.path.dirname(folder)
    name = "default" if data == "default" else os.path.basename(os.path.normpath(data)) or "scene"
    return os.path.join("runs", name)


def _open_run(request: RunRequest, cfg, given: ResumeCheck) -> tuple:
    """Lock ``request.out_dir`` and settle what the run continues from: ``(lock, run)`` (a
    resumed run keeps the checkpoint's configuration; the run's ``notes``: what was printed about
    the checkpoints, e.g. a damaged one set aside, for the run's log)."""
    from ..training.checkpoints import find_checkpoint
    from ..training.errors import TrainingError
    from .run_dir import RunDirError, open_run_dir

    out_dir, resume = request.out_dir, request.resume
    continues_run = resume is not None and (
        resume == "latest" or _inside(os.path.abspath(resume), os.path.abspath(out_dir)))
    try:
        lock = open_run_dir(out_dir, continues_run=continues_run, overwrite=request.overwrite,
                            log=click.echo)
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    notes = []

    def note(line):
        click.echo(line)
        notes.append(line)

    run_info = request.run_info()
    try:
        if resume:
            try:
                resume, meta = find_checkpoint(os.path.join(out_dir, "checkpoints"), resume, note)
            except TrainingError as exc:
                raise UserError(str(exc)) from None
            cfg, run_info = _resumed_settings(meta, run_info, given)
    except BaseException:
        lock.release()
        raise
    return lock, _Run(request, cfg, run_info, resume, notes)


def _train_locked(request: RunRequest, cfg, given: ResumeCheck) -> None:
    lock, run = _open_run(request, cfg, given)
    try:
        _train_in(run.settled(given, click.echo))
    finally:
        lock.release()


def _train_distributed(request: RunRequest, cfg, given: ResumeCheck) -> None:
    """``train --distributed``: every rank trains a replica; rank 0 holds the run folder and
    writes every output, the other ranks log into a scratch folder. Any rank's error ends every
    rank (MPI_Abort) after a line that names the rank; the last checkpoint stays intact (written
    atomically by rank 0)."""
    import contextlib
    import shutil
    import sys
    import tempfile

    from ..training.parallel import mpi_world

    world = mpi_world()
    lock = None
    out_dir = request.out_dir
    # one adapter per rank, chosen by the rank (no --adapter), and no window
    request = dataclasses.replace(request, adapter_filter=None, preview=False)
    early = _RecordedSignals().install()
    try:
        error = None
        run = _Run(request, cfg, request.run_info(), request.resume)
        if world.rank == 0:
            try:
                lock, run = _open_run(request, cfg, given)
            except UserError as exc:
                error = str(exc)
        error, resume, cfg, run_info = world.comm.bcast(
            (error, run.resume, run.cfg, run.run_info), root=0)
        if error:
            raise UserError(error)
        run = _Run(request, cfg, run_info, resume, run.notes)
        run = run.settled(given, click.echo if world.rank == 0 else lambda line: None)
        if world.rank == 0:
            _train_in(run, world, earlier_signal=early)
        else:
            scratch = tempfile.mkdtemp(prefix=f"wgsl_splat_rank{world.rank}_")
            quiet_request = dataclasses.replace(run.request, out_dir=scratch, preview_web=False,
                                                exports=())
            try:
                with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                    _train_in(dataclasses.replace(run, request=quiet_request, notes=[]), world,
                              earlier_signal=early)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except click.exceptions.Exit:
        # An agreed stop (SIGINT/SIGTERM): every rank exits alike, and none before rank 0 has
        # written the interrupt checkpoint and PLY (an early exit could take rank 0 down with it).
        world.comm.Barrier()
        raise
    except BaseException as exc:     # noqa: BLE001
        if world.size == 1:
            raise
        msg = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        sys.stderr.write(f"Error: rank {world.rank} of {world.size}: {msg}; ending every rank "
                         f"(the last checkpoint in {out_dir}/checkpoints is intact)\n")
        sys.stderr.flush()
        world.comm.Abort(1)
    finally:
        early.restore()
        if lock is not None:
            lock.release()


class _RecordedSignals:
    """SIGINT/SIGTERM before a distributed run's training loop (loading, decoding): recorded, not
    fatal, so that the rank stops with the others after the first step (the stop travels with the
    gradients) instead of dying alone while the others wait for it in a collective."""

    def __init__(self) -> None:
        self.signum, self.old = None, {}

    def install(self) -> "_RecordedSignals":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self.old = {s: signal.signal(s, self._record) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _record(self, signum, frame) -> None:
        self.signum = signum

    def __call__(self):
        return self.signum

    def restore(self) -> None:
        import signal

        for s, handler in self.old.items():
            signal.signal(s, handler)
        self.old = {}


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _train_in(run: _Run, world=None, earlier_signal=None) -> None:
    """The run itself, in a locked output folder."""
    from ..data.datasets import DatasetError
    from ..training.errors import TrainingError
    from ..training.evaluation import held_out_views
    from ..training.startup import check_new_run
    from ..training.trainer import Trainer
    from .sfm import scene_for

    request, cfg, out_dir = run.request, run.cfg, run.request.out_dir
    # photos or a video: their COLMAP folder, computed once and reused by --resume and later
    # runs; under MPI by rank 0 alone (an error there ends every rank, _train_distributed)
    data = scene_for(request.data, request) if world is None or world.rank == 0 else None
    if world is not None:
        data = world.comm.bcast(data, root=0)
    dataset = load_training_data(data, request.resolution, request.eval_split, cfg.background)
    for note in dataset.notes:
        click.echo(f"note: {note}")
    if not run.resume:   # refused now, not after decoding and initialisation (nothing written yet)
        try:
            check_new_run(dataset, cfg)
        except TrainingError as exc:
            raise UserError(str(exc)) from None
    factory, path_name = make_step_factory(request.device, request.adapter_filter, click.echo,
                                           render_config(cfg.render_mode), request.devices, world)
    again = resume_command(request, world)
    replicas = getattr(factory, "world", 1)
    if cfg.batch_size < replicas:
        raise UserError(f"--batch-size {cfg.batch_size} is smaller than the {replicas} devices "
                        f"training it: each device needs at least one view per step")
    known = len(dataset.notes)
    with click.progressbar(length=len(dataset.cameras), label="decoding images") as bar:
        try:   # every image before step 1: a bad one is an error now, not hours into the run
            dataset.preload(progress=bar.update)
        except DatasetError as exc:
            raise UserError(str(exc)) from None
    for note in dataset.notes[known:]:   # what decoding found (a mask that keeps no pixel)
        click.echo(f"note: {note}")
    held_out = len(held_out_views(dataset))
    click.echo(f"Training {len(dataset.train_indices)} views ({held_out} held out) "
               f"for {cfg.iters} steps ({cfg.render_mode}) on {path_name} -> {out_dir}")
    web_hook = None
    if request.web:   # before the trainer: a port in use is one line before anything is written
        from .web_viewer import TrainingWebPreview

        web_hook = TrainingWebPreview(dataset, *request.web, cfg.render_mode, click.echo)
    trainer = Trainer(dataset, cfg, out_dir, factory, log=click.echo,
                      run_info=dict(run.run_info, device=path_name),
                      primary=world is None or world.rank == 0)
    trainer.resume_command = again
    for line in run.notes:     # printed already; the run's log keeps them too
        trainer.log(line, echo=False)
    on_step = None
    if request.preview:
        on_step = _preview_hook(dataset, click.echo)
    if web_hook is not None:
        from .web_viewer import chain_hooks

        on_step = chain_hooks(on_step, web_hook)
    bar = click.progressbar(length=cfg.iters, label="training", show_eta=True, show_pos=True,
                            item_show_func=lambda s: s, file=None)
    state = {"done": 0, "t0": time.perf_counter()}

    def progress(it, loss, tr):
        rate = (it - state.get("first", it)) / max(time.perf_counter() - state["t0"], 1e-9)
        state.setdefault("first", it - 1)
        shown = "…" if loss is None else f"{loss:.4f}"
        bar.update(it - state["done"], f"loss {shown} N {tr.step.num_gaussians} {rate:.2f} it/s")
        state["done"] = it

    try:
        with bar:
            state["done"] = 0
            summary = trainer.run(resume=run.resume, progress=progress, on_step=on_step,
                                  earlier_signal=earlier_signal)
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        if exc.filename is None:
            raise
        raise UserError(_write_failed(exc, trainer.latest_checkpoint(), again)) from None
    finally:
        trainer.close()
        if on_step is not None:
            on_step.close()
    if summary["interrupted"] and world is not None and world.rank != 0:
        # rank 0 writes (and reports) the interrupt checkpoint; this rank only ends alike
        raise click.exceptions.Exit(128 + summary["signal"])
    ply = os.path.relpath(summary["ply"], out_dir) if summary["ply"] else "no PLY"
    if summary["interrupted"]:
        click.echo(f"Interrupted by {summary['interrupted']} at step {summary['iterations']}: "
                   f"saved {ply} and {os.path.relpath(summary['checkpoint'], out_dir)} in "
                   f"{out_dir}. Continue with: {again}")
        raise click.exceptions.Exit(128 + summary["signal"])   # what shells report for a signal
    click.echo(f"Results in {out_dir}: {ply}, metrics.json, train.log, checkpoints/")
    if request.exports and summary["ply"]:
        from .export import export_run

        export_run(summary["ply"], request.exports, click.echo)




def _write_failed(exc: OSError, checkpoint: str | None, again: str) -> str:
    """One line for an output the run could not write (a full disk above all): which file, and
    what is safe. Writes are atomic, so the checkpoint before it is intact and no temp file is
    left behind."""
    import errno

    full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    failed = f"writing {exc.filename} failed ({exc.strerror or exc})"
    kept = (f"the previous checkpoint {checkpoint} is intact; "
            f"{'free some space' if full else 'once it can be written'}, continue with: {again}"
            if checkpoint else "no checkpoint had been written yet")
    return f"{'the disk is full: ' if full else ''}{failed}; {kept}"


class _preview_hook:
    """The trainer's on_step hook for --preview: opens the window at the first step (the device
    step exists then); any reason it cannot is a warning, never the end of the run."""

    def __init__(self, dataset, echo) -> None:
        from .viewer import ViewerError, check_display

        self.dataset, self.echo, self.preview, self.off = dataset, echo, None, False
        try:
            check_display()
        except ViewerError as exc:
            echo(f"Warning: --preview ignored: {exc}")
            self.off = True

    def __call__(self, it, trainer) -> None:
        if self.off:
            return
        if self.preview is None:
            from .viewer import TrainingPreview, ViewerError

            if trainer.step.renderer is None:
                self.echo("Warning: --preview needs the GPU path; training continues without it")
                self.off = True
                return
            try:
                self.preview = TrainingPreview(trainer.step, self.dataset, log=trainer.log)
            except ViewerError as exc:
                self.echo(f"Warning: --preview ignored: {exc}")
                self.off = True
                return
        self.preview.on_step(it, trainer)

    def close(self) -> None:
        if self.preview is not None:
            trainer_overhead = self.preview.overhead
            self.echo(f"preview: {self.preview.viewer.frames} frames, "
                      f"{100 * trainer_overhead:.1f}% of the wall time")
            self.preview.close()
