"""The training step, one API for both paths: ``step(camera, target) -> loss``.

A step renders one view, computes the loss ``(1-λ)·L1 + λ·(1-SSIM)`` and its gradient, runs the
backward pass, accumulates the densification statistics and applies one Adam update in place.
:class:`CpuTrainStep` does it with the NumPy reference; ``wgsl_splat.gpu.step.GpuTrainStep`` does
the same on the device. The trainer loop only talks to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .camera import Camera
from .model import GaussianModel
from .optim import AdamState, OptimConfig, adam_step
from .render_config import CLASSIC, RenderConfig

DEFAULT_LAMBDA_DSSIM = 0.2


@dataclass
class DensifyStats:
    """Adaptive-density-control statistics, accumulated over the views a Gaussian was visible in.

    grad_accum: Σ ‖∂L/∂μ2D‖ in NDC units (pixel gradient scaled by W/2, H/2, as 3DGS's
    viewspace-point gradient); denom: number of views it was visible in; max_radii: largest screen
    radius (pixels) seen.
    """

    grad_accum: np.ndarray
    denom: np.ndarray
    max_radii: np.ndarray

    @staticmethod
    def zeros(n: int) -> "DensifyStats":
        return DensifyStats(np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32))

    def mean_grad(self) -> np.ndarray:
        return self.grad_accum / np.maximum(self.denom, 1.0)


def ndc_grad_norm(dL_dmeans2d: np.ndarray, width: int, height: int) -> np.ndarray:
    """‖∂L/∂μ2D‖ in NDC units from the pixel-space gradient."""
    return np.hypot(dL_dmeans2d[:, 0] * (0.5 * width), dL_dmeans2d[:, 1] * (0.5 * height))


@dataclass
class StepResult:
    loss: float
    l1: float | None = None
    ssim: float | None = None


class TrainStep(ABC):
    """Owns the parameters, the Adam state and the densification statistics of one path.

    ``render_config`` picks the render mode; in the antialiased mode the step also owns the 3D
    filter of every Gaussian (:meth:`set_filter_cameras`, :meth:`update_filter_3d`), which is not
    optimised: it is recomputed from the training cameras when the trainer says so."""

    def __init__(self, config: OptimConfig, background=(0.0, 0.0, 0.0),
                 lambda_dssim: float = DEFAULT_LAMBDA_DSSIM,
                 render_config: RenderConfig | None = None):
        self.config = config
        self.background = np.asarray(background, dtype=np.float32).reshape(3)
        self.lambda_dssim = lambda_dssim
        self.render_config = render_config or CLASSIC
        self.filter_cameras: list[Camera] = []

    def set_filter_cameras(self, cameras: list[Camera]) -> None:
        """The cameras whose sampling rates bound the 3D filter (the training views)."""
        self.filter_cameras = list(cameras)

    def update_filter_3d(self) -> None:
        """Recompute the 3D filter from the current means (antialiased mode; else nothing)."""

    def filter_3d(self) -> np.ndarray | None:
        """The 3D filter on the host, (N,) float32 (None in the classic mode)."""
        return None

    @abstractmethod
    def step(self, camera: Camera, target: np.ndarray, active_sh_degree: int | None = None,
             view_id=None) -> float | None:
        """One optimisation step on one view. Returns the loss when the host has it for free (the
        NumPy path) and None otherwise (the GPU path keeps losses on the device until
        :meth:`take_losses`). ``view_id`` names the view so that a path may keep ``target`` resident
        (the GPU path uploads each view's image once); the caller promises the same id always comes
        with the same image."""

    @property
    def max_gaussians(self) -> int | None:
        """The most Gaussians this path can hold (None: host memory is the only bound);
        densification stops there."""
        return None

    def holds_target(self, view_id) -> bool:
        """True when the step keeps view ``view_id``'s image itself, so that :meth:`step` may be
        called with ``target=None`` for it (the GPU path, after the view's first upload)."""
        return False

    @abstractmethod
    def take_losses(self) -> list[float]:
        """The losses of every step since the last call, oldest first."""

    @property
    @abstractmethod
    def num_gaussians(self) -> int:
        """Current N, without a download."""

    @abstractmethod
    def get_model(self) -> GaussianModel:
        """The current parameters on the host (a copy)."""

    @abstractmethod
    def get_state(self) -> tuple[GaussianModel, AdamState, DensifyStats]:
        """Parameters, optimiser state and statistics on the host, for densification and checkpoints."""

    @abstractmethod
    def set_state(self, model: GaussianModel, adam: AdamState, stats: DensifyStats) -> None:
        """Replace everything (after densification changed N, or when resuming)."""

    @abstractmethod
    def render(self, camera: Camera, active_sh_degree: int | None = None) -> np.ndarray:
        """Render a view with the current parameters (evaluation, previews)."""


class CpuTrainStep(TrainStep):
    """The NumPy reference path (float32 parameters, the reference math)."""

    def __init__(self, model: GaussianModel, config: OptimConfig, background=(0.0, 0.0, 0.0),
                 lambda_dssim: float = DEFAULT_LAMBDA_DSSIM, adam: AdamState | None = None,
                 render_config: RenderConfig | None = None):
        super().__init__(config, background, lambda_dssim, render_config)
        self.model = model.astype(np.float32)
        self.adam = adam if adam is not None else AdamState.zeros_for(self.model)
        self.stats = DensifyStats.zeros(len(self.model))
        self._filter: np.ndarray | None = None   # antialiased: (N,) float32, None = zeros
        self.last = StepResult(float("nan"))
        self._losses: list[float] = []

    def step(self, camera, target, active_sh_degree=None, view_id=None) -> float:
        from .reference import render, render_backward
        from .reference.loss import loss_and_grad

        out = render(self.model, camera, self.background, active_sh_degree=active_sh_degree,
                     config=self.render_config, filter_3d=self._filter)
        loss, dL_dimage, parts = loss_and_grad(out.image, np.asarray(target, np.float32), self.lambda_dssim)
        grads = render_backward(self.model, camera, out, dL_dimage)
        vis = grads.visible
        s = self.stats
        s.grad_accum[vis] += ndc_grad_norm(grads.screen.means2d[vis], camera.width, camera.height)
        s.denom[vis] += 1.0
        s.max_radii[vis] = np.maximum(s.max_radii[vis], out.proj.radii[vis])
        adam_step(self.model, grads.params, self.adam, self.config)
        self.last = StepResult(loss, parts["l1"], parts["ssim"])
        self._losses.append(loss)
        return loss

    def take_losses(self) -> list[float]:
        out, self._losses = self._losses, []
        return out

    @property
    def num_gaussians(self) -> int:
        return len(self.model)

    def get_model(self) -> GaussianModel:
        return self.model.copy()

    def get_state(self):
        return self.model.copy(), self.adam.copy(), DensifyStats(
            self.stats.grad_accum.copy(), self.stats.denom.copy(), self.stats.max_radii.copy())

    def set_state(self, model, adam, stats) -> None:
        if not (len(model) == len(adam) == len(stats.denom)):
            raise ValueError(f"sizes differ: model {len(model)}, adam {len(adam)}, stats {len(stats.denom)}")
        if self._filter is not None and len(self._filter) != len(model):
            self._filter = None   # a new set: zeros until update_filter_3d
        self.model, self.adam, self.stats = model.astype(np.float32), adam, stats

    def render(self, camera, active_sh_degree=None) -> np.ndarray:
        from .reference import render_image

        return render_image(self.model, camera, self.background, active_sh_degree=active_sh_degree,
                            config=self.render_config, filter_3d=self._filter)

    def update_filter_3d(self) -> None:
        if self.render_config.antialiased:
            from .reference import compute_filter_3d

            self._filter = compute_filter_3d(self.model.means, self.filter_cameras,
                                             self.render_config).astype(np.float32)

    def filter_3d(self) -> np.ndarray | None:
        if not self.render_config.antialiased:
            return None
        return (np.zeros(len(self.model), np.float32) if self._filter is None
                else self._filter.copy())
