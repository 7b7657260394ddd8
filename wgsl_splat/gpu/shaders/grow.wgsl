// TrainState.grow on the device (wgsl_splat/training/state.py; NumPy twin: reference/rows.py
// grow). A strategy's decision (its own WGSL, included as the generated "decision.wgsl" with the
// accessors of the state's statistics) says per row whether it stays, is cloned or is split:
//
//   grow_decide : per row i, the flags of its rows in the grown model — plan[i] (the row itself),
//                 plan[N + i] (its clone), plan[2N + i] (its split samples) —, its cost
//                 (plan[3N + i]), its rank key (rank_keys[i]: rank.wgsl ranks the rows by it when
//                 the room binds; a decision ranked on the host reads the costs back instead),
//                 and the round's tallies (the decision's three counts, its peak, the total cost)
//   (prefix.wgsl: exclusive scan of plan[0, 3N) -> each kept row's place in the new order)
//   grow_rows   : the row table (state_rows.wgsl): kept rows, clones, split samples sample-major
//                 (sample j of source i at plan[2N + i] + j·T2)
//
// grow_decide runs once per page of the state (gpu/pages.py): the decision reads row i of the
// page's arrays, the plan is indexed by the row's number in the state, base + i, of N = total.
// grow_rows runs once over all rows (n = total, base = 0).

#include "row_constants.wgsl"

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)

struct GrowParams {
    n: u32,               // rows
    use_allowed: u32,     // 1: a row may grow only where allowed[i] (the room binds)
    samples: u32,         // split samples per split row
    x_groups: u32,        // x workgroups per grid row
    scan_total: u32,      // index of the plan scan's total in scan_sums
    log_scales: u32,      // params offsets: log-scales, quaternions, opacity logits
    quats: u32,
    opacity: u32,
    base: u32,            // the page's first row
    total: u32,           // rows of the state, N
}

// What a strategy's decide() returns for one row.
struct Decision {
    keep: bool,           // the row stays
    clone: bool,          // a copy of it is appended (NEW)
    split: bool,          // it is appended as `samples` samples (SPLIT); set keep = false
    cost: u32,            // rows it would add if it may grow (what the room counts)
    counts: vec3<u32>,    // the decision's own tallies, summed over the rows
    peak: f32,            // a non-negative value whose largest the round reports
}

@group(0) @binding(0) var<uniform> gp: GrowParams;
@group(0) @binding(1) var<uniform> dp: DecisionParams;
@group(0) @binding(2) var<storage, read> params: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> allowed: array<u32>;
@group(0) @binding(5) var<storage, read_write> plan: array<u32>;    // 3N flags (then their scan), N costs
@group(0) @binding(6) var<storage, read_write> tallies: array<atomic<u32>>;  // counts 0-2, peak bits, cost
@group(0) @binding(7) var<storage, read_write> table: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read> scan_sums: array<u32>;    // prefix.wgsl block sums + total
@group(0) @binding(9) var<storage, read_write> rank_keys: array<u32>;

// -- what a decision reads ------------------------------------------------------------------------
fn n_rows() -> u32 {
    return gp.n;
}

fn mean(i: u32) -> vec3<f32> {
    return vec3<f32>(params[3u * i], params[3u * i + 1u], params[3u * i + 2u]);
}

fn log_scales(i: u32) -> vec3<f32> {
    let o = gp.log_scales + 3u * i;
    return vec3<f32>(params[o], params[o + 1u], params[o + 2u]);
}

fn quat(i: u32) -> vec4<f32> {
    let o = gp.quats + 4u * i;
    return vec4<f32>(params[o], params[o + 1u], params[o + 2u], params[o + 3u]);
}

fn opacity_logit(i: u32) -> f32 {
    return params[gp.opacity + i];
}

#include "decision.wgsl"

var<workgroup> wg_tallies: array<atomic<u32>, 5>;

fn row_of(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * gp.x_groups) * WG + lid;
}

@compute @workgroup_size(WG)
fn grow_decide(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid < 5u) {
        atomicStore(&wg_tallies[lid], 0u);
    }
    workgroupBarrier();
    let n = gp.total;
    let i = row_of(lid, wid);
    if (i < gp.n) {
        let g = gp.base + i;
        let may_grow = gp.use_allowed == 0u || allowed[g] != 0u;
        let d = decide(i, may_grow);
        plan[g] = select(0u, 1u, d.keep);
        plan[n + g] = select(0u, 1u, d.clone);
        plan[2u * n + g] = select(0u, 1u, d.split);
        plan[3u * n + g] = d.cost;
        rank_keys[g] = rank_key(i);
        if (d.counts.x != 0u) {
            atomicAdd(&wg_tallies[0], d.counts.x);
        }
        if (d.counts.y != 0u) {
            atomicAdd(&wg_tallies[1], d.counts.y);
        }
        if (d.counts.z != 0u) {
            atomicAdd(&wg_tallies[2], d.counts.z);
        }
        atomicMax(&wg_tallies[3], bitcast<u32>(max(d.peak, 0.0)));   // non-negative floats order as u32
        if (d.cost != 0u) {
            atomicAdd(&wg_tallies[4], d.cost);
        }
    }
    workgroupBarrier();
    if (lid < 5u) {
        let v = atomicLoad(&wg_tallies[lid]);
        if (lid == 3u) {
            atomicMax(&tallies[3], v);
        } else if (v != 0u) {
            atomicAdd(&tallies[lid], v);
        }
    }
}

// The exclusive prefix after plan position p (the last one's is the total): the flag at p is the
// difference of the two.
fn next_prefix(p: u32, total: u32) -> u32 {
    if (p + 1u < 3u * gp.n) {
        return plan[p + 1u];
    }
    return total;
}

@compute @workgroup_size(WG)
fn grow_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n = gp.n;
    let i = row_of(lid, wid);
    if (i >= n) {
        return;
    }
    let total = scan_sums[gp.scan_total];
    let t2 = total - plan[2u * n];          // split sources: each sample block is this long
    if (next_prefix(i, total) != plan[i]) {
        table[plan[i]] = vec2<u32>(i, KEEP);
    }
    if (next_prefix(n + i, total) != plan[n + i]) {
        table[plan[n + i]] = vec2<u32>(i, NEW);
    }
    let base = plan[2u * n + i];
    if (next_prefix(2u * n + i, total) != base) {
        for (var j = 0u; j < gp.samples; j = j + 1u) {
            table[base + j * t2] = vec2<u32>(i, SPLIT | (j << 8u));
        }
    }
}
