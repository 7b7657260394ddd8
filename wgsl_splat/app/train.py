"""``train``: the command, the choice of path (NumPy, one device, several devices, MPI ranks), the
run folder, resume, the live preview. The configuration flags are generated from the training
configuration's declarations (:mod:`.config_cli`)."""

from __future__ import annotations

import os
import time

import click

from ..data.datasets import scene_formats_text
from ..data.exports import FORMAT_NAMES
from ..errors import UserError
from ..options import PRESET_NAMES
from ..render_config import CLASSIC, RenderConfig, render_config
from .common import ADAPTER_OPTION, DEVICE_OPTION, gpu_context, load_training_data
from .config_cli import (
    add_config_flags,
    configure,
    flag_value,
    given_config_flags,
    section_of,
)
from .web_viewer import HOST_OPTION, PORT_OPTION

# run-level flags a resumed run must agree with: parameter name -> (flag, run-info key)
RUN_FLAGS = {"data": ("DATA", "data"), "resolution": ("-r/--resolution", "resolution"),
             "eval_split": ("--eval", "eval_split"), "preset": ("--preset", "preset")}
# run-level flags a resumed run takes from the run unless given again (it may change them):
# parameter name -> run-info key
RESUMED_PATH = {"device": "device_option"}


TRAIN_HELP = f"""Train on DATA: {scene_formats_text()}, or 'default' (the embedded procedural
scene). Writes a .ply, checkpoints, metrics.json and a log into --out, which holds one run: an
existing run is continued (--resume latest) or replaced (--overwrite).

SIGINT (Ctrl-C) and SIGTERM finish the current step, save a checkpoint and the PLY, and exit with
130 / 143."""


@click.command(help=TRAIN_HELP)
@click.argument("data", required=False, default="default")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Output folder (default: runs/<scene name>).")
@click.option("--preset", type=click.Choice(PRESET_NAMES), default="default", show_default=True,
              help="smoke: 300 quick steps; fast: 7k steps; default: the original 30k schedule.")
@click.option("--eval", "eval_split", is_flag=True,
              help="Hold out every 8th image (sorted by name) as a test view.")
@click.option("-r", "--resolution", type=click.IntRange(min=1), default=1, show_default=True,
              help="Downscale images by this factor (cached).")
@DEVICE_OPTION
@ADAPTER_OPTION
@click.option("--resume", default=None,
              help="Continue the run in --out ('latest': its newest intact checkpoint) or from a "
                   "checkpoint file, with the run's own configuration.")
@click.option("--overwrite", is_flag=True,
              help="Replace the run stored in --out (removes only the files a run writes).")
@click.option("--preview", is_flag=True,
              help="Show the model live in a window while it trains (GPU path; ignored without a "
                   "display).")
@click.option("--preview-web", is_flag=True,
              help="Serve the run to web browsers (needs wgsl_splat[web]; --host, --port): the "
                   "model as it trains, the dataset's cameras, the loss curve, N, it/s.")
@HOST_OPTION
@PORT_OPTION
@click.option("--export", "exports", type=click.Choice(FORMAT_NAMES), multiple=True,
              help="At the end of the run also write the final PLY in this format next to it "
                   "(repeatable; see `wgsl_splat export`).")
@click.option("--devices", default=None,
              help="GPU path: train on several adapters at once, 'all' or adapter indices like "
                   "0,1 (see `wgsl_splat devices`); the batch is split across them.")
@click.option("--distributed", is_flag=True,
              help="One rank per process under mpirun/srun (needs wgsl_splat[mpi]): the batch is "
                   "split across ranks, gradients all-reduced with MPI, rank 0 writes the outputs.")
@add_config_flags
@click.pass_context
def train(ctx, data, out_dir, preset, eval_split, resolution, device, adapter_filter, resume,
          overwrite, preview, preview_web, host, port, exports, devices, distributed, **flags):
    given = given_config_flags(ctx)
    cfg = configure(preset, flags.get("strategy"), given, flags, resuming=resume is not None)
    sources = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    given_run = {name for name in (*RUN_FLAGS, *RESUMED_PATH)
                 if ctx.get_parameter_source(name) in sources}
    run_training(data=data, out_dir=out_dir, preset=preset, eval_split=eval_split,
                 resolution=resolution, device=device, adapter_filter=adapter_filter,
                 resume=resume, overwrite=overwrite, preview=preview, devices=devices,
                 distributed=distributed, cfg=cfg,
                 given=ResumeCheck(given_run, {cf: flags[cf.param] for cf in given}),
                 web=(host, port) if preview_web else None, exports=exports)


