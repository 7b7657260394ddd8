"""The NumPy path's training step: the reference math, float32 parameters, host state."""

from __future__ import annotations

import numpy as np

from ..contract import appearance, per_view, pose
from ..contract.losses import LossConfig, param_terms_numpy
from ..contract.optim import AdamState, OptimConfig, adam_step
from ..contract.state import HostArrays
from ..contract.statistics import (
    ViewObservation,
    accumulate_numpy,
    reduction_layout,
    resolve,
)
from ..contract.step import StepResult, StepSpec, TrainStep
from ..model import GaussianModel
from ..render_config import RenderConfig
from . import rows
from .state import HostState


class CpuTrainStep(TrainStep):
    """:class:`~wgsl_splat.contract.step.TrainStep` with the NumPy reference (render, loss, exact backward,
    Adam) on a :class:`~wgsl_splat.reference.state.HostState`."""

    def __init__(self, model: GaussianModel | HostArrays, config: OptimConfig | None = None,
                 background=(0.0, 0.0, 0.0), adam: AdamState | None = None, *,
                 loss: LossConfig | None = None, render_config: RenderConfig | None = None,
                 spec: StepSpec | None = None):
        """``model``: the parameters (fresh moments, or ``adam``, and ADC's statistics), or the
        whole state as :class:`~wgsl_splat.contract.state.HostArrays` (what the trainer passes);
        ``spec`` or the optimiser, background and loss one by one."""
        super().__init__(config, background, loss, render_config, spec)
        arrays = HostArrays.of(model, adam, spec.statistics if spec else None)
        self._state = HostState(arrays)
        self.statistics = resolve(arrays.stats)
        self.last = StepResult(float("nan"))
        self._losses: list[float] = []
        self._grad_sum: GaussianModel | None = None   # the batch's summed gradients

    @property
    def state(self) -> HostState:
        return self._state

    # The arrays the reference functions take, by their old names (tests, examples).
    @property
    def model(self) -> GaussianModel:
        return self._state.arrays.model

    @property
    def adam(self) -> AdamState:
        return self._state.arrays.adam

    def accumulate(self, views, active_sh_degree=None, fresh=True) -> None:
        from . import render, render_backward
        from .loss import loss_and_grad

        a = self._state.arrays
        model = a.model
        if fresh or self._grad_sum is None or len(self._grad_sum) != len(model):
            self._grad_sum = model.zeros_like()
        for view in views:
            camera = view.camera
            use_pose = self.pose is not None and view.view_id is not None
            if use_pose:   # --pose-opt: render from the corrected pose (contract/pose.py)
                delta = self.pose.params[view.view_id]
                camera = pose.refined_camera(camera, delta)
            out = render(model, camera, self.background, active_sh_degree=active_sh_degree,
                         config=self.render_config, filter_3d=self._state.filter_3d)
            image = out.image
            use_app = self.appearance is not None and view.view_id is not None
            if use_app:   # --appearance: the loss sees A·C + b (contract/appearance.py)
                image = appearance.apply(out.image, self.appearance.params[view.view_id])
            loss, dL_dimage, parts = loss_and_grad(image, np.asarray(view.target, np.float32),
                                                   self.loss_config.lambda_dssim)
            if use_app:
                dL_dimage, d_a = appearance.backward(out.image,
                                                     self.appearance.params[view.view_id],
                                                     dL_dimage)
                d_a = d_a + appearance.centring_grad(self.appearance.params,
                                                     self.config.appearance_centring)
                per_view.adam_update(self.appearance, view.view_id, d_a,
                                     self.config.appearance_lr)
            view_grad = np.zeros((3, 4)) if use_pose else None
            grads = render_backward(model, camera, out, dL_dimage, view_grad)
            if use_pose:
                per_view.adam_update(self.pose, view.view_id,
                                     pose.delta_grad(view.camera.world_to_camera, delta, view_grad),
                                     self.config.pose_lr, pose.rate_scale(self.config.extent))
            loss += param_terms_numpy(self.loss_config, model, grads.params)
            if self.statistics:
                obs = ViewObservation(grads.screen.means2d, out.proj.radii, camera.width,
                                      camera.height)
                accumulate_numpy(a.stats, self.statistics, obs, grads.visible)
            for name, g in self._grad_sum.arrays().items():
                g += grads.params.arrays()[name]
            self.last = StepResult(loss, parts["l1"], parts["ssim"])
            self._losses.append(loss)

    def finish(self, batch_size, noise=None) -> None:
        a = self._state.arrays
        grads = self._grad_sum
        if batch_size != 1:   # the gradient of the batch's mean loss (float32, as the GPU's scale)
            scale = np.float32(1.0 / batch_size)
            grads = grads.copy()
            for g in grads.arrays().values():
                g *= scale
        if noise is not None:   # MCMC: the means move before the update (gsplat's order)
            rows.perturb_means(a, *noise)
        adam_step(a.model, grads, a.adam, self.config)
        self._grad_sum = None

    def read_reduction(self):
        sums = [g.ravel() for g in self._grad_sum.arrays().values()]
        added, maxed = reduction_layout(self.statistics)
        st = self._state.arrays.stats
        sums += [st[s.name] for s in added]
        maxima = [st[s.name] for s in maxed]
        return (np.concatenate(sums).astype(np.float32),
                np.concatenate(maxima).astype(np.float32) if maxima else np.zeros(0, np.float32))

    def write_reduction(self, sums, maxima) -> None:
        o = 0
        for g in self._grad_sum.arrays().values():
            g.ravel()[:] = sums[o:o + g.size]
            o += g.size
        added, maxed = reduction_layout(self.statistics)
        st = self._state.arrays.stats
        for part, values in ((added, sums[o:]), (maxed, maxima)):
            for j, s in enumerate(part):
                n = len(st[s.name])
                st[s.name][:] = values[j * n:(j + 1) * n]

    def take_losses(self) -> list[float]:
        out, self._losses = self._losses, []
        return out

    def observe(self, views, weights, into, active_sh_degree=None) -> None:
        from . import render
        from .raster import rasterize_backward

        a = self._state.arrays
        planes = [a.stats[name] for name in into]
        for view in views:
            out = render(a.model, view.camera, self.background, active_sh_degree=active_sh_degree,
                         config=self.render_config, filter_3d=self._state.filter_3d)
            w = np.asarray(weights(out.image, np.asarray(view.target, np.float32)), np.float32)
            screen = rasterize_backward(out.proj, out.raster, w)
            for k, plane in enumerate(planes):
                plane += screen.colors[:, k].astype(np.float32)

    def get_model(self) -> GaussianModel:
        return self._state.arrays.model.copy()

    def render(self, camera, active_sh_degree=None) -> np.ndarray:
        from . import render_image

        return render_image(self._state.arrays.model, camera, self.background,
                            active_sh_degree=active_sh_degree, config=self.render_config,
                            filter_3d=self._state.filter_3d)

    def update_filter_3d(self) -> None:
        if self.render_config.antialiased:
            from . import compute_filter_3d

            self._state.filter_3d = compute_filter_3d(
                self._state.arrays.model.means, self.filter_cameras,
                self.render_config).astype(np.float32)

    def filter_3d(self) -> np.ndarray | None:
        if not self.render_config.antialiased:
            return None
        f = self._state.filter_3d
        return np.zeros(self._state.n, np.float32) if f is None else f.copy()
