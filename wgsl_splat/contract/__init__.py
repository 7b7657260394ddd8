"""The step contract: what a training step promises (:mod:`.step`), the per-Gaussian state and
its row operations (:mod:`.state`, :mod:`.rows`), the statistics a strategy reads
(:mod:`.statistics`), the loss terms (:mod:`.losses`), Adam (:mod:`.optim`), the per-view
parameters (:mod:`.per_view`, :mod:`.appearance`, :mod:`.pose`) and the facts both
implementations share (random streams, row kinds, loss and SH constants: :mod:`.rows`,
:mod:`.losses`, :mod:`.sh`).

The bottom layer above the package's base modules (``model``, ``camera``, ``options``,
``render_config``, ...): the NumPy path (:mod:`wgsl_splat.reference`) and the device path
(:mod:`wgsl_splat.gpu`) implement it, the strategies (:mod:`wgsl_splat.strategy`) decide through
it, and it imports none of them (docs/design.md, "Layers")."""
