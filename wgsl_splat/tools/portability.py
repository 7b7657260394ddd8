"""Every shader variant the host creates, through the compilers of the platforms we cannot run here.

``python -m wgsl_splat.tools.portability --out DIR [--fxc] [--dump-only]``

1. **Variants.** :func:`tour` lists every module variant :mod:`wgsl_splat.gpu.kernels` declares
   (name, ``{{DEFINES}}``, render configuration, generated includes) with the pipelines made from
   it (entry point, override constants), and runs the strategies' own kernels on a small problem
   while :func:`~wgsl_splat.gpu.shaders.record_variants` records them (their decisions' code is
   generated from declarations gpu/ cannot see). ``tests/test_portability.py`` fails when a test
   creates a variant the tour does not: one the host makes without declaring it.
2. **Dump.** Per module variant the assembled WGSL exactly as wgpu receives it, per pipeline the
   same text with the override constants resolved (naga's writers take no pipeline constants;
   wgpu resolves them the same way before translating), and ``manifest.json``.
3. **Check** (:func:`check`), each failure naming the variant, the backend and the compiler's
   message:

   - **Tint** (Dawn for Node, npm ``webgpu``, Null backend): the WebGPU front end with WebGPU's
     default limits, ``enable subgroups;`` added to subgroup variants (a device with the
     ``subgroups`` feature). Float-atomic variants do not exist on WebGPU (``atomic<f32>``): not
     compiled, reported as unavailable (the compare-and-swap variants are the WebGPU path).
   - **naga** (npm ``naga-wasm``): WGSL -> MSL (language 3.0) and -> HLSL (shader model 6.0 for
     DXC, 5.1 for FXC).
   - **DXC** (``dxcompiler.dll`` of the npm ``webgpu`` package, under Wine): every HLSL variant
     DX12 can run (float atomics: not on DX12), ``cs_6_0``, with wgpu's arguments.
   - **FXC** (``d3dcompiler_47.dll``, ``--fxc``): ``cs_5_1``, the variants wgpu-py's default DX12
     compiler gets (no subgroups: shader model 5.1 has no wave operations).

The tools live in a cache folder (``$WGSL_SPLAT_PORTABILITY_TOOLS``, default ``.portability/``
in the checkout): ``npm install --prefix DIR`` of :data:`NPM_PACKAGES`, and ``hlslc.exe`` built
from ``hlslc.c`` with mingw-w64; Wine (``wine64``) runs it. :func:`find_tools` says what is
missing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
# pinned npm packages (.ci/run installs the same list)
NPM_PACKAGES = tuple((HERE / "portability_npm.txt").read_text().split())
NODE_SCRIPT = HERE / "portability_check.mjs"
HLSLC_SOURCE = HERE / "hlslc.c"


# -- variants -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One pipeline: a module variant (name, defines, render configuration) and an entry point
    with its override constants. ``stage`` is compute, or vertex/fragment for render shaders."""

    module: str
    defines: tuple
    config: object
    entry: str
    constants: tuple = ()
    stage: str = "compute"
    generated: tuple = ()       # (file name, text) of the includes generated from declarations

    @property
    def module_id(self) -> str:
        h = hashlib.sha1(repr((self.defines, self.config, self.generated)).encode()).hexdigest()[:8]
        return f"{self.module}.{self.config.mode}.{h}"

    @property
    def id(self) -> str:
        h = hashlib.sha1(repr(self.constants).encode()).hexdigest()[:6]
        return f"{self.module_id}.{self.entry}.{h}"

    def describe(self) -> str:
        defs = ", ".join(f"{k}={v}" for k, v in self.defines)
        consts = ", ".join(f"{k}={v}" for k, v in self.constants)
        gen = ", ".join(f"{name}#{hashlib.sha1(text.encode()).hexdigest()[:6]}"
                        for name, text in self.generated)
        return (f"{self.module}.wgsl [{self.config.mode}{'; ' + defs if defs else ''}"
                f"{'; ' + gen if gen else ''}] {self.entry}({consts})")


_ENTRY_RE = re.compile(r"@(compute|vertex|fragment)\b[^{;]*?\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", re.S)


