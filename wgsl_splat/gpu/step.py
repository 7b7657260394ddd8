"""The training step on the device: one command encoder, one compute pass, one submit per step.

Per step (docs/design.md §3), all recorded into a single compute pass on buffers that stay on the device:

    forward (renderer.py: project, depth sort, emission, scan, rasterise)
    loss + dL/dimage (loss.py)
    rasterisation backward, projection backward + densification statistics (backward.py)
    Adam in place (adam.py)

The host writes three small uniforms per step (camera, Adam step sizes; the loss's only when the
image size changes; with ``--appearance`` a fourth, the view's Adam scalars, ``appearance.py``;
with ``--pose-opt`` one more, the view's loaded pose and Adam scalars, ``pose.py``, whose
corrected pose is composed in a one-dispatch pass before the step's) and nothing else: the target
image is uploaded once per view and kept on the device (``view_id``, :mod:`.targets`), and
nothing is read back inside a step. The loss and the intersection counters of each step land in
device ring buffers of ``history`` slots; the host reads a whole ring at once (one blocking read
per ``history`` steps at most, or when :meth:`take_losses` is called). That read is also where an
intersection overflow is noticed: emission never writes past the capacity, the buffers grow for
the following steps and :attr:`overflowed_steps` counts the steps that were rendered with clipped
intersections. After an upload of the state (densification, resume) the first step renders once
with a 16-byte count check first, so a grown model never trains clipped. How many Gaussians the
device holds is :mod:`.memory`'s arithmetic.

:attr:`counters` (``readbacks``, ``buffers_created``, ``bind_groups_created`` of the pool) lets a
test assert that steady-state steps create nothing and read nothing back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..camera import Camera
from ..contract.error_maps import ErrorMaps
from ..contract.losses import LossConfig
from ..contract.optim import AdamState, OptimConfig
from ..contract.state import HostArrays
from ..contract.statistics import reduction_layout, resolve
from ..contract.step import StepSpec, TrainStep
from ..model import GaussianModel
from ..render_config import RenderConfig
from .adam import GpuAdam, ParamLayout
from .appearance import GpuAppearance
from .backward import GRAD2D_FLOATS, GpuBackward
from .device import Gpu
from .error_maps import GpuErrorMaps
from .filter3d import Filter3D
from .kernels import OBSERVE
from .layout import Layout
from .loss import RESULT_BYTES, GpuLoss
from .memory import MemoryPlan
from .pages import GRADS, MOMENTS, PARAMS, PagedArrays, page_name
from .pool import UNIFORM_USAGE, buffer_usage
from .pose import GpuPose
from .renderer import COUNTERS_BYTES, GpuRenderer
from .runtime import GpuContext
from .sort import grid_2d
from .state import DeviceState
from .targets import TARGET_CACHE_BYTES, TargetCache

HISTORY = 64                      # steps per ring of losses and counters


@dataclass
class GpuGradients:
    """One step's gradients without the update (gradcheck, tests)."""

    params: GaussianModel          # dL/d(stored parameters)
    screen: np.ndarray             # (N, 9): mean2d x, y, opacity, conic a, b, c, colour r, g, b
    loss: float | None             # None when dL/dimage was given
    image: np.ndarray              # (H, W, 3) the forward render the gradients belong to


