// 3DGS adaptive density control on the device (NumPy twin: reference/rows.py adc_flags,
// adc_table). One round, without the host seeing a Gaussian:
//
//   adc_flags : per Gaussian i, the three "kept" flags of its rows in the grown model, written to
//               plan[i] (the original), plan[N + i] (its clone), plan[2N + i] (its split samples),
//               and the round's counts (qualifying clones and splits, Gaussians seen, max gradient)
//   (prefix.wgsl: exclusive scan of plan[0, 3N) -> each kept row's place in the new order)
//   adc_rows  : the row table (state_rows.wgsl) in 3DGS's order: kept originals, kept clones,
//               kept split samples sample-major (sample j of source i at plan[2N + i] + j·T2)
//
// The decisions compare float32 values with float32 thresholds the host computed (no division,
// no transcendental), so they are those of the NumPy path bit for bit.


struct AdcParams {
    sizes: vec4<u32>,     // N, statistics plane stride (capacity), split samples, use `allowed`
    offs: vec4<u32>,      // params offsets: log-scales, quats, opacity logits, SH
    thr: vec4<f32>,       // gradient, log clone limit, opacity-logit floor, log world limit
    thr2: vec4<f32>,      // log split divisor, screen radius limit, 0, 0
    grid: vec4<u32>,      // x workgroups per grid row, scan blocks (the total's index), 0, 0
}

@group(0) @binding(0) var<uniform> ap: AdcParams;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> stats: array<f32>;        // grad_accum | denom | max_radii
@group(0) @binding(3) var<storage, read> allowed: array<u32>;      // when the room binds
@group(0) @binding(4) var<storage, read_write> plan: array<u32>;   // 3N flags, then their scan
@group(0) @binding(5) var<storage, read_write> counters: array<atomic<u32>>;  // clone, split, seen, max grad bits
@group(0) @binding(6) var<storage, read_write> table: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read> scan_sums: array<u32>;    // prefix.wgsl block sums + total

var<workgroup> wg_counts: array<atomic<u32>, 4>;

fn gaussian_index(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * ap.grid.x) * 256u + lid;
}

@compute @workgroup_size(256)
fn adc_flags(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid < 4u) {
        atomicStore(&wg_counts[lid], 0u);
    }
    workgroupBarrier();
    let n = ap.sizes.x;
    let i = gaussian_index(lid, wid);
    if (i < n) {
        let c = ap.sizes.y;
        let ga = stats[i];
        let denom = stats[c + i];
        let radius = stats[2u * c + i];
        var high = ga >= ap.thr.x * max(denom, 1.0);
        if (ap.sizes.w != 0u) {
            high = high && allowed[i] != 0u;
        }
        let o = ap.offs.x + 3u * i;
        let max_ls = max(max(params[o], params[o + 1u]), params[o + 2u]);
        let small = max_ls <= ap.thr.y;
        let clone = high && small;
        let split = high && !small;
        let faint = params[ap.offs.z + i] < ap.thr.z;
        let big = max_ls > ap.thr.w;
        let keep_orig = !split && !faint && !big && !(radius > ap.thr2.y);
        let keep_clone = clone && !faint && !big;
        let keep_split = split && !faint && !((max_ls - ap.thr2.x) > ap.thr.w);
        plan[i] = select(0u, 1u, keep_orig);
        plan[n + i] = select(0u, 1u, keep_clone);
        plan[2u * n + i] = select(0u, 1u, keep_split);
        if (clone) {
            atomicAdd(&wg_counts[0], 1u);
        }
        if (split) {
            atomicAdd(&wg_counts[1], 1u);
        }
        if (denom > 0.0) {
            atomicAdd(&wg_counts[2], 1u);
            atomicMax(&wg_counts[3], bitcast<u32>(ga / denom));   // positive floats order as u32
        }
    }
    workgroupBarrier();
    if (lid < 3u) {
        let v = atomicLoad(&wg_counts[lid]);
        if (v != 0u) {
            atomicAdd(&counters[lid], v);
        }
    } else if (lid == 3u) {
        atomicMax(&counters[3], atomicLoad(&wg_counts[3]));
    }
}

// The exclusive prefix after plan position p (the last one's is the total): the flag at p is the
// difference of the two.
fn next_prefix(p: u32, total: u32) -> u32 {
    if (p + 1u < 3u * ap.sizes.x) {
        return plan[p + 1u];
    }
    return total;
}

@compute @workgroup_size(256)
fn adc_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n = ap.sizes.x;
    let i = gaussian_index(lid, wid);
    if (i >= n) {
        return;
    }
    let total = scan_sums[ap.grid.y];
    let t2 = total - plan[2u * n];          // kept split sources: each sample block is this long
    if (next_prefix(i, total) != plan[i]) {
        table[plan[i]] = vec2<u32>(i, 0u);                          // KEEP
    }
    if (next_prefix(n + i, total) != plan[n + i]) {
        table[plan[n + i]] = vec2<u32>(i, 1u);                      // NEW (the clone)
    }
    let base = plan[2u * n + i];
    if (next_prefix(2u * n + i, total) != base) {
        for (var j = 0u; j < ap.sizes.z; j = j + 1u) {
            table[base + j * t2] = vec2<u32>(i, 2u | (j << 8u));   // SPLIT, sample j
        }
    }
}
