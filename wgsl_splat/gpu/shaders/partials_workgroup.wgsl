// Per-splat partial sums of raster_backward.wgsl without subgroup operations: every thread is a
// subgroup of one lane, owns one slot (its local index) and writes its own partials, so the
// reduction reads THREADS partials per sum. Same interface as partials_butterfly.wgsl.

fn partial_slot(li: u32) -> u32 {
    atomicOr(&s_slot_mask[li / 32u], 1u << (li % 32u));
    return li;
}

fn partial_lanes() -> u32 {
    return 1u;
}

fn partial_lane(li: u32) -> u32 {
    return 0u;
}

fn partial_last(x: u32, li: u32) -> u32 {
    return x;
}

fn partial_sum(v: vec4<f32>, size: u32, li: u32) -> vec4<f32> {
    return v;
}