def entry_points(code: str) -> list[tuple[str, str]]:
    """(stage, name) of every entry point in ``code``."""
    return [(m.group(1), m.group(2)) for m in _ENTRY_RE.finditer(code)]


def variants_of(rec) -> list:
    """The variants a :class:`~wgsl_splat.gpu.shaders.VariantRecorder` saw: its pipelines, and for
    modules with none (render shaders, which the viewer builds with wgpu directly) every entry
    point with the overrides at their defaults."""
    from ..gpu.shaders import load_source

    codes: dict = {}

    def code(key):
        if key not in codes:
            codes[key] = load_source(key[0], dict(key[1]), config=key[2],
                                     generated=dict(key[3])).code
        return codes[key]

    out = {Variant(key[0], key[1], key[2], entry, full_constants(code(key), consts),
                   generated=key[3])
           for key, entry, consts in rec.pipelines}
    with_pipelines = {key for key, _, _ in rec.pipelines}
    for key in rec.modules - with_pipelines:
        for stage, entry in entry_points(code(key)):
            out.add(Variant(key[0], key[1], key[2], entry, full_constants(code(key), ()), stage,
                            generated=key[3]))
    return sorted(out, key=lambda v: (v.module, v.config.mode, v.defines, v.generated, v.entry,
                                      v.constants))


def uncovered(created: list, tour_variants: list) -> list:
    """The variants of ``created`` the tour does not cover. Generated code (a strategy's
    statistics and decision, the loss's parameter terms) and override constants are independent
    inputs of the compiler, so the tour compiles every generated variant with one set of
    constants and every set of constants with one generated variant: a created variant is
    covered when the tour has it, or has both its constants (with other generated code) and its
    generated code (with other constants)."""
    exact = set(tour_variants)
    shape = {(t.module, t.defines, t.config, t.entry, t.constants, t.stage) for t in tour_variants}
    code = {(t.module, t.defines, t.config, t.generated, t.entry) for t in tour_variants}
    return [v for v in created if v not in exact and not (
        (v.module, v.defines, v.config, v.entry, v.constants, v.stage) in shape
        and (v.module, v.defines, v.config, v.generated, v.entry) in code)]


def tour(ctx, log=print) -> list:
    """Every shader variant the host can create (see the module docstring): the variants
    :mod:`wgsl_splat.gpu.kernels` declares, listed, and the strategies' own kernels (a decision's
    ``grow.wgsl``, generated from the strategy's declarations, which gpu/ cannot see), run once on
    a tiny step on ``ctx`` while the loader records them."""
    from ..contract.statistics import STANDARD
    from ..gpu.kernels import declared_variants
    from ..gpu.shaders import record_variants
    from ..strategy import STRATEGIES

    t0 = time.perf_counter()
    stat_sets = [tuple(s.name for s in STANDARD), ()]
    for name in sorted(STRATEGIES):
        names = tuple(s.name for s in STRATEGIES[name].statistics)
        if names not in stat_sets:
            stat_sets.append(names)
    found = set()
    declared = declared_variants(stat_sets)
    for variant, every in declared:
        code = variant.source().code
        for stage, entry in entry_points(code):
            sets = variant.constant_sets(entry)
            for consts in sets if every else sets[:1]:
                found.add(Variant(variant.name, variant.defines, variant.config, entry,
                                  full_constants(code, consts), stage, variant.generated))
    with record_variants() as rec:
        _strategy_kernels(ctx, STRATEGIES)
    found.update(variants_of(rec))
    found = sorted(found, key=lambda v: (v.module, v.config.mode, v.defines, v.generated,
                                         v.entry, v.constants))
    log(f"tour: {len(found)} pipeline variants of {len(declared)} declared module variants and "
        f"{len(rec.modules)} of the strategies' in {time.perf_counter() - t0:.1f} s")
    return found


