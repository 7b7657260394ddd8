"""The training step, one API for both paths: ``step(camera, target)``, ``step_batch(views)``.

A step renders each view of its batch (one by default), computes the loss ``(1-λ)·L1 + λ·(1-SSIM)``
(plus the strategy's regularisers) and its gradient, runs the backward pass, accumulates the
statistics the strategy asked for (every view counts as one observation, as in gsplat), optionally
perturbs the means (MCMC) and applies one Adam update in place with the gradient of the batch's
mean loss: the views' gradients are summed into one buffer and the update reads the sum times
1/B. A data-parallel step (``wgsl_splat.training.parallel``) splits the same two halves, :meth:`accumulate`
and :meth:`finish`, across replicas and sums their gradients in between. The step owns
the run's :class:`~wgsl_splat.contract.state.TrainState`, where densification edits the rows.
``wgsl_splat.reference.step.CpuTrainStep`` does it with the NumPy reference,
``wgsl_splat.gpu.step.GpuTrainStep`` on the device; the trainer loop only talks to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..camera import Camera
from ..model import GaussianModel
from ..render_config import CLASSIC, RenderConfig
from .appearance import AppearanceState
from .losses import LossConfig, l1_term
from .optim import OptimConfig
from .pose import PoseState
from .state import TrainState


@dataclass(frozen=True)
class StepSpec:
    """What the trainer tells a path's step about the run: the optimiser, the background, the loss
    (image terms and parameter terms, :mod:`wgsl_splat.contract.losses`) and the names of the
    statistics the strategy asks the backward pass for (:mod:`~wgsl_splat.contract.statistics`)."""

    optim: OptimConfig = field(default_factory=OptimConfig)
    background: tuple = (0.0, 0.0, 0.0)
    loss: LossConfig = field(default_factory=LossConfig)
    statistics: tuple = ()
    appearance_views: int = 0    # --appearance: a colour transform per view id 0..n-1 (0: off)
    pose_views: int = 0          # --pose-opt: a pose correction per view id 0..n-1 (0: off)


@dataclass(frozen=True)
class View:
    """One training view of a batch: its camera, its image (None when the step holds it, see
    :meth:`TrainStep.holds_target`) and the id that names the image."""

    camera: Camera
    target: np.ndarray | None
    view_id: object = None


@dataclass
class StepResult:
    loss: float
    l1: float | None = None
    ssim: float | None = None


class TrainStep(ABC):
    """Owns the training state of one path (parameters, Adam moments, statistics).

    ``render_config`` picks the render mode; in the antialiased mode the step also owns the 3D
    filter of every Gaussian (:meth:`set_filter_cameras`, :meth:`update_filter_3d`), which is not
    optimised: it is recomputed from the training cameras when the trainer says so (after the
    strategy changed the set of Gaussians, and on Mip-Splatting's schedule)."""

    #: Host seconds spent blocked on the device (the GPU path's submit and read-backs).
    blocked_seconds: float = 0.0
    #: The device renderer the live preview draws with (None: no preview on this path).
    renderer = None
    #: Set by the trainer before a step when a stop signal arrived. After the step,
    #: :attr:`stop_agreed` says whether the run stops now: every process of a distributed run
    #: agrees through its reduction (wgsl_splat.training.parallel), so all stop after the same step.
    stop_requested: bool = False

    @property
    def stop_agreed(self) -> bool:
        return self.stop_requested

    @stop_agreed.setter
    def stop_agreed(self, value: bool) -> None:
        self.stop_requested = bool(value)

    def __init__(self, config: OptimConfig | None = None, background=(0.0, 0.0, 0.0),
                 loss: LossConfig | None = None, render_config: RenderConfig | None = None,
                 spec: StepSpec | None = None):
        """``spec`` (what the trainer passes) or its parts one by one (tests, tools)."""
        if spec is not None:
            config, background, loss = spec.optim, spec.background, spec.loss
        self.config = config or OptimConfig()
        self.background = np.asarray(background, dtype=np.float32).reshape(3)
        self.loss_config = loss or LossConfig()
        self.render_config = render_config or CLASSIC
        self.filter_cameras: list[Camera] = []
        views = spec.appearance_views if spec is not None else 0
        self.appearance = AppearanceState.fresh(views) if views else None
        views = spec.pose_views if spec is not None else 0
        self.pose = PoseState.fresh(views) if views else None

    def appearance_state(self) -> AppearanceState | None:
        """The per-view colour transforms and their Adam state (None without --appearance)."""
        return self.appearance

    def load_appearance(self, state: AppearanceState) -> None:
        """Continue from ``state`` (a resumed run)."""
        self.appearance = state

    def pose_state(self) -> PoseState | None:
        """The per-view pose corrections and their Adam state (None without --pose-opt)."""
        return self.pose

    def load_pose(self, state: PoseState) -> None:
        """Continue from ``state`` (a resumed run)."""
        self.pose = state

    @property
    @abstractmethod
    def state(self) -> TrainState:
        """The per-Gaussian arrays and their row operations."""

    def set_filter_cameras(self, cameras: list[Camera]) -> None:
        """The cameras whose sampling rates bound the 3D filter (the training views)."""
        self.filter_cameras = list(cameras)

    def update_filter_3d(self) -> None:
        """Recompute the 3D filter from the current means (antialiased mode; else nothing)."""

    def filter_3d(self) -> np.ndarray | None:
        """The 3D filter on the host, (N,) float32 (None in the classic mode)."""
        return None

    def step(self, camera: Camera, target: np.ndarray | None, active_sh_degree: int | None = None,
             view_id=None, noise: tuple[float, int] | None = None) -> None:
        """One optimisation step on one view. ``view_id`` names the view so that a path may keep
        ``target`` resident (the GPU path uploads each view's image once); the caller promises the
        same id always comes with the same image. ``noise = (scale, key)``: perturb the means
        before the update (3DGS-MCMC's noise,
        :meth:`~wgsl_splat.strategy.mcmc.MCMCState.perturb_means`). The losses stay with the step
        until :meth:`take_losses` (the GPU path keeps them on the device)."""
        self.step_batch([View(camera, target, view_id)], active_sh_degree, noise)

    def step_batch(self, views: list[View], active_sh_degree: int | None = None,
                   noise: tuple[float, int] | None = None) -> None:
        """One optimisation step on a batch of views (module doc): :meth:`accumulate` then
        :meth:`finish`."""
        self.accumulate(views, active_sh_degree)
        self.finish(len(views), noise)

    @abstractmethod
    def accumulate(self, views: list[View], active_sh_degree: int | None = None,
                   fresh: bool = True) -> None:
        """Forward, loss and backward of each view: their parameter gradients summed into the
        step's gradient buffer (``fresh``: starting from zero, else adding to what is there), the
        densification statistics accumulated. No update."""

    @abstractmethod
    def finish(self, batch_size: int, noise: tuple[float, int] | None = None) -> None:
        """The update of the step: MCMC's noise, then Adam with the summed gradients × 1/batch_size."""

    # -- data-parallel reduction (wgsl_splat.training.parallel): what replicas exchange between the halves --
    def synchronize(self) -> None:
        """Wait until the device has done the submitted work (the time counts as blocked); the
        NumPy path has nothing in flight."""

    @abstractmethod
    def read_reduction(self) -> tuple[np.ndarray, np.ndarray]:
        """After :meth:`accumulate`: ``(sums, maxima)``, float32 arrays that replicas reduce by sum
        and by max: the gradient sum followed by the summed statistics (grad_accum, denom), and
        the max statistic (max_radii). Empty statistics when the strategy asks for none."""

    @abstractmethod
    def write_reduction(self, sums: np.ndarray, maxima: np.ndarray) -> None:
        """Replace the gradient sum and the statistics by the reduced ones (:meth:`read_reduction`'s
        layout), before :meth:`finish`."""

    def clear_stats(self) -> None:
        """Zero the statistics (a replica that is not the reduction's first, before
        :meth:`accumulate`: the reduced sum then counts the earlier totals once)."""
        self.state.clear_stats()

    def observe(self, views: list[View], weights, into: tuple[str, ...],
                active_sh_degree: int | None = None) -> None:
        """A view observation (no gradient, no update): render each view and add, for every
        Gaussian and every channel ``k < len(into)``, its blending weights α·T summed over the
        pixels, each pixel weighted by channel ``k`` of ``weights(image, target)`` (an
        ``(H, W, 3)`` float32 map of the render and the view's image), to the statistic named
        ``into[k]`` (declared with the observable ``observed``,
        :mod:`~wgsl_splat.contract.statistics`). This is the colour part of the rasterisation
        backward pass with ``weights`` as dL/dimage. ``weights`` is a function on the host, or
        :class:`~wgsl_splat.contract.error_maps.ErrorMaps`, which the GPU path computes on the
        device (``view.target`` may then be None for a view the step holds)."""
        raise NotImplementedError(f"{type(self).__name__} cannot observe views")

    @abstractmethod
    def take_losses(self) -> list[float]:
        """The losses of every view trained on since the last call, oldest first."""

    @property
    def num_gaussians(self) -> int:
        """Current N, without a download."""
        return self.state.n

    @abstractmethod
    def get_model(self) -> GaussianModel:
        """The current parameters on the host (a copy)."""

    @abstractmethod
    def render(self, camera: Camera, active_sh_degree: int | None = None) -> np.ndarray:
        """Render a view with the current parameters (evaluation, previews)."""

    def view_errors(self, views: list[View], active_sh_degree: int | None = None) -> list[float]:
        """Each view's L1 term of the loss (:func:`~wgsl_splat.contract.losses.l1_term`) with
        the current parameters, without a gradient or an update (the growth validation's
        measure). Here: a render each, compared on the host; the GPU path compares on the
        device against the resident image and reads back only the numbers."""
        return [l1_term(np.asarray(self.render(v.camera, active_sh_degree), np.float32)[..., :3],
                        v.target) for v in views]

    # -- optional capabilities: no-ops unless a path has them --------------------------------------
    @property
    def max_gaussians(self) -> int | None:
        """The most Gaussians this path can hold (None: host memory is the only bound);
        densification stops there."""
        return None

    def holds_target(self, view_id) -> bool:
        """True when the step keeps view ``view_id``'s image itself, so that :meth:`step` may be
        called with ``target=None`` for it (the GPU path, after the view's first upload)."""
        return False

    def enable_profiling(self, on: bool = True) -> bool:
        """Time the stages of the following steps; returns whether this path can."""
        return False

    def stage_times(self) -> dict[str, float]:
        """Milliseconds per stage of the last profiled step."""
        return {}

    @property
    def counters(self) -> dict:
        """Resource counters (the GPU path: buffers, bind groups, read-backs, peak memory, the
        pairs its emission passes disagreed on)."""
        return {}

