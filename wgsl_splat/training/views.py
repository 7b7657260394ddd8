"""The training views as the loop and a strategy see them (:class:`TrainingViews`): each view's
camera and image at a resolution factor (a strategy's resolution schedule,
:meth:`~wgsl_splat.strategy.base.Strategy.resolution`), view observations through the step
(:meth:`~wgsl_splat.contract.step.TrainStep.observe`) and the views' errors
(:meth:`~wgsl_splat.contract.step.TrainStep.view_errors`).

A view at factor ``f`` is the camera scaled by ``1/f`` (:meth:`~wgsl_splat.camera.Camera.scaled`)
against its image area-averaged to that size (:func:`~wgsl_splat.data.images.resize_area`, the
loader's ``-r``); its ``view_id`` is ``(i, f)`` (``i`` at full resolution), so a step that keeps
images resident (the GPU path) keeps one per view and factor.
"""

from __future__ import annotations

import numpy as np

from ..contract.step import TrainStep, View


class TrainingViews:
    def __init__(self, dataset, step: TrainStep, active_sh_degree=None) -> None:
        """``active_sh_degree(iteration)``: the SH degree the loop trains with at a step."""
        self.dataset = dataset
        self.step = step
        self.active_sh_degree = active_sh_degree or (lambda iteration: None)
        self._scaled: dict[tuple[int, int], np.ndarray] = {}   # NumPy path: downscaled images

    @property
    def ids(self) -> list[int]:
        """The training views' indices into the dataset."""
        return list(self.dataset.train_indices)

    def camera(self, i: int, factor: int = 1):
        cam = self.dataset.cameras[i]
        return cam if factor == 1 else cam.scaled(factor)

    def image(self, i: int, factor: int = 1) -> np.ndarray:
        """View ``i``'s training target (float32, H×W×3: masked pixels are ``MASKED``) at
        ``factor``; downscaled, a pixel is masked when any pixel it averages was."""
        if factor == 1:
            return np.ascontiguousarray(self.dataset.load_target(i), dtype=np.float32)
        from ..contract.losses import masked_target
        from ..data.images import resize_area

        cam = self.camera(i, factor)
        img = resize_area(np.asarray(self.dataset.load_image(i), np.float32), cam.height, cam.width)
        mask = self.dataset.load_mask(i)
        if mask is not None:
            mask = resize_area(mask.astype(np.float32), cam.height, cam.width) >= 1.0 - 1e-6
        return masked_target(np.ascontiguousarray(img, np.float32), mask)

    def view(self, i: int, factor: int = 1) -> View:
        """View ``i`` for a training step: its image only when the step does not hold it already
        (no float copy of the full-resolution images is kept on the host; downscaled ones are
        cached where the step keeps none)."""
        key = i if factor == 1 else (i, factor)
        if self.step.holds_target(key):
            target = None
        elif factor == 1:
            target = self.image(i)
        else:
            target = self._scaled.get(key)
            if target is None:
                target = self._scaled[key] = self.image(i, factor)
        return View(self.camera(i, factor), target, key)

    def observe(self, ids, weights, into: tuple[str, ...], iteration: int,
                factor: int = 1) -> None:
        """Observe views ``ids`` at ``factor`` with the SH degree of step ``iteration``
        (:meth:`TrainStep.observe`: ``weights(image, target)`` per view, its blending-weight
        sums into the statistics ``into``), each view's image the one the steps train on (the
        step's own where it holds it)."""
        views = [self.view(i, factor) for i in ids]
        self.step.observe(views, weights, into, self.active_sh_degree(iteration))

    def errors(self, ids, iteration: int) -> list[float]:
        """Views ``ids``' L1 term of the loss at the training resolution, rendered with the SH
        degree of step ``iteration`` (:meth:`TrainStep.view_errors`: on the GPU path against
        the resident images, nothing but the numbers read back)."""
        return self.step.view_errors([self.view(i) for i in ids], self.active_sh_degree(iteration))