class ResumeCheck:
    """The flags given on the command line: a resumed run keeps its own configuration, and every
    flag given again must agree with it."""

    def __init__(self, run_flags=frozenset(), config_flags=None) -> None:
        self.run_flags = set(run_flags)
        self.config_flags = dict(config_flags or {})

    def check(self, old_cfg, old_run: dict, new_run: dict) -> None:
        from .. import options

        for name in sorted(self.run_flags & RUN_FLAGS.keys()):
            flag, key = RUN_FLAGS[name]
            if old_run.get(key) != new_run.get(key):
                self._refuse(flag, new_run.get(key), old_run.get(key))
        for cf, raw in self.config_flags.items():
            section = section_of(cf.declared)
            if section is not None and section != old_cfg.strategy:
                raise UserError(f"{cf.declared.option.flag.split('/')[0]} is an option of "
                                f"--strategy {section}, and the run being resumed trains "
                                f"{old_cfg.strategy}")
            new = flag_value(cf, raw)
            old = options.get_path(old_cfg, cf.declared.path)
            if old != new:
                self._refuse(cf.declared.option.flag.split("/")[0], raw, old)

    def resumed_device(self, device: str, run: dict, echo) -> str:
        """The ``--device`` a resumed run continues on: the run's own unless given again."""
        old = run.get(RESUMED_PATH["device"])
        if "device" in self.run_flags or old is None or old == device:
            return device
        echo(f"note: continuing on --device {old}, as the run trained (pass --device to change)")
        return old

    @staticmethod
    def _refuse(flag, new, old):
        raise UserError(f"{flag} {new} disagrees with the run being resumed ({old}): a resumed run "
                        f"keeps its own configuration; drop the flag, or train into a new --out")


def make_step_factory(device: str, adapter_filter: str | None, echo,
                      config: RenderConfig = CLASSIC, devices: str | None = None, world=None):
    """Pick the path: returns ``(factory, description)`` where ``factory(arrays, spec)`` builds a
    :class:`~wgsl_splat.contract.step.TrainStep` rendering in ``config``'s mode. ``devices``
    (``--devices``) and ``world`` (an MPI reducer, ``--distributed``) make it a data-parallel step
    over replicas (:mod:`wgsl_splat.training.parallel`): this process's devices, or under MPI one
    device per rank chosen by the rank's index on its node."""
    from ..reference.step import CpuTrainStep

    def cpu_factory(arrays, spec):
        return CpuTrainStep(arrays, spec=spec, render_config=config)

    if devices is not None or world is not None:
        return _replicated_factory(device, devices, world, echo, config, cpu_factory)
    ctx = None if device == "cpu" else gpu_context(device, adapter_filter, echo)
    if ctx is None:
        return cpu_factory, "cpu (NumPy reference)"
    from ..gpu.step import GpuTrainStep

    def gpu_factory(arrays, spec):
        return GpuTrainStep(ctx, arrays, spec=spec, render_config=config)

    return gpu_factory, f"gpu ({ctx.name})"


def _replicated_factory(device, devices, world, echo, config, cpu_factory):
    from ..training.parallel import LocalReducer, ReplicatedStep

    reducer = world or LocalReducer()
    if device == "cpu":
        if devices is not None:
            raise UserError("--devices chooses GPU adapters: it needs the GPU path, not --device cpu")

        def factory(arrays, spec):
            return ReplicatedStep([cpu_factory(arrays, spec)], reducer, start_step=arrays.adam.step)
        factory.world = reducer.size
        return factory, f"cpu (NumPy reference), rank {reducer.rank} of {reducer.size}"
    from ..gpu.runtime import GpuError, device_indices, open_devices
    from ..gpu.step import GpuTrainStep

    try:
        indices = device_indices(devices or "all")
        if world is not None:   # one device per rank: the rank's index among its node's ranks
            indices = [indices[world.local_rank % len(indices)]]
        contexts = open_devices(indices)
    except GpuError as exc:
        raise UserError(str(exc)) from None
    if any(c.backend == "OpenGL" for c in contexts):
        from .common import opengl_note

        echo(opengl_note(next(c for c in contexts if c.backend == "OpenGL")))
    if world is None and len(contexts) == 1:   # nothing to reduce: the plain step, no read-back
        def single(arrays, spec):
            return GpuTrainStep(contexts[0], arrays, spec=spec, render_config=config)
        return single, f"gpu ([{indices[0]}] {contexts[0].name})"

    def factory(arrays, spec):
        replicas = [GpuTrainStep(ctx, arrays, spec=spec, render_config=config) for ctx in contexts]
        return ReplicatedStep(replicas, reducer, start_step=arrays.adam.step)

    factory.world = len(contexts) * reducer.size
    names = ", ".join(f"[{i}] {c.name}" for i, c in zip(indices, contexts))
    where = f"rank {reducer.rank} of {reducer.size}: " if world is not None else ""
    return factory, f"gpu ({where}{names})"


