"""WGSL source loading, include expansion, compilation and pipeline caching.

Sources live in the repository's top-level ``shaders/`` folder, installed as the package data
``wgsl_splat.shaders`` (see :data:`SHADER_DIR`). A line ``#include "common.wgsl"``
is replaced by that file's text (each file is included at most once per module, recursively);
``{{NAME}}`` is substituted from the ``defines`` mapping (for things that WGSL ``override``
constants cannot express, e.g. array lengths of workgroup memory, or which file an ``#include``
names: ``#include "{{ATOMICS}}"`` picks the float-atomic or the compare-and-swap helpers). Scalar knobs use WGSL
``override`` constants, passed as pipeline ``constants``.

Bind group layouts are explicit and derived from the module's declarations
(``@group(g) @binding(b) var<uniform|storage, read|storage, read_write> ...``), so one bind group
serves every entry point of a module. A binding whose declaration line carries the comment
``// dynamic`` gets a dynamic offset (used for per-dispatch uniform slots).

Compile errors are re-raised as :class:`~wgsl_splat.gpu.runtime.ShaderCompileError` whose message
names the original file and line (``shaders/project.wgsl:42:7``), not the line in the expanded text.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path

from .runtime import GpuContext, ShaderCompileError, convert_wgpu_error


def _shader_dir():
    """The folder of WGSL sources. Installed (a wheel, ``pip install .``, or ``pip install -e .``,
    whose import hook maps the package onto the checkout's ``shaders/``) it is the package data
    ``wgsl_splat.shaders``; a checkout imported without installing reads ``shaders/`` directly."""
    try:
        return importlib.resources.files("wgsl_splat.shaders")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "shaders"


SHADER_DIR = _shader_dir()

_INCLUDE_RE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')
_DEFINE_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_BINDING_RE = re.compile(
    r"@group\((\d+)\)\s*@binding\((\d+)\)\s*var\s*<\s*(uniform|storage)\s*(?:,\s*(read_write|read))?\s*>"
    r"[^;]*;(.*)$")
_LOC_RE = re.compile(r"wgsl:(\d+):(\d+)")


@dataclass(frozen=True)
class ShaderSource:
    name: str
    code: str
    line_map: tuple  # output line i (0-based) -> (file name, 1-based line in that file)
    bindings: tuple  # (group, binding, kind, dynamic) with kind uniform|read-only-storage|storage

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


def _file_name(name: str) -> str:
    return name if name.endswith(".wgsl") else name + ".wgsl"


def load_source(name: str, defines: dict | None = None, shader_dir: Path | None = None) -> ShaderSource:
    """Read ``shaders/NAME.wgsl`` with includes expanded and ``{{KEY}}`` substituted."""
    root = Path(shader_dir) if shader_dir is not None else SHADER_DIR  # a path or a Traversable
    defines = {k: str(v) for k, v in (defines or {}).items()}
    out_lines: list[str] = []
    line_map: list[tuple[str, int]] = []
    included: set[str] = set()

    def expand(fname: str, stack: tuple[str, ...]) -> None:
        if fname in included:
            return
        included.add(fname)
        path = root / fname
        if not path.is_file():
            where = f" (included from {stack[-1]})" if stack else ""
            raise FileNotFoundError(f"WGSL source {path} not found{where}")
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):

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
            group, binding, space, access, rest = m.groups()
            kind = "uniform" if space == "uniform" else (
                "storage" if access == "read_write" else "read-only-storage")
            bindings.append((int(group), int(binding), kind, "dynamic" in rest))
    return ShaderSource(_file_name(name).removesuffix(".wgsl"), "\n".join(out_lines) + "\n",
                        tuple(line_map), tuple(sorted(bindings)))


class ShaderModule:
    """A compiled module with its explicit bind group layouts and a per-entry pipeline cache."""

    def __init__(self, lib: "ShaderLibrary", source: ShaderSource) -> None:
        self.lib = lib
        self.source = source
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
            for gg, b, kind, dyn in source.bindings:
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
        return pipe

    def binding_kinds(self, group: int) -> dict[int, tuple[str, bool]]:
        return {b: (kind, dyn) for g, b, kind, dyn in self.source.bindings if g == group}


class ShaderLibrary:
    """Per-device cache of compiled modules, keyed by (name, defines)."""

    def __init__(self, ctx: GpuContext, shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.shader_dir = shader_dir
        self._modules: dict = {}
        self.modules_compiled = 0
        self.pipelines_created = 0

    def module(self, name: str, defines: dict | None = None) -> ShaderModule:
        key = (name, tuple(sorted((defines or {}).items())))
        mod = self._modules.get(key)
        if mod is None:
            mod = ShaderModule(self, load_source(name, defines, self.shader_dir))
            self._modules[key] = mod
            self.modules_compiled += 1
        return mod

    def pipeline(self, name: str, entry: str, constants: dict | None = None,
                 defines: dict | None = None):
        return self.module(name, defines).pipeline(entry, constants)
