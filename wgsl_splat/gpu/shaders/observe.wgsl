// A view observation's last stage (TrainStep.observe; NumPy twin: reference/step.py observe): after
// raster_backward.wgsl ran with a per-pixel weight map as dL/dimage, the colour part of each
// splat's grad2d is, per channel k, Σ_p w_k(p)·α·T over the pixels it was composited into. Add
// channel k to statistic plane planes[k] and clear grad2d (the training step expects it zero).
// A render whose intersections overflowed the capacity it was drawn with adds nothing: the host
// reads the counts of a ring of views at once and observes those views again, grown.

const WG: u32 = 256u;           // threads per workgroup (the host reads it from here)

// Channels observed (1..3); a constant, not a uniform: lavapipe re-specialises a pipeline whose
// control flow depends on a uniform (docs/benchmarks.md, project backward).
override COUNT: u32 = 3u;

struct ObserveParams {
    n: u32,               // rows
    x_groups: u32,        // x workgroups per grid row
    capacity: u32,        // the render's intersection capacity (0xffffffff: observe it clipped)
    pad1: u32,
    planes: vec4<u32>,    // the statistic plane of each channel
}

@group(0) @binding(0) var<uniform> op: ObserveParams;
@group(0) @binding(1) var<storage, read_write> grad2d: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;
@group(0) @binding(3) var<storage, read> counters: array<u32>;   // the forward's: [0] pairs

@compute @workgroup_size(WG)
fn observe(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.x + wid.y * op.x_groups) * WG + lid;
    if (i >= op.n) {
        return;
    }
    if (counters[0] <= op.capacity) {
        let c = grad2d[3u * i + 2u];
        let n = op.n;
        stats[op.planes.x * n + i] = stats[op.planes.x * n + i] + c.x;
        if (COUNT > 1u) {
            stats[op.planes.y * n + i] = stats[op.planes.y * n + i] + c.y;
        }
        if (COUNT > 2u) {
            stats[op.planes.z * n + i] = stats[op.planes.z * n + i] + c.z;
        }
    }
    grad2d[3u * i] = vec4<f32>(0.0);
    grad2d[3u * i + 1u] = vec4<f32>(0.0);
    grad2d[3u * i + 2u] = vec4<f32>(0.0);
}
