"""The harness of the round benchmarks (observe_cost.py, rank_cost.py): ways of doing one part
of a densification round, alternated in one process, each timed to the device's end with the
bytes and blocking reads it took (not the waits around it)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path


def alternate(step, variants: dict, pairs: int, prepare=None) -> dict:
    """Run each of ``variants`` (name -> function) ``pairs`` times in turn on ``step`` (a
    GpuTrainStep; ``prepare()`` before each, untimed). Returns the medians (ms), the bytes and
    the blocking reads of each way's last run."""
    times = {k: [] for k in variants}
    read, reads = {}, {}
    for _ in range(pairs):
        for name, fn in variants.items():
            if prepare is not None:
                prepare()
            step.synchronize()
            before, waits = step.counters["readback_bytes"], step.counters["readbacks"]
            t = time.perf_counter()
            fn()
            read[name] = step.counters["readback_bytes"] - before
            reads[name] = step.counters["readbacks"] - waits
            step.synchronize()
            times[name].append(time.perf_counter() - t)
    return {"median_ms": {k: 1000 * statistics.median(v) for k, v in times.items()},
            "readback_bytes": read, "readbacks": reads}


def finish(out: dict, json_path: str | None) -> int:
    """Print a line per way and write ``out`` to ``json_path`` (when given)."""
    width = max(map(len, out["median_ms"]))
    for k, ms in out["median_ms"].items():
        print(f"{k:{width}s} {ms:9.1f} ms per round   {out['readback_bytes'][k]:>12,} bytes read "
              f"back in {out['readbacks'][k]} blocking read(s)")
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1))
    return 0
