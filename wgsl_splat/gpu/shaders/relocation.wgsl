// The state's sampling operations (3DGS-MCMC's relocation, as gsplat's strategy/ops.py has them;
// training/state.py TrainState.relocate, sample_add, perturb_means; NumPy twin: reference/rows.py):
//
//   relocate_weights   : weights[i] = floor(σ(logit_i)·2^q), σ from the shared table (0 for dead rows
//                    when relocating), and the number of dead rows
//   (prefix.wgsl: exclusive scan of the weights; the total is the last block sum)
//   relocate_draw      : each draw d (a dead row when relocating, a new row N + t when adding) takes
//                    bits(key, d) mod total and finds the row whose weight interval holds it;
//                    counts[source] += 1
//   relocate_values : per drawn source, the relocation of eq. 9 (counts + 1 copies): new opacity
//                    logit and log-scale shift
//   relocate_rows      : the row table (state_rows.wgsl): relocated rows and their sources RELOCATE,
//                    the others KEEP
//   perturb_means   : every step, means += Σ·z·σ(100·(1 − o − 0.995))·scale
//
// Integer weights make the cumulative sums exact, so the draws are those of the NumPy path.
//
// The kernels that read parameters run once per page of the state (gpu/pages.py): row i of the
// page is row base + i of the state's N = total; relocate_draw when adding and relocate_rows'
// new rows (new_rows = 1) run once.

#include "random.wgsl"
#include "row_constants.wgsl"

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)

struct RelocateParams {
    n: u32,               // rows
    draws: u32,           // rows to add (sample_add), 0 when relocating
    weight_bits: u32,     // q of the integer weights floor(o·2^q)
    scan_total: u32,      // index of the weights scan's total in scan_sums
    log_scales: u32,      // params offsets: log-scales, quaternions, opacity logits
    quats: u32,
    opacity: u32,
    dead_logit: f32,      // rows at or below this opacity logit are dead
    min_opacity: f32,     // relocated opacities stay above this
    noise_scale: f32,     // perturb_means: the noise's scale
    key: u32,             // the random stream
    x_groups: u32,        // x workgroups per grid row
    relocating: u32,      // 1: relocate (dead rows draw), 0: sample_add (new rows draw)
    base: u32,            // the page's first row
    total: u32,           // rows of the state, N
    new_rows: u32,        // relocate_rows: 1 for the dispatch over the added rows
}

@group(0) @binding(0) var<uniform> mp: RelocateParams;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> weights: array<u32>;   // weights, then their scan
@group(0) @binding(3) var<storage, read> scan_sums: array<u32>;
@group(0) @binding(4) var<storage, read_write> sources: array<u32>;   // per draw: its source
@group(0) @binding(5) var<storage, read_write> counts: array<atomic<u32>>;   // N draw counts, then dead
@group(0) @binding(6) var<storage, read_write> relocated: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> table: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read> sigmoid_table: array<f32>;   // σ(k/64), |k| ≤ 1024


var<workgroup> wg_dead: atomic<u32>;

fn thread_index(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * mp.x_groups) * WG + lid;
}

fn is_dead(i: u32) -> bool {
    return params[mp.opacity + i] <= mp.dead_logit;
}

fn opacity(i: u32) -> f32 {
    return 1.0 / (1.0 + exp(-params[mp.opacity + i]));
}

@compute @workgroup_size(WG)
fn relocate_weights(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u) {
        atomicStore(&wg_dead, 0u);
    }
    workgroupBarrier();
    let n = mp.n;
    let i = thread_index(lid, wid);
    if (i < n) {
        let dead = is_dead(i);
        // σ from the shared table at round(64·logit): the NumPy path's weights bit for bit
        let k = clamp(round(params[mp.opacity + i] * SIGMOID_STEPS), -SIGMOID_HALF, SIGMOID_HALF);
        var w = u32(floor(sigmoid_table[u32(k + SIGMOID_HALF)] * f32(1u << mp.weight_bits)));
        if (dead && mp.relocating == 1u) {
            w = 0u;
        }
        weights[mp.base + i] = w;
        if (dead) {
            atomicAdd(&wg_dead, 1u);
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        let d = atomicLoad(&wg_dead);
        if (d != 0u) {
            atomicAdd(&counts[mp.total], d);
        }
    }
}

// The row whose weight interval [excl(i), excl(i) + w(i)) holds r: the last i with excl(i) <= r
// among rows of non-zero weight, i.e. (the first j in [1, N] with excl(j) > r) - 1, excl(N) = total.
fn locate(r: u32, total: u32) -> u32 {
    let n = mp.total;
    var lo = 1u;
    var hi = n;       // excl(n) = total > r: the answer is in [lo, hi]
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        var v = total;
        if (mid < n) {
            v = weights[mid];
        }
        if (v > r) {
            hi = mid;
        } else {
            lo = mid + 1u;
        }
    }
    return lo - 1u;
}

