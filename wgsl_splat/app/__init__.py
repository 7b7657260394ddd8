"""The command-line application: one module per command, the run folder, the viewer."""
