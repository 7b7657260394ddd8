"""Implementations of the CLI commands (kept apart from click so they stay testable)."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from ..atomic_io import save_png
from ..camera import Camera
from ..errors import UserError
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig, render_config


def load_cameras_json(path) -> list[Camera]:
    try:
        with open(path) as f:
            raw = json.load(f)
        items = raw if isinstance(raw, list) else [raw]
        return [Camera(np.asarray(c["world_to_camera"], dtype=np.float64), c["fx"], c["fy"], c["cx"],
                       c["cy"], c["width"], c["height"], c.get("name", f"camera_{i:03d}"))
                for i, c in enumerate(items)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"cannot read cameras from {path}: {exc}") from None


def load_model(path, drop_nonfinite: bool = False) -> GaussianModel:
    return load_model_and_mode(path, drop_nonfinite)[0]


def load_model_and_mode(path, drop_nonfinite: bool = False) -> tuple[GaussianModel, str]:
    """The model of a PLY and the render mode its header declares (one-line errors)."""
    import click

    from ..data.ply import NonFinitePlyError, PlyError, load_ply_with_mode

    if not os.path.isfile(path):
        raise UserError(f"model file not found: {path}")
    notes = []
    try:
        model, mode = load_ply_with_mode(path, drop_nonfinite=drop_nonfinite, notes=notes)
    except NonFinitePlyError as exc:
        raise UserError(f"{exc}; --drop-nonfinite leaves them out") from None
    except PlyError as exc:
        raise UserError(f"{path}: {exc}") from None
    for note in notes:
        click.echo(f"note: {note}")
    return model, mode


def render_mode_for(model_mode: str, antialiased: bool | None, echo) -> RenderConfig:
    """The render configuration of a model trained in ``model_mode`` given the command line's
    ``--antialiased/--classic`` (None: as trained); rendering it otherwise prints a warning."""
    mode = model_mode if antialiased is None else ("antialiased" if antialiased else "classic")
    if mode != model_mode:
        effect = ("only the 2D Mip filter applies, it has no 3D filter" if mode == "antialiased"
                  else "without the 2D Mip filter, as viewers that do not know it show it")
        echo(f"Warning: the model was trained {model_mode}; rendering it {mode} as asked ({effect})")
    return render_config(mode)


def gpu_context(device: str, adapter_filter: str | None = None, echo=None, why: str = ""):
    """The GPU context for ``--device`` (``None``: use the NumPy path), adapter errors turned into a
    :class:`UserError` that starts with ``why`` (e.g. "the viewer renders on the GPU")."""
    from ..gpu.runtime import GpuError, select_device

    try:
        return select_device(device, adapter_filter, echo=echo)
    except GpuError as exc:
        raise UserError(f"{why}: {exc}" if why else str(exc)) from None


def upload_to_gpu(renderer, model, way_out: str) -> None:
    """``renderer.upload_model(model)``, a model too large for the adapter a one-line error."""
    from ..gpu.renderer import ModelTooLargeError

    try:
        renderer.upload_model(model)
    except ModelTooLargeError as exc:
        raise UserError(f"{exc}: {way_out}") from None


def make_renderer(device: str, adapter_filter: str | None = None, echo=None,
                  config: RenderConfig = CLASSIC):
    """A function (model, camera, background) -> (H,W,3) image on the chosen path, and its name.
    The GPU renderer keeps the model resident and re-uploads only when another model is passed;
    the NumPy path renders in bounded memory (:func:`~wgsl_splat.reference.render_image`).
    Antialiased models come from PLYs with their 3D filter fused in: rendered with a zero filter."""
    from ..reference import render_image

    def cpu(model, camera, background):
        return render_image(model, camera, background, config=config)

    ctx = None if device == "cpu" else gpu_context(device, adapter_filter, echo)
    if ctx is None:
        return cpu, "cpu (NumPy reference)"
    from ..gpu.renderer import GpuRenderer

    renderer = GpuRenderer(ctx, config=config)
    uploaded = {"model": None}

    def gpu(model, camera, background):
        if uploaded["model"] is not model:
            upload_to_gpu(renderer, model, "render it with --device cpu (or, for render, a lower "
                                           "--sh-degree)")
            uploaded["model"] = model
        return renderer.render(camera, background)

    return gpu, f"gpu ({ctx.name})"


def render(model_path, data, camera_json, out_dir, background, limit, device, resolution=1,
           sh_degree=None, drop_nonfinite=False, antialiased: bool | None = None) -> None:
    """Render a model from a scene's cameras (next to its images) or from a camera file.

    ``data``: 'default' (the embedded scene) or any scene ``train`` reads, at ``resolution``.
    Without ``model_path`` the scene's point cloud is rendered as initial Gaussians. The render
    mode is the model's (its PLY header), unless ``antialiased`` says otherwise.
    """
    import click

    from ..atomic_io import safe_file_stem

    model, mode = load_model_and_mode(model_path, drop_nonfinite) if model_path else (None, "classic")
    dataset = load_training_data(data, resolution, False, background)
    if model is None:
        if dataset.points is None:
            raise UserError(f"{data} has no point cloud to render: pass a MODEL.ply")
        model = GaussianModel.from_points(dataset.points, dataset.point_colors, sh_degree=0)
    if sh_degree is not None and sh_degree < model.sh_degree:
        model = model.with_sh_degree(sh_degree)
    views = [(cam, i) for i, cam in enumerate(dataset.cameras)]   # (camera, ground-truth index)
    if camera_json:
        views = [(cam, None) for cam in load_cameras_json(camera_json)]
    if limit is not None:
        views = views[:limit]
    config = render_mode_for(mode, antialiased, click.echo)
    render_fn, path_name = make_renderer(device, echo=click.echo, config=config)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out_dir}: {exc.strerror or exc}") from None
    times = []
    for k, (cam, gt) in enumerate(views):
        t0 = time.perf_counter()
        image = render_fn(model, cam, background)
        times.append(time.perf_counter() - t0)
        name = safe_file_stem(cam.name, f"camera_{k:03d}")
        save_png(os.path.join(out_dir, f"{name}.png"), image)
        if gt is not None:
            save_png(os.path.join(out_dir, f"{name}_gt.png"), dataset.load_image(gt))
    click.echo(f"Rendered {len(views)} views of {len(model)} Gaussians ({config.mode}) on "
               f"{path_name} (median {1000 * float(np.median(times)):.1f} ms/view) into {out_dir}")


def load_training_data(data: str, resolution: int, eval_split: bool, background):
    from ..data.datasets import DatasetError, load_dataset

    try:
        if data == "default":
            from ..data.default_scene import default_dataset

            return default_dataset(resolution=resolution, eval_split=eval_split,
                                   background=background)
        return load_dataset(data, resolution=resolution, eval_split=eval_split,
                            background=background)
    except DatasetError as exc:
        raise UserError(str(exc)) from None


def make_step_factory(device: str, adapter_filter: str | None, echo,
                      config: RenderConfig = CLASSIC, devices: str | None = None, world=None):
    """Pick the path: returns ``(factory, description)`` where ``factory`` builds a TrainStep
    rendering in ``config``'s mode. ``devices`` (``--devices``) and ``world`` (an MPI reducer,
    ``--distributed``) make it a data-parallel step over replicas (wgsl_splat.training.parallel): this
    process's devices, or under MPI one device per rank chosen by the rank's index on its node."""
    from ..reference.step import CpuTrainStep

    def cpu_factory(arrays, optim, background, lambda_dssim, regularizers):
        return CpuTrainStep(arrays, optim, background, lambda_dssim, regularizers=regularizers,
                            render_config=config)

    if devices is not None or world is not None:
        return _replicated_factory(device, devices, world, echo, config, cpu_factory)
    ctx = None if device == "cpu" else gpu_context(device, adapter_filter, echo)
    if ctx is None:
        return cpu_factory, "cpu (NumPy reference)"
    try:
        from ..gpu.step import GpuTrainStep
    except ImportError:
        msg = "the device training step is not available in this build"
        if device == "gpu":
            raise UserError(f"--device gpu: {msg}") from None
        echo(f"Warning: {msg}; training on the NumPy path")
        return cpu_factory, "cpu (NumPy reference)"

    def gpu_factory(arrays, optim, background, lambda_dssim, regularizers):
        return GpuTrainStep(ctx, arrays, optim, background, lambda_dssim,
                            regularizers=regularizers, render_config=config)

    return gpu_factory, f"gpu ({ctx.name})"


def _replicated_factory(device, devices, world, echo, config, cpu_factory):
    from ..training.parallel import LocalReducer, ReplicatedStep

    reducer = world or LocalReducer()
    if device == "cpu":
        if devices is not None:
            raise UserError("--devices chooses GPU adapters: it needs the GPU path, not --device cpu")
        def factory(arrays, *args):
            return ReplicatedStep([cpu_factory(arrays, *args)], reducer,
                                  start_step=arrays.adam.step)
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
    if world is None and len(contexts) == 1:   # nothing to reduce: the plain step, no read-back
        def single(arrays, optim, background, lambda_dssim, regularizers):
            return GpuTrainStep(contexts[0], arrays, optim, background, lambda_dssim,
                                regularizers=regularizers, render_config=config)
        return single, f"gpu ([{indices[0]}] {contexts[0].name})"

    def factory(arrays, optim, background, lambda_dssim, regularizers):
        replicas = [GpuTrainStep(ctx, arrays, optim, background, lambda_dssim,
                                 regularizers=regularizers, render_config=config) for ctx in contexts]
        return ReplicatedStep(replicas, reducer, start_step=arrays.adam.step)

    factory.world = len(contexts) * reducer.size
    names = ", ".join(f"[{i}] {c.name}" for i, c in zip(indices, contexts))
    where = f"rank {reducer.rank} of {reducer.size}: " if world is not None else ""
    return factory, f"gpu ({where}{names})"


def _run_settings(cfg, run: dict) -> dict:
    """The value of every ``train`` flag that shapes a run, read from its configuration and run
    info: what a resumed run compares the flags given again with (keys are the flags' names)."""
    d, m = cfg.adc, cfg.mcmc
    return {"data": run.get("data"), "preset": run.get("preset"),
            "resolution": run.get("resolution"), "eval_split": run.get("eval_split"),
            "iters": cfg.iters, "sh_degree": cfg.sh_degree, "densify_from": d.start,
            "densify_until": d.stop, "densify_every": d.every,
            "densify_grad_threshold": d.grad_threshold,
            "opacity_reset_every": d.opacity_reset_every, "prune_screen_size": d.max_screen_size,
            "max_params_per_observation": d.max_params_per_observation,
            "white_background": tuple(cfg.background) == (1.0, 1.0, 1.0), "seed": cfg.seed,
            "eval_at": tuple(cfg.eval_at), "lr_scale": cfg.optim.lr_scale,
            "strategy": cfg.strategy, "cap_max": m.cap_max, "mcmc_noise_lr": m.noise_lr,
            "opacity_reg": m.opacity_reg, "scale_reg": m.scale_reg,
            "antialiased": cfg.render_mode == "antialiased", "batch_size": cfg.batch_size}


_FLAG_NAMES = {"data": "DATA", "eval_split": "--eval", "resolution": "-r/--resolution"}


def _resumed_settings(meta: dict, cfg, run: dict, given) -> tuple:
    """The configuration and run info a resumed run continues with: the checkpoint's own. Flags
    given again must agree with it (one line naming the first that does not)."""
    from ..training.config import TrainConfig

    old_cfg = TrainConfig.from_dict(meta["config"])
    old_run = {**run, **(meta.get("run") or {})}   # checkpoints before format 2 lack run info
    old, new = _run_settings(old_cfg, old_run), _run_settings(cfg, run)
    for flag in sorted(given):
        if flag in old and old[flag] != new[flag]:
            name = _FLAG_NAMES.get(flag, "--" + flag.replace("_", "-"))
            raise UserError(f"{name} {new[flag]} disagrees with the run being resumed ({old[flag]}): "
                            f"a resumed run keeps its own configuration; drop the flag, or train "
                            f"into a new --out")
    return old_cfg, old_run


def _parse_eval_at(text: str, iters: int) -> tuple:
    try:
        steps = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UserError(f"--eval-at takes comma-separated step numbers, got {text!r}") from None
    bad = [s for s in steps if not 1 <= s <= iters]
    if bad or not steps:
        raise UserError(f"--eval-at {text!r}: steps must lie between 1 and {iters} (the run's length)")
    return tuple(steps)


def _default_out_dir(data: str, resume: str | None) -> str:
    """A checkpoint's own run folder when resuming from one, else ``runs/<scene name>``."""
    if resume and resume != "latest":
        folder = os.path.dirname(os.path.abspath(resume))
        if os.path.basename(folder) == "checkpoints":
            return os.path.dirname(folder)
    name = "default" if data == "default" else os.path.basename(os.path.normpath(data)) or "scene"
    return os.path.join("runs", name)


def train(data="default", out_dir=None, preset="default", iters=None, eval_split=False,
          resolution=1, device="auto", adapter_filter=None, sh_degree=None, densify_from=None,
          densify_until=None, densify_every=None, densify_grad_threshold=None,
          opacity_reset_every=None, prune_screen_size=None, max_params_per_observation=None,
          white_background=False, seed=0,
          resume=None, eval_at=None, preview=False, overwrite=False, lr_scale=1.0,
          strategy="adc", cap_max=None, mcmc_noise_lr=None, opacity_reg=None, scale_reg=None,
          antialiased=False, batch_size=1, devices=None, distributed=False,
          given=frozenset()) -> None:
    """The ``train`` command (its flags, by name). ``given``: the names of the flags given on the
    command line (a resumed run checks them against its own configuration instead of applying
    them)."""
    import click
    from dataclasses import replace

    from ..training.config import preset as make_preset
    from .run_dir import RunDirError, open_run_dir
    from ..training.trainer import TrainingError, find_checkpoint

    cfg = make_preset(preset)
    if iters is not None:
        cfg.iters = iters
        cfg.eval_at = tuple(s for s in cfg.eval_at if s < iters) + (iters,)
        cfg.save_at = tuple(s for s in cfg.save_at if s < iters) + (iters,)
    if eval_at:
        cfg.eval_at = _parse_eval_at(eval_at, cfg.iters)
    if sh_degree is not None:
        cfg.sh_degree = sh_degree
    for section, name, value in (
            (cfg.adc, "start", densify_from), (cfg.adc, "stop", densify_until),
            (cfg.adc, "every", densify_every), (cfg.adc, "grad_threshold", densify_grad_threshold),
            (cfg.adc, "opacity_reset_every", opacity_reset_every),
            (cfg.adc, "max_screen_size", prune_screen_size),
            (cfg.adc, "max_params_per_observation", max_params_per_observation),
            (cfg.mcmc, "cap_max", cap_max),
            (cfg.mcmc, "noise_lr", mcmc_noise_lr), (cfg.mcmc, "opacity_reg", opacity_reg),
            (cfg.mcmc, "scale_reg", scale_reg)):
        if value is not None:
            setattr(section, name, value)
    cfg.strategy = strategy
    cfg.seed = seed
    cfg.batch_size = batch_size
    cfg.background = (1.0, 1.0, 1.0) if white_background else (0.0, 0.0, 0.0)
    cfg.optim = replace(cfg.optim, lr_scale=float(lr_scale))
    cfg.render_mode = "antialiased" if antialiased else "classic"
    run_info = dict(data=data if data == "default" else os.path.abspath(data), resolution=resolution,
                    eval_split=eval_split, preset=preset)
    if resume and overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it: pass one")
    out_dir = out_dir or _default_out_dir(data, resume)
    if distributed:
        return _train_distributed(out_dir, cfg, run_info, data, resolution, eval_split, device,
                                  devices, resume, overwrite, given)
    _train_locked(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, overwrite, given, preview, devices)


def _open_run(out_dir, cfg, run_info, resume, overwrite, given):
    """Lock ``out_dir`` and settle what the run continues from: ``(lock, resume, cfg, run_info)``
    (a resumed run keeps the checkpoint's configuration)."""
    import click

    from .run_dir import RunDirError, open_run_dir
    from ..training.trainer import TrainingError, find_checkpoint

    continues_run = resume is not None and (
        resume == "latest" or _inside(os.path.abspath(resume), os.path.abspath(out_dir)))
    try:
        lock = open_run_dir(out_dir, continues_run=continues_run, overwrite=overwrite,
                            log=click.echo)
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    try:
        if resume:
            try:
                resume, meta = find_checkpoint(os.path.join(out_dir, "checkpoints"), resume,
                                               click.echo)
            except TrainingError as exc:
                raise UserError(str(exc)) from None
            cfg, run_info = _resumed_settings(meta, cfg, run_info, given)
    except BaseException:
        lock.release()
        raise
    return lock, resume, cfg, run_info


def _train_locked(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, overwrite, given, preview, devices) -> None:
    lock, resume, cfg, run_info = _open_run(out_dir, cfg, run_info, resume, overwrite, given)
    try:
        if resume:
            data, resolution, eval_split = (run_info["data"], run_info["resolution"],
                                            run_info["eval_split"])
        _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
                  resume, preview, devices)
    finally:
        lock.release()


