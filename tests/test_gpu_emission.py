"""Emission's two passes (count, write) are two pipelines, and a compiler that contracts or
reorders float math may decide a borderline (tile, splat) pair differently in each (issue 33
item 1). Here the write pass's tile test alone is perturbed (its override EMIT_KEYS_Q_SCALE: 2
makes it see pairs the count did not, 0.5 drop some), in both layouts and so both emissions (the
CPU layout's (tile, chunk) table, the GPU layout's per-splat pairs sorted by tile): the
disagreement is counted (counters[2], read with the intersection total), no write leaves its
cell or segment, and a slot left empty holds NULL_SPLAT (the per-splat emission: in no tile's
range), never a stale id of an earlier render."""

from __future__ import annotations

import numpy as np
import pytest

from wgsl_splat.gpu.layout import Layout
from wgsl_splat.gpu.renderer import GpuRenderer
from wgsl_splat.tools.random_scene import random_scene

LAYOUTS = ("cpu", "gpu")
NULL_SPLAT = 0xFFFFFFFF
POISON = 0xDEADBEEF


def chunk_of_slots(state: dict, chunks: int) -> np.ndarray:
    """For every slot of the intersection list, the emission chunk (thread) whose cell it lies
    in according to the ids written there: the chunk that owns the id's depth rank."""
    order = state["depth_sorted_ids"].astype(np.int64)
    n = len(order)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    items = -(-n // chunks)
    ids = state["isect_ids"]
    out = np.full(len(ids), -1, np.int64)
    real = ids < n
    out[real] = rank[ids[real]] // items
    return out


def tile_lists(state: dict) -> list[np.ndarray]:
    """Every tile's ids in order, from the ranges."""
    ids = state["isect_ids"]
    return [ids[a:b] for a, b in state["ranges"]]


def is_subsequence(part: np.ndarray, whole: np.ndarray) -> bool:
    it = iter(whole.tolist())
    return all(any(v == w for w in it) for v in part.tolist())


def render_state(r: GpuRenderer, model, cam, constants: dict):
    r.emit_keys_constants = constants
    r.upload_model(model)
    r.render(cam, (0.0, 0.0, 0.0), readback=False)          # sizes the capacity
    poisoned = [r.isect_ids]
    if r.per_splat:                                         # the pairs before their sort
        poisoned += [r.pair_sort.keys, r.pair_sort.vals]
    for name in poisoned:
        r.pool.write(name, np.full(r.capacity, POISON, np.uint32))
    before = r.emission_disagreements
    image = r.render(cam, (0.0, 0.0, 0.0))
    return image, r.read_raster_state(), r.emission_disagreements - before


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_disagreeing_emission_is_counted_and_stays_in_its_cells(gpu_ctx, layout):
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    model, cam = random_scene(np.random.default_rng(seed), 400, 96, 80, dtype=np.float32)
    r = GpuRenderer(gpu_ctx, layout=Layout.of(gpu_ctx, layout))
    assert r.per_splat == (layout == "gpu")
    image, clean, disagreed = render_state(r, model, cam, {})
    assert disagreed == 0, f"seed {seed}: unperturbed emission disagreed on {disagreed} pairs"
    assert np.all(clean["isect_ids"] < len(model)), f"seed {seed}: an unwritten slot"
    cells = None if r.per_splat else chunk_of_slots(clean, r.chunks)
    for scale in (2.0, 0.5):
        _, got, disagreed = render_state(r, model, cam, {"EMIT_KEYS_Q_SCALE": scale})
        assert disagreed > 0, f"seed {seed}, scale {scale}: the disagreement went unnoticed"
        ids = got["isect_ids"]
        assert not np.any(ids == POISON), f"seed {seed}, scale {scale}: a slot left unwritten"
        written = ids != NULL_SPLAT
        if scale < 1.0:   # every pair not placed is a NULL slot, counted
            assert (~written).sum() == disagreed, f"seed {seed}"
        else:             # every slot the count reserved is filled
            assert written.all(), f"seed {seed}"
        if cells is not None:
            assert np.array_equal(got["ranges"], clean["ranges"]), f"seed {seed}, scale {scale}"
            assert np.array_equal(chunk_of_slots(got, r.chunks)[written], cells[written]), \
                f"seed {seed}, scale {scale}: a write left its (tile, chunk) cell"
        elif scale > 1.0:
            # each splat fills its segment (its count's size) with the first pairs its write
            # pass sees, the rest dropped: a write past a segment changes another's count
            n = len(model)
            assert np.array_equal(np.bincount(ids, minlength=n),
                                  np.bincount(clean["isect_ids"], minlength=n)), \
                f"seed {seed}: a splat wrote past its segment"
            rank = np.argsort(got["depth_sorted_ids"])
            assert all(np.all(np.diff(rank[a]) > 0) for a in tile_lists(got)), \
                f"seed {seed}: a tile's ids out of depth order"
        else:               # every tile keeps a part of its list, in order; NULLs in no range
            assert np.all(np.concatenate(tile_lists(got)) != NULL_SPLAT), f"seed {seed}"
            assert all(is_subsequence(a, b) for a, b in zip(tile_lists(got), tile_lists(clean))), \
                f"seed {seed}: a tile got a pair it does not have, or out of order"
    r.emit_keys_constants = {}
    again = r.render(cam, (0.0, 0.0, 0.0))
    assert np.array_equal(again, image), f"seed {seed}: the perturbation outlived its render"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_counts_past_2_32_are_flagged_and_no_range_runs_backwards(gpu_ctx, layout):
    """Issue 33 item 3 in the renderer's own scan, both layouts: counts ((tile, chunk) cells, or
    per-splat pair counts) that sum past 2^32 - 1 (a huge view of huge early splats) give a total
    that says overflow, and every tile range has start <= end (a wrapped sum gave a tile a start
    past its end: ~2^32 batches)."""
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    rng = np.random.default_rng(seed)
    model, cam = random_scene(rng, 400, 96, 80, dtype=np.float32)
    r = GpuRenderer(gpu_ctx, layout=Layout.of(gpu_ctx, layout))
    r.upload_model(model)
    r.render(cam, (0.0, 0.0, 0.0))                    # the table, ranges and parameters exist
    table, cells = ("emit_counts", len(model)) if r.per_splat else (
        "emit_table", r.tiles_x * r.tiles_y * r.chunks)
    counts = rng.integers(0, 1 << 30, cells, dtype=np.uint64)
    counts[: cells // 8] = 1 << 31                    # past 2^32 whatever the draw
    r.pool.write(table, counts.astype(np.uint32))
    with gpu_ctx.guard("scan"):
        enc = gpu_ctx.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        r._encode_scan(cpass)
        if r.per_splat:
            r._encode_sorted_ranges(cpass)
        cpass.end()
        gpu_ctx.queue.submit([enc.finish()])
    total, clipped, _, overflow = r.pool.read_array("counters", np.uint32, 4).astype(np.uint64)
    assert counts.sum() > np.iinfo(np.uint32).max, f"seed {seed}: the counts must overflow"
    assert total == np.iinfo(np.uint32).max and overflow == 1, f"seed {seed}: {total}, {overflow}"
    assert clipped == r.capacity, f"seed {seed}"
    ranges = r.pool.read_array("ranges", np.uint32, 2 * r.tiles_x * r.tiles_y).reshape(-1, 2)
    assert np.all(ranges[:, 0] <= ranges[:, 1]), f"seed {seed}: a range runs backwards"
    assert np.all(np.diff(ranges[:, 0].astype(np.int64)) >= 0), f"seed {seed}"
