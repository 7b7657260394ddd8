"""GPU runtime: adapter/device selection, feature and limit detection, GPU errors as exceptions.

``select_device(kind, adapter_filter)`` is the one entry point the CLI and the trainer use:

- ``kind="cpu"``  -> ``None`` (the caller uses the NumPy reference path);
- ``kind="auto"`` -> a :class:`GpuContext`, or ``None`` with a clear warning when no adapter exists;
- ``kind="gpu"``  -> a :class:`GpuContext`, or :class:`NoAdapterError` when none exists.

wgpu-py already honours ``WGPU_BACKEND_TYPE`` (e.g. ``Vulkan``, ``Metal``, ``D3D12``) and
``WGPUPY_WGPU_ADAPTER_NAME`` in ``request_adapter``; ``adapter_filter`` (``--adapter NAME``) is our
own case-insensitive substring filter over the adapter's summary (name, type and backend).

wgpu-py turns a validation error of the call in progress into ``wgpu.GPUValidationError``; errors
that arrive outside a call (and "device lost") are only logged by wgpu-py. We attach a logging
handler to the ``wgpu`` logger that records those, and :meth:`GpuContext.check` raises them as a
:class:`GpuError`. :meth:`GpuContext.guard` converts wgpu exceptions raised inside a block into
our exception types with a message that says what we were doing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

log = logging.getLogger("wgsl_splat.gpu")

OPTIONAL_FEATURES = ("shader-float32-atomic", "subgroup", "timestamp-query", "shader-f16")

# Limits we raise above the WebGPU defaults when the adapter allows it (larger scenes need bigger
# buffers). The shaders themselves stay within the baseline for everything else (<= 8 storage
# buffers per stage, <= 16 KiB workgroup memory, 256 invocations per workgroup).
_RAISED_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size")


class GpuError(RuntimeError):
    """Any failure of the GPU path, with a message meant for a person."""


class NoAdapterError(GpuError):
    """No wgpu adapter matches the request."""


class GpuValidationError(GpuError):
    """The GPU API rejected a call (bad WGSL, bad binding, out-of-range dispatch, ...)."""


class ShaderCompileError(GpuValidationError):
    """A WGSL source failed to compile; the message names the shader file and line."""


class GpuOutOfMemoryError(GpuError, MemoryError):
    """The device could not allocate a buffer."""


class DeviceLostError(GpuError):
    """The device was lost (driver reset, removed GPU, fatal error); the GPU state is gone."""


def _wgpu():
    os.environ.setdefault("XDG_RUNTIME_DIR", _default_xdg_runtime_dir())
    import wgpu  # noqa: PLC0415  (lazy: importing wgpu loads the native library)

    return wgpu


def _default_xdg_runtime_dir() -> str:
    # Vulkan loaders warn (and some fail) without XDG_RUNTIME_DIR; headless CI often lacks it.
    path = f"/tmp/xdg-{os.getuid()}" if hasattr(os, "getuid") else "/tmp/xdg"
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        pass
    return path


class _WgpuLogCatcher(logging.Handler):
    """Records errors that wgpu-py logs instead of raising (uncaptured errors, device lost)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lock = threading.Lock()
        self.contexts: list["GpuContext"] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        with self.lock:
            for ctx in self.contexts:
                if "device was lost" in msg or "DEVICE LOST" in msg:
                    ctx._lost_message = msg
                else:
                    ctx._pending_errors.append(msg)


_catcher: _WgpuLogCatcher | None = None


def _install_catcher() -> _WgpuLogCatcher:
    global _catcher
    if _catcher is None:
        _catcher = _WgpuLogCatcher()
        logging.getLogger("wgpu").addHandler(_catcher)
    return _catcher


def convert_wgpu_error(exc: BaseException, what: str) -> GpuError | None:
    """Map a wgpu exception to our exception type (None if it is not a GPU error)."""
    wgpu = _wgpu()
    text = f"{what}: {exc}" if what else str(exc)
    if isinstance(exc, GpuError):
        return exc
    if isinstance(exc, wgpu.GPUOutOfMemoryError) or "out of memory" in str(exc).lower():
        return GpuOutOfMemoryError(f"GPU out of memory while {text}")
    if "lost" in str(exc).lower() and "device" in str(exc).lower():
        return DeviceLostError(f"GPU device lost while {text}")
    if isinstance(exc, wgpu.GPUValidationError):
        return GpuValidationError(f"GPU validation error while {text}")
    if isinstance(exc, (wgpu.GPUError, wgpu.GPUPipelineError)):
        return GpuError(f"GPU error while {text}")
    return None


