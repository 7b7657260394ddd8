"""Training: configuration, the loop, the step API both paths implement, the state, Adam, evaluation, data parallelism."""
