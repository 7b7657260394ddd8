"""Loading a script of ``benchmarks/`` (not a package) as a module, for the tests of its logic."""

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
