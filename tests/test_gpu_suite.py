"""benchmarks/gpu_suite.py at its --dry-run size on lavapipe: the workloads run as child processes,
their figures are parsed into one JSON and the Markdown rows, and the docs block is replaced."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_suite():
    spec = importlib.util.spec_from_file_location("gpu_suite", ROOT / "benchmarks" / "gpu_suite.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_docs_hold_the_block_the_suite_replaces():
    suite = load_suite()
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert text.count(suite.BEGIN) == 1 and text.count(suite.END) == 1


def test_dry_run_writes_the_json_the_rows_and_the_docs_block(tmp_path, lego_dir, gpu_ctx):
    suite = load_suite()
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# head\n\n{suite.BEGIN}\nold rows\n{suite.END}\n\ntail\n")
    out = tmp_path / "suite.json"
    rc = suite.main(["--dry-run", "--only", "checks,lego,step_1m,observe,rank", "--out", str(out),
                     "--data-dir",
                     str(lego_dir.parent), "--work", str(tmp_path / "work"),
                     "--update-docs", str(docs)])
    report = json.loads(out.read_text())
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    assert report["dry_run"]
    assert set(report["results"]) == {"checks", "lego", "step_1m", "observe", "rank"}
    lego, step = report["results"]["lego"], report["results"]["step_1m"]
    checks = report["results"]["checks"]
    assert checks["ok"] and checks["passed"] >= 4 and checks["failed"] == 0, checks
    assert lego["ok"] and not lego["interrupted"] and lego["steps"] == 20 and lego["n"] > 0
    assert lego["peak_mib"] > 0 and lego["it_per_s"] > 0 and lego["densify_share"] is not None
    assert list(lego["eval"]) == ["20"]                   # JSON keys
    assert lego["eval"]["20"]["views"] == 200 and math.isfinite(lego["eval"]["20"]["psnr"])
    assert step["ok"] and step["n"] == 2000 and step["step_ms"] > 0
    assert {"params", "adam_m"} <= {name for name, _ in step["memory"]}
    assert report["machine"]["adapter"]
    observed = report["results"]["observe"]
    assert observed["ok"] and observed["n"] == 2000 and observed["views"] == 2, observed
    assert set(observed["median_ms"]) == {"observe, host", "observe, device", "validation, host",
                                          "validation, device"}
    assert observed["readback_bytes"]["observe, host"] >= 2 * 96 * 54 * 12   # the images
    assert observed["readback_bytes"]["observe, device"] < 1024              # the counts only
    assert observed["readbacks"]["observe, device"] == 1      # the views' counts, at once
    assert observed["readbacks"]["observe, host"] >= 2       # an image per view
    ranked = report["results"]["rank"]
    assert ranked["ok"] and ranked["n"] == 3000 and 0 < ranked["room"] < ranked["wanted"], ranked
    assert ranked["readbacks"]["ranked on the device"] == 2          # the round's counts
    assert ranked["readback_bytes"]["ranked on the host"] >= 3000 * 4 * 6   # costs, statistics
    rows = out.with_suffix(".md").read_text()
    assert "| observe, device | " in rows and "| ranked on the device | " in rows
    assert "| lego | 20 | " in rows and "| step_1m | 2000 | 96x54 |" in rows
    assert "Checks on the device (both layouts, sentinel tails): " in rows
    assert "| stage of the 1 M / 1080p step | ms | share | msplat on an M4 |" in rows
    text = docs.read_text()
    assert "old rows" not in text and rows.strip() in text
    assert text.startswith("# head") and text.rstrip().endswith("tail")
