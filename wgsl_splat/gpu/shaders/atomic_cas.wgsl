// Gradient accumulation without float atomics (DX12, WebGPU baseline): the f32 lives in an
// atomic<u32> and is updated with a compare-and-swap loop. Same interface as atomic_float.wgsl.
alias GradAtomic = atomic<u32>;

// (Storage pointers cannot be passed to a function in WGSL, hence one loop per buffer.)
fn grad_add(i: u32, v: f32) {
    let split = rp.grid.w * GRAD_STRIDE;
    if (i < split) {
        var old = atomicLoad(&grad2d[i]);
        loop {
            let r = atomicCompareExchangeWeak(&grad2d[i], old, bitcast<u32>(bitcast<f32>(old) + v));
            if (r.exchanged) {
                break;
            }
            old = r.old_value;
        }
    } else {
        let j = i - split;
        var old = atomicLoad(&grad2d_hi[j]);
        loop {
            let r = atomicCompareExchangeWeak(&grad2d_hi[j], old, bitcast<u32>(bitcast<f32>(old) + v));
            if (r.exchanged) {
                break;
            }
            old = r.old_value;
        }
    }
}
