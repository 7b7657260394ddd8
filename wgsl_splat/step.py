"""The training step, one API for both paths: ``step(camera, target)``.

A step renders one view, computes the loss ``(1-λ)·L1 + λ·(1-SSIM)`` (plus the strategy's
regularisers) and its gradient, runs the backward pass, accumulates the statistics the strategy
asked for, optionally perturbs the means (MCMC) and applies one Adam update in place. The step owns
the run's :class:`~wgsl_splat.state.TrainState`, where densification edits the rows.
``wgsl_splat.reference.step.CpuTrainStep`` does it with the NumPy reference,
``wgsl_splat.gpu.step.GpuTrainStep`` on the device; the trainer loop only talks to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .camera import Camera
from .model import GaussianModel
from .optim import OptimConfig
from .render_config import CLASSIC, RenderConfig
from .state import TrainState

DEFAULT_LAMBDA_DSSIM = 0.2


def ndc_grad_norm(dL_dmeans2d: np.ndarray, width: int, height: int) -> np.ndarray:
    """‖∂L/∂μ2D‖ in NDC units from the pixel-space gradient."""
    return np.hypot(dL_dmeans2d[:, 0] * (0.5 * width), dL_dmeans2d[:, 1] * (0.5 * height))


@dataclass(frozen=True)
class Regularizers:
    """Loss terms on the parameters: ``opacity · mean(σ(logit)) + scale · mean(exp(log_scale))``
    (gsplat's ``opacity_reg`` and ``scale_reg``; means over Gaussians and scale axes)."""

    opacity: float = 0.0
    scale: float = 0.0

    @property
    def active(self) -> bool:
        return self.opacity != 0.0 or self.scale != 0.0


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

    def __init__(self, config: OptimConfig, background=(0.0, 0.0, 0.0),
                 lambda_dssim: float = DEFAULT_LAMBDA_DSSIM,
                 regularizers: Regularizers = Regularizers(),
                 render_config: RenderConfig | None = None):
        self.config = config
        self.background = np.asarray(background, dtype=np.float32).reshape(3)
        self.lambda_dssim = lambda_dssim
        self.regularizers = regularizers
        self.render_config = render_config or CLASSIC
        self.filter_cameras: list[Camera] = []

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

    @abstractmethod
    def step(self, camera: Camera, target: np.ndarray | None, active_sh_degree: int | None = None,
             view_id=None, noise: tuple[float, int] | None = None) -> float | None:
        """One optimisation step on one view. Returns the loss when the host has it for free (the
        NumPy path) and None otherwise (the GPU path keeps losses on the device until
        :meth:`take_losses`). ``view_id`` names the view so that a path may keep ``target`` resident
        (the GPU path uploads each view's image once); the caller promises the same id always comes
        with the same image. ``noise = (scale, key)``: perturb the means before the update
        (:meth:`~wgsl_splat.state.TrainState.perturb_means`)."""

    @abstractmethod
    def take_losses(self) -> list[float]:
        """The losses of every step since the last call, oldest first."""

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
        """Resource counters (the GPU path: buffers, bind groups, read-backs, peak memory)."""
        return {}

