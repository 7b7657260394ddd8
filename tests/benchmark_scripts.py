"""Loading a script of ``benchmarks/`` (not a package) as a module, and the short run its tests
probe, for the tests of its logic."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as module ``name`` (registered in ``sys.modules``, so its
    dataclasses and pickles resolve)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def short_run(out, *flags: str) -> None:
    """A 20-step smoke run of the embedded scene on the NumPy path, held-out views evaluated,
    into ``out`` (``flags``: more of ``train``'s, e.g. ``--eval-at 10,20``)."""
    from click.testing import CliRunner

    from wgsl_splat.app.cli import main

    res = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "20", "-r", "4",
                                    "--eval", "--device", "cpu", *flags, "--out", str(out)])
    assert res.exit_code == 0, res.output