def _train_distributed(out_dir, cfg, run_info, data, resolution, eval_split, device, devices,
                       resume, overwrite, given) -> None:
    """``train --distributed``: every rank trains a replica; rank 0 holds the run folder and
    writes every output, the other ranks log into a scratch folder. Any rank's error ends every
    rank (MPI_Abort) after a line that names the rank; the last checkpoint stays intact (written
    atomically by rank 0)."""
    import contextlib
    import shutil
    import sys
    import tempfile

    import click

    from ..training.parallel import mpi_world

    world = mpi_world()
    lock = None
    try:
        error = None
        if world.rank == 0:
            try:
                lock, resume, cfg, run_info = _open_run(out_dir, cfg, run_info, resume, overwrite,
                                                        given)
            except UserError as exc:
                error = str(exc)
        error, resume, cfg, run_info = world.comm.bcast((error, resume, cfg, run_info), root=0)
        if error:
            raise UserError(error)
        if resume:
            data, resolution, eval_split = (run_info["data"], run_info["resolution"],
                                            run_info["eval_split"])
        if world.rank == 0:
            _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, None, resume,
                      False, devices, world)
        else:
            scratch = tempfile.mkdtemp(prefix=f"wgsl_splat_rank{world.rank}_")
            try:
                with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                    _train_in(scratch, cfg, run_info, data, resolution, eval_split, device, None,
                              resume, False, devices, world)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except click.exceptions.Exit:
        raise                        # an agreed stop (SIGINT/SIGTERM): every rank exits alike
    except BaseException as exc:     # noqa: BLE001
        if world.size == 1:
            raise
        msg = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        sys.stderr.write(f"Error: rank {world.rank} of {world.size}: {msg}; ending every rank "
                         f"(the last checkpoint in {out_dir}/checkpoints is intact)\n")
        sys.stderr.flush()
        world.comm.Abort(1)
    finally:
        if lock is not None:
            lock.release()


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _train_in(out_dir, cfg, run_info, data, resolution, eval_split, device, adapter_filter,
              resume, preview, devices=None, world=None) -> None:
    """The run itself, in a locked output folder."""
    import click

    from ..data.datasets import DatasetError
    from ..training.trainer import Trainer, TrainingError

    dataset = load_training_data(data, resolution, eval_split, cfg.background)
    for note in dataset.notes:
        click.echo(f"note: {note}")
    with click.progressbar(length=len(dataset.cameras), label="decoding images") as bar:
        try:   # every image before step 1: a bad one is an error now, not hours into the run
            dataset.preload(progress=bar.update)
        except DatasetError as exc:
            raise UserError(str(exc)) from None
    factory, path_name = make_step_factory(device, adapter_filter, click.echo,
                                           render_config(cfg.render_mode), devices, world)
    replicas = getattr(factory, "world", 1)
    if cfg.batch_size < replicas:
        raise UserError(f"--batch-size {cfg.batch_size} is smaller than the {replicas} devices "
                        f"training it: each device needs at least one view per step")
    click.echo(f"Training {len(dataset.train_indices)} views ({len(dataset.test_indices)} held out) "
               f"for {cfg.iters} steps ({cfg.render_mode}) on {path_name} -> {out_dir}")
    trainer = Trainer(dataset, cfg, out_dir, factory, log=click.echo,
                      run_info=dict(run_info, device=path_name),
                      primary=world is None or world.rank == 0)
    on_step = None
    if preview:
        on_step = _preview_hook(dataset, click.echo)
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
            summary = trainer.run(resume=resume, progress=progress, on_step=on_step)
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    finally:
        trainer.close()
        if on_step is not None:
            on_step.close()
    ply = os.path.relpath(summary["ply"], out_dir) if summary["ply"] else "no PLY"
    if summary["interrupted"]:
        click.echo(f"Interrupted by {summary['interrupted']} at step {summary['iterations']}: "
                   f"saved {ply} and {os.path.relpath(summary['checkpoint'], out_dir)} in "
                   f"{out_dir}. Continue with: wgsl_splat train --out {out_dir} --resume latest")
        raise click.exceptions.Exit(128 + summary["signal"])   # what shells report for a signal
    click.echo(f"Results in {out_dir}: {ply}, metrics.json, train.log, checkpoints/")


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


