// Gradient accumulation with hardware float atomics (optional feature shader-float32-atomic).
// The including module declares `grad2d` and `grad2d_hi: array<GradAtomic>` (storage, read_write):
// the gradients of splat ids below rp.grid.w, and of the others (gpu/pages.py).
alias GradAtomic = atomic<f32>;

fn grad_add(i: u32, v: f32) {
    let split = rp.grid.w * GRAD_STRIDE;
    if (i < split) {
        atomicAdd(&grad2d[i], v);
    } else {
        atomicAdd(&grad2d_hi[i - split], v);
    }
}