@compute @workgroup_size(WG)
fn relocate_draw(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = thread_index(lid, wid);
    let total = scan_sums[mp.scan_total];
    var draw = 0u;
    if (mp.relocating == 1u) {
        if (t >= mp.n || !is_dead(t)) {
            return;
        }
        draw = mp.base + t;       // a dead row draws its own replacement
    } else {
        if (t >= mp.draws) {
            return;
        }
        draw = mp.total + t;      // new row N + t
    }
    if (total == 0u) {
        return;
    }
    let s = locate(random_bits(mp.key, draw, 0u) % total, total);
    sources[draw] = s;
    atomicAdd(&counts[s], 1u);
}

@compute @workgroup_size(WG)
fn relocate_values(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let s = thread_index(lid, wid);
    if (s >= mp.n) {
        return;
    }
    let c = atomicLoad(&counts[mp.base + s]);
    if (c == 0u) {
        return;
    }
    let ratio = min(c + 1u, RELOCATION_MAX_RATIO);
    let o = opacity(s);
    let new_o = 1.0 - pow(1.0 - o, 1.0 / f32(ratio));
    // eq. 9: o / Σ_{i=1..ratio} Σ_{k=0..i-1} C(i-1, k) (-1)^k new_o^(k+1) / sqrt(k+1)
    var denom = 0.0;
    for (var i = 1u; i <= ratio; i = i + 1u) {
        var binom = 1.0;          // C(i-1, k), built up along k
        var power = new_o;        // new_o^(k+1)
        var sign = 1.0;
        for (var k = 0u; k < i; k = k + 1u) {
            denom = denom + binom * sign * power / sqrt(f32(k + 1u));
            binom = binom * f32(i - 1u - k) / f32(k + 1u);
            power = power * new_o;
            sign = -sign;
        }
    }
    let clamped = clamp(new_o, mp.min_opacity, 1.0 - F32_EPS);
    relocated[mp.base + s] = vec2<f32>(log(clamped / (1.0 - clamped)), log(o / denom));
}

@compute @workgroup_size(WG)
fn relocate_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = thread_index(lid, wid);
    if (mp.new_rows == 1u) {
        if (r < mp.draws) {
            let g = mp.total + r;
            table[g] = vec2<u32>(sources[g], RELOCATE);        // from its draw
        }
        return;
    }
    if (r >= mp.n) {
        return;
    }
    let g = mp.base + r;
    let total = scan_sums[mp.scan_total];
    var e = vec2<u32>(g, KEEP);
    if (mp.relocating == 1u && total != 0u && is_dead(r)) {
        e = vec2<u32>(sources[g], RELOCATE);                   // from its draw
    } else if (atomicLoad(&counts[g]) != 0u) {
        e = vec2<u32>(g, RELOCATE);                            // a drawn source, relocated in place
    }
    table[g] = e;
}

@compute @workgroup_size(WG)
fn perturb_means(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = thread_index(lid, wid);
    if (i >= mp.n) {
        return;
    }
    let gate = 1.0 / (1.0 + exp(-NOISE_GATE_K * ((1.0 - opacity(i)) - NOISE_GATE_X0)));
    let z = random_normal3(mp.key, mp.base + i) * (gate * mp.noise_scale);
    let oq = mp.quats + 4u * i;
    let q4 = vec4<f32>(params[oq], params[oq + 1u], params[oq + 2u], params[oq + 3u]);
    let q = q4 / length(q4);
    let w = q.x;
    let x = q.y;
    let y = q.z;
    let zq = q.w;
    let rot = mat3x3<f32>(
        vec3<f32>(1.0 - 2.0 * (y * y + zq * zq), 2.0 * (x * y + w * zq), 2.0 * (x * zq - w * y)),
        vec3<f32>(2.0 * (x * y - w * zq), 1.0 - 2.0 * (x * x + zq * zq), 2.0 * (y * zq + w * x)),
        vec3<f32>(2.0 * (x * zq + w * y), 2.0 * (y * zq - w * x), 1.0 - 2.0 * (x * x + y * y)));
    let ol = mp.log_scales + 3u * i;
    let s2 = exp(2.0 * vec3<f32>(params[ol], params[ol + 1u], params[ol + 2u]));
    // Σ z = R (S² (Rᵀ z))
    let d = rot * (s2 * (transpose(rot) * z));
    params[3u * i] = params[3u * i] + d.x;
    params[3u * i + 1u] = params[3u * i + 1u] + d.y;
    params[3u * i + 2u] = params[3u * i + 2u] + d.z;
}
