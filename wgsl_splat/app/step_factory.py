"""The choice of path for ``train``: the NumPy reference, one GPU adapter, several adapters of this
process (``--devices``), or one adapter per MPI rank (``--distributed``)."""

from __future__ import annotations

from ..errors import UserError
from ..render_config import CLASSIC, RenderConfig
from .common import gpu_context


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
