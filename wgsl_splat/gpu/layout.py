"""How the step's kernels are laid out on an adapter: one record, its defaults derived in one place.

The same computation runs in layouts that suit a CPU adapter (lavapipe: few long threads, one
workgroup's scans, no barriers in the loss) or a GPU (many short threads, multi-workgroup scans),
and in the variants an adapter's optional features allow (float atomics, subgroups). The renderer,
the backward pass, the loss, the sorts and the step read their choices from one :class:`Layout`;
:meth:`Layout.of` derives the adapter's default, and tests and tools force any other layout
through it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .runtime import GpuError

RASTER_ROWS = (4, 8, 16)
RASTER_COLS = (1, 2)
#: the (rows, columns) of a raster thread the kernels are declared in (gpu/kernels.py): the CPU
#: layout, its one-column twin, and the 8- and 4-row GPU layouts
RASTER_SHAPES = ((16, 2), (16, 1), (8, 1), (4, 1))
LOSS_VARIANTS = ("tiled", "lines")
#: the adapter kinds whose defaults Layout.of derives (a CPU driver such as lavapipe, or a GPU)
KINDS = ("cpu", "gpu")
#: how the (tile, splat) pairs are emitted (renderer.py): "table", one thread per chunk of
#: depth-sorted splats counting into a (tile, chunk) table (emit.wgsl; no sort of the pairs), or
#: "splats", one thread per splat, then a stable radix sort of the pairs by tile (emit_splats.wgsl)
EMISSIONS = ("table", "splats")
#: the widths of the emulated subgroups (Layout.emulated_subgroup): those of real GPUs, which
#: lavapipe's subgroups (4 to 16 lanes) cannot show
EMULATED_SUBGROUPS = (32, 64)


@dataclass(frozen=True)
class Layout:
    """The layout choices of the step's kernels (:meth:`of` for an adapter's)."""

    raster_rows: int       # pixel rows per raster thread (4, 8, 16)
    raster_cols: int       # pixel columns per raster thread (1, 2)
    raster_skip: bool      # branch around a vec4 pixel group a splat does not touch
    threads: int           # threads of the serial-chunk kernels (radix sort, emission)
    parallel_scan: bool    # their tables scanned by many workgroups, not by one
    loss_variant: str      # "tiled" (workgroup memory) or "lines" (one thread per image line)
    float_atomics: bool    # raster backward's hardware float atomics, else a CAS loop
    subgroups: bool        # raster backward's subgroup reduction, else through workgroup memory
    emission: str          # EMISSIONS: the pairs' emission
    per_view_tiles: bool   # appearance/pose kernels: a thread per pixel and workgroup-tree sums,
                           # else a thread per image row and one-thread sums (no barriers)
    # A test variant: the subgroup reduction's logic with subgroups of this many invocations
    # emulated through workgroup memory (EMULATED_SUBGROUPS; 0: off). Instead of `subgroups`.
    emulated_subgroup: int = 0

    def __post_init__(self) -> None:
        if self.raster_rows not in RASTER_ROWS:
            raise ValueError(f"raster_rows must be 4, 8 or 16, got {self.raster_rows}")
        if self.raster_cols not in RASTER_COLS:
            raise ValueError(f"raster_cols must be 1 or 2, got {self.raster_cols}")
        if self.loss_variant not in LOSS_VARIANTS:
            raise ValueError(f"loss_variant must be one of {LOSS_VARIANTS}, got "
                             f"{self.loss_variant!r}")
        if self.emission not in EMISSIONS:
            raise ValueError(f"emission must be one of {EMISSIONS}, got {self.emission!r}")
        if int(self.threads) < 1:
            raise ValueError(f"threads must be positive, got {self.threads}")
        if self.emulated_subgroup not in (0, *EMULATED_SUBGROUPS):
            raise ValueError(f"emulated_subgroup must be 0 (off) or one of {EMULATED_SUBGROUPS}, "
                             f"got {self.emulated_subgroup}")
        if self.emulated_subgroup and self.subgroups:
            raise ValueError("emulated_subgroup replaces the subgroup reduction: subgroups=False")

    @classmethod
    def of(cls, ctx, kind: str | None = None, **choices) -> "Layout":
        """The layout for adapter ``ctx``: its default, with ``choices`` (field names; None keeps
        the default) forced. A dependent default follows the forced value it depends on (the
        columns follow the rows). ``kind`` ("cpu" or "gpu", :data:`KINDS`): the defaults of that
        kind of adapter instead of ``ctx``'s own (its optional features still ``ctx``'s), so the
        GPU layout runs and is measured on lavapipe."""
        unknown = set(choices) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"Layout has no field {', '.join(sorted(unknown))}")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"layout kind must be one of {KINDS}, got {kind!r}")
        given = {k: v for k, v in choices.items() if v is not None}
        cpu = ctx.adapter_type == "CPU" if kind is None else kind == "cpu"
        # Pixels per raster thread: 16 rows on a CPU adapter (workgroup-memory loads are expensive
        # there), 4 on a GPU (64 threads per tile); 2 columns with the CPU layout (8 threads, one
        # SIMD row of lavapipe per tile: the per-splat loads and sums are paid once per row).
        rows = int(given.get("raster_rows", 16 if cpu else 4))
        layout = cls(
            raster_rows=rows,
            raster_cols=int(given.get("raster_cols", 2 if cpu and rows == 16 else 1)),
            # Worth it on GPUs; on a CPU adapter the lanes pay for the mask bookkeeping instead
            # (branch-free measured 2-15 % faster on lavapipe, docs/benchmarks.md).
            raster_skip=bool(given.get("raster_skip", not cpu)),
            # A CPU adapter wants a few long chunks per core; a GPU many short ones.
            threads=int(given.get("threads", 256 if cpu else 16384)),
            # One workgroup's scans on CPU adapters (barriers are costly there), many on GPUs
            # (measured on an H100: the one-workgroup scans took 21-36 ms of a 43-70 ms step at
            # 100k Gaussians).
            parallel_scan=bool(given.get("parallel_scan", not cpu)),
            # lavapipe: no barriers, no workgroup memory in the loss.
            loss_variant=str(given.get("loss_variant", "lines" if cpu else "tiled")),
            float_atomics=bool(given.get("float_atomics", ctx.has_float_atomics)),
            # an emulated subgroup is the reduction instead of the adapter's subgroups
            subgroups=bool(given.get("subgroups", ctx.has_subgroups
                                     and not given.get("emulated_subgroup"))),
            # A GPU needs threads that grow with N: the table's are bounded by its size (2 056 at
            # 1080p: 36 % of the step at 1 M Gaussians on an H200); lavapipe's few cores run the
            # table without a sort of the pairs (the sort cost more than the rest of the render).
            emission=str(given.get("emission", "table" if cpu else "splats")),
            # A GPU needs a thread per pixel (a 270-row view is 270 threads); on lavapipe the
            # per-pixel tiles and their barriers measured 4-10x slower than a thread per row
            # (docs/benchmarks.md).
            per_view_tiles=bool(given.get("per_view_tiles", not cpu)),
            emulated_subgroup=int(given.get("emulated_subgroup", 0)))
        layout.check(ctx)
        return layout

    def replace(self, **choices) -> "Layout":
        """This layout with ``choices`` forced (None keeps a field)."""
        return replace(self, **{k: v for k, v in choices.items() if v is not None})

    def check(self, ctx) -> None:
        """:class:`GpuError` when the layout asks for a feature adapter ``ctx`` lacks."""
        if self.float_atomics and not ctx.has_float_atomics:
            raise GpuError(f"{ctx.name} has no shader-float32-atomic; use the compare-and-swap "
                           f"variant")
        if self.subgroups and not ctx.has_subgroups:
            raise GpuError(f"{ctx.name} has no subgroup operations; use the workgroup reduction")

    @property
    def reduction(self) -> str:
        """The raster backward's accumulation variant in words."""
        if self.emulated_subgroup:
            kind = f"emulated {self.emulated_subgroup}-lane subgroup"
        else:
            kind = "subgroup" if self.subgroups else "workgroup"
        return f"{'float atomics' if self.float_atomics else 'CAS loop'}, {kind} reduction"