def view(model_path, data, resolution, size, background, screenshot, frames, adapter_filter,
         drop_nonfinite=False, antialiased: bool | None = None) -> None:
    import click

    from ..gpu.renderer import GpuRenderer
    from .view_camera import OrbitCamera
    from .viewer import Viewer, ViewerError

    try:
        w, h = (int(v) for v in size.lower().split("x"))
        assert w > 0 and h > 0
    except (ValueError, AssertionError):
        raise UserError(f"--size takes WIDTHxHEIGHT, got {size!r}") from None
    model, mode = load_model_and_mode(model_path, drop_nonfinite)
    config = render_mode_for(mode, antialiased, click.echo)
    cameras = []
    if data:
        cameras = list(load_training_data(data, resolution, False, background).cameras)
    ctx = gpu_context("gpu", adapter_filter, click.echo, "the viewer renders on the GPU")
    # The window's surface is one texture, the image one storage buffer: a size beyond either
    # would abort the process in the driver (a Rust panic), not raise.
    side = int(ctx.limits.get("max-texture-dimension-2d", 8192))
    pixels = ctx.max_binding_bytes // 12
    if w > side or h > side or w * h > pixels:
        raise UserError(f"--size {w}x{h} is beyond this adapter: at most {side} px a side and "
                        f"{pixels / 1e6:.1f} megapixels")
    renderer = GpuRenderer(ctx, config=config)
    upload_to_gpu(renderer, model, "the viewer renders on the GPU; render views with "
                                   "'render --device cpu' instead")
    if cameras:
        center = np.median(model.means, axis=0) if len(model) else np.zeros(3)
        orbit = OrbitCamera.from_camera(cameras[0], float(np.linalg.norm(center - cameras[0].center)) or 1.0)
    else:
        orbit = OrbitCamera.for_points(model.means)
    try:
        viewer = Viewer(ctx, renderer, orbit, size=(w, h),
                        title=f"wgsl_splat — {os.path.basename(model_path)} ({config.mode})",
                        cameras=cameras, background=background)
    except ViewerError as exc:
        raise UserError(str(exc)) from None
    if screenshot:
        viewer.request_screenshot(screenshot)
        frames = 1
    viewer.run(max_frames=frames)


