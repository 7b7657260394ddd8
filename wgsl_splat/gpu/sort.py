"""GPU bitonic sort of (tile, depth) keys with splat-id values (shaders/sort.wgsl).

The host only knows the *capacity* C (a power of two); the number of elements actually present is
in a GPU counters buffer (``[total, count, P, overflow]`` written by scan.wgsl), so encoding a sort
never needs a read-back: dispatches are sized for C and the workgroups and merge levels beyond the
padded size P return immediately.
"""

from __future__ import annotations

import numpy as np

from .kernels import BITONIC, PREFIX, RADIX, RADIX_BITS, radix
from .layout import Layout
from .pool import UNIFORM_USAGE, BufferPool, buffer_usage
from .shaders import ShaderLibrary, file_constants

SORT_BLOCK = 2 * file_constants(BITONIC.name)["HALF_BLOCK"]   # elements per workgroup of sort.wgsl
MAX_FUSED = 4               # substages fused per global dispatch (2^4 elements per thread)
STAGE_SLOT = 256            # bytes per dynamic uniform slot (WebGPU min alignment is <= 256)
MAX_WORKGROUPS_X = 32768    # split bigger 1D grids into 2D (the limit per dimension is 65 535)


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def grid_2d(groups: int) -> tuple[int, int]:
    """A 2D grid with at least ``groups`` workgroups, each dimension <= 65 535."""
    groups = max(int(groups), 0)
    if groups <= MAX_WORKGROUPS_X:
        return groups, 1
    y = -(-groups // MAX_WORKGROUPS_X)
    return MAX_WORKGROUPS_X, y


def sort_plan(capacity: int) -> list[tuple[str, int, int, int]]:
    """Dispatches for a bitonic sort of ``capacity`` (power of two >= 1024) elements.

    Each item is (entry, merge level size, log2 of the first distance, fused substages R).
    """
    if capacity < SORT_BLOCK or capacity & (capacity - 1):
        raise ValueError(f"sort capacity must be a power of two >= {SORT_BLOCK}, got {capacity}")
    plan = [("sort_local", SORT_BLOCK, 0, 0)]
    lb = SORT_BLOCK.bit_length() - 1
    size = 2 * SORT_BLOCK
    while size <= capacity:
        lj = size.bit_length() - 2          # log2(size / 2)
        while lj >= lb:
            r = min(MAX_FUSED, lj - lb + 1)
            plan.append(("sort_global", size, lj, r))
            lj -= r
        plan.append(("sort_merge", size, 0, 0))
        size *= 2
    return plan


class BitonicSorter:
    """Encodes the sort of pool buffers ``keys`` (vec2<u32>) and ``vals`` (u32) in place."""

    def __init__(self, lib: ShaderLibrary, pool: BufferPool, prefix: str = "sort") -> None:
        self.lib = lib
        self.pool = pool
        self.prefix = prefix
        self.module = BITONIC.variant().module(lib)
        self._stage = self.module.struct_dtype("SortStage", stride=STAGE_SLOT)
        self._stage_bytes = self.module.struct_dtype("SortStage").itemsize
        self.capacity = 0
        self.plan: list = []
        self._stages_name = f"{prefix}_stages"

    def ensure_capacity(self, capacity: int) -> None:
        capacity = max(SORT_BLOCK, next_pow2(capacity))
        if capacity == self.capacity:
            return
        self.capacity = capacity
        self.plan = sort_plan(capacity)
        slots = np.zeros(len(self.plan), self._stage)
        slots["size"] = [size for _, size, _, _ in self.plan]
        slots["log2_j"] = [lj for _, _, lj, _ in self.plan]
        self.pool.get(self._stages_name, slots.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write(self._stages_name, slots)

    @property
    def num_dispatches(self) -> int:
        return len(self.plan)

    def encode(self, cpass, keys: str, vals: str, counters: str) -> None:
        """Record the sort into an open compute pass (capacity must be set first)."""
        if not self.plan:
            raise RuntimeError("BitonicSorter.ensure_capacity() was not called")
        bg = self.pool.bind_group(self.module, 0, {
            "keys": keys, "vals": vals, "counters": counters,
            "stage": (self._stages_name, 0, self._stage_bytes)})
        c = self.capacity
        for i, (entry, _size, _lj, r) in enumerate(self.plan):
            consts = {"R": r} if entry == "sort_global" else None
            cpass.set_pipeline(self.module.pipeline(entry, consts))
            cpass.set_bind_group(0, bg, [i * STAGE_SLOT])
            groups = c // (256 << r) if entry == "sort_global" else c // SORT_BLOCK
            cpass.dispatch_workgroups(*grid_2d(groups))


def sort_pairs(ctx, keys: np.ndarray, vals: np.ndarray, *, lib: ShaderLibrary | None = None,
               pool: BufferPool | None = None, capacity: int | None = None):
    """Sort (keys (n,2) uint32, vals (n,) uint32) on the GPU; returns sorted copies (for tests)."""
    import wgpu  # noqa: PLC0415

    keys = np.ascontiguousarray(keys, np.uint32).reshape(-1, 2)
    vals = np.ascontiguousarray(vals, np.uint32).ravel()
    n = len(vals)
    lib = lib or ShaderLibrary(ctx)
    pool = pool or BufferPool(ctx)
    sorter = BitonicSorter(lib, pool, prefix="test_sort")
    sorter.ensure_capacity(max(capacity or 0, n, 1))
    c = sorter.capacity
    pool.get("test_keys", c * 8)
    pool.get("test_vals", c * 4)
    pool.get("test_counters", 16)
    pool.write("test_keys", keys)
    pool.write("test_vals", vals)
    padded = max(SORT_BLOCK, next_pow2(max(n, 1)))
    pool.write("test_counters", np.array([n, n, padded, 0], np.uint32))
    with ctx.guard("sorting on the GPU"):
        enc = ctx.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        sorter.encode(cpass, "test_keys", "test_vals", "test_counters")
        cpass.end()
        ctx.queue.submit([enc.finish()])
    out_k = pool.read_array("test_keys", np.uint32, 2 * n).reshape(n, 2) if n else keys[:0]
    out_v = pool.read_array("test_vals", np.uint32, n) if n else vals[:0]
    del wgpu
    return out_k, out_v


# -------------------------------------------------------------------------------------------------
# Exclusive prefix sum over many workgroups (shaders/prefix.wgsl), for GPUs.

SCAN_BLOCK = file_constants(PREFIX.name)["WG"] * file_constants(PREFIX.name)["PER"]   # per workgroup


class PrefixScan:
    """In-place exclusive prefix sum of the first ``length`` u32 of a pool buffer: 3 dispatches
    (block sums, their scan in one workgroup, block apply). The grand total lands in
    ``{name}_scan_sums[blocks]``."""

    def __init__(self, lib: ShaderLibrary, pool: BufferPool, name: str) -> None:
        self.lib = lib
        self.pool = pool
        self.module = PREFIX.variant().module(lib)
        self.params = f"{name}_scan_params"
        self.sums = f"{name}_scan_sums"
        self.length = -1
        self.blocks = 1
        self.grid = (1, 1)

    def configure(self, length: int) -> None:
        length = max(0, int(length))
        if length == self.length:
            return
        self.length = length
        self.blocks = max(1, -(-length // SCAN_BLOCK))
        if self.blocks > SCAN_BLOCK * 64:
            raise ValueError(f"prefix scan of {length} entries exceeds {SCAN_BLOCK ** 2 * 64}")
        self.grid = grid_2d(self.blocks)
        self.pool.get(self.sums, 4 * (self.blocks + 1))
        p = np.zeros((), self.module.struct_dtype("ScanParams"))
        p["length"], p["blocks"], p["grid_x"] = length, self.blocks, self.grid[0]
        self.pool.get(self.params, p.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write(self.params, p)

    def encode(self, cpass, data: str) -> None:
        cpass.set_bind_group(0, self.pool.bind_group(self.module, 0, {
            "sp": self.params, "data": data, "block_sums": self.sums}))
        cpass.set_pipeline(self.module.pipeline("scan_reduce"))
        cpass.dispatch_workgroups(*self.grid)
        cpass.set_pipeline(self.module.pipeline("scan_blocks"))
        cpass.dispatch_workgroups(1)
        cpass.set_pipeline(self.module.pipeline("scan_apply"))
        cpass.dispatch_workgroups(*self.grid)


# -------------------------------------------------------------------------------------------------
# Stable multi-pass LSD radix sort (shaders/radix.wgsl) -- the one the renderer uses.

RADIX_MAX_BITS = RADIX_BITS[0]      # digit bits per pass (256 bins)
RADIX_WG = file_constants(RADIX.name)["RADIX_WG"]   # threads of radix_hist / radix_scatter


def radix_passes(bits: int, max_bits: int = RADIX_MAX_BITS) -> list[tuple[int, int]]:
    """Split ``bits`` key bits into as few passes as possible of near-equal width: (shift, bits)."""
    bits = max(1, int(bits))
    n = -(-bits // max_bits)
    out, shift = [], 0
    for p in range(n):
        w = (bits - shift) // (n - p) + (1 if (bits - shift) % (n - p) else 0)
        out.append((shift, w))
        shift += w
    return out


class RadixSorter:
    """Stable sort of u32 keys with u32 values, ping-ponging between two buffer pairs.

    ``keys``/``vals`` hold the input; the result is in :attr:`result` (the same pair after an even
    number of passes, the ``*_tmp`` pair after an odd one). The element count is read on the GPU
    from ``counters[count_slot]``, clamped to ``capacity``.
    """

    def __init__(self, lib: ShaderLibrary, pool: BufferPool, name: str, layout: Layout, *,
                 max_bits: int = RADIX_MAX_BITS, items_per_bin: int = 4) -> None:
        self.lib = lib
        self.pool = pool
        self.name = name
        self.max_threads = int(layout.threads)
        self.threads = 1
        self.max_bits = max_bits
        self.items_per_bin = items_per_bin
        self.module = radix(max_bits).module(lib)
        self._stage = self.module.struct_dtype("RadixStage", stride=STAGE_SLOT)
        self._stage_bytes = self.module.struct_dtype("RadixStage").itemsize
        self.keys, self.vals = f"{name}_keys", f"{name}_vals"
        self.keys_tmp, self.vals_tmp = f"{name}_keys_tmp", f"{name}_vals_tmp"
        self.table = f"{name}_table"
        self.stages = f"{name}_stages"
        self._config = None
        self.passes: list[tuple[int, int]] = []
        # GPUs: the (bins x T) table is scanned by many workgroups (PrefixScan) and T is large
        # (about 16 elements per thread); CPU adapters: one workgroup scans a small table.
        self.scan = PrefixScan(lib, pool, name) if layout.parallel_scan else None

    def configure(self, capacity: int, key_bits: int, count_slot: int, *,
                  exact: bool = False) -> None:
        """Size the buffers for ``capacity`` elements (``exact``: to that size, no slack for
        growth) and plan passes over ``key_bits`` bits.

        With the one-workgroup scan, the number of threads T (chunks) is chosen so that the
        (bins x T) table stays a fraction of the data (each chunk has at least ``items_per_bin`` x
        bins elements at capacity): the table costs a read and a write per entry in every pass
        whatever the element count. With the parallel scan, T gives each thread about 16 elements
        (up to ``threads``): a GPU needs the parallelism more than a small table.
        """
        capacity = max(1, int(capacity))
        for n in (self.keys, self.vals, self.keys_tmp, self.vals_tmp):
            self.pool.get(n, 4 * capacity, exact=exact)
        passes = radix_passes(key_bits, self.max_bits)
        bins = 1 << max(w for _, w in passes)
        per_thread = 16 if self.scan is not None else bins * self.items_per_bin
        threads = max(1, min(self.max_threads, -(-capacity // per_thread)))
        # The table is one binding: where bindings are small, fewer and longer chunks.
        threads = max(1, min(threads, self.pool.ctx.max_binding_bytes // (4 * bins)))
        config = (capacity, tuple(passes), count_slot, threads)
        if config == self._config:
            return
        self._config = config
        self.passes = passes
        self.threads = threads
        self.pool.get(self.table, 4 * threads * bins)
        if self.scan is not None:
            # Passes with fewer bins leave stale rows at the end of the table; they come after
            # every row in use, so scanning the full length never changes an offset in use.
            self.scan.configure(threads * bins)
        slots = np.zeros(len(passes), self._stage)
        slots["shift"] = [shift for shift, _ in passes]
        slots["bins"] = [1 << w for _, w in passes]
        slots["threads"], slots["count_slot"], slots["capacity"] = threads, count_slot, capacity
        self.pool.get(self.stages, slots.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write(self.stages, slots)

    @property
    def result(self) -> tuple[str, str]:
        return (self.keys, self.vals) if len(self.passes) % 2 == 0 else (self.keys_tmp, self.vals_tmp)

    @property
    def num_dispatches(self) -> int:
        return (5 if self.scan is not None else 3) * len(self.passes)

    def encode(self, cpass, counters: str) -> None:
        if self._config is None:
            raise RuntimeError("RadixSorter.configure() was not called")
        bgs = [self.pool.bind_group(self.module, 0, {
                   "keys_in": src_k, "vals_in": src_v, "keys_out": dst_k, "vals_out": dst_v,
                   "table": self.table, "counters": counters,
                   "stage": (self.stages, 0, self._stage_bytes)})
               for src_k, src_v, dst_k, dst_v in (
                   (self.keys, self.vals, self.keys_tmp, self.vals_tmp),
                   (self.keys_tmp, self.vals_tmp, self.keys, self.vals))]
        groups = grid_2d(-(-self.threads // RADIX_WG))
        hist = self.module.pipeline("radix_hist")
        scan = self.module.pipeline("radix_scan")
        scatter = self.module.pipeline("radix_scatter")
        for i in range(len(self.passes)):
            bg = bgs[i % 2]
            off = [i * STAGE_SLOT]
            cpass.set_bind_group(0, bg, off)
            cpass.set_pipeline(hist)
            cpass.dispatch_workgroups(*groups)
            if self.scan is None:
                cpass.set_pipeline(scan)
                cpass.dispatch_workgroups(1)
            else:
                self.scan.encode(cpass, self.table)
                cpass.set_bind_group(0, bg, off)
            cpass.set_pipeline(scatter)
            cpass.dispatch_workgroups(*groups)


def radix_sort_pairs(ctx, keys: np.ndarray, vals: np.ndarray, key_bits: int = 32, *,
                     lib: ShaderLibrary | None = None, pool: BufferPool | None = None,
                     layout: Layout | None = None, max_bits: int = RADIX_MAX_BITS,
                     capacity: int | None = None):
    """Stable sort of u32 ``keys`` (and ``vals``) on the GPU; returns sorted copies (for tests).
    ``layout``: its threads and scans (default: 256 threads, one workgroup's scans)."""
    layout = layout or Layout.of(ctx, threads=256, parallel_scan=False)
    keys = np.ascontiguousarray(keys, np.uint32).ravel()
    vals = np.ascontiguousarray(vals, np.uint32).ravel()
    n = len(keys)
    lib = lib or ShaderLibrary(ctx)
    pool = pool or BufferPool(ctx)
    sorter = RadixSorter(lib, pool, f"test_radix{max_bits}{'p' if layout.parallel_scan else ''}",
                         layout, max_bits=max_bits)
    sorter.configure(max(capacity or 0, n, 1), key_bits, count_slot=0)
    pool.get("test_radix_counters", 16)
    pool.write(sorter.keys, keys)
    pool.write(sorter.vals, vals)
    pool.write("test_radix_counters", np.array([n, 0, 0, 0], np.uint32))
    with ctx.guard("radix sorting on the GPU"):
        enc = ctx.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        sorter.encode(cpass, "test_radix_counters")
        cpass.end()
        ctx.queue.submit([enc.finish()])
    rk, rv = sorter.result
    if n == 0:
        return keys[:0], vals[:0]
    return pool.read_array(rk, np.uint32, n), pool.read_array(rv, np.uint32, n)