@dataclass(eq=False)
class GpuContext:
    """A chosen adapter and its device, with what we detected about them."""

    adapter: object
    device: object
    features: frozenset
    limits: dict
    info: dict
    _pending_errors: list = field(default_factory=list, repr=False)
    _lost_message: str | None = field(default=None, repr=False)

    @property
    def queue(self):
        return self.device.queue

    @property
    def name(self) -> str:
        return str(self.info.get("device") or self.info.get("description") or "unknown adapter")

    @property
    def backend(self) -> str:
        return str(self.info.get("backend_type", "?"))

    @property
    def adapter_type(self) -> str:
        return str(self.info.get("adapter_type", "?"))

    @property
    def max_binding_bytes(self) -> int:
        """The largest storage buffer a shader can bind whole: every per-Gaussian and
        per-intersection buffer must fit (128 MiB on lavapipe and in the WebGPU baseline)."""
        return min(int(self.limits.get("max-storage-buffer-binding-size", 1 << 27)),
                   int(self.limits.get("max-buffer-size", 1 << 28)))

    @property
    def has_float_atomics(self) -> bool:
        return "shader-float32-atomic" in self.features

    @property
    def has_timestamps(self) -> bool:
        return "timestamp-query" in self.features

    @property
    def has_subgroups(self) -> bool:
        return "subgroup" in self.features

    @property
    def has_f16(self) -> bool:
        return "shader-f16" in self.features

    def describe(self) -> str:
        """The one-line description logged when the device is chosen."""
        return f"Using GPU adapter: {self.name} ({self.adapter_type}, {self.backend})"

    def feature_summary(self) -> str:
        opt = ", ".join(f"{f}={'yes' if f in self.features else 'no'}" for f in OPTIONAL_FEATURES)
        return opt

    # -- errors -------------------------------------------------------------------------------------
    def check(self) -> None:
        """Raise errors wgpu reported outside a call (uncaptured errors, device lost)."""
        if self._lost_message is not None:
            raise DeviceLostError(f"GPU device lost: {self._lost_message}")
        if self._pending_errors:
            msgs, self._pending_errors[:] = list(self._pending_errors), []
            text = "\n".join(msgs)
            cls = GpuOutOfMemoryError if "out of memory" in text.lower() else GpuValidationError
            raise cls(f"GPU reported an error: {text}")

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Run a block of GPU calls; wgpu exceptions become GpuError subclasses naming ``what``."""
        try:
            yield
        except GpuError:
            raise
        except Exception as exc:  # noqa: BLE001
            conv = convert_wgpu_error(exc, what)
            if conv is None:
                raise
            raise conv from exc
        self.check()

    def close(self) -> None:
        if _catcher is not None:
            with _catcher.lock:
                if self in _catcher.contexts:
                    _catcher.contexts.remove(self)


def adapter_summary(adapter) -> str:
    info = adapter.info
    return (f"{info.get('device') or info.get('description')} "
            f"({info.get('adapter_type')}, {info.get('backend_type')})")


def list_adapters() -> list:
    """All adapters wgpu can see (for ``wgsl_splat devices``)."""
    wgpu = _wgpu()
    try:
        return list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as exc:  # noqa: BLE001  (no driver at all)
        log.debug("enumerate_adapters failed: %s", exc)
        return []


def _pick_adapter(adapter_filter: str | None, power_preference: str):
    wgpu = _wgpu()
    if adapter_filter:
        needle = adapter_filter.lower()
        matches = [a for a in list_adapters()
                   if needle in (adapter_summary(a) + " " + str(a.info.get("vendor", ""))).lower()]
        if not matches:
            names = "; ".join(adapter_summary(a) for a in list_adapters()) or "none"
            raise NoAdapterError(f"no GPU adapter matches {adapter_filter!r} (available: {names})")
        # Prefer discrete > integrated > others among the matches.
        rank = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}
        return sorted(matches, key=lambda a: rank.get(a.info.get("adapter_type"), 4))[0]
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    except Exception as exc:  # noqa: BLE001  (wgpu raises RuntimeError/ValueError when none)
        raise NoAdapterError(f"no GPU adapter available ({exc})") from exc
    if adapter is None:
        raise NoAdapterError("no GPU adapter available")
    return adapter


def create_context(adapter, *, features: tuple[str, ...] | None = None) -> GpuContext:
    """Open a device on ``adapter`` with every optional feature it supports."""
    wanted = OPTIONAL_FEATURES if features is None else features
    available = set(adapter.features)
    req_features = [f for f in wanted if f in available]
    adapter_limits = dict(adapter.limits)
    req_limits = {k: adapter_limits[k] for k in _RAISED_LIMITS if k in adapter_limits}
    try:
        device = adapter.request_device_sync(label="wgsl_splat", required_features=req_features,
                                             required_limits=req_limits)
    except Exception as exc:  # noqa: BLE001
        raise GpuError(f"could not open a device on {adapter_summary(adapter)}: {exc}") from exc
    ctx = GpuContext(adapter=adapter, device=device, features=frozenset(device.features),
                     limits=dict(device.limits), info=dict(adapter.info))
    catcher = _install_catcher()
    with catcher.lock:
        catcher.contexts.append(ctx)
    return ctx


def select_device(kind: str = "auto", adapter_filter: str | None = None, *,
                  power_preference: str = "high-performance",
                  echo: Callable[[str], None] | None = None,
                  features: tuple[str, ...] | None = None) -> GpuContext | None:
    """Choose where to compute: a :class:`GpuContext`, or ``None`` for the NumPy path.

    ``echo`` (e.g. ``click.echo``) also receives the one-line adapter message and the fall-back
    warning, which are always sent to the ``wgsl_splat.gpu`` logger too. ``features`` restricts the
    optional features requested (tests use it to exercise fall-backs).
    """
    kind = (kind or "auto").lower()
    if kind not in ("auto", "gpu", "cpu"):
        raise ValueError(f"device must be auto, gpu or cpu, got {kind!r}")
    if kind == "cpu":
        log.info("Using the NumPy CPU path (--device cpu)")
        return None
    try:
        adapter = _pick_adapter(adapter_filter, power_preference)
        ctx = create_context(adapter, features=features)
    except GpuError as exc:
        if kind == "gpu":
            raise NoAdapterError(f"--device gpu was requested but {exc}") from exc
        msg = f"Warning: {exc}; falling back to the (much slower) NumPy CPU path"
        log.warning(msg)
        if echo is not None:
            echo(msg)
        return None
    line = ctx.describe()
    log.info(line)
    log.info("Optional GPU features: %s", ctx.feature_summary())
    if echo is not None:
        echo(line)
    return ctx


def device_indices(spec: str) -> list[int]:
    """``--devices``: ``all`` (every adapter of the default adapter's backend, CPU adapters only
    when there is nothing else) or comma-separated indices of ``wgsl_splat devices`` (repeats
    allowed: several devices on one adapter). A one-line :class:`GpuError` for what is not there."""
    adapters = list_adapters()
    names = "; ".join(f"{i}: {adapter_summary(a)}" for i, a in enumerate(adapters)) or "none"
    if spec.strip().lower() == "all":
        if not adapters:
            raise NoAdapterError("--devices all: no GPU adapter found")
        backend = _pick_adapter(None, "high-performance").info.get("backend_type")
        same = [i for i, a in enumerate(adapters) if a.info.get("backend_type") == backend]
        real = [i for i in same if adapters[i].info.get("adapter_type") != "CPU"]
        return real or same[:1]
    try:
        indices = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise GpuError(f"--devices takes 'all' or adapter indices like 0,1, got {spec!r}") from None
    bad = [i for i in indices if not 0 <= i < len(adapters)]
    if bad or not indices:
        raise GpuError(f"--devices {spec}: no adapter {bad[0] if bad else ''} here "
                       f"(adapters: {names}; see `wgsl_splat devices`)")
    return indices


# wgpu's OpenGL backend aborts the process (a panic on its EGL context, BadAccess, in a poll or
# submit) when one process drives several of its devices next to another GL device: measured with
# wgpu 0.32 / Mesa llvmpipe. Several devices need another backend (one device per process works).
SINGLE_DEVICE_BACKENDS = ("OpenGL",)


def several_devices_refused(adapter) -> str | None:
    """Why one process must not open several devices on ``adapter`` (None: it may)."""
    backend = str(adapter.info.get("backend_type", ""))
    if backend in SINGLE_DEVICE_BACKENDS:
        return (f"{adapter_summary(adapter)}: wgpu's {backend} backend cannot drive several devices "
                f"in one process (wgpu aborts the process); use a Vulkan, Metal or D3D12 adapter, "
                f"or one device per process (--distributed under mpirun)")
    return None


def open_devices(indices: list[int]) -> list[GpuContext]:
    """One device per entry of ``indices`` (adapter indices of :func:`list_adapters`); the same
    index twice opens two devices on that adapter (each from its own adapter object). Several
    devices on an adapter that cannot run them (:func:`several_devices_refused`) are a
    :class:`GpuError`, before any is opened."""
    adapters = list_adapters()
    if len(indices) > 1:
        for i in dict.fromkeys(indices):
            why = several_devices_refused(adapters[i])
            if why:
                raise GpuError(f"--devices {','.join(map(str, indices))}: {why}")
    contexts = []
    for i in indices:
        contexts.append(create_context(list_adapters()[i]))
    return contexts
