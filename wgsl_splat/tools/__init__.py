"""Developer tools behind commands: the benchmark, the roofline, the gradient check, random test scenes."""
