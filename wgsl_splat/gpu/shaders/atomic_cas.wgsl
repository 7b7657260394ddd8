// Gradient accumulation without float atomics (DX12, WebGPU baseline): the f32 lives in an
// atomic<u32> and is updated with a compare-and-swap loop. Same interface as atomic_float.wgsl.
alias GradAtomic = atomic<u32>;

fn grad_add(i: u32, v: f32) {
    var old = atomicLoad(&grad2d[i]);
    loop {
        let r = atomicCompareExchangeWeak(&grad2d[i], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
}
