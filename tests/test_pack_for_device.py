"""benchmarks/pack_for_device.py: a scene packed as lossless WebP (to fit the device tool's 64 MiB)
unpacks to the same pixels, with the test views thinned and their transforms file to match."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("pack_for_device",
                                                  ROOT / "benchmarks" / "pack_for_device.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_pack_then_unpack_gives_the_same_pixels(tmp_path):
    rng = np.random.default_rng(0)
    scene, out = tmp_path / "scene", tmp_path / "packed"
    images = {}
    for split, count in (("train", 2), ("test", 5)):
        (scene / split).mkdir(parents=True)
        frames = []
        for i in range(count):
            rgba = rng.integers(0, 256, (9, 7, 4), dtype=np.uint8)
            Image.fromarray(rgba, "RGBA").save(scene / split / f"r_{i}.png")
            images[f"{split}/r_{i}"] = rgba
            frames.append({"file_path": f"./{split}/r_{i}", "transform_matrix": np.eye(4).tolist()})
        (scene / f"transforms_{split}.json").write_text(json.dumps(
            {"camera_angle_x": 0.7, "frames": frames}))
    mod = load()
    assert mod.main(["pack", str(scene), str(out), "--test-every", "2", "--jobs", "1"]) == 0
    assert not list(out.rglob("*.png")) and len(list(out.rglob("*.webp"))) == 2 + 3
    test = json.loads((out / "transforms_test.json").read_text())
    assert [f["file_path"] for f in test["frames"]] == ["./test/r_0", "./test/r_2", "./test/r_4"]
    assert mod.main(["unpack", str(out), "--jobs", "1"]) == 0
    assert not list(out.rglob("*.webp"))
    for png in out.rglob("*.png"):
        key = f"{png.parent.name}/{png.stem}"
        assert np.array_equal(np.asarray(Image.open(png)), images[key]), key