def _strategy_kernels(ctx, strategies) -> None:
    """ADC's round and each strategy's :meth:`~wgsl_splat.strategy.base.Strategy.exercise_kernels`
    on a tiny step with the strategy's statistics."""
    import numpy as np

    from ..contract.optim import OptimConfig
    from ..contract.state import HostArrays
    from ..contract.statistics import STANDARD
    from ..contract.step import View
    from ..gpu.step import GpuTrainStep
    from ..strategy.adc import ADCRound, adc_round
    from .random_scene import random_scene

    rng = np.random.default_rng(26)
    model, cam = random_scene(rng, 48, 40, 24, sh_degree=3, dtype=np.float32)
    target = rng.uniform(0, 1, (cam.height, cam.width, 3)).astype(np.float32)
    step = GpuTrainStep(ctx, HostArrays.fresh(model, STANDARD), OptimConfig())
    adc_round(step.state, ADCRound(2e-4, 0.02, 2, 1.6, 0.005, 0.15, 20.0, 10**6, key=3))
    for name in sorted(strategies):
        cls = strategies[name]
        step = GpuTrainStep(ctx, HostArrays.fresh(model, cls.statistics), OptimConfig())
        cls.exercise_kernels(step, View(cam, target, view_id=0))


# -- dump -----------------------------------------------------------------------------------------
_OVERRIDE_RE = re.compile(
    r"^(\s*)(@id\(\d+\)\s*)?override\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*([A-Za-z0-9_<>]+))?"
    r"\s*(?:=\s*([^;]+))?;", re.M)


def _literal(value, wgsl_type: str | None) -> str:
    if wgsl_type == "bool":
        return "true" if value else "false"
    if wgsl_type == "f32" or isinstance(value, float):
        return f"{float(value)!r}f".replace("inf", "0x1p+128")
    if wgsl_type == "i32":
        return f"{int(value)}i"
    return f"{int(value)}u"


def _default_value(expr: str, wgsl_type: str | None):
    e = expr.strip()
    if e in ("true", "false"):
        return int(e == "true")
    m = re.fullmatch(r"(-?[0-9.eE+-]+)([uif]?)", e)
    if m is None:
        return None
    if m.group(2) == "f" or wgsl_type == "f32" or "." in m.group(1):
        return float(m.group(1))
    return int(m.group(1))


def full_constants(code: str, constants: tuple) -> tuple:
    """``constants`` completed with the defaults of the overrides they leave out (booleans as 0/1,
    as pipelines pass them), so that a pipeline made with the defaults implicitly and one made
    with them spelled out are the same variant."""
    values = {}
    for m in _OVERRIDE_RE.finditer(code):
        if m.group(5) is not None:
            v = _default_value(m.group(5), m.group(4))
            if v is not None:
                values[m.group(3)] = v
    values.update(dict(constants))
    return tuple(sorted(values.items()))


def resolve_overrides(code: str, constants: tuple) -> str:
    """``code`` with every ``override`` declaration turned into a ``const`` of the pipeline's value
    (or its default): what wgpu's naga-based backends translate."""
    values = dict(constants)
    unknown = set(values) - {m.group(3) for m in _OVERRIDE_RE.finditer(code)}
    if unknown:
        raise KeyError(f"override constants {sorted(unknown)} are not declared")

    def sub(m: re.Match) -> str:
        indent, _, name, wtype, default = m.groups()
        if name in values:
            expr = _literal(values[name], wtype)
        elif default is not None:
            expr = default.strip()
        else:
            raise KeyError(f"override {name} has no default and no value")
        return f"{indent}const {name}{': ' + wtype if wtype else ''} = {expr};"

    return _OVERRIDE_RE.sub(sub, code)


def needs(code: str) -> set:
    """Optional capabilities the WGSL uses: ``float-atomics`` (atomic<f32>), ``subgroups``
    (outside comments: a comment may name a builtin the code does not call)."""
    code = re.sub(r"//[^\n]*", "", code)
    out = set()
    if re.search(r"atomic\s*<\s*f32\s*>", code):
        out.add("float-atomics")
    if re.search(r"\bsubgroup[A-Z][A-Za-z]*\s*\(", code):
        out.add("subgroups")
    return out


