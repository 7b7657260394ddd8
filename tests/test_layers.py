"""The package's layers point one way (docs/design.md, "Layers"): every import, module-level or
inside a function, goes to the same layer or one below, never up, and packages of one layer do
not import each other. Run ``python tests/test_layers.py`` to print the package graph."""

from __future__ import annotations

import ast
import collections
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "wgsl_splat"

# Bottom to top. The packages of one layer are peers and import none of each other, except in
# the base (modules of conventions that build on one another) and the application.
LAYERS = [
    ("base", {"__init__", "errors", "atomic_io", "env", "counter_rng", "camera", "model",
              "options", "render_config"}),
    ("step contract", {"contract"}),
    ("implementations and data", {"reference", "gpu", "data"}),
    ("strategies", {"strategy"}),
    ("the run", {"training"}),
    ("tools", {"tools"}),
    ("application", {"app", "__main__"}),
]
RANK = {unit: (rank, name) for rank, (name, units) in enumerate(LAYERS) for unit in units}
OPEN_LAYERS = {"base", "application"}


def unit_of(module: str) -> str:
    """``wgsl_splat.gpu.step`` -> ``gpu``; ``wgsl_splat.model`` -> ``model``; the package's own
    ``__init__`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, str, int]]:
    """``(importing module, imported module, file, line)`` of every import of the package."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        is_init = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_init else parts)
        package = parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                    targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                else:
                    targets = [node.module or ""]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found += [(module, t, str(path.relative_to(ROOT.parent)), node.lineno)
                      for t in targets if t == "wgsl_splat" or t.startswith("wgsl_splat.")]
    return found


def package_graph() -> dict[str, set[str]]:
    graph = collections.defaultdict(set)
    for src, dst, _, _ in imports():
        if unit_of(src) != unit_of(dst):
            graph[unit_of(src)].add(unit_of(dst))
    return graph


def test_every_module_belongs_to_a_layer():
    units = {unit_of(src) for src, _, _, _ in imports()} | {
        p.stem if p.is_file() else p.name for p in ROOT.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert not sorted(units - RANK.keys()), "declare the new module or package in LAYERS"


def test_no_import_points_up_or_sideways():
    wrong = []
    for src, dst, path, line in imports():
        (rs, ls), (rd, ld) = RANK[unit_of(src)], RANK[unit_of(dst)]
        if rd > rs or (rd == rs and unit_of(src) != unit_of(dst) and ls not in OPEN_LAYERS):
            wrong.append(f"{path}:{line}: {src} ({ls}) imports {dst} ({ld})")
    assert not wrong, "\n".join(wrong)


if __name__ == "__main__":
    for unit, deps in sorted(package_graph().items(), key=lambda kv: RANK[kv[0]]):
        print(f"{unit:10s} ({RANK[unit][1]}) -> {', '.join(sorted(deps, key=lambda u: RANK[u]))}")