def latest_ply(out_dir: str) -> tuple[int, str]:
    base = os.path.join(out_dir, "point_cloud")
    found = []
    if os.path.isdir(base):
        for d in os.listdir(base):
            if d.startswith("iteration_") and d[10:].isdigit():
                p = os.path.join(base, d, "point_cloud.ply")
                if os.path.isfile(p):
                    found.append((int(d[10:]), p))
    if not found:
        raise UserError(f"no point_cloud/iteration_*/point_cloud.ply in {out_dir}: is it a training output folder?")
    return max(found)


def parse_scales(text: str | None) -> list[float]:
    """``--scales 1,0.5,0.25`` -> [1.0, 0.5, 0.25] (positive numbers); None -> [1.0]."""
    if text is None:
        return [1.0]
    try:
        scales = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        scales = []
    if not scales or not all(np.isfinite(s) and s > 0 for s in scales):
        raise UserError(f"--scales takes comma-separated positive numbers, got {text!r}")
    return scales


def evaluate(out_dir: str, data: str | None, iteration: int | None, device: str,
             drop_nonfinite: bool = False, scales: str | None = None,
             antialiased: bool | None = None) -> None:
    """Re-evaluate a finished run on its held-out views (same data, resolution and split); with
    ``scales``, also at other resolutions: scale s renders the cameras at s times the training
    resolution against ground truth area-downscaled from the source images (Mip-Splatting's
    multi-scale protocol; s > 1 needs sources larger than the training images)."""
    from .run_dir import RunDirError, lock_folder

    if not os.path.isfile(os.path.join(out_dir, "cfg.json")):
        raise UserError(f"{out_dir} has no cfg.json: is it a training output folder?")
    scale_list = parse_scales(scales)
    try:
        lock = lock_folder(out_dir)   # a run training there would write metrics.json too
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    with lock:
        _evaluate(out_dir, data, iteration, device, drop_nonfinite, scale_list, antialiased)