def dump(variants: list, out: Path, shader_dir: Path | None = None) -> list[dict]:
    """Write the WGSL of ``variants`` into ``out`` and return the manifest (also
    ``out/manifest.json``). ``shader_dir``: WGSL sources other than the package's (e.g. another
    git revision's, for benchmarks/bench_fxc.py)."""
    from ..gpu.shaders import load_source

    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    sources: dict = {}
    for v in variants:
        if v.module_id not in sources:
            src = load_source(v.module, dict(v.defines), shader_dir, v.config,
                              dict(v.generated))
            sources[v.module_id] = src.code
            (out / f"{v.module_id}.wgsl").write_text(src.code)
        code = sources[v.module_id]
        resolved = resolve_overrides(code, v.constants)
        (out / f"{v.id}.resolved.wgsl").write_text(resolved)
        manifest.append({"id": v.id, "module_id": v.module_id, "describe": v.describe(),
                         "module": v.module, "mode": v.config.mode, "defines": dict(v.defines),
                         "entry": v.entry, "stage": v.stage, "constants": dict(v.constants),
                         "needs": sorted(needs(code)), "wgsl": f"{v.module_id}.wgsl",
                         "resolved": f"{v.id}.resolved.wgsl"})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


# -- tools ----------------------------------------------------------------------------------------
@dataclass
class Tools:
    root: Path
    node: str | None = None
    wine: str | None = None
    hlslc: Path | None = None
    missing: list = field(default_factory=list)

    @property
    def dll_dir(self) -> Path:
        return self.root / "node_modules" / "webgpu" / "dist" / "win32-x64"

    def versions(self) -> dict:
        out = {}
        for pkg in ("webgpu", "naga-wasm"):
            p = self.root / "node_modules" / pkg / "package.json"
            if p.is_file():
                out[pkg] = json.loads(p.read_text())["version"]
        return out


def tools_root() -> Path:
    from .. import env

    chosen = env.PORTABILITY_TOOLS.read()
    if chosen:
        return Path(chosen)
    return HERE.parents[1] / ".portability"


def _wine() -> str | None:
    for name in ("wine64", "wine"):
        path = shutil.which(name)
        if path:
            return path
    for path in ("/usr/lib/wine/wine64", "/usr/lib/wine/wine"):
        if os.access(path, os.X_OK):
            return path
    return None


def find_tools(root: Path | None = None, build: bool = True) -> Tools:
    """What the check needs, under ``root``; ``missing`` names what is not there (and how to get
    it). ``build`` compiles ``hlslc.exe`` with mingw-w64 when it is missing or older than its
    source."""
    t = Tools(root or tools_root())
    t.node = shutil.which("node")
    if t.node is None:
        t.missing.append("node (Debian: nodejs)")
    for pkg in NPM_PACKAGES:
        name = pkg.rsplit("@", 1)[0]
        if not (t.root / "node_modules" / name / "package.json").is_file():
            t.missing.append(f"npm {pkg} (npm install --prefix {t.root} {' '.join(NPM_PACKAGES)})")
    t.wine = _wine()
    if t.wine is None:
        t.missing.append("wine64 (Debian: wine64)")
    exe = t.root / "hlslc.exe"
    stale = not exe.is_file() or exe.stat().st_mtime < HLSLC_SOURCE.stat().st_mtime
    if stale and build:
        gcc = shutil.which("x86_64-w64-mingw32-gcc")
        if gcc is None:
            t.missing.append("x86_64-w64-mingw32-gcc (Debian: gcc-mingw-w64-x86-64-win32)")
        else:
            t.root.mkdir(parents=True, exist_ok=True)
            subprocess.run([gcc, "-O2", "-o", str(exe), str(HLSLC_SOURCE)], check=True)
    if exe.is_file():
        t.hlslc = exe
    elif not build:
        t.missing.append(f"{exe} (built from {HLSLC_SOURCE.name} with mingw-w64)")
    return t


# -- check ----------------------------------------------------------------------------------------
@dataclass
class Failure:
    variant: str
    backend: str
    message: str

    def __str__(self) -> str:
        return f"{self.variant}: {self.backend}: {self.message.strip()}"