def _resumed_settings(meta: dict, run: dict, given: ResumeCheck) -> tuple:
    """The configuration and run info a resumed run continues with: the checkpoint's own. Flags
    given again must agree with it (one line naming the first that does not)."""
    from ..training.config import TrainConfig

    old_cfg = TrainConfig.from_dict(meta["config"])
    stored = meta.get("run") or {}
    old_run = {**run, **stored}   # checkpoints before format 2 lack run info
    if RESUMED_PATH["device"] not in stored:   # before it was recorded: the path the run named
        described = stored.get("device")
        old_run[RESUMED_PATH["device"]] = ("cpu" if isinstance(described, str)
                                           and described.startswith("cpu") else None)
    given.check(old_cfg, old_run, run)
    return old_cfg, old_run


def run_training(data="default", out_dir=None, preset="default", eval_split=False, resolution=1,
                 device="auto", adapter_filter=None, resume=None, overwrite=False, preview=False,
                 devices=None, distributed=False, cfg=None, given: ResumeCheck | None = None,
                 web=None, exports=()) -> None:
    """The ``train`` command with its configuration settled (``cfg``: the preset's when None)."""
    from ..training.config import make_config

    cfg = cfg or make_config(preset)
    given = given or ResumeCheck()
    if web:   # fail fast (no viser, port taken), before any image is decoded
        from .web_viewer import check_port, import_viser

        import_viser()
        check_port(*web)
    try:   # what needs no data is refused before the run folder is touched
        cfg.check()
        cfg.optim.for_batch(cfg.batch_size)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if cfg.appearance and (devices is not None or distributed):
        raise UserError("--appearance keeps each view's colour transform on one device: it does "
                        "not combine with --devices or --distributed")
    if cfg.pose_opt and (devices is not None or distributed):
        raise UserError("--pose-opt keeps each view's pose correction on one device: it does not "
                        "combine with --devices or --distributed")
    run_info = dict(data=data if data == "default" else os.path.abspath(data), resolution=resolution,
                    eval_split=eval_split, preset=preset, device_option=device)
    if resume and overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it: pass one")
    out_dir = out_dir or _default_out_dir(data, resume)
    if not resume and data != "default":
        from .run_dir import RunDirError, check_apart_from_data

        try:
            check_apart_from_data(out_dir, data)
        except RunDirError as exc:
            raise UserError(str(exc)) from None
    if distributed:
        return _train_distributed(out_dir, cfg, run_info, data, resolution, eval_split, device,
                                  devices, resume, overwrite, given, web, exports)
    _train_locked(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, overwrite, given, preview, devices, web, exports)


def _default_out_dir(data: str, resume: str | None) -> str:
    """A checkpoint's own run folder when resuming from one, else ``runs/<scene name>``."""
    if resume and resume != "latest":
        folder = os.path.dirname(os.path.abspath(resume))
        if os.path.basename(folder) == "checkpoints":
            return os.path.dirname(folder)
    name = "default" if data == "default" else os.path.basename(os.path.normpath(data)) or "scene"
    return os.path.join("runs", name)


def _open_run(out_dir, cfg, run_info, resume, overwrite, given):
    """Lock ``out_dir`` and settle what the run continues from: ``(lock, resume, cfg, run_info,
    notes)`` (a resumed run keeps the checkpoint's configuration; ``notes``: what was printed
    about the checkpoints, e.g. a damaged one set aside, for the run's log)."""
    from ..training.trainer import TrainingError, find_checkpoint
    from .run_dir import RunDirError, open_run_dir

    continues_run = resume is not None and (
        resume == "latest" or _inside(os.path.abspath(resume), os.path.abspath(out_dir)))
    try:
        lock = open_run_dir(out_dir, continues_run=continues_run, overwrite=overwrite,
                            log=click.echo)
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    notes = []

    def note(line):
        click.echo(line)
        notes.append(line)

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
    return lock, resume, cfg, run_info, notes


def _train_locked(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, overwrite, given, preview, devices, web=None, exports=()) -> None:
    lock, resume, cfg, run_info, notes = _open_run(out_dir, cfg, run_info, resume, overwrite,
                                                   given)
    try:
        if resume:
            data, resolution, eval_split = (run_info["data"], run_info["resolution"],
                                            run_info["eval_split"])
            device = given.resumed_device(device, run_info, click.echo)
            run_info = dict(run_info, device_option=device)
        _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, preview, devices, notes=notes, web=web, exports=exports)
    finally:
        lock.release()