def _evaluate(out_dir, data, iteration, device, drop_nonfinite, scale_list, antialiased) -> None:
    import click

    from ..atomic_io import write_json
    from ..training.evaluation import Lpips, evaluate_views

    with open(os.path.join(out_dir, "cfg.json")) as f:
        cfg = json.load(f)
    run = cfg.get("run", {})
    data = data or run.get("data")
    if data is None:
        raise UserError("cfg.json does not record the data path: pass --data")
    if iteration is None:
        iteration, ply_path = latest_ply(out_dir)
    else:
        ply_path = os.path.join(out_dir, "point_cloud", f"iteration_{iteration}", "point_cloud.ply")
    model, mode = load_model_and_mode(ply_path, drop_nonfinite)
    config = render_mode_for(mode, antialiased, click.echo)
    background = tuple(cfg.get("background", (0.0, 0.0, 0.0)))
    train_resolution = float(run.get("resolution", 1))
    render_fn, path_name = make_renderer(device, echo=click.echo, config=config)
    lpips = Lpips()
    metrics_path = os.path.join(out_dir, "metrics.json")
    metrics = {}
    if os.path.isfile(metrics_path):
        with open(metrics_path) as f:
            metrics = json.load(f)
    for scale in scale_list:
        resolution = train_resolution / scale
        if resolution < 1.0:
            raise UserError(f"scale {scale:g} needs images {scale:g}x the training resolution "
                            f"(-r {train_resolution:g}), larger than the source images")
        dataset = load_training_data(data, resolution, run.get("eval_split", True), background)
        folder = out_dir if scale == 1.0 else os.path.join(out_dir, f"scale_{scale:g}")
        result = evaluate_views(dataset, lambda cam: render_fn(model, cam, background), folder,
                                iteration, lpips=lpips)
        cam = dataset.cameras[(dataset.test_indices or dataset.train_indices)[0]]
        result.update(num_gaussians=len(model), render_mode=config.mode, scale=scale,
                      resolution=resolution, size=f"{cam.width}x{cam.height}")
        key = f"eval_iteration_{iteration}" + ("" if scale == 1.0 else f"_scale_{scale:g}")
        metrics[key] = result
        write_json(metrics_path, metrics)
        click.echo(f"scale {scale:g} ({result['size']}, {config.mode}): " + result["line"]
                   + f" ({path_name}; written to {metrics_path})")


