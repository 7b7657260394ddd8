"""The device profiles: the optional features and limits of the platforms a context can emulate
(``WGSL_SPLAT_DEVICE_PROFILE``, docs/portability.md), as data. :mod:`.runtime` picks the profile
(:func:`~.runtime.device_profile`) and requests a device under it
(:func:`~.runtime.profile_request`)."""

from __future__ import annotations

from dataclasses import dataclass

#: WebGPU's default limits (the WebGPU spec, "Limits"): what every WebGPU implementation offers.
WEBGPU_LIMITS = {
    "max-texture-dimension-1d": 8192, "max-texture-dimension-2d": 8192,
    "max-texture-dimension-3d": 2048, "max-texture-array-layers": 256, "max-bind-groups": 4,
    "max-bind-groups-plus-vertex-buffers": 24, "max-bindings-per-bind-group": 1000,
    "max-dynamic-uniform-buffers-per-pipeline-layout": 8,
    "max-dynamic-storage-buffers-per-pipeline-layout": 4,
    "max-sampled-textures-per-shader-stage": 16, "max-samplers-per-shader-stage": 16,
    "max-storage-buffers-per-shader-stage": 8, "max-storage-textures-per-shader-stage": 4,
    "max-uniform-buffers-per-shader-stage": 12, "max-uniform-buffer-binding-size": 65536,
    "max-storage-buffer-binding-size": 134217728, "min-uniform-buffer-offset-alignment": 256,
    "min-storage-buffer-offset-alignment": 256, "max-vertex-buffers": 8,
    "max-buffer-size": 268435456, "max-vertex-attributes": 16,
    "max-vertex-buffer-array-stride": 2048, "max-inter-stage-shader-variables": 16,
    "max-color-attachments": 8, "max-color-attachment-bytes-per-sample": 32,
    "max-compute-workgroup-storage-size": 16384, "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256, "max-compute-workgroup-size-y": 256,
    "max-compute-workgroup-size-z": 64, "max-compute-workgroups-per-dimension": 65535,
}


@dataclass(frozen=True)
class DeviceProfile:
    """A platform's optional features (of :data:`~.runtime.OPTIONAL_FEATURES`) and limits.
    ``limits`` maps a limit to the platform's value; limits it does not name stay the adapter's. A
    context under a profile gets, per limit, the stricter of the profile's value and the
    adapter's."""

    name: str
    features: tuple
    limits: dict
    source: str


# Values from wgpu-hal's adapter code (metal/adapter.rs, dx12/adapter.rs), wgpu's feature docs and
# the WebGPU spec; docs/portability.md says which figure comes from where.
PROFILES = {
    # WebGPU core: no optional feature at all (float atomics do not exist in WebGPU; its optional
    # `subgroups` needs an `enable subgroups;` that wgpu-native rejects; `timestamp-query` is
    # optional), every limit at its default: 8 storage buffers per stage, 16 KiB workgroup memory,
    # 256 invocations per workgroup, 128 MiB storage bindings, 256-byte offset alignment.
    "webgpu": DeviceProfile("webgpu", (), dict(WEBGPU_LIMITS), "WebGPU spec defaults"),
    # Apple GPU family 7 (M1 and later) through wgpu's Metal backend: float atomics (MSL 3.0),
    # SIMD-group operations, f16, timestamps only at pass boundaries (no
    # timestamp-query-inside-passes, which our stage timer does not use), 31 buffers per stage,
    # 32 KiB threadgroup memory, 1024 threads per threadgroup.
    "metal-apple7": DeviceProfile(
        "metal-apple7", ("shader-float32-atomic", "subgroup", "timestamp-query", "shader-f16"),
        {"max-storage-buffers-per-shader-stage": 31, "max-uniform-buffers-per-shader-stage": 31,
         "max-compute-workgroup-storage-size": 32768,
         "max-compute-invocations-per-workgroup": 1024, "max-compute-workgroup-size-x": 1024,
         "max-compute-workgroup-size-y": 1024, "max-compute-workgroup-size-z": 1024,
         "max-storage-buffer-binding-size": (1 << 32) - 1},
        "wgpu-hal metal/adapter.rs (Apple7), wgpu SHADER_FLOAT32_ATOMIC docs"),
    # Direct3D 12 (feature level 11_1+) through wgpu with FXC, wgpu-py's default compiler: shader
    # model 5.1, so no subgroups (wave ops need SM 6.0, i.e. DXC) and no f16; no float atomics on
    # DX12 in wgpu; timestamps anywhere; 64 UAVs / 4 = 16 storage buffers per stage; workgroup
    # memory as wgpu's DX12 adapter reports it (16 KiB); 2 GiB - 1 storage bindings.
    "dx12": DeviceProfile(
        "dx12", ("timestamp-query",),
        {"max-storage-buffers-per-shader-stage": 16, "max-compute-workgroup-storage-size": 16384,
         "max-compute-invocations-per-workgroup": 1024, "max-compute-workgroup-size-x": 1024,
         "max-compute-workgroup-size-y": 1024, "max-compute-workgroup-size-z": 64,
         "max-storage-buffer-binding-size": (1 << 31) - 1,
         "max-buffer-size": (1 << 31) - 1},
        "wgpu-hal dx12/adapter.rs with FXC (shader model 5.1)"),
}
PROFILE_NAMES = ("full",) + tuple(PROFILES)
