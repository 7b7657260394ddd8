"""The shader modules the host compiles, as declarations (docs/design.md §3).

A :class:`Kernel` is a module of ``gpu/shaders/``: the render modes it is compiled in and, per
entry point, the override constants the host passes (every value it may pass). A
:class:`KernelVariant` is one compilation of it: the render configuration, the ``{{DEFINES}}`` and
the generated includes, made by the functions below from typed choices (a :class:`~.layout.Layout`,
the loss variant, the statistics, ...). The host compiles variants (:meth:`KernelVariant.module`),
not modules named by strings, and the portability tour (``tools/portability.py``) lists
:func:`declared_variants`, every variant the host can make, instead of running training code to
see which it makes.

Constants are sorted ``(name, value)`` pairs, booleans as 0/1, as pipelines are keyed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..contract.losses import PARAM_TERMS, gaussian_window_1d
from ..contract.statistics import STANDARD, accessors_wgsl, resolve
from ..render_config import CLASSIC, RENDER_MODES, RenderConfig, render_config
from .layout import EMULATED_SUBGROUPS, RASTER_SHAPES, Layout

BACKWARD_BATCH = 64         # the most splats per round of raster_backward
PARTIALS_BYTES = 12288      # workgroup memory for its per-round partial sums (48 B per cell)
RASTER_BATCH = 256          # splats per workgroup-memory batch of raster.wgsl (12 KiB)
RADIX_BITS = (8, 4)         # digit bits of the radix sort: the renderer's, and the tests' smaller


def _sets(**domains) -> tuple:
    """Every combination of the constants' values, as sorted (name, value) pairs."""
    names = sorted(domains)
    return tuple(tuple(zip(names, values))
                 for values in itertools.product(*(domains[n] for n in names)))


#: gaussian.wgsl's SH layout: K coefficients stored, the active degree at most K's
SH_SETS = tuple((("SH_ACTIVE", a), ("SH_COEFFS", (d + 1) ** 2))
                for d in range(4) for a in range(d + 1))


def _with_sh(**domains) -> tuple:
    return tuple(tuple(sorted(c + sh)) for c in _sets(**domains) for sh in SH_SETS)


@dataclass(frozen=True)
class Kernel:
    """A module of ``gpu/shaders/`` (``name``.wgsl)."""

    name: str
    modes: tuple = ("classic",)     # the render modes it is compiled in
    constants: tuple = ()           # (entry, constant sets) the host passes; others: none

    def constant_sets(self, entry: str) -> tuple:
        return dict(self.constants).get(entry, ((),))

    def variant(self, config: RenderConfig | None = None, defines: dict | None = None,
                generated: dict | None = None, constants: tuple | None = None) -> KernelVariant:
        return KernelVariant(self, config or CLASSIC,
                             tuple(sorted((k, str(v)) for k, v in (defines or {}).items())),
                             tuple(sorted((generated or {}).items())),
                             self.constants if constants is None else constants)


@dataclass(frozen=True)
class KernelVariant:
    """One compilation of a :class:`Kernel`; ``constants``: what this variant's pipelines take
    (the kernel's unless the variant takes fewer)."""

    kernel: Kernel
    config: RenderConfig
    defines: tuple                  # sorted (name, text)
    generated: tuple                # sorted (file name, text)
    constants: tuple

    @property
    def name(self) -> str:
        return self.kernel.name

    def constant_sets(self, entry: str) -> tuple:
        return dict(self.constants).get(entry, ((),))

    def module(self, lib):
        """The compiled module on ``lib`` (a ShaderLibrary; cached there)."""
        return lib.module(self.name, dict(self.defines), self.config, dict(self.generated))

    def source(self, shader_dir=None):
        """The assembled WGSL (a ShaderSource), as the library compiles it."""
        from .shaders import load_source  # noqa: PLC0415

        return load_source(self.name, dict(self.defines), shader_dir, self.config,
                           dict(self.generated))


MODES = RENDER_MODES

# -- the forward pipeline (renderer.py) -----------------------------------------------------------
PROJECT = Kernel("project", MODES, (("project", SH_SETS),))
# emit_keys' tile test alone scaled (emit.wgsl): the default, and the tests' perturbations
EMIT_KEYS_PERTURBED = (0.5, 2.0)
EMIT = Kernel("emit", MODES, (("emit_keys", ((),) + tuple(
    (("EMIT_KEYS_Q_SCALE", v),) for v in EMIT_KEYS_PERTURBED)),))
SCAN = Kernel("scan", MODES)
EMIT_SPLATS = Kernel("emit_splats", MODES, (("write_pairs", ((),) + tuple(
    (("EMIT_KEYS_Q_SCALE", v),) for v in EMIT_KEYS_PERTURBED)),))
