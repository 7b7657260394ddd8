// The parameter terms' value added to a step's loss (wgsl_splat/training/losses.py): the sum of
// project_backward.wgsl's per-workgroup partial sums, added to the loss ring slot of the step
// (loss.wgsl writes the image loss there), so the reported loss is the one the NumPy step
// reports. One workgroup.

#include "common.wgsl"

struct TermsSlot {
    slot: u32,            // the loss ring slot of this step (one uniform slot each, dynamic offset)
}

@group(0) @binding(0) var<uniform> ts: TermsSlot;      // dynamic
@group(0) @binding(1) var<uniform> rp: RenderParams;
@group(0) @binding(2) var<storage, read> term_partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<vec4<f32>>;

var<workgroup> sums: array<f32, BLOCK_SIZE>;

@compute @workgroup_size(BLOCK_SIZE)
fn add_terms(@builtin(local_invocation_index) lid: u32) {
    let count = (rp.model.x + BLOCK_SIZE - 1u) / BLOCK_SIZE;   // project_backward's workgroups
    var s = 0.0;
    for (var j = lid; j < count; j = j + BLOCK_SIZE) {
        s = s + term_partials[j];
    }
    sums[lid] = s;
    workgroupBarrier();
    for (var h = BLOCK_SIZE / 2u; h > 0u; h = h >> 1u) {
        if (lid < h) {
            sums[lid] = sums[lid] + sums[lid + h];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        result[ts.slot].x = result[ts.slot].x + sums[0];
    }
}
