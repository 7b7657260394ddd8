// The weight map of a view observation on the device (TrainStep.observe with ErrorMaps; NumPy
// twin: contract/error_maps.py): per pixel e = mean_c |image - target| (0 where the target is
// masked), its range [lo, hi] and sum over the image, then the weights (e - lo > threshold *
// (hi - lo), e, 1), written where the rasterisation backward pass reads dL/dimage. Three
// dispatches: each workgroup's pixels' errors, range and sum; the image's (one workgroup); the
// weights. The first two alone give a view's L1 term, sum / pixels (TrainStep.view_errors).

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)
const PER_THREAD: u32 = 16u;    // pixels per thread: a workgroup covers WG * PER_THREAD
const BIG: f32 = 3.0e38;

struct ErrorMapParams {
    pixels: u32,
    groups: u32,          // workgroups of the first and last dispatch
    threshold: f32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> ep: ErrorMapParams;
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read> target_img: array<f32>;
@group(0) @binding(3) var<storage, read_write> wmap: array<f32>;
// (lo, hi, sum, 0) of each workgroup's pixels' errors, then at [groups] the image's
@group(0) @binding(4) var<storage, read_write> ranges: array<vec4<f32>>;

var<workgroup> range_s: array<vec3<f32>, WG>;

fn workgroup_range(lid: u32, r: vec3<f32>) -> vec4<f32> {
    range_s[lid] = r;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            let a = range_s[lid];
            let b = range_s[lid + s];
            range_s[lid] = vec3<f32>(min(a.x, b.x), max(a.y, b.y), a.z + b.z);
        }
        workgroupBarrier();
    }
    return vec4<f32>(range_s[0], 0.0);
}

@compute @workgroup_size(WG)
fn error_range(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    var r = vec3<f32>(BIG, -BIG, 0.0);
    let base = wid.x * WG * PER_THREAD;
    for (var k = 0u; k < PER_THREAD; k = k + 1u) {
        let p = base + k * WG + lid;
        if (p < ep.pixels) {
            let i = 3u * p;
            let t = vec3<f32>(target_img[i], target_img[i + 1u], target_img[i + 2u]);
            let d = abs(vec3<f32>(image[i], image[i + 1u], image[i + 2u]) - t);
            let e = select((d.x + d.y + d.z) / 3.0, 0.0, any(t < vec3<f32>(0.0)));
            wmap[i + 1u] = e;
            r = vec3<f32>(min(r.x, e), max(r.y, e), r.z + e);
        }
    }
    let total = workgroup_range(lid, r);
    if (lid == 0u) {
        ranges[wid.x] = total;
    }
}

@compute @workgroup_size(WG)
fn image_range(@builtin(local_invocation_index) lid: u32) {
    var r = vec3<f32>(BIG, -BIG, 0.0);
    for (var g = lid; g < ep.groups; g = g + WG) {
        let x = ranges[g];
        r = vec3<f32>(min(r.x, x.x), max(r.y, x.y), r.z + x.z);
    }
    let total = workgroup_range(lid, r);
    if (lid == 0u) {
        ranges[ep.groups] = total;
    }
}

@compute @workgroup_size(WG)
fn error_weights(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = ranges[ep.groups];
    let cut = ep.threshold * (r.y - r.x);
    let base = wid.x * WG * PER_THREAD;
    for (var k = 0u; k < PER_THREAD; k = k + 1u) {
        let p = base + k * WG + lid;
        if (p < ep.pixels) {
            let i = 3u * p;
            wmap[i] = select(0.0, 1.0, r.y > r.x && wmap[i + 1u] - r.x > cut);
            wmap[i + 2u] = 1.0;
        }
    }
}