def devices() -> None:
    import click

    from ..gpu.runtime import adapter_summary, list_adapters

    adapters = list_adapters()
    if not adapters:
        click.echo("No wgpu adapter found: training and rendering use the NumPy CPU path. On Linux "
                   "without a GPU, install Mesa's lavapipe (Debian: mesa-vulkan-drivers).")
        return
    for i, adapter in enumerate(adapters):
        click.echo(f"[{i}] {adapter_summary(adapter)}")


def gradcheck(n, width, height, seed, sh_degree, variants, tolerance, adapter_filter,
              antialiased=False) -> None:
    import click

    from ..gpu.step import GpuTrainStep
    from ..tools.gradcheck import compare, format_table, make_problem
    from ..training.optim import OptimConfig
    from ..tools.random_scene import filter_cameras

    ctx = gpu_context("gpu", adapter_filter, click.echo, "gradcheck needs a GPU adapter")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (1 << 32))
    config = render_config("antialiased" if antialiased else "classic")
    model, cam, target = make_problem(seed, n, width, height, sh_degree, config=config)
    click.echo(f"Random scene: seed {seed}, {n} Gaussians (edge cases included), SH degree "
               f"{sh_degree}, {width}x{height}, {config.mode}")
    combos = [(None, None)]
    if variants == "all":
        combos = [(fa, sg) for fa in (True, False) for sg in (True, False)
                  if (ctx.has_float_atomics or not fa) and (ctx.has_subgroups or not sg)]
    failed = False
    for fa, sg in combos:
        step = GpuTrainStep(ctx, model, OptimConfig(), float_atomics=fa, subgroups=sg,
                            render_config=config)
        step.set_filter_cameras(filter_cameras(cam))
        step.update_filter_3d()
        errors = compare(step, model, cam, target, tolerance=tolerance)
        click.echo(f"\nGPU ({step.backward.variant}) vs NumPy reference (float64):")
        click.echo(format_table(errors))
        failed |= not all(e.ok for e in errors)
    click.echo("\nFAILED: some gradients differ by more than the tolerance" if failed else "\nall passed")
    if failed:
        raise SystemExit(1)