SORTED_RANGES = Kernel("sorted_ranges", MODES)
RASTER = Kernel("raster", MODES)
# -- the sorts (sort.py) --------------------------------------------------------------------------
RADIX = Kernel("radix")
PREFIX = Kernel("prefix")
BITONIC = Kernel("sort", constants=(("sort_global", _sets(R=(1, 2, 3, 4))),))
# -- loss, backward, update (loss.py, backward.py, adam.py, appearance.py, pose.py) -------------------
LOSS_TILED = Kernel("loss")
LOSS_LINES = Kernel("loss_lines")
RASTER_BACKWARD = Kernel("raster_backward", MODES)
PROJECT_BACKWARD = Kernel("project_backward", MODES, (
    ("project_backward", _with_sh(STATS=(0, 1), ACCUMULATE=(0, 1))),))
LOSS_TERMS = Kernel("loss_terms", MODES)
ADAM = Kernel("adam", constants=(("adam_step", _sets(ZERO_GRAD=(0, 1))),))
APPEARANCE = Kernel("appearance")
POSE = Kernel("pose")
# -- the step's other kernels (step.py, filter3d.py) ------------------------------------------------
OBSERVE = Kernel("observe", constants=(("observe", _sets(COUNT=(1, 2, 3))),))
ERROR_MAPS = Kernel("error_maps")
FILTER3D = Kernel("filter3d", ("antialiased",), (("filter3d_pass", _sets(FINISH=(0, 1))),))
# -- the state's row operations (state.py) ------------------------------------------------------------
STATE_ROWS = Kernel("state_rows")
OPACITY_RESET = Kernel("opacity_reset", MODES)
RELOCATION = Kernel("relocation")
GROW = Kernel("grow")           # with a strategy's decision: grow() below
RANK = Kernel("rank")           # the room's ranking when a round's growth is capped
# -- tools and the viewer -----------------------------------------------------------------------------
LIMITS = Kernel("limits", constants=(("fma_chain", _sets(LOOP=(1024,))),))
PRESENT = Kernel("present")     # a render shader (app/viewer.py)