class GpuTrainStep(TrainStep):
    """:class:`~wgsl_splat.contract.step.TrainStep` on the device (see the module docstring)."""

    def __init__(self, ctx: GpuContext, model: GaussianModel | HostArrays,
                 config: OptimConfig | None = None, background=(0.0, 0.0, 0.0),
                 adam: AdamState | None = None, *, loss: LossConfig | None = None,
                 spec: StepSpec | None = None, layout: Layout | None = None,
                 history: int = HISTORY,
                 target_cache_bytes: int = TARGET_CACHE_BYTES,
                 render_config: RenderConfig | None = None) -> None:
        super().__init__(config, background, loss, render_config, spec)
        config = self.config
        arrays = HostArrays.of(model, adam, spec.statistics if spec else None)
        self.statistics = resolve(arrays.stats)
        self.gpu = Gpu.of(ctx)
        self.ctx, self.pool, self.lib = self.gpu.ctx, self.gpu.pool, self.gpu.lib
        # The kernels' layout: ``layout`` (Layout.of forces fields), or the adapter's default.
        self.layout = layout or Layout.of(self.ctx)
        # the per-Gaussian state's pages, which every stage binds
        self.arrays = PagedArrays(self.pool, self.ctx.max_binding_bytes)
        self.renderer = GpuRenderer(self.gpu, layout=self.layout, config=self.render_config,
                                    arrays=self.arrays)
        self.filter = Filter3D(self.renderer) if self.render_config.antialiased else None
        self.loss = GpuLoss(self.gpu, lam=self.loss_config.lambda_dssim, history=history,
                            variant=self.layout.loss_variant)
        self.backward = GpuBackward(self.gpu, self.renderer, statistics=self.statistics,
                                    loss=self.loss_config, history=history,
                                    pose=self.pose is not None)
        # project_backward writes every gradient: Adam need not zero them
        self.adam = GpuAdam(self.gpu, config, params="params", grads="grads", zero_grads=False)
        # A step of one view applies Adam inside the projection backward pass (no gradient
        # buffer); batches, the data-parallel reduction, MCMC's noise between the gradients and the
        # update, and parameter terms write `grads` and run adam.wgsl (allocated when first needed).
        self.fused_adam = self.backward.fusable
        self.last_step_fused = False
        if self.fused_adam:
            self.adam.fused_dtype(self.backward.fused_module().struct_dtype("FusedAdam"))
        self.app = None
        if self.appearance is not None:   # --appearance: the matrices live on the device
            self.app = GpuAppearance(self.gpu, len(self.appearance.params), config.appearance_lr,
                                     tiles=self.layout.per_view_tiles,
                                     centring=config.appearance_centring)
            self.app.upload(self.appearance)
        self.pose_opt = None
        if self.pose is not None:   # --pose-opt: the corrections live on the device
            self.pose_opt = GpuPose(self.gpu, len(self.pose.params), config.pose_lr,
                                    config.extent, parallel=self.layout.per_view_tiles)
            self.pose_opt.upload(self.pose)
        self.history = int(history)
        self.pool.get("step_counts", COUNTERS_BYTES * self.history)
        self.memory = MemoryPlan(self)
        self.targets = TargetCache(self.pool, self.loss, self.memory, target_cache_bytes)
        self._pending = 0             # steps whose loss has not been read yet
        self._next_slot = 0
        self._losses: list[float] = []
        self._verify_capacity = True
        self.profiler = None
        self.blocked_seconds = 0.0     # host time spent waiting for the device (submit, read-backs)
        self.steps = 0
        self.overflowed_steps = 0
        self.max_intersections = 0
        self._observe = None          # observe.wgsl, compiled when a strategy first observes
        self._error_maps = None       # error_maps.wgsl, likewise (the fast mode's weights)
        self._state = DeviceState(self, tuple(arrays.stats))
        self._state.upload(arrays)

    # -- state --------------------------------------------------------------------------------------
    @property
    def state(self) -> DeviceState:
        return self._state

    @property
    def max_gaussians(self) -> int:
        """The most Gaussians this step can hold (:meth:`MemoryPlan.max_gaussians`)."""
        return self.memory.max_gaussians()

    def room_for(self, n: int, extra: int) -> int:
        """How many of ``extra`` more Gaussians beside ``n`` the device holds
        (:meth:`MemoryPlan.room_for`)."""
        return self.memory.room_for(n, extra)

    @property
    def memory_cap(self) -> int | None:
        """The count :meth:`room_for` found the device's memory to hold (None: none found)."""
        return self.memory.cap

    def release_transients(self) -> None:
        """Free the buffers a step rebuilds anyway (before a row operation needs the room): the
        splats, their gradients and rectangles, the depth sort's, the gradients of a batched
        step."""
        r = self.renderer
        names = ["splats", "splats_hi", "rects", "grad2d", "grad2d_hi", "grad2d_copy",
                 r.depth_sort.keys, r.depth_sort.vals, r.depth_sort.keys_tmp,
                 r.depth_sort.vals_tmp]
        names += self.arrays.page_names(GRADS)
        for name in names:
            self.pool.free(name)
        r.depth_sort._config = None

    def resize(self, n: int) -> None:
        """Everything sized by N follows ``n`` rows of the state (its pages already hold them)."""
        self.renderer.resize(n, self.arrays.sh_coeffs)
        self._configure_adam()
        self.backward.resize()

    def _configure_adam(self) -> None:
        for name in MOMENTS:
            self.arrays.alloc(name)
        self.adam.bind_pages(self.arrays)
        if page_name(GRADS, 0) in self.pool:
            self.arrays.alloc(GRADS)

    def _ensure_grads(self) -> None:
        """The gradient pages (a batched or a non-fused step, the data-parallel reduction, the
        gradient check), made at their exact size when first needed (cheap once they exist)."""
        self.arrays.alloc(GRADS)

    def _upload(self, arrays: HostArrays) -> None:
        self.take_losses_into_buffer()
        model = arrays.model.astype(np.float32)
        stats = (np.stack([arrays.stats[s.name] for s in self.statistics]) if self.statistics
                 else None)
        with self.ctx.guard("uploading the training state"):
            self.renderer.upload_model(model, keep_filter=True)   # N changed: zeros until updated
            self._configure_adam()
            for name, moment in zip(MOMENTS, (arrays.adam.m, arrays.adam.v)):
                self.arrays.write(name, moment.astype(np.float32))
            self.adam.step = int(arrays.adam.step)
            self.backward.configure(stats)
        self._verify_capacity = True

    def get_model(self) -> GaussianModel:
        return self.arrays.read(PARAMS)

    def _download(self) -> HostArrays:
        stats = self.backward.read_stats() if self._state.stat_names else None
        adam = AdamState(*(self.arrays.read(name) for name in MOMENTS), self.adam.step)
        return HostArrays(self.get_model(), adam,
                          {k: stats[i].copy() for i, k in enumerate(self._state.stat_names)})

    @property
    def counters(self) -> dict:
        return dict(self.pool.counters(),
                    emission_disagreements=self.renderer.emission_disagreements,
                    clipped_renders=self.renderer.clipped_renders)

    # -- the antialiased mode's 3D filter -----------------------------------------------------------
    def set_filter_cameras(self, cameras: list[Camera]) -> None:
        super().set_filter_cameras(cameras)
        if self.filter is not None:
            self.filter.set_cameras(self.filter_cameras)

    def update_filter_3d(self) -> None:
        if self.filter is not None:
            self.filter.run()

    def filter_3d(self) -> np.ndarray | None:
        return None if self.filter is None else self.filter.read()

    # -- appearance ---------------------------------------------------------------------------------
    def appearance_state(self):
        if self.app is not None:
            self.appearance = self.app.download()
        return self.appearance

    def load_appearance(self, state) -> None:
        super().load_appearance(state)
        self.app.upload(state)

    # -- pose corrections ---------------------------------------------------------------------------
    def pose_state(self):
        if self.pose_opt is not None:
            self.pose = self.pose_opt.download()
        return self.pose

    def load_pose(self, state) -> None:
        super().load_pose(state)
        self.pose_opt.upload(state)

    # -- targets ------------------------------------------------------------------------------------
    def holds_target(self, view_id) -> bool:
        return self.targets.holds(view_id)

    # -- the step -----------------------------------------------------------------------------------
    def _begin(self, camera: Camera, active_sh_degree) -> None:
        r = self.renderer
        r.prepare(camera, self.background, active_sh_degree)
        if self._verify_capacity:
            # First step after an upload: render once with a 16-byte count check (grows the
            # intersection buffers and re-renders if needed), so the step below is never clipped.
            r.render(camera, self.background, readback=False, active_sh_degree=active_sh_degree)
            r.check_capacity()
            r.prepare(camera, self.background, active_sh_degree)
            self._verify_capacity = False
        self.loss.configure(camera.width, camera.height, "grad_image")

    def step_batch(self, views, active_sh_degree=None, noise=None) -> None:
        """One step: a submit per view, the last one also holding the update (one submit per step
        for a single view). The losses stay on the device until :meth:`take_losses`."""
        self.targets.touch(views)
        for k, view in enumerate(views):
            last = k == len(views) - 1
            self._submit_view(view, active_sh_degree, accumulate=k > 0,
                              update=(len(views), noise) if last else None)
        if self.pool.sentinel_bytes:   # the debug mode (gpu/pool.py): a blocking read per step
            self.pool.check_sentinels()

    def accumulate(self, views, active_sh_degree=None, fresh=True) -> None:
        self.targets.touch(views)
        for k, view in enumerate(views):
            self._submit_view(view, active_sh_degree, accumulate=k > 0 or not fresh)

    def finish(self, batch_size, noise=None) -> None:
        def update(cpass):
            for _name, encode in self._update_stages(batch_size, noise):
                encode(cpass)
        self._submit("the update of the training step", update)
        if self.pool.sentinel_bytes:
            self.pool.check_sentinels()

    def _submit(self, what: str, encode_pass) -> None:
        with self.ctx.guard(what):
            enc = self.ctx.device.create_command_encoder(label=what)
            cpass = enc.begin_compute_pass(label=what)
            encode_pass(cpass)
            cpass.end()
            t = time.perf_counter()
            self.ctx.queue.submit([enc.finish()])
            self.blocked_seconds += time.perf_counter() - t

    def _submit_view(self, view, active_sh_degree, *, accumulate: bool, update=None) -> None:
        """Forward, loss and backward of one view in one submit; ``update = (batch_size, noise)``
        appends the step's update to it."""
        if self._pending >= self.history:
            self.take_losses_into_buffer()
        self._begin(view.camera, active_sh_degree)
        target_name = self.targets.resident(view.target, view.view_id)
        slot = self._next_slot
        app_view = view.view_id if self.app is not None else None
        if app_view is not None:
            self.app.prepare(app_view, view.camera.width, view.camera.height)
        pose_view = view.view_id if self.pose_opt is not None else None
        if pose_view is not None:
            self.pose_opt.prepare(pose_view, view.camera, self.backward.pose_partials())
        stages = self.stages(target_name, slot, accumulate=accumulate, update=update,
                             appearance=app_view is not None, pose=pose_view is not None)
        with self.ctx.guard("encoding and submitting the training step"):
            enc = self.ctx.device.create_command_encoder(label="train step")
            if pose_view is not None:   # the corrected pose over the render uniform's
                self.pose_opt.encode_apply(enc, [self.renderer.page_uniform(page)
                                                 for page in self.renderer.pages])
            if self.profiler is None:
                cpass = enc.begin_compute_pass(label="train step")
                for _name, encode in stages:
                    encode(cpass)
                cpass.end()
            else:
                self.profiler.reset()
                for name, encode in stages:
                    with self.profiler.stage(enc, name) as cpass:
                        encode(cpass)
                self.profiler.resolve(enc)
            enc.copy_buffer_to_buffer(self.pool["counters"], 0, self.pool["step_counts"],
                                      COUNTERS_BYTES * slot, COUNTERS_BYTES)
            buf = enc.finish()
            t = time.perf_counter()
            # Some drivers (lavapipe) keep one submission in flight: submit then blocks until the
            # previous step is done. That is device time, not host work: counted apart.
            self.ctx.queue.submit([buf])
            self.blocked_seconds += time.perf_counter() - t
        self._next_slot = (slot + 1) % self.history
        self._pending += 1
        if update is not None:
            self.steps += 1

    def stages(self, target_name: str, slot: int, *, accumulate: bool = False,
               update: tuple | None = (1, None), appearance: bool = False,
               pose: bool = False) -> list:
        """``(name, encode(cpass))`` of one view, in order (all in one pass unless profiling).
        ``accumulate``: add the gradients to the batch's sum so far. ``update = (batch_size,
        noise)``: append the step's update (None: none); ``noise = (scale, key)`` is MCMC's
        position noise before the update (gsplat's order). A lone view's update runs inside the
        projection backward pass (:attr:`fused_adam`). ``appearance``: the view's colour
        transform between the render and the loss (:meth:`GpuAppearance.prepare` done). ``pose``:
        the update of the view's pose correction after the backward pass (:meth:`GpuPose.prepare`
        and :meth:`GpuPose.encode_apply` done)."""
        image, grad = ("image_app", "grad_app") if appearance else ("image", "grad_image")

        def loss(cpass):
            self.loss.encode(cpass, image=image, target=target_name, grad=grad, slot=slot)

        fused = (self.fused_adam and update is not None and update[0] == 1 and update[1] is None
                 and not accumulate)
        self.last_step_fused = fused
        if not fused:
            self._ensure_grads()
        stages = list(self.renderer.forward_stages())
        if appearance:
            stages.append(("appearance", self.app.encode_apply))
        stages.append(("loss", loss))
        if appearance:
            stages.append(("appearance backward", self.app.encode_backward))
        if self.renderer.num:
            stages.append(("raster backward", lambda cpass: self.backward.encode_raster(cpass)))
        stats = bool(self._state.stat_names)
        if fused:
            uniform = self.adam.encode_fused()
            stages.append(("project backward + adam", lambda cpass: self.backward.encode_project(
                cpass, stats=stats, adam=uniform)))
        else:
            stages.append(("project backward", lambda cpass: self.backward.encode_project(
                cpass, stats=stats, accumulate=accumulate)))
        if pose:
            stages.append(("pose update", self.pose_opt.encode_update))
        if self.backward.terms:
            stages.append(("loss terms", lambda cpass: self.backward.encode_terms(
                cpass, self.loss.n_result, slot)))
        if update is not None and not fused:
            stages += self._update_stages(*update)
        return stages

    def _update_stages(self, batch_size: int, noise) -> list:
        self._ensure_grads()
        stages = []
        if noise is not None:
            stages.append(("mcmc noise", lambda cpass: self._state.encode_perturb(cpass, *noise)))
        scale = 1.0 / batch_size
        stages.append(("adam", lambda cpass: self.adam.encode(cpass, grad_scale=scale)))
        return stages

    # -- data-parallel reduction --------------------------------------------------------------------
    def synchronize(self) -> None:
        t = time.perf_counter()
        # a 4-byte read waits for the queue (queue.on_submitted_work_done fails in wgpu-py 0.32)
        self.pool.read_array("counters", np.uint32, 1)
        self.blocked_seconds += time.perf_counter() - t

    def read_reduction(self):
        self._ensure_grads()
        grads = ParamLayout.pack(self.arrays.read(GRADS))
        if not self.statistics:
            return grads, np.zeros(0, np.float32)
        planes = dict(zip(self._state.stat_names, self.backward.read_stats()))
        added, maxed = reduction_layout(self.statistics)
        maxima = [planes[s.name] for s in maxed]
        return (np.concatenate([grads] + [planes[s.name] for s in added]),
                np.concatenate(maxima) if maxima else np.zeros(0, np.float32))

    def write_reduction(self, sums, maxima) -> None:
        a = self.arrays
        p, n = a.num_params, a.num
        self._ensure_grads()
        a.write(GRADS, ParamLayout.unpack(np.asarray(sums[:p], np.float32), n, a.sh_coeffs))
        if self.statistics:
            added, maxed = reduction_layout(self.statistics)
            values = {s.name: sums[p + j * n:p + (j + 1) * n] for j, s in enumerate(added)}
            values.update({s.name: maxima[j * n:(j + 1) * n] for j, s in enumerate(maxed)})
            self.backward.configure(np.stack([values[s.name] for s in self.statistics]))

    def enable_profiling(self, on: bool = True) -> bool:
        """Time every stage of the following steps with timestamp queries (one pass per stage);
        returns whether the adapter can (:meth:`stage_times` then has the last step's figures)."""
        if on and self.profiler is None:
            from .profiler import StageTimer  # noqa: PLC0415

            timer = StageTimer(self.ctx, self.pool)
            self.profiler = timer if timer.available else None
        elif not on:
            self.profiler = None
        return self.profiler is not None

    def stage_times(self) -> dict[str, float]:
        """Device milliseconds per stage of the last profiled step (one blocking read)."""
        return self.profiler.read() if self.profiler is not None else {}

    def take_losses_into_buffer(self) -> None:
        """Read the rings of the pending steps (one blocking read) into the host-side list."""
        if self._pending == 0:
            return
        count = self._pending
        first = (self._next_slot - count) % self.history
        slots = [(first + j) % self.history for j in range(count)]
        losses, counts = self._read_rings("reading the step losses back", self.loss.n_result,
                                          self.history)
        self._losses.extend(float(losses[s, 0]) for s in slots)
        totals = counts[slots, 0].astype(np.int64)
        self.max_intersections = max(self.max_intersections, int(totals.max()))
        cap = self.renderer.capacity
        over = int(np.sum(totals > cap))
        self.overflowed_steps += over
        if over and cap >= self.renderer.max_capacity:     # no growing past one binding
            self.renderer.note_clipped(over, int(totals.max()))
        self.renderer.emission_disagreements += int(counts[slots, 2].astype(np.int64).sum())
        if totals.max() > 0.9 * cap:   # grow ahead of need: densification keeps adding splats
            self.renderer.ensure_capacity(int(totals.max() * 1.25))
        self._pending = 0

    def _read_rings(self, what: str, results: str | None, count: int
                    ) -> tuple[np.ndarray | None, np.ndarray]:
        """The first ``count`` slots of a results ring (pool buffer ``results``, 16 bytes a slot:
        the loss's (loss, L1, SSIM, 1-SSIM), or a view's error (lo, hi, sum, 0); None: none) and
        of the intersection counters' ring, in one blocking read: ``(count, 4)`` floats (None
        without results) and ``(count, COUNTERS_BYTES // 4)`` counts."""
        res_bytes = RESULT_BYTES * count if results else 0
        count_bytes = COUNTERS_BYTES * count
        t = time.perf_counter()
        with self.ctx.guard(what):
            staging = self.pool.staging(res_bytes + count_bytes)
            enc = self.ctx.device.create_command_encoder(label="read rings")
            if results:
                enc.copy_buffer_to_buffer(self.pool[results], 0, staging, 0, res_bytes)
            enc.copy_buffer_to_buffer(self.pool["step_counts"], 0, staging, res_bytes, count_bytes)
            self.ctx.queue.submit([enc.finish()])
            data = self.pool.map_staging(res_bytes + count_bytes)
        self.blocked_seconds += time.perf_counter() - t
        values = (np.frombuffer(data, np.float32, 4 * count).reshape(count, 4) if results
                  else None)
        counts = np.frombuffer(data, np.uint32, count_bytes // 4, res_bytes).reshape(count, -1)
        return values, counts

    def _views_in_rings(self, views, encode, what: str, results: str | None = None,
                        active_sh_degree=None) -> list[np.ndarray | None]:
        """Per view one submit: the forward render, ``encode(cpass, view)``'s dispatches after
        it, the 16-byte result it returns (``(buffer, offset)``, or None) copied to the view's
        slot of ring ``results`` and its intersection counts to the counters' ring; the rings are
        read once per ``history`` views. The views whose intersections overflowed are done again
        with grown buffers (past the most one binding holds they stay clipped, counted).
        Returns each view's result (None without ``results``)."""
        self.take_losses_into_buffer()     # the views use the count ring's slots from 0
        r, out = self.renderer, [None] * len(views)
        self.targets.touch(views)
        pending = list(range(len(views)))
        for _attempt in range(3):
            redo, most = [], 0
            for first in range(0, len(pending), self.history):
                chunk = pending[first:first + self.history]
                for slot, k in enumerate(chunk):
                    self._begin(views[k].camera, active_sh_degree)
                    with self.ctx.guard(what):
                        enc = self.ctx.device.create_command_encoder(label=what)
                        cpass = enc.begin_compute_pass(label=what)
                        r.encode_forward(cpass)
                        result = encode(cpass, views[k])
                        cpass.end()
                        if results:
                            enc.copy_buffer_to_buffer(self.pool[result[0]], result[1],
                                                      self.pool[results], RESULT_BYTES * slot,
                                                      RESULT_BYTES)
                        enc.copy_buffer_to_buffer(self.pool["counters"], 0,
                                                  self.pool["step_counts"],
                                                  COUNTERS_BYTES * slot, COUNTERS_BYTES)
                        self.ctx.queue.submit([enc.finish()])
                values, counts = self._read_rings(what, results, len(chunk))
                reached = counts[:, 0].astype(np.int64)
                r.emission_disagreements += int(counts[:, 2].astype(np.int64).sum())
                over = reached > r.capacity
                for slot, k in enumerate(chunk):
                    out[k] = None if values is None else values[slot].copy()
                if over.any() and r.capacity >= r.max_capacity:   # drawn clipped
                    r.note_clipped(int(over.sum()), int(reached.max()))
                elif over.any():
                    redo += [k for k, o in zip(chunk, over) if o]
                    most = max(most, int(reached.max()))
            if not redo:
                break
            r.ensure_capacity(most)
            r.redos += 1
            pending = redo
        return out

    @property
    def error_maps(self) -> GpuErrorMaps:
        """error_maps.wgsl, compiled when first used (observations, the views' errors)."""
        if self._error_maps is None:
            self._error_maps = GpuErrorMaps(self.gpu)
        return self._error_maps

    def view_errors(self, views, active_sh_degree=None) -> list[float]:
        """:meth:`TrainStep.view_errors` on the device: per view a forward render and its error
        against the view's resident image (uploaded once, as a training view's), summed on the
        device (``error_maps.wgsl``'s first two passes); the sums of up to ``history`` views are
        read back at once with their intersection counts, no image (:meth:`_views_in_rings`)."""
        maps, r = self.error_maps, self.renderer
        self.pool.get("view_errors", RESULT_BYTES * self.history)

        def encode(cpass, view):
            target = self.targets.resident(view.target, view.view_id)
            maps.encode(cpass, image="image", target=target, out="grad_image",
                        width=r.width, height=r.height, weights=False)
            return maps.total

        totals = self._views_in_rings(views, encode, "measuring the views' errors",
                                      "view_errors", active_sh_degree)
        # the summed per-pixel error (the channels' mean) over the pixels: the L1 term
        return [float(t[2]) / (v.camera.width * v.camera.height) for t, v in zip(totals, views)]

    def observe(self, views, weights, into, active_sh_degree=None) -> None:
        """:meth:`TrainStep.observe` on the device: per view a forward render, the weight map
        (:class:`ErrorMaps`: computed on the device against the view's resident image; any other
        function: on the host from the render read back, uploaded), the rasterisation backward
        with it as dL/dimage and ``observe.wgsl`` (grad2d's colour part into the statistics'
        planes, grad2d cleared). On the device nothing but the views' intersection counts is
        read, once per ``history`` views; a view that overflowed added nothing and is observed
        again, grown (:meth:`_views_in_rings`)."""
        names = self._state.stat_names
        missing = [k for k in into if k not in names]
        if missing or not 1 <= len(into) <= 3:
            raise ValueError(f"observe into {into}: 1-3 of this state's statistics {names}")
        planes = np.zeros(4, np.uint32)
        planes[:len(into)] = [names.index(k) for k in into]
        if self._observe is None:
            self._observe = OBSERVE.variant().module(self.lib)
        module, r = self._observe, self.renderer
        block = module.workgroup_size("observe")[0]
        on_device = isinstance(weights, ErrorMaps)

        def encode(cpass, view):
            if not r.num:
                return
            if on_device:
                target = self.targets.resident(view.target, view.view_id)
                self.error_maps.encode(cpass, image="image", target=target, out="grad_image",
                                       width=r.width, height=r.height,
                                       threshold=weights.threshold)
            self.backward.encode_raster(cpass, "grad_image")
            cpass.set_pipeline(module.pipeline("observe", {"COUNT": len(into)}))
            # a render past the most one binding holds is observed clipped, as it is trained
            capacity = r.capacity if r.capacity < r.max_capacity else 0xFFFFFFFF
            for page in r.pages:    # once per page (gpu/pages.py): rows local to the page
                groups = grid_2d(-(-page.count // block))
                u = np.zeros((), module.struct_dtype("ObserveParams"))
                u["n"], u["x_groups"], u["planes"] = page.count, groups[0], planes
                u["capacity"] = capacity
                name = page_name("observe_params", page.index)
                self.pool.get(name, u.nbytes, buffer_usage(*UNIFORM_USAGE))
                self.pool.write(name, u)
                cpass.set_bind_group(0, self.pool.bind_group(module, 0, {
                    "op": name, "grad2d": r.paging.splat_window("grad2d", page),
                    "stats": page_name("stats", page.index), "counters": "counters"}))
                cpass.dispatch_workgroups(*groups)

        if on_device:
            self._views_in_rings(views, encode, "observing the views",
                                 active_sh_degree=active_sh_degree)
            return
        self.targets.touch(views)
        for view in views:     # a weight function on the host: the render read back per view
            image = r.render(view.camera, self.background, readback=True,
                             active_sh_degree=active_sh_degree)
            self._upload_weights(weights, image, view)
            with self.ctx.guard("observing a view"):
                enc = self.ctx.device.create_command_encoder(label="observe")
                cpass = enc.begin_compute_pass(label="observe")
                encode(cpass, view)
                cpass.end()
                self.ctx.queue.submit([enc.finish()])

    def _upload_weights(self, weights, image: np.ndarray, view) -> None:
        """A weight map computed on the host from the render (the view's image read from the
        device when it is resident there and not given), uploaded as dL/dimage."""
        target = view.target
        if target is None:
            name = self.targets.resident(None, view.view_id)
            target = self.pool.read_array(name, np.float32, image.size).reshape(image.shape)
        w = np.ascontiguousarray(weights(image, np.asarray(target, np.float32)), np.float32)
        if w.shape != image.shape:
            raise ValueError(f"weights of shape {w.shape} for an image of {image.shape}")
        self.pool.get("grad_image", w.nbytes)
        self.pool.write("grad_image", w)

    def take_losses(self) -> list[float]:
        """Losses of the steps since the last call, in order (at most one blocking read)."""
        self.take_losses_into_buffer()
        out, self._losses = self._losses, []
        return out

    def render(self, camera: Camera, active_sh_degree: int | None = None) -> np.ndarray:
        return self.renderer.render(camera, self.background, readback=True,
                                    active_sh_degree=active_sh_degree)

    # -- diagnostics --------------------------------------------------------------------------------
    def gradients(self, camera: Camera, target: np.ndarray | None = None, *,
                  dL_dimage: np.ndarray | None = None,
                  active_sh_degree: int | None = None) -> GpuGradients:
        """Forward, loss (or the given dL/dimage) and both backward passes, without the Adam update
        and without touching the densification statistics; reads everything back."""
        if (target is None) == (dL_dimage is None):
            raise ValueError("pass exactly one of target and dL_dimage")
        self.take_losses_into_buffer()
        r = self.renderer
        self._begin(camera, active_sh_degree)
        if dL_dimage is None:
            target_name = self.targets.resident(target, None)
        else:
            g = np.ascontiguousarray(dL_dimage, np.float32)
            self.pool.get("grad_image", g.nbytes)
            self.pool.write("grad_image", g)
        n = r.num
        self._ensure_grads()
        split = r.paging.split
        g2 = 4 * GRAD2D_FLOATS
        self.pool.get("grad2d_copy", g2 * max(n, 1), windowed=True)
        with self.ctx.guard("computing gradients"):
            enc = self.ctx.device.create_command_encoder(label="gradients")
            cpass = enc.begin_compute_pass(label="forward+raster backward")
            r.encode_forward(cpass)
            if dL_dimage is None:
                self.loss.encode(cpass, image="image", target=target_name, grad="grad_image", slot=0)
            if n:
                self.backward.encode_raster(cpass, "grad_image")
            cpass.end()
            enc.copy_buffer_to_buffer(self.pool["grad2d"], 0, self.pool["grad2d_copy"], 0,
                                      g2 * min(max(n, 1), split))
            if n > split:
                enc.copy_buffer_to_buffer(self.pool["grad2d_hi"], 0, self.pool["grad2d_copy"],
                                          g2 * split, g2 * (n - split))
            cpass = enc.begin_compute_pass(label="projection backward")
            self.backward.encode_project(cpass, stats=False)
            cpass.end()
            self.ctx.queue.submit([enc.finish()])
        grads = self.arrays.read(GRADS)
        raw = self.pool.read_array("grad2d_copy", np.float32, GRAD2D_FLOATS * n).reshape(n, GRAD2D_FLOATS)
        screen = raw[:, [0, 1, 2, 4, 5, 6, 8, 9, 10]].copy()
        loss = self.loss.read_loss(0).loss if dL_dimage is None else None
        image = self.pool.read_array("image", np.float32, 3 * r.width * r.height).reshape(
            r.height, r.width, 3)
        return GpuGradients(grads, screen, loss, image)
