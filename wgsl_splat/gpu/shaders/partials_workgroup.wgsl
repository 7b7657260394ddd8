// Per-splat partial sums of raster_backward.wgsl without subgroup operations: every thread owns
// one slot (its local index) and writes its own partials, so the reduction reads THREADS partials per sum.
// Same interface as partials_subgroup.wgsl.

fn partial_slot(li: u32) -> u32 {
    atomicOr(&s_slot_mask[li / 32u], 1u << (li % 32u));
    return li;
}

fn partial_lanes() -> u32 {
    return 1u;
}

fn partial_sum(v: vec4<f32>, size: u32) -> vec4<f32> {
    return v;
}
