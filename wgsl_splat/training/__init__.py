"""The run: its configuration (config.py), the loop, checkpoints and health checks (trainer.py),
the views it trains on (views.py), evaluation, data parallelism (parallel.py). It builds on the
step contract (:mod:`wgsl_splat.contract`) and the strategies; the application sits above it."""
