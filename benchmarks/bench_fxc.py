"""FXC and DXC compile time per raster-backward variant (or every variant), now and at a git revision.

    python benchmarks/bench_fxc.py [--rev HEAD~3] [--all] [--variants N] [--json out.json]

FXC (``d3dcompiler_47.dll``) is wgpu's default DX12 compiler; DXC (``dxcompiler.dll``) the one
``gpu/runtime.py`` selects on Windows when a DLL is there. Both run under Wine as in the
portability check (``wgsl_splat/tools/portability.py``; install its tools first: ``.ci/run`` does).
The variants are the portability tour's (needs a GPU adapter: lavapipe will do); ``--rev`` compiles
the WGSL of that revision for the same variants, so before/after come from one run. FXC takes
minutes per variant: not part of CI. Times are the compilers' own (one Wine process per job
share; ``--jobs`` shares run at once).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wgsl_splat.tools import portability as port  # noqa: E402


def shaders_at(rev: str, dest: Path) -> Path:
    """The WGSL folder of git revision ``rev``, extracted into ``dest``."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "wgsl_splat/gpu/shaders"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest / "wgsl_splat" / "gpu" / "shaders"


def time_variants(variants, tools, out: Path, shader_dir, jobs: int) -> list[dict]:
    report = port.check(variants, out, tools, fxc=False, dxc=False, jobs=jobs,
                        shader_dir=shader_dir)
    results = json.loads((out / "results.json").read_text())["variants"]
    manifest = {m["id"]: m for m in json.loads((out / "manifest.json").read_text())}
    jobs_list, names = [], []
    for r in results:
        m = manifest[r["id"]]
        for backend, key, profile in (("dxc", "naga-hlsl-sm60", "cs_6_0"),
                                      ("fxc", "naga-hlsl-sm51", "cs_5_1")):
            if r[key]["status"] == "ok":
                path = out / r[key]["file"]
                jobs_list.append((backend, path, port.hlsl_entry(path.read_text(), m["entry"]),
                                  profile))
                names.append((m["describe"], backend))
    rows = []
    for (describe, backend), (ok, msg, dt) in zip(names, port.run_hlslc(tools, jobs_list,
                                                                        parallel=jobs)):
        rows.append({"variant": describe, "compiler": backend, "ok": ok, "seconds": dt,
                     "x3550": "X3550" in msg, "message": msg if not ok else ""})
    print(report.summary().splitlines()[0])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="also time the WGSL of this git revision (before/after)")
    ap.add_argument("--all", action="store_true", help="every variant, not only raster_backward")
    ap.add_argument("--variants", type=int, default=0,
                    help="at most this many variants (0: all selected)")
    ap.add_argument("--mode", default="classic", help="render mode of the variants (or 'all')")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from wgsl_splat.gpu.runtime import select_device

    tools = port.find_tools()
    if tools.missing:
        print("missing: " + "; ".join(tools.missing), file=sys.stderr)
        return 1
    variants = port.tour(select_device("gpu"))
    variants = [v for v in variants if v.stage == "compute"
                and (args.all or v.module == "raster_backward")
                and (args.mode == "all" or v.config.mode == args.mode)
                and "atomic_float" not in dict(v.defines).get("ATOMICS", "")]
    if args.variants:
        variants = variants[:args.variants]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = [("now", None)]
        if args.rev:
            runs.insert(0, (args.rev, shaders_at(args.rev, tmp / "rev")))
        for label, shader_dir in runs:
            out[label] = time_variants(variants, tools, tmp / label.replace("/", "_"),
                                       shader_dir, args.jobs)
    for label, rows in out.items():
        print(f"\n## {label}")
        for r in sorted(rows, key=lambda r: (r["variant"], r["compiler"])):
            flag = " X3550" if r["x3550"] else ""
            status = "" if r["ok"] else f" FAILED: {r['message'][:200]}"
            print(f"{r['compiler']}  {r['seconds']:8.1f} s{flag}  {r['variant']}{status}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
