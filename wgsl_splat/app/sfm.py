"""``sfm``: camera poses for a folder of photos or a video, written as an ordinary COLMAP folder
(:mod:`wgsl_splat.data.sfm`; needs the ``wgsl_splat[sfm]`` extra). ``train PHOTOS|VIDEO`` runs the
same into a cache beside the input (:func:`scene_for`). The SfM flags are declared once here, as
:class:`Flag` values both commands' requests hold."""

from __future__ import annotations

from dataclasses import dataclass

import click

from ..errors import UserError
from .flags import Flag, add_flags, argument, flag, split_request

FRAMES = Flag(("--frames",), dict(
    type=click.IntRange(min=3), default=120, show_default=True,
    help="SfM from a video: how many frames to keep (the sharpest of each equal stretch)."))
MAX_SIDE = Flag(("--max-side",), dict(
    type=click.IntRange(min=64), default=1600, show_default=True,
    help="SfM: the longest side of the images written for training (larger photos are "
         "downscaled once)."))
SFM_SIDE = Flag(("--sfm-side",), dict(
    type=click.IntRange(min=64), default=1024, show_default=True,
    help="SfM: the longest side features are extracted at."))
MATCHER = Flag(("--matcher",), dict(
    type=click.Choice(["auto", "exhaustive", "sequential"]), default="auto", show_default=True,
    help="SfM: which image pairs are matched; auto: every pair of photos, nearby frames of a "
         "video (and every 10th frame with the others: loop closure)."))
MAPPER = Flag(("--mapper",), dict(
    type=click.Choice(["incremental", "global"]), default="incremental", show_default=True,
    help="SfM: COLMAP's incremental mapper or the global one (GLOMAP)."))


@dataclass(frozen=True)
class SfmRequest:
    """The ``sfm`` command's flags, in the order ``--help`` lists them."""

    source: str = argument(type=click.Path())
    out: str = flag("--out", required=True, type=click.Path(file_okay=False),
                    help="The COLMAP folder to write (images/, sparse/0/, sfm.json).")
    overwrite: bool = flag("--overwrite", is_flag=True,
                           help="Replace an SfM result of other inputs in --out.")
    frames: int = FRAMES.field()
    max_side: int = MAX_SIDE.field()
    sfm_side: int = SFM_SIDE.field()
    matcher: str = MATCHER.field()
    mapper: str = MAPPER.field()


def settings_of(request):
    """The SfM settings a request (``sfm``'s or ``train``'s) asks for."""
    from ..data.sfm import SfmSettings

    return SfmSettings(max_side=request.max_side, sfm_side=request.sfm_side,
                       frames=request.frames, matcher=request.matcher, mapper=request.mapper)


@click.command("sfm")
@add_flags(SfmRequest)
def sfm(**values):
    """Compute camera poses for SOURCE (a folder of photos or a video) with COLMAP (pycolmap) and
    write them as a COLMAP folder that `train` and other trainers read. A --out holding the
    result of the same inputs and settings is reused."""
    request, _ = split_request(SfmRequest, values)
    result = run_sfm(request.source, request.out, settings_of(request), request.overwrite)
    click.echo(f"COLMAP folder: {result.folder} (train it: wgsl_splat train {result.folder})")


def run_sfm(source, out, settings, replace_other: bool):
    """:func:`~wgsl_splat.data.sfm.make_scene` with progress bars and its summary printed;
    one-line errors."""
    from ..data.sfm import SfmError, make_scene

    bars = _Bars()
    try:
        result = make_scene(source, out, settings, log=bars.echo, progress=bars,
                            replace_other=replace_other)
    except SfmError as exc:
        raise UserError(str(exc)) from None
    finally:
        bars.close()
    for line in result.lines():
        click.echo(line)
    return result


def scene_for(data: str, request) -> str:
    """The scene ``train`` loads for ``data``: ``data`` itself, or for a folder of photos or a
    video, the COLMAP folder SfM made of it (cached beside it, recomputed when the inputs or
    settings changed)."""
    if data == "default":
        return data
    from pathlib import Path

    from ..data.datasets import SCENE_FORMATS
    from ..data.sfm import SfmError, cached_scene_dir, sfm_input_kind

    p = Path(data).expanduser()
    if not p.exists() or any(f.detect(p) for f in SCENE_FORMATS) or sfm_input_kind(p) is None:
        return data
    try:
        folder = cached_scene_dir(p)
    except SfmError as exc:
        raise UserError(str(exc)) from None
    return str(run_sfm(p, folder, settings_of(request), replace_other=True).folder)


class _Bars:
    """One progress bar per SfM stage (``progress(stage, done, total)``); a line printed
    between stages closes the bar of the stage before."""

    LABELS = {"images": "writing images", "frames": "sampling frames",
              "extraction": "extracting features", "mapping": "mapping"}

    def __init__(self) -> None:
        self.stage, self.bar, self.done = None, None, 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage, self.done = stage, 0
            self.bar = click.progressbar(length=total, label=self.LABELS.get(stage, stage))
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def echo(self, line: str) -> None:
        self.close()
        click.echo(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
        self.bar, self.stage = None, None