def bench(presets, n, width, height, device, steps, warmup, json_path, no_stages, adapter_filter,
          modes: str = "classic") -> None:
    import click

    from ..render_config import RENDER_MODES

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in mode_list if m not in RENDER_MODES]
    if bad or not mode_list:
        raise UserError(f"unknown render mode(s) {', '.join(bad) or repr(modes)}; choose from "
                        f"{', '.join(RENDER_MODES)}")

    from ..atomic_io import write_json
    from ..tools.bench import PRESETS, SEED_PRESETS, Config, format_report, run_bench

    if n is not None or width is not None or height is not None:
        if None in (n, width, height):
            raise UserError("a custom configuration needs all of -n, --width and --height")
        configs = [Config("custom", n, width, height)]
    else:
        names = {"seeds": list(SEED_PRESETS), "all": list(PRESETS)}.get(presets)
        names = names or [p.strip() for p in presets.split(",") if p.strip()]
        unknown = [p for p in names if p not in PRESETS]
        if unknown:
            raise UserError(f"unknown preset(s) {', '.join(unknown)}; choose from {', '.join(PRESETS)}, seeds, all")
        configs = [Config(p, *PRESETS[p]) for p in names]
    devices = ("gpu", "cpu") if device == "both" else (device,)
    ctx = None
    if "gpu" in devices:
        from ..gpu.runtime import GpuError, select_device

        try:
            ctx = select_device("gpu", adapter_filter, echo=click.echo)
        except GpuError as exc:
            if device == "gpu":
                raise UserError(str(exc)) from None
            click.echo(f"Warning: {exc}; timing the NumPy path only")
    report = run_bench(configs, devices, steps, warmup, ctx, stages=not no_stages, echo=click.echo,
                       modes=tuple(mode_list))
    click.echo(format_report(report))
    if json_path:
        write_json(json_path, report)
        click.echo(f"Results written to {json_path}")