# -- variants -----------------------------------------------------------------------------------------
def raster(layout: Layout, config: RenderConfig) -> KernelVariant:
    rows, cols = layout.raster_rows, layout.raster_cols
    return RASTER.variant(config, {
        "BATCH": RASTER_BATCH, "ROWS": rows, "COLS": cols, "THREADS_X": 16 // cols,
        "THREADS_Y": 16 // rows, "SKIP": str(layout.raster_skip).lower()})


def backward_cells(layout: Layout) -> int:
    """The (splat, slot) cells of partial sums a round of raster_backward fills at most: what
    PARTIALS_BYTES holds, or, for the emulated subgroups (whose lane exchange takes workgroup
    memory too), exactly what their slots need (the workgroup stays within WebGPU's 16 KiB)."""
    if layout.emulated_subgroup:
        threads = (16 // layout.raster_cols) * (16 // layout.raster_rows)
        return BACKWARD_BATCH * max(1, threads // layout.emulated_subgroup)
    return PARTIALS_BYTES // 48


def backward_round(layout: Layout, lanes: int) -> int:
    """Splats per round of raster_backward when its subgroups have ``lanes`` invocations (1: the
    workgroup reduction), as the kernel computes it from the slots it counts."""
    threads = (16 // layout.raster_cols) * (16 // layout.raster_rows)
    slots = max(1, threads // lanes)
    return min(BACKWARD_BATCH, backward_cells(layout) // slots)


def raster_backward(layout: Layout, config: RenderConfig) -> KernelVariant:
    rows, cols = layout.raster_rows, layout.raster_cols
    defines = {
        "ROWS": rows, "COLS": cols, "THREADS_X": 16 // cols, "THREADS_Y": 16 // rows,
        "BATCH": BACKWARD_BATCH, "PART_CELLS": backward_cells(layout),
        "ATOMICS": "atomic_float.wgsl" if layout.float_atomics else "atomic_cas.wgsl",
        "PARTIALS": "partials_subgroup.wgsl" if layout.subgroups else "partials_workgroup.wgsl"}
    if layout.emulated_subgroup:    # the subgroup logic at a real GPU's width, for the tests
        defines.update(PARTIALS="partials_emulated.wgsl", LANE_WIDTH=layout.emulated_subgroup)
    return RASTER_BACKWARD.variant(config, defines)


def project_backward(config: RenderConfig, includes: dict, fused: bool) -> KernelVariant:
    """``includes``: its generated code (backward.py's project_includes); ``fused``: the Adam
    sink, which never accumulates a batch."""
    if not fused:
        return PROJECT_BACKWARD.variant(config, {"SINK": "grads_sink.wgsl"}, includes)
    return PROJECT_BACKWARD.variant(config, {"SINK": "adam_sink.wgsl"}, includes, (
        ("project_backward", _with_sh(STATS=(0, 1), ACCUMULATE=(0,))),))


def grow(statistics, decision_wgsl: str, rank_stat: str | None = None) -> KernelVariant:
    """grow.wgsl with a row decision's kernel (``RowDecision.wgsl``, a strategy's), the
    accessors of the state's statistics and ``rank_key(i)``: the bits of statistic
    ``rank_stat``'s positive part (non-negative floats order as u32; zero for all rows without
    one), what ``RowDecision.score`` ranks by. Declared by the strategies, so not listed below."""
    if rank_stat is None:
        key = "fn rank_key(i: u32) -> u32 {\n    return 0u;\n}\n"
    else:
        key = (f"fn rank_key(i: u32) -> u32 {{\n    let v = stat_{rank_stat}(i);\n"
               "    return select(0u, bitcast<u32>(v), v > 0.0);\n}\n")
    text = accessors_wgsl(resolve(statistics)) + "\n" + key + "\n" + decision_wgsl
    return GROW.variant(generated={"decision.wgsl": text})


def window_defines() -> dict[str, str]:
    """``{{W0}}..{{W5}}`` of ssim.wgsl: the reference window's weights (w0 = w10, ..., w5 the
    centre)."""
    g = gaussian_window_1d()
    return {f"W{i}": repr(float(np.float32(g[i]))) for i in range(6)}


def loss(variant: str) -> KernelVariant:
    return (LOSS_TILED if variant == "tiled" else LOSS_LINES).variant(defines=window_defines())


def radix(max_bits: int) -> KernelVariant:
    return RADIX.variant(defines={"MAX_BINS": 1 << max_bits})


# -- what the tour compiles -----------------------------------------------------------------------------
def declared_variants(statistics_sets=(STANDARD, ())) -> list[tuple[KernelVariant, bool]]:
    """Every variant the host can make, each with whether all its constant sets are to be
    compiled (False: one of them). Generated code and override constants are independent inputs
    of the compilers, so a kernel's constants are compiled with one generated variant and every
    other generated variant with one set of constants. ``statistics_sets``: the statistics the
    strategies declare (gpu cannot see them), each a tuple of names; the first is the base."""
    from .backward import project_includes  # noqa: PLC0415

    out = []
    configs = {mode: render_config(mode) for mode in RENDER_MODES}
    for kernel in (PROJECT, EMIT, SCAN, EMIT_SPLATS, SORTED_RANGES, PREFIX, BITONIC, LOSS_TERMS,
                   ADAM, APPEARANCE, POSE, OBSERVE, ERROR_MAPS, FILTER3D, STATE_ROWS,
                   OPACITY_RESET, RELOCATION, RANK, LIMITS, PRESENT):
        out += [(kernel.variant(configs[mode]), True) for mode in kernel.modes]
    out += [(radix(bits), True) for bits in RADIX_BITS]
    out += [(loss(variant), True) for variant in ("tiled", "lines")]
    base = Layout(raster_rows=16, raster_cols=2, raster_skip=False, threads=256,
                  parallel_scan=False, loss_variant="lines", float_atomics=False, subgroups=False,
                  emission="table", per_view_tiles=False)
    terms = [list(chosen) for k in range(len(PARAM_TERMS) + 1)
             for chosen in itertools.combinations(PARAM_TERMS, k)]
    for config in configs.values():
        for (rows, cols), flag_a, flag_b in itertools.product(RASTER_SHAPES, (False, True),
                                                              (False, True)):
            shape = replace(base, raster_rows=rows, raster_cols=cols)
            if flag_b:   # the skip branch varies raster alone
                out.append((raster(replace(shape, raster_skip=flag_a), config), True))
            out.append((raster_backward(replace(shape, float_atomics=flag_a, subgroups=flag_b),
                                        config), True))
            if not flag_b:
                out += [(raster_backward(replace(shape, float_atomics=flag_a,
                                                 emulated_subgroup=w), config), True)
                        for w in EMULATED_SUBGROUPS]
        for j, stats in enumerate(statistics_sets):
            for chosen, pose in itertools.product(terms, (False, True)):
                includes = project_includes(stats, chosen, pose)
                first = j == 0 and not chosen and not pose
                out.append((project_backward(config, includes, False), first))
                if not chosen and not pose:     # the fused sink: a lone view, no term, no pose
                    out.append((project_backward(config, includes, True), j == 0))
    return out
