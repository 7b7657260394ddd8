// The DecisionParams fields of a split/clone/prune decision, declared once: adc.wgsl and fast.wgsl
// include them in their struct (wgsl_beside expands the include), SplitCloneRound.shared_params
// (split_clone_prune.py) fills them. Each is a float32 the host computed, so that decide() needs
// no division or transcendental and decides as the NumPy twin does, bit for bit.
    grad: f32,            // mean NDC gradient threshold
    log_clone: f32,       // log of the largest scale a clone may have
    logit_min: f32,       // opacity logit below which a row is pruned
    log_world: f32,       // log of the largest world scale kept (3e38: off)
    log_div: f32,         // log of the split samples' scale divisor
    samples: u32,         // split samples
