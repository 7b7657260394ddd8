"""The wheel ships every subpackage and every WGSL file (a package or a data file left out installs
fine but fails on import or on the first pipeline: it happened with wgsl_splat.strategy)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_holds_every_module_and_shader(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(tmp_path), str(ROOT)], check=True)
    (wheel,) = tmp_path.glob("wgsl_splat-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    on_disk = {p.relative_to(ROOT).as_posix() for ext in ("*.py", "*.wgsl")
               for p in (ROOT / "wgsl_splat").rglob(ext) if "__pycache__" not in p.parts}
    assert on_disk - names == set()
