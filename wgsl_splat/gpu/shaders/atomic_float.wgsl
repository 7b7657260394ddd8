// Gradient accumulation with hardware float atomics (optional feature shader-float32-atomic).
// The including module declares `grad2d: array<GradAtomic>` (storage, read_write).
alias GradAtomic = atomic<f32>;

fn grad_add(i: u32, v: f32) {
    atomicAdd(&grad2d[i], v);
}
