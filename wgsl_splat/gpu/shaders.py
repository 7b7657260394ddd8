"""WGSL source loading, include expansion, compilation and pipeline caching.

Sources live in ``wgsl_splat/gpu/shaders/``, next to this loader, shipped as package data (see
:data:`SHADER_DIR`). A line ``#include "common.wgsl"``
is replaced by that file's text (each file is included at most once per module, recursively);
``{{NAME}}`` is substituted from the ``defines`` mapping (for things that WGSL ``override``
constants cannot express, e.g. array lengths of workgroup memory, or which file an ``#include``
names: ``#include "{{ATOMICS}}"`` picks the float-atomic or the compare-and-swap helpers). Scalar knobs use WGSL
``override`` constants, passed as pipeline ``constants``.

Bind group layouts are explicit and derived from the module's declarations
(``@group(g) @binding(b) var<uniform|storage, read|storage, read_write> NAME: ...``), so one bind
group serves every entry point of a module, and buffers are bound by the WGSL variable's NAME
(:meth:`~wgsl_splat.gpu.pool.BufferPool.bind_group`), never by a slot number written twice. A
binding whose declaration line carries the comment ``// dynamic`` gets a dynamic offset (used for
per-dispatch uniform slots).

Generated includes: ``#include "render_config.wgsl"`` (in ``common.wgsl``) is not a file but the
constants of the module's :class:`~wgsl_splat.render_config.RenderConfig`
(:meth:`RenderConfig.wgsl`), so the render constants exist once, in Python.

Uniform structs are described once, in WGSL: :func:`struct_dtype` derives a NumPy structured dtype
(field names, offsets and size by WGSL's uniform layout rules) from the struct's declaration, and
the host fills that, so the Python packing cannot drift from the shader.

Variants: every module the loader assembles (name, defines, render configuration) and every
pipeline made from it (entry point, override constants) is reported to the active
:class:`VariantRecorder` objects (:func:`record_variants`), so the portability check
(``wgsl_splat.tools.portability``) compiles exactly what the host creates.

Compile errors are re-raised as :class:`~wgsl_splat.gpu.runtime.ShaderCompileError` whose message
names the original file and line (``shaders/project.wgsl:42:7``), not the line in the expanded text.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..render_config import CLASSIC, RenderConfig
from .runtime import GpuContext, ShaderCompileError, convert_wgpu_error


def _shader_dir():
    """The folder of WGSL sources: ``wgsl_splat/gpu/shaders/``, package data of ``wgsl_splat.gpu``
    (found through ``importlib.resources`` the same way in a wheel, a plain and an editable
    install)."""
    return importlib.resources.files("wgsl_splat.gpu") / "shaders"


SHADER_DIR = _shader_dir()

_INCLUDE_RE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')
_DEFINE_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_BINDING_RE = re.compile(
    r"@group\((\d+)\)\s*@binding\((\d+)\)\s*var\s*<\s*(uniform|storage)\s*(?:,\s*(read_write|read))?\s*>"
    r"\s*([A-Za-z_][A-Za-z0-9_]*)[^;]*;(.*)$")
_STRUCT_RE = re.compile(r"\bstruct\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{([^}]*)\}", re.S)
_COMMENT_RE = re.compile(r"//[^\n]*")
GENERATED_RENDER_CONFIG = "render_config.wgsl"
_LOC_RE = re.compile(r"wgsl:(\d+):(\d+)")


@dataclass(frozen=True)
class ShaderSource:
    name: str
    code: str
    line_map: tuple  # output line i (0-based) -> (file name, 1-based line in that file)
    bindings: tuple  # (group, binding, kind, dynamic, name), kind uniform|read-only-storage|storage

    def locate(self, line: int) -> str:
        if 1 <= line <= len(self.line_map):
            fname, fline = self.line_map[line - 1]
            return f"shaders/{fname}:{fline}"
        return f"shaders/{self.name}:?"

    def remap_message(self, message: str) -> str:
        """Rewrite ``wgsl:LINE:COL`` locations of the expanded source to file:line:col."""
        def sub(m: re.Match) -> str:
            return f"{self.locate(int(m.group(1)))}:{m.group(2)}"
        return _LOC_RE.sub(sub, message)


@dataclass
class VariantRecorder:
    """What the loader was asked for while recording: ``modules`` holds (name, defines, config)
    keys (defines as sorted (key, str value) pairs), ``pipelines`` (module key, entry, constants)
    with the constants as sorted (name, value) pairs."""

    modules: set = field(default_factory=set)
    pipelines: set = field(default_factory=set)

    def variants(self) -> set:
        return set(self.pipelines)


_recorders: list[VariantRecorder] = []
_recorders_lock = threading.Lock()


def module_key(name: str, defines: dict | None, config: RenderConfig | None,
               generated: dict | None = None) -> tuple:
    return (_file_name(name).removesuffix(".wgsl"),
            tuple(sorted((k, str(v)) for k, v in (defines or {}).items())), config or CLASSIC,
            tuple(sorted((generated or {}).items())))


def constants_key(constants: dict | None) -> tuple:
    return tuple(sorted((k, float(v) if isinstance(v, float) else int(v))
                        for k, v in (constants or {}).items()))


_paused_depth = [0]


def _paused() -> bool:
    return _paused_depth[0] > 0


@contextlib.contextmanager
def unrecorded():
    """``with unrecorded():`` -- what the loader assembles inside the block is not recorded: code
    generated from declarations outside the package (a user's strategy) is the user's to check,
    not the portability tour's."""
    _paused_depth[0] += 1
    try:
        yield
    finally:
        _paused_depth[0] -= 1


def _record(kind: str, item: tuple) -> None:
    if _recorders and not _paused():
        with _recorders_lock:
            for rec in _recorders:
                getattr(rec, kind).add(item)


def start_recording() -> VariantRecorder:
    """A recorder that sees every module and pipeline from now on (until :func:`stop_recording`)."""
    rec = VariantRecorder()
    with _recorders_lock:
        _recorders.append(rec)
    return rec


def stop_recording(rec: VariantRecorder) -> None:
    with _recorders_lock:
        if rec in _recorders:
            _recorders.remove(rec)


@contextlib.contextmanager
def record_variants():
    """``with record_variants() as rec:`` -- what the loader assembles inside the block."""
    rec = start_recording()
    try:
        yield rec
    finally:
        stop_recording(rec)


def _file_name(name: str) -> str:
    return name if name.endswith(".wgsl") else name + ".wgsl"


def generated_includes(config: RenderConfig | None = None) -> dict[str, str]:
    """The includes every module may use that are generated from their Python declarations: the
    render constants (``render_config.wgsl``), the row operations' constants
    (``row_constants.wgsl``: the state's row kinds, the relocation's constants) and the SH
    constants (``sh_constants.wgsl``)."""
    from ..contract.rows import row_constants_wgsl
    from ..contract.sh import sh_constants_wgsl

    return {GENERATED_RENDER_CONFIG: (config or CLASSIC).wgsl(),
            "row_constants.wgsl": row_constants_wgsl(), "sh_constants.wgsl": sh_constants_wgsl()}


def load_source(name: str, defines: dict | None = None, shader_dir: Path | None = None,
                config: RenderConfig | None = None, generated: dict | None = None,
                source: str | None = None) -> ShaderSource:
    """Read ``shaders/NAME.wgsl`` (or take ``source``, the text of a module kept elsewhere, e.g.
    beside a strategy) with includes expanded and ``{{KEY}}`` substituted; the generated includes
    (:func:`generated_includes` for ``config``, plus ``generated``: file name -> text) come
    from Python declarations, not from files."""
    if shader_dir is None:
        _record("modules", module_key(name, defines, config, generated))
    root = Path(shader_dir) if shader_dir is not None else SHADER_DIR  # a path or a Traversable
    defines = {k: str(v) for k, v in (defines or {}).items()}
    generated = {**generated_includes(config), **(generated or {})}
    if source is not None:
        generated[_file_name(name)] = source
    out_lines: list[str] = []
    line_map: list[tuple[str, int]] = []
    included: set[str] = set()

    def expand(fname: str, stack: tuple[str, ...]) -> None:
        if fname in included:
            return
        included.add(fname)
        path = root / fname
        if fname in generated:
            text = generated[fname]
        elif path.is_file():
            text = path.read_text(encoding="utf-8")
        else:
            where = f" (included from {stack[-1]})" if stack else ""
            raise FileNotFoundError(f"WGSL source {path} not found{where}")
        for lineno, line in enumerate(text.splitlines(), start=1):

            def sub(dm: re.Match) -> str:
                key = dm.group(1)
                if key not in defines:
                    raise KeyError(f"shaders/{fname}:{lineno}: no value for {{{{{key}}}}}")
                return defines[key]

            line = _DEFINE_RE.sub(sub, line)
            m = _INCLUDE_RE.match(line)
            if m:  # after substitution, so that a define can choose the included file
                expand(_file_name(m.group(1)), stack + (fname,))
                continue
            out_lines.append(line)
            line_map.append((fname, lineno))

    expand(_file_name(name), ())
    bindings = []
    for line in out_lines:
        m = _BINDING_RE.search(line)
        if m:
            group, binding, space, access, var, rest = m.groups()
            kind = "uniform" if space == "uniform" else (
                "storage" if access == "read_write" else "read-only-storage")
            bindings.append((int(group), int(binding), kind, "dynamic" in rest, var))
    return ShaderSource(_file_name(name).removesuffix(".wgsl"), "\n".join(out_lines) + "\n",
                        tuple(line_map), tuple(sorted(bindings)))


class ShaderModule:
    """A compiled module with its explicit bind group layouts and a per-entry pipeline cache."""

    def __init__(self, lib: "ShaderLibrary", source: ShaderSource) -> None:
        self.lib = lib
        self.source = source
        self.key: tuple | None = None     # (name, defines, config), set by ShaderLibrary.module
        ctx = lib.ctx
        device = ctx.device
        try:
            self.module = device.create_shader_module(code=source.code, label=f"{source.name}.wgsl")
        except Exception as exc:  # noqa: BLE001
            conv = convert_wgpu_error(exc, f"compiling shaders/{source.name}.wgsl")
            if conv is None:
                raise
            raise ShaderCompileError(source.remap_message(str(conv))) from exc
        groups = sorted({g for g, *_ in source.bindings})
        self.layouts = []
        self.dynamic = {}
        for g in range(groups[-1] + 1 if groups else 0):
            entries = []
            for gg, b, kind, dyn, _var in source.bindings:
                if gg != g:
                    continue
                entries.append({"binding": b, "visibility": 4,  # ShaderStage.COMPUTE
                                "buffer": {"type": kind, "has_dynamic_offset": dyn}})
                self.dynamic[(g, b)] = dyn
            with ctx.guard(f"creating the bind group layout {g} of shaders/{source.name}.wgsl"):
                self.layouts.append(device.create_bind_group_layout(entries=entries))
        with ctx.guard(f"creating the pipeline layout of shaders/{source.name}.wgsl"):
            self.pipeline_layout = device.create_pipeline_layout(bind_group_layouts=self.layouts)
        self._pipelines: dict = {}
        self._slots: dict[int, dict[str, int]] = {}

    def pipeline(self, entry: str, constants: dict | None = None):
        key = (entry, tuple(sorted((constants or {}).items())))
        pipe = self._pipelines.get(key)
        if pipe is None:
            compute = {"module": self.module, "entry_point": entry}
            if constants:
                compute["constants"] = {k: float(v) if isinstance(v, float) else int(v)
                                        for k, v in constants.items()}
            try:
                pipe = self.lib.ctx.device.create_compute_pipeline(
                    layout=self.pipeline_layout, compute=compute,
                    label=f"{self.source.name}:{entry}")
            except Exception as exc:  # noqa: BLE001
                conv = convert_wgpu_error(exc, f"creating pipeline shaders/{self.source.name}.wgsl "
                                               f"entry {entry!r} {dict(constants or {})}")
                if conv is None:
                    raise
                raise ShaderCompileError(self.source.remap_message(str(conv))) from exc
            self._pipelines[key] = pipe
            self.lib.pipelines_created += 1
            if self.key is not None:
                _record("pipelines", (self.key, entry, constants_key(constants)))
        return pipe

    def constant(self, name: str) -> int:
        """The value of the module's integer ``const NAME`` (the host reads shared sizes here)."""
        consts = wgsl_constants(self.source)
        if name not in consts:
            raise KeyError(f"shaders/{self.source.name}.wgsl declares no integer const {name}")
        return consts[name]

    def workgroup_size(self, entry: str) -> tuple[int, int, int]:
        """The ``@workgroup_size`` of entry point ``entry``, read from the source (names resolved
        through the module's ``const`` declarations): the host sizes its dispatches from it, so the
        two cannot disagree."""
        return workgroup_size(self.source, entry)

    def binding_kinds(self, group: int) -> dict[int, tuple[str, bool]]:
        return {b: (kind, dyn) for g, b, kind, dyn, _ in self.source.bindings if g == group}

    def binding_slots(self, group: int) -> dict[str, int]:
        """WGSL variable name -> binding index of bind group ``group``."""
        slots = self._slots.get(group)
        if slots is None:
            slots = {var: b for g, b, _, _, var in self.source.bindings if g == group}
            self._slots[group] = slots
        return slots

    def struct_dtype(self, name: str, stride: int | None = None) -> np.dtype:
        """The NumPy layout of WGSL struct ``name`` of this module (see :func:`struct_dtype`)."""
        return struct_dtype(self.source, name, stride)


# -- constants the host reads from the WGSL -------------------------------------------------------------
_CONST_RE = re.compile(r"^\s*const\s+([A-Za-z_]\w*)\s*(?::\s*\w+)?\s*=\s*([0-9]+)u?\s*;", re.M)


def wgsl_constants(source: ShaderSource) -> dict[str, int]:
    """The module-scope integer ``const`` declarations of a module."""
    return {m.group(1): int(m.group(2)) for m in _CONST_RE.finditer(source.code)}


def file_constants(name: str) -> dict[str, int]:
    """The integer ``const`` declarations written in ``shaders/NAME.wgsl`` itself (no includes, no
    defines): for host code that needs a kernel's size before any device exists."""
    text = (SHADER_DIR / _file_name(name)).read_text(encoding="utf-8")
    return {m.group(1): int(m.group(2)) for m in _CONST_RE.finditer(text)}


def workgroup_size(source: ShaderSource, entry: str) -> tuple[int, int, int]:
    """``@workgroup_size(x[, y[, z]])`` of ``fn entry`` (integers or ``const`` names)."""
    m = re.search(r"@workgroup_size\(([^)]*)\)\s*fn\s+" + re.escape(entry) + r"\s*\(", source.code)
    if m is None:
        raise KeyError(f"shaders/{source.name}.wgsl has no compute entry point {entry!r}")
    consts = wgsl_constants(source)
    dims = []
    for part in m.group(1).split(","):
        part = part.strip().rstrip("u")
        dims.append(int(part) if part.isdigit() else consts[part])
    return tuple(dims + [1] * (3 - len(dims)))


# -- uniform struct layouts ---------------------------------------------------------------------------
_SCALARS = {"f32": "<f4", "u32": "<u4", "i32": "<i4"}
_VEC_RE = re.compile(r"^vec([234])\s*<\s*(f32|u32|i32)\s*>$")
_ARRAY_RE = re.compile(r"^array\s*<\s*(.+?)\s*,\s*(\d+u?|[A-Za-z_]\w*)\s*>$")


def _wgsl_layout(type_text: str, consts: dict | None = None) -> tuple[str, tuple, int, int]:
    """(NumPy scalar code, shape, alignment, size) of a WGSL type in the uniform address space
    (array lengths may be ``const`` names of ``consts``)."""
    t = type_text.strip()
    if t in _SCALARS:
        return _SCALARS[t], (), 4, 4
    m = _VEC_RE.match(t)
    if m:
        n = int(m.group(1))
        return _SCALARS[m.group(2)], (n,), (8 if n == 2 else 16), 4 * n
    m = _ARRAY_RE.match(t)
    if m:
        code, shape, align, size = _wgsl_layout(m.group(1), consts)
        length = m.group(2).rstrip("u")
        length = int(length) if length.isdigit() else (consts or {})[length]
        stride = -(-size // align) * align
        if stride % 16 or stride != size:
            # uniform arrays have a 16-byte element stride: only vec4 elements map onto a plain
            # NumPy subarray, which is all the structs here use
            raise ValueError(f"uniform array element {m.group(1)!r} is not a 16-byte vector")
        return code, (length,) + shape, max(align, 16), stride * length
    raise ValueError(f"WGSL type {t!r} is not supported in uniform structs")


def _split_fields(body: str) -> list[str]:
    fields, depth, cur = [], 0, ""
    for ch in _COMMENT_RE.sub("", body):
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            fields.append(cur)
            cur = ""
        else:
            cur += ch
    fields.append(cur)
    return [f.strip() for f in fields if f.strip()]


def struct_dtype(source: ShaderSource, name: str, stride: int | None = None) -> np.dtype:
    """NumPy structured dtype of the WGSL struct ``name`` declared in ``source``: one field per
    WGSL member, same name, at its offset under WGSL's uniform layout rules (vec2 aligned to 8,
    vec3/vec4 to 16, arrays of vec4), itemsize the struct's size (or ``stride`` bytes, for arrays of
    dynamic-offset slots). Fill ``np.zeros((), dtype)`` (or an array of them) and write its bytes."""
    found = [m for m in _STRUCT_RE.finditer(source.code) if m.group(1) == name]
    if not found:
        raise KeyError(f"shaders/{source.name}.wgsl declares no struct {name!r}")
    names, formats, offsets = [], [], []
    consts = wgsl_constants(source)
    offset, struct_align = 0, 16
    for decl in _split_fields(found[0].group(2)):
        fname, _, ftype = decl.partition(":")
        code, shape, align, size = _wgsl_layout(ftype, consts)
        offset = -(-offset // align) * align
        names.append(fname.strip())
        formats.append((code, shape) if shape else code)
        offsets.append(offset)
        offset += size
        struct_align = max(struct_align, align)
    size = -(-offset // struct_align) * struct_align
    if stride is not None:
        if stride < size:
            raise ValueError(f"stride {stride} is smaller than struct {name} ({size} bytes)")
        size = stride
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})


class ShaderLibrary:
    """Per-device cache of compiled modules, keyed by (name, defines, render configuration)."""

    def __init__(self, ctx: GpuContext, shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.shader_dir = shader_dir
        self._modules: dict = {}
        self.modules_compiled = 0
        self.pipelines_created = 0

    def module(self, name: str, defines: dict | None = None,
               config: RenderConfig | None = None, generated: dict | None = None) -> ShaderModule:
        """The compiled module ``name`` (cached); ``generated``: includes made from Python
        declarations (file name -> text), e.g. a strategy's decision or the statistics."""
        config = config or CLASSIC
        key = (name, tuple(sorted((defines or {}).items())), config,
               tuple(sorted((generated or {}).items())))
        mod = self._modules.get(key)
        if mod is None:
            mod = ShaderModule(self, load_source(name, defines, self.shader_dir, config, generated))
            if self.shader_dir is None and not _paused():
                mod.key = module_key(name, defines, config, generated)
            self._modules[key] = mod
            self.modules_compiled += 1
        return mod

    def pipeline(self, name: str, entry: str, constants: dict | None = None,
                 defines: dict | None = None, config: RenderConfig | None = None,
                 generated: dict | None = None):
        return self.module(name, defines, config, generated).pipeline(entry, constants)