@dataclass
class Report:
    variants: int
    failures: list
    unavailable: list          # (variant, backend, why) not compiled by design
    compiled: dict             # backend -> number of variants compiled
    seconds: dict              # backend -> wall seconds
    versions: dict
    slowest: dict = field(default_factory=dict)   # backend -> (seconds, variant)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [f"{self.variants} pipeline variants; tools: "
                 + ", ".join(f"{k} {v}" for k, v in self.versions.items())]
        for b, n in self.compiled.items():
            slow = self.slowest.get(b)
            extra = f", slowest {slow[0]:.1f} s ({slow[1]})" if slow else ""
            lines.append(f"  {b}: {n} compiled in {self.seconds.get(b, 0):.1f} s{extra}")
        by = {}
        for _, backend, why in self.unavailable:
            by.setdefault((backend, why), 0)
            by[(backend, why)] += 1
        for (backend, why), n in sorted(by.items()):
            lines.append(f"  {backend}: {n} not compiled: {why}")
        lines += [f"FAIL {f}" for f in self.failures]
        lines.append("all passed" if self.ok else f"{len(self.failures)} failures")
        return "\n".join(lines)


_NUMTHREADS_RE = re.compile(r"\[numthreads\([^)]*\)\]\s*void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def hlsl_entry(hlsl: str, entry: str) -> str:
    """The name naga gave entry point ``entry`` in its HLSL (it appends ``_`` to names that end in
    a digit or are HLSL keywords; wgpu takes the name from naga's reflection the same way)."""
    names = _NUMTHREADS_RE.findall(hlsl)
    for name in (entry, entry + "_"):
        if name in names:
            return name
    return entry


_BATCH_RE = re.compile(r"^### BEGIN (\d+)\n(.*?)^### END \1 (\d+) (\d+)\n", re.S | re.M)


def run_hlslc(tools: Tools, jobs: list, *, parallel: int = 2, timeout: float = 1800.0
              ) -> list[tuple[bool, str, float]]:
    """Compile ``jobs`` [(compiler fxc|dxc, hlsl path, entry, profile)] with ``hlslc.exe`` under
    Wine, ``parallel`` processes each taking a share (Wine starts once per process); per job
    (ok, messages, seconds of the compiler itself)."""
    if not jobs:
        return []
    _wine_ready(tools)
    order = sorted(range(len(jobs)), key=lambda i: -Path(jobs[i][1]).stat().st_size)
    shares = [order[k::parallel] for k in range(parallel)]
    results: list = [None] * len(jobs)
    env = dict(os.environ, WINEDEBUG="-all", WINEPREFIX=str(tools.root / "wineprefix"))

    def run_share(k: int) -> None:
        idx = shares[k]
        if not idx:
            return
        listing = tools.root / f"jobs{k}.txt"
        lines = []
        for i in idx:
            compiler, path, entry, profile = jobs[i]
            dll = tools.dll_dir / ("dxcompiler.dll" if compiler == "dxc" else "d3dcompiler_47.dll")
            lines.append("\t".join([compiler, str(dll), str(path), entry, profile]))
        listing.write_text("\n".join(lines) + "\n")
        try:
            p = subprocess.run([tools.wine, str(tools.hlslc), "batch", str(listing)],
                               capture_output=True, text=True, timeout=timeout, env=env)
            out = p.stdout
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        for m in _BATCH_RE.finditer(out):
            j = idx[int(m.group(1))]
            results[j] = (m.group(3) == "0", m.group(2).strip(), int(m.group(4)) / 1000.0)
        for j in idx:
            if results[j] is None:
                results[j] = (False, f"no result from hlslc (timed out after {timeout:.0f} s, "
                                     f"or Wine failed): {out[-500:]}", 0.0)

    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        list(pool.map(run_share, range(parallel)))
    return results


def _wine_ready(tools: Tools) -> None:
    """Create the Wine prefix once (its first start takes seconds and prints noise)."""
    prefix = tools.root / "wineprefix"
    if not (prefix / "system.reg").exists():
        env = dict(os.environ, WINEDEBUG="-all", WINEPREFIX=str(prefix))
        subprocess.run([tools.wine, "cmd", "/c", "exit"], capture_output=True, env=env,
                       timeout=300)


def check(variants: list, out: Path, tools: Tools, *, fxc: bool = False, dxc: bool = True,
          jobs: int = 2, timeout: float = 1800.0, shader_dir: Path | None = None) -> Report:
    """Dump ``variants`` into ``out`` and run them through Tint, naga, DXC (and FXC)."""
    manifest = dump(variants, out, shader_dir)
    failures, unavailable, compiled, seconds, slowest = [], [], {}, {}, {}
    t0 = time.perf_counter()
    p = subprocess.run([tools.node, str(NODE_SCRIPT), str(tools.root / "node_modules"), str(out)],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"the Tint/naga script failed: {p.stderr.strip() or p.stdout.strip()}")
    results = json.loads((out / "results.json").read_text())
    seconds["tint+naga"] = time.perf_counter() - t0
    versions = tools.versions()
    versions["naga"] = results.get("nagaVersion", "?")
    by_id = {m["id"]: m for m in manifest}
    for r in results["variants"]:
        m = by_id[r["id"]]
        for backend in ("tint", "naga-msl", "naga-hlsl-sm60", "naga-hlsl-sm51"):
            res = r[backend]
            if res["status"] == "ok":
                compiled[backend] = compiled.get(backend, 0) + 1
            elif res["status"] == "unavailable":
                unavailable.append((m["describe"], backend, res["message"]))
            else:
                failures.append(Failure(m["describe"], backend, res["message"]))

    jobs_list = []   # (backend, manifest entry, hlsl path, profile)
    for r in results["variants"]:
        m = by_id[r["id"]]
        if m["stage"] != "compute":
            continue
        if "float-atomics" in m["needs"]:
            for b in (["dxc"] if dxc else []) + (["fxc"] if fxc else []):
                unavailable.append((m["describe"], b, "float atomics: not on DX12 (wgpu)"))
            continue
        if dxc and r["naga-hlsl-sm60"]["status"] == "ok":
            jobs_list.append(("dxc", m, out / r["naga-hlsl-sm60"]["file"], "cs_6_0"))
        if fxc:
            if "subgroups" in m["needs"]:
                unavailable.append((m["describe"], "fxc", "subgroups need shader model 6 (DXC)"))
            elif r["naga-hlsl-sm51"]["status"] == "ok":
                jobs_list.append(("fxc", m, out / r["naga-hlsl-sm51"]["file"], "cs_5_1"))
    # identical HLSL (variants that differ only where it does not reach the HLSL) compiles once
    unique: dict = {}
    for backend, m, path, profile in jobs_list:
        text = path.read_text()
        entry = hlsl_entry(text, m["entry"])
        key = (backend, hashlib.sha1(text.encode()).hexdigest(), entry)
        unique.setdefault(key, (backend, path, entry, profile))
    keys = list(unique)
    t1 = time.perf_counter()
    outcome = dict(zip(keys, run_hlslc(tools, [unique[k] for k in keys], parallel=jobs,
                                       timeout=timeout)))
    for backend in {k[0] for k in keys}:
        seconds[backend] = time.perf_counter() - t1
    for backend, m, path, profile in jobs_list:
        text = path.read_text()
        key = (backend, hashlib.sha1(text.encode()).hexdigest(), hlsl_entry(text, m["entry"]))
        ok, msg, dt = outcome[key]
        if ok:
            compiled[backend] = compiled.get(backend, 0) + 1
        else:
            failures.append(Failure(m["describe"], backend, msg))
        if dt > slowest.get(backend, (0.0, ""))[0]:
            slowest[backend] = (dt, m["describe"])
    report = Report(len(manifest), failures, unavailable, compiled, seconds, versions, slowest)
    (out / "report.txt").write_text(report.summary() + "\n")
    return report


# -- command --------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wgsl_splat.tools.portability",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the WGSL, HLSL, MSL and the report")
    ap.add_argument("--dump-only", action="store_true", help="write the variants, compile nothing")
    ap.add_argument("--fxc", action="store_true", help="also compile with FXC (slow)")
    ap.add_argument("--no-dxc", action="store_true", help="skip DXC")
    ap.add_argument("--jobs", type=int, default=2, help="compilers run at once (default 2)")
    args = ap.parse_args(argv)

    from ..gpu.runtime import GpuError, select_device

    try:
        ctx = select_device("gpu", features=None)
    except GpuError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    variants = tour(ctx)
    if args.dump_only:
        dump(variants, args.out)
        print(f"wrote {len(variants)} variants to {args.out}")
        return 0
    tools = find_tools()
    if tools.missing:
        print("error: missing " + "; ".join(tools.missing), file=sys.stderr)
        return 1
    report = check(variants, args.out, tools, fxc=args.fxc, dxc=not args.no_dxc, jobs=args.jobs)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
