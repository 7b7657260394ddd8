"""GPU runtime: adapter/device selection, feature and limit detection, GPU errors as exceptions.

``select_device(kind, adapter_filter)`` is the one entry point the CLI and the trainer use:

- ``kind="cpu"``  -> ``None`` (the caller uses the NumPy reference path);
- ``kind="auto"`` -> a :class:`GpuContext`, or ``None`` with a clear warning when no adapter exists;
- ``kind="gpu"``  -> a :class:`GpuContext`, or :class:`NoAdapterError` when none exists.

wgpu-py already honours ``WGPU_BACKEND_TYPE`` (e.g. ``Vulkan``, ``Metal``, ``D3D12``) and
``WGPUPY_WGPU_ADAPTER_NAME`` in ``request_adapter``; ``adapter_filter`` (``--adapter NAME``) is our
own case-insensitive substring filter over the adapter's summary (name, type and backend).

**Device profiles.** ``WGSL_SPLAT_DEVICE_PROFILE=webgpu|metal-apple7|dx12|full`` makes every
context expose only the optional features and the limits of that platform (:mod:`.profiles`), so
the fall-backs those platforms take (compare-and-swap atomics, the workgroup reduction, no stage
timestamps) and their binding limits run on whatever adapter is here (lavapipe in CI).
``full`` (or unset) is everything the adapter offers. See docs/portability.md.

**Binding limit and memory.** ``WGSL_SPLAT_MAX_BINDING=BYTES`` (a debug option: ``256K``, ``1M``)
asks the device for that max-storage-buffer-binding-size instead of the adapter's, so data that
spans several bindings (the paged state, docs/design.md §3) runs, and wgpu's validation enforces
the limit, at a size a test can afford. ``WGSL_SPLAT_DEVICE_MEMORY=BYTES`` (``6G``) is the device
memory the trainer may fill (:attr:`GpuContext.memory_bytes`); WebGPU does not tell an adapter's
memory, so without it a CPU adapter (lavapipe: the device memory is the host's) is given half of
the host's physical memory and a GPU no budget: there growth asks the driver instead, by
allocating what the grown step needs before a row operation starts (``GpuTrainStep.room_for``).
Both are declared, parsed and bounded in :mod:`wgsl_splat.env` (at least 64 KiB each); a value it
refuses is an :class:`EnvSettingError` on every path (never a fall-back to the NumPy path), and a
message that cites a limit the variable set names it (:attr:`GpuContext.binding_setting`).

**DX12 shader compiler.** On Windows, wgpu-py compiles HLSL with FXC unless told otherwise; when a
``dxcompiler.dll`` (1.8.2502 or newer) is named by ``WGSL_SPLAT_DXC`` or lies in wgpu-py's
``resources`` folder, :func:`_configure_dx12_compiler` selects DXC before the instance exists.

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
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .. import env
from .profiles import PROFILES, DeviceProfile

log = logging.getLogger("wgsl_splat.gpu")

OPTIONAL_FEATURES = ("shader-float32-atomic", "subgroup", "timestamp-query", "shader-f16")

# Limits we raise above the WebGPU defaults when the adapter allows it (larger scenes need bigger
# buffers). The shaders themselves stay within the baseline for everything else (<= 8 storage
# buffers per stage, <= 16 KiB workgroup memory, 256 invocations per workgroup).
_RAISED_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size")


class GpuError(RuntimeError):
    """Any failure of the GPU path, with a message meant for a person."""


class ProfileError(GpuError):
    """``WGSL_SPLAT_DEVICE_PROFILE`` names no profile, or one this adapter cannot emulate."""


class EnvSettingError(GpuError):
    """A variable of the GPU path (``WGSL_SPLAT_MAX_BINDING``, ``WGSL_SPLAT_DEVICE_MEMORY``) holds
    a value :mod:`wgsl_splat.env` refuses: one line naming it, its value and what it takes."""


PROFILE_ENV = env.DEVICE_PROFILE.name
BINDING_ENV = env.MAX_BINDING.name
MEMORY_ENV = env.DEVICE_MEMORY.name
_BINDING_LIMIT = "max-storage-buffer-binding-size"


def _read(var: env.EnvVar):
    try:
        return var.read()
    except env.EnvError as exc:
        raise EnvSettingError(str(exc)) from None


def binding_override() -> int | None:
    """``$WGSL_SPLAT_MAX_BINDING`` in bytes (None when unset), rounded down to 256 bytes."""
    forced = _read(env.MAX_BINDING)
    return None if forced is None else forced - forced % 256


def memory_override() -> int | None:
    """``$WGSL_SPLAT_DEVICE_MEMORY`` in bytes (None when unset)."""
    return _read(env.DEVICE_MEMORY)


def sentinels_on() -> bool:
    """``$WGSL_SPLAT_SENTINELS`` is ``on``: buffer pools give storage buffers sentinel tails."""
    return _read(env.SENTINELS) == "on"


def check_settings() -> DeviceProfile | None:
    """Read every variable of the GPU path (one-line errors: :class:`ProfileError`,
    :class:`EnvSettingError`) before an adapter is looked for, so that a bad value is an error
    on every path and on every machine; returns the device profile."""
    binding_override()
    memory_override()
    sentinels_on()
    return device_profile()


def device_profile(name: str | None = None) -> DeviceProfile | None:
    """The profile ``name`` (default: ``$WGSL_SPLAT_DEVICE_PROFILE``); None for ``full``/unset.
    A :class:`ProfileError` (one line) for a name that does not exist."""
    try:
        key = env.DEVICE_PROFILE.read() if name is None else (
            env.DEVICE_PROFILE.parse(name) if name.strip() else None)
    except env.EnvError as exc:
        raise ProfileError(str(exc)) from None
    return None if key in (None, "full") else PROFILES[key]


def _stricter(limit: str, a: int, b: int) -> int:
    # alignments are better when smaller; every other limit when larger
    return max(a, b) if limit.startswith("min-") else min(a, b)


def profile_request(profile: DeviceProfile | None, adapter_features, adapter_limits: dict,
                    wanted: tuple, adapter_name: str = "this adapter") -> tuple[list, dict]:
    """(features, limits) to request from an adapter with ``adapter_features`` and
    ``adapter_limits``: ``wanted`` optional features it has (under a profile: the profile's, each
    of which the adapter must have), the raised limits, and under a profile its limits."""
    available = set(adapter_features)
    if profile is None:
        feats = [f for f in wanted if f in available]
        limits = {k: adapter_limits[k] for k in _RAISED_LIMITS if k in adapter_limits}
        return feats, _with_binding_override(limits)
    missing = [f for f in profile.features if f not in available]
    if missing:
        raise ProfileError(f"{PROFILE_ENV}={profile.name} needs {', '.join(missing)}, which "
                           f"{adapter_name} does not have (use a profile with fewer features)")
    feats = [f for f in wanted if f in profile.features]
    limits = {k: adapter_limits[k] for k in _RAISED_LIMITS if k in adapter_limits}
    for k, v in profile.limits.items():
        if k in adapter_limits:
            limits[k] = _stricter(k, int(v), int(adapter_limits[k]))
    return feats, _with_binding_override(limits)


def _with_binding_override(limits: dict) -> dict:
    forced = binding_override()     # at least 64 KiB (env.MAX_BINDING), a multiple of 256
    if forced is not None and _BINDING_LIMIT in limits:
        limits[_BINDING_LIMIT] = min(int(limits[_BINDING_LIMIT]), forced)
    return limits


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

    _configure_dx12_compiler(wgpu)
    return wgpu


_dx12_configured = False


def dxc_path(wgpu_module=None) -> str | None:
    """The ``dxcompiler.dll`` wgpu's DX12 backend should load, or None (FXC): ``WGSL_SPLAT_DXC``
    when set (an empty value keeps FXC), else one in wgpu-py's resources folder (where wgpu-py's
    ``tools/download_dxc.py`` puts it)."""
    path = env.DXC.read()
    if path is not None:
        return path or None
    if wgpu_module is None:
        return None
    candidate = os.path.join(os.path.dirname(wgpu_module.__file__), "resources", "dxcompiler.dll")
    return candidate if os.path.isfile(candidate) else None


def _configure_dx12_compiler(wgpu_module, platform: str | None = None) -> str | None:
    """On Windows, make wgpu's DX12 backend compile with DXC when a dxcompiler.dll is available
    (FXC, wgpu's default, takes far longer on large kernels and has no subgroup operations).
    Must run before the wgpu instance exists; returns the DLL chosen (None: FXC, or not Windows)."""
    global _dx12_configured
    if _dx12_configured or (platform or sys.platform) != "win32":
        return None
    _dx12_configured = True
    path = dxc_path(wgpu_module)
    if path is None:
        return None
    if not os.path.isfile(path):
        raise GpuError(f"WGSL_SPLAT_DXC names {path}, which does not exist")
    from wgpu.backends.wgpu_native.extras import set_instance_extras  # noqa: PLC0415

    set_instance_extras(dx12_compiler="dxc", dxc_path=path)
    log.info("DX12 shaders compile with DXC (%s)", path)
    return path


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
    profile: DeviceProfile | None = None
    #: ``WGSL_SPLAT_MAX_BINDING=…`` when that variable set the binding limit at creation (None:
    #: the adapter's or the profile's limit): messages citing the limit name it
    binding_setting: str | None = None
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
    def max_buffer_bytes(self) -> int:
        """The largest buffer the device makes (a buffer bound in windows may be that large)."""
        return max(int(self.limits.get("max-buffer-size", 1 << 28)), self.max_binding_bytes)

    @property
    def memory_bytes(self) -> int | None:
        """The device memory the trainer may fill, or None where nothing says (see the module
        docstring: ``$WGSL_SPLAT_DEVICE_MEMORY``, half of the host's memory on a CPU adapter)."""
        forced = memory_override()
        if forced is not None:
            return forced
        if self.adapter_type == "CPU":
            host = host_memory_bytes()
            return host // 2 if host else None
        return None

    @property
    def memory_setting(self) -> str | None:
        """``WGSL_SPLAT_DEVICE_MEMORY=…`` when that variable sets :attr:`memory_bytes`."""
        return env.DEVICE_MEMORY.setting() if memory_override() is not None else None

    def can_allocate(self, nbytes: int) -> bool:
        """Whether the device can allocate ``nbytes`` more now: made in buffers of at most the
        adapter's largest and destroyed at once (WebGPU does not tell a GPU's memory; an
        allocation is the one question a driver answers)."""
        wgpu = _wgpu()
        made = []
        try:
            with self.guard(f"probing for {nbytes} bytes of device memory"):
                left = int(nbytes)
                chunk = self.max_buffer_bytes - self.max_buffer_bytes % 256
                while left > 0:
                    size = min(left, chunk)
                    size += -size % 4
                    made.append(self.device.create_buffer(size=size,
                                                          usage=wgpu.BufferUsage.STORAGE))
                    left -= size
            return True
        except GpuOutOfMemoryError:
            return False
        finally:
            for buf in made:
                buf.destroy()

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

    @property
    def profile_name(self) -> str:
        return self.profile.name if self.profile is not None else "full"

    def describe(self) -> str:
        """The one-line description logged when the device is chosen."""
        prof = "" if self.profile is None else f", device profile {self.profile.name}"
        return f"Using GPU adapter: {self.name} ({self.adapter_type}, {self.backend}{prof})"

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


def host_memory_bytes() -> int | None:
    """This machine's physical memory (None where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


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


def create_context(adapter, *, features: tuple[str, ...] | None = None,
                   profile: DeviceProfile | str | None = None) -> GpuContext:
    """Open a device on ``adapter`` with every optional feature it supports, or under a device
    profile (``profile``, default ``$WGSL_SPLAT_DEVICE_PROFILE``) the platform's features and
    limits. ``features`` restricts the optional features further (tests)."""
    if profile is None or isinstance(profile, str):
        profile = device_profile(profile)
    memory_override()      # a bad value is refused here too (open_devices), not at first use
    wanted = OPTIONAL_FEATURES if features is None else features
    req_features, req_limits = profile_request(profile, adapter.features, dict(adapter.limits),
                                               tuple(wanted), adapter_summary(adapter))
    forced = binding_override()
    binding_setting = (env.MAX_BINDING.setting() if forced is not None
                       and req_limits.get(_BINDING_LIMIT) == forced else None)
    try:
        device = adapter.request_device_sync(label="wgsl_splat", required_features=req_features,
                                             required_limits=req_limits)
    except Exception as exc:  # noqa: BLE001
        raise GpuError(f"could not open a device on {adapter_summary(adapter)}: {exc}") from exc
    ctx = GpuContext(adapter=adapter, device=device, features=frozenset(device.features),
                     limits=dict(device.limits), info=dict(adapter.info), profile=profile,
                     binding_setting=binding_setting)
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
    profile = check_settings()     # a bad value is an error on every path, never a fall-back
    try:
        adapter = _pick_adapter(adapter_filter, power_preference)
        ctx = create_context(adapter, features=features, profile=profile)
    except (ProfileError, EnvSettingError):
        raise
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