def _train_distributed(out_dir, cfg, run_info, data, resolution, eval_split, device, devices,
                       resume, overwrite, given, web=None, exports=()) -> None:
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
    notes = []
    early = _RecordedSignals().install()
    try:
        error = None
        if world.rank == 0:
            try:
                lock, resume, cfg, run_info, notes = _open_run(out_dir, cfg, run_info, resume,
                                                               overwrite, given)
            except UserError as exc:
                error = str(exc)
        error, resume, cfg, run_info = world.comm.bcast((error, resume, cfg, run_info), root=0)
        if error:
            raise UserError(error)
        if resume:
            data, resolution, eval_split = (run_info["data"], run_info["resolution"],
                                            run_info["eval_split"])
            device = given.resumed_device(device, run_info, click.echo if world.rank == 0
                                          else lambda line: None)
            run_info = dict(run_info, device_option=device)
        if world.rank == 0:
            _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, None, resume,
                      False, devices, world, notes=notes, earlier_signal=early, web=web,
                      exports=exports)
        else:
            scratch = tempfile.mkdtemp(prefix=f"wgsl_splat_rank{world.rank}_")
            try:
                with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                    _train_in(scratch, cfg, run_info, data, resolution, eval_split, device, None,
                              resume, False, devices, world, earlier_signal=early)
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


def resume_command(out_dir, run_info, device, adapter_filter, devices, world, preview) -> str:
    """The command that continues this run as it was started: the same program, launcher and
    rank count (MPI), data, adapters and path (the configuration, -r and split come from the
    checkpoint). Printed on an interrupt and where a run stops with a checkpoint to continue."""
    import shlex
    import sys

    argv0 = os.path.normpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    main = os.path.basename(argv0)
    if argv0.endswith(os.path.join("wgsl_splat", "__main__.py")):   # python -m wgsl_splat
        program = [sys.executable, "-m", "wgsl_splat"]
    elif main.startswith("wgsl_splat"):            # the console script
        program = [sys.argv[0]]
    else:                                          # embedded (tests, other programs)
        program = ["wgsl_splat"]
    if world is not None:
        # srun started the ranks itself: a Slurm step without MPICH's or Open MPI's launcher
        slurm = "SLURM_STEP_ID" in os.environ and not any(
            k.startswith(("HYDI_", "HYDRA_", "OMPI_")) for k in os.environ)
        program = ["srun" if slurm else "mpirun", "-n", str(world.size)] + program
    args = ["train"] + ([] if run_info["data"] == "default" else [run_info["data"]])
    args += ["--out", out_dir, "--resume", "latest"]
    if device != "auto":
        args += ["--device", device]
    if adapter_filter:
        args += ["--adapter", adapter_filter]
    if devices is not None:
        args += ["--devices", devices]
    if world is not None:
        args.append("--distributed")
    if preview:
        args.append("--preview")
    return shlex.join(program + args)


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
              resume, preview, devices=None, world=None, notes=(), earlier_signal=None,
              web=None, exports=()) -> None:
    """The run itself, in a locked output folder."""
    from ..data.datasets import DatasetError
    from ..training.evaluation import held_out_views
    from ..training.trainer import Trainer, TrainingError, check_new_run

    dataset = load_training_data(data, resolution, eval_split, cfg.background)
    for note in dataset.notes:
        click.echo(f"note: {note}")
    if not resume:   # refused now, not after decoding and initialisation (nothing written yet)
        try:
            check_new_run(dataset, cfg)
        except TrainingError as exc:
            raise UserError(str(exc)) from None
    factory, path_name = make_step_factory(device, adapter_filter, click.echo,
                                           render_config(cfg.render_mode), devices, world)
    again = resume_command(out_dir, run_info, device, adapter_filter, devices, world, preview)
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
    if web:   # before the trainer: a port in use is one line before anything is written
        from .web_viewer import TrainingWebPreview

        web_hook = TrainingWebPreview(dataset, *web, cfg.render_mode, click.echo)
    trainer = Trainer(dataset, cfg, out_dir, factory, log=click.echo,
                      run_info=dict(run_info, device=path_name),
                      primary=world is None or world.rank == 0)
    trainer.resume_command = again
    for line in notes:     # printed already; the run's log keeps them too
        trainer.log(line, echo=False)
    on_step = None
    if preview:
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
            summary = trainer.run(resume=resume, progress=progress, on_step=on_step,
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
    if exports and summary["ply"]:
        from .export import export_run

        export_run(summary["ply"], exports, click.echo)


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
