"""GPU sorts against numpy on adversarial keys (radix: the renderer's; bitonic: kept for comparison)."""

from __future__ import annotations

import numpy as np
import pytest

from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.pool import BufferPool
from wgsl_splat.gpu.shaders import ShaderLibrary
from wgsl_splat.gpu.sort import (
    BitonicSorter,
    PrefixScan,
    next_pow2,
    radix_passes,
    radix_sort_pairs,
    sort_pairs,
    sort_plan,
)


@pytest.fixture(scope="module")
def lib_pool(gpu_ctx):
    return ShaderLibrary(gpu_ctx), BufferPool(gpu_ctx)


def _fresh_rng():
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    return np.random.default_rng(seed), seed


def _adversarial_keys(kind: str, n: int, rng) -> np.ndarray:
    if kind == "random32":
        return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    if kind == "equal":
        return np.full(n, 7, np.uint32)
    if kind == "sorted":
        return np.sort(rng.integers(0, 1 << 32, n, dtype=np.uint64)).astype(np.uint32)
    if kind == "reversed":
        return np.sort(rng.integers(0, 1 << 32, n, dtype=np.uint64))[::-1].astype(np.uint32)
    if kind == "few":
        return rng.choice(np.array([0, 1, 0xFFFFFFFF, 0x80000000], np.uint32), n)
    if kind == "max":
        return np.full(n, 0xFFFFFFFF, np.uint32)
    if kind == "depths":  # positive float32 depths as their bits, with exact ties
        d = rng.choice(rng.uniform(0.01, 100.0, max(1, n // 3)).astype(np.float32), n)
        return d.view(np.uint32)
    raise ValueError(kind)


KINDS = ["random32", "equal", "sorted", "reversed", "few", "max", "depths"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 1023, 4097, 65537])
def test_radix_sort_matches_stable_argsort(gpu_ctx, lib_pool, kind, n):
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    keys = _adversarial_keys(kind, n, rng)
    vals = rng.permutation(n).astype(np.uint32)
    out_k, out_v = radix_sort_pairs(gpu_ctx, keys, vals, 32, lib=lib, pool=pool)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(out_k, keys[order]), f"seed {seed}"
    assert np.array_equal(out_v, vals[order]), f"stability broken (seed {seed})"


@pytest.mark.parametrize("kind", ["random32", "equal", "few", "depths"])
@pytest.mark.parametrize("n", [1, 1023, 65537])
def test_radix_sort_with_parallel_scan_matches_stable_argsort(gpu_ctx, lib_pool, kind, n):
    """The GPU layout: many threads, the (bin, thread) table scanned by many workgroups."""
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    keys = _adversarial_keys(kind, n, rng)
    vals = rng.permutation(n).astype(np.uint32)
    out_k, out_v = radix_sort_pairs(gpu_ctx, keys, vals, 32, lib=lib, pool=pool,
                                    layout=Layout.of(gpu_ctx, "gpu"))
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(out_k, keys[order]), f"seed {seed}"
    assert np.array_equal(out_v, vals[order]), f"stability broken (seed {seed})"


def run_scan(gpu_ctx, scan: PrefixScan, data: str) -> None:
    with gpu_ctx.guard("prefix scan"):
        enc = gpu_ctx.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        scan.encode(cpass, data)
        cpass.end()
        gpu_ctx.queue.submit([enc.finish()])


@pytest.mark.parametrize("length", [0, 1, 255, 1023, 1024, 1025, 300_001])
def test_prefix_scan_matches_cumsum(gpu_ctx, lib_pool, length):
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    data = rng.integers(0, 1000, length + 7).astype(np.uint32)   # 7 past the end: untouched
    scan = PrefixScan(lib, pool, "test_prefix")
    scan.configure(length)
    pool.get("test_prefix_data", max(4 * len(data), 4))
    pool.write("test_prefix_data", data)
    run_scan(gpu_ctx, scan, "test_prefix_data")
    out = pool.read_array("test_prefix_data", np.uint32, len(data))
    expect = np.concatenate([np.cumsum(data[:length]) - data[:length], data[length:]])
    assert np.array_equal(out, expect.astype(np.uint32)), f"seed {seed}"
    total = pool.read_array(scan.sums, np.uint32, scan.blocks + 1)[-1]
    assert total == data[:length].sum(), f"seed {seed}"


@pytest.mark.parametrize("length", [5, 1025, 300_001])
def test_prefix_scan_saturates_instead_of_wrapping(gpu_ctx, lib_pool, length):
    """Counts that sum past 2^32 - 1 (intersections of a huge view): every prefix is the true one
    capped at U32_MAX, so the prefixes never decrease (a wrapped one would give a tile a start
    past its end) and the total says overflow."""
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    u32_max = np.iinfo(np.uint32).max
    data = rng.integers(0, 1 << 31, length, dtype=np.uint64)
    data[rng.integers(0, length)] = u32_max                     # one count alone at the limit
    scan = PrefixScan(lib, pool, "test_prefix_sat")
    scan.configure(length)
    pool.get("test_prefix_sat_data", 4 * length)
    pool.write("test_prefix_sat_data", data.astype(np.uint32))
    run_scan(gpu_ctx, scan, "test_prefix_sat_data")
    out = pool.read_array("test_prefix_sat_data", np.uint32, length).astype(np.uint64)
    expect = np.minimum(np.cumsum(data) - data, u32_max)
    assert np.array_equal(out, expect), f"seed {seed}"
    assert np.all(np.diff(out.astype(np.int64)) >= 0), f"seed {seed}"
    total = pool.read_array(scan.sums, np.uint32, scan.blocks + 1)[-1]
    assert total == u32_max, f"seed {seed}"


@pytest.mark.parametrize("bits,max_bits", [(1, 8), (9, 8), (10, 4), (17, 8)])
def test_radix_sort_partial_key_bits_is_stable(gpu_ctx, lib_pool, bits, max_bits):
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    n = 30011
    keys = rng.integers(0, 1 << bits, n).astype(np.uint32)
    vals = np.arange(n, dtype=np.uint32)
    out_k, out_v = radix_sort_pairs(gpu_ctx, keys, vals, bits, lib=lib, pool=pool,
                                    max_bits=max_bits, capacity=40000)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(out_v, order), f"seed {seed}"


def test_radix_float_bits_order_positive_depths(gpu_ctx, lib_pool):
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    depth = rng.uniform(0.01, 1e4, 5000).astype(np.float32)
    _, out_v = radix_sort_pairs(gpu_ctx, depth.view(np.uint32), np.arange(5000, dtype=np.uint32),
                                lib=lib, pool=pool)
    assert np.array_equal(out_v, np.argsort(depth, kind="stable")), f"seed {seed}"


def test_radix_passes_cover_bits():
    for bits in range(1, 33):
        passes = radix_passes(bits)
        assert sum(w for _, w in passes) == bits
        assert all(1 <= w <= 8 for _, w in passes)
        assert [s for s, _ in passes] == list(np.cumsum([0] + [w for _, w in passes[:-1]]))


@pytest.mark.parametrize("kind", ["random", "ties", "equal", "sorted", "reversed"])
@pytest.mark.parametrize("n", [1, 1000, 1025, 5000])
def test_bitonic_sort_matches_lexsort(gpu_ctx, lib_pool, kind, n):
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    if kind == "random":
        tiles = rng.integers(0, 5000, n)
        depth = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    elif kind == "ties":
        tiles = rng.integers(0, 3, n)
        depth = rng.integers(0, 4, n)
    elif kind == "equal":
        tiles = np.full(n, 5)
        depth = np.full(n, 0xFFFFFFFF)
    else:
        tiles = np.sort(rng.integers(0, 100, n))
        depth = np.sort(rng.integers(0, 1000, n))
        if kind == "reversed":
            tiles, depth = tiles[::-1], depth[::-1]
    keys = np.stack([tiles, depth], 1).astype(np.uint32)
    vals = rng.permutation(n).astype(np.uint32)
    out_k, out_v = sort_pairs(gpu_ctx, keys, vals, lib=lib, pool=pool)
    order = np.lexsort((vals, keys[:, 1], keys[:, 0]))
    assert np.array_equal(out_k, keys[order]), f"seed {seed}"
    assert np.array_equal(out_v, vals[order]), f"seed {seed}"


def test_bitonic_capacity_larger_than_count(gpu_ctx, lib_pool):
    """Stages beyond the padded size P (computed on the GPU) must be no-ops."""
    rng, seed = _fresh_rng()
    lib, pool = lib_pool
    n = 1500
    keys = rng.integers(0, 1 << 20, (n, 2)).astype(np.uint32)
    vals = np.arange(n, dtype=np.uint32)
    out_k, out_v = sort_pairs(gpu_ctx, keys, vals, lib=lib, pool=pool, capacity=16384)
    order = np.lexsort((vals, keys[:, 1], keys[:, 0]))
    assert np.array_equal(out_v, vals[order]), f"seed {seed}"


def test_bitonic_plan_shape():
    assert sort_plan(1024) == [("sort_local", 1024, 0, 0)]
    plan = sort_plan(1 << 17)
    assert plan[0][0] == "sort_local" and plan[-1] == ("sort_merge", 1 << 17, 0, 0)
    # every merge level covers all its substages with distance >= 1024 exactly once
    for size in (1 << s for s in range(11, 18)):
        fused = sum(r for e, sz, _, r in plan if e == "sort_global" and sz == size)
        assert fused == (size.bit_length() - 2) - 10 + 1
    assert next_pow2(1025) == 2048 and next_pow2(1) == 1
    with pytest.raises(ValueError):
        sort_plan(1000)
    assert BitonicSorter  # exported
