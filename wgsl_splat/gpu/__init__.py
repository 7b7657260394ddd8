"""The GPU path: WGSL compute shaders driven through wgpu-py.

- :mod:`.runtime`  adapter/device selection (``select_device``), feature and limit detection,
  GPU errors as :class:`~.runtime.GpuError` subclasses; :mod:`.profiles` the device profiles
  (the platforms' features and limits);
- :mod:`.shaders`  WGSL loading from ``gpu/shaders/`` with ``#include`` and
  ``{{NAME}}`` substitution, explicit bind group layouts, module and pipeline caches;
- :mod:`.pool`     named device buffers sized by capacity, cached bind groups, counters;
- :mod:`.device`   :class:`~.device.Gpu`: the context, pool and library a step's stages share;
- :mod:`.layout`   :class:`~.layout.Layout`: the kernels' layout choices, the adapter's default;
- :mod:`.kernels`  every shader module and its variants, declared (what the host compiles, what
  the portability tour lists);
- :mod:`.pages`    the paged per-Gaussian storage; :mod:`.memory` how many Gaussians fit;
  :mod:`.targets` the training images kept on the device;
- :mod:`.sort`     the stable radix sort used by the renderer, and a bitonic sort for comparison;
- :mod:`.renderer` the forward pipeline: one command encoder, one submit per render;
- :mod:`.loss`     L1 + SSIM and dL/dimage; :mod:`.backward` rasterisation and projection
  backward with densification statistics; :mod:`.adam` the in-place update;
- :mod:`.step`     the training step (:class:`~.step.GpuTrainStep`): all of the above in one pass,
  one submit per step, no read-back; :mod:`.profiler` per-stage timestamps.

Modules are imported lazily by their users so that ``import wgsl_splat`` never loads wgpu.
"""
