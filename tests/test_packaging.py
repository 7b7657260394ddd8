"""The wheel ships every subpackage: pyproject.toml lists packages by hand (the shaders are mapped
from the top-level folder), and a package left out installs fine but fails on import (it happened:
wgsl_splat.strategy)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_subpackage():
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(ast.literal_eval(re.search(r"^packages\s*=\s*(\[.*?\])", text, re.M).group(1)))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "wgsl_splat").rglob("__init__.py")}
    assert on_disk | {"wgsl_splat.shaders"} == listed, (on_disk, listed)
