"""Programs nobody here wrote that some tests check our output with: PlayCanvas's
``splat-transform`` (reads every export back), Debian's ``chromium`` driven by ``playwright-core``
(opens the web viewer). ``.ci/run`` installs them; in CI (``CI=true``) a missing one fails the
test, elsewhere it skips with one line saying what to install."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where .ci/run installs the npm packages (npm install --prefix); WGSL_SPLAT_NODE_TOOLS overrides.
NODE_TOOLS = os.environ.get("WGSL_SPLAT_NODE_TOOLS", os.path.join(REPO, ".ci", "node"))


def missing(what: str, install: str):
    """Fail under CI=true (the CI machine must have it), skip otherwise."""
    msg = f"needs {what}: {install}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{msg} (CI=true: .ci/run installs it)", pytrace=False)
    pytest.skip(msg)


def node() -> str:
    path = shutil.which("node")
    if not path:
        missing("node (>= 18)", "apt-get install nodejs npm")
    return path


def splat_transform() -> list[str]:
    """The command that runs PlayCanvas's splat-transform CLI."""
    local = os.path.join(NODE_TOOLS, "node_modules", "@playcanvas", "splat-transform", "bin",
                         "cli.mjs")
    if os.path.isfile(local):
        return [node(), local]
    found = shutil.which("splat-transform")
    if found:
        return [found]
    missing("PlayCanvas splat-transform", f"npm install --prefix {NODE_TOOLS} "
            "@playcanvas/splat-transform (or npm install -g @playcanvas/splat-transform)")


def run_splat_transform(*args, timeout: float = 120) -> str:
    """Run splat-transform; its output on failure."""
    cmd = splat_transform() + ["--no-tty", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def playwright_module() -> str:
    """The playwright-core package folder (its index.mjs is imported by the browser script)."""
    local = os.path.join(NODE_TOOLS, "node_modules", "playwright-core")
    if os.path.isdir(local):
        return local
    if shutil.which("npm"):
        root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip()
        if root and os.path.isdir(os.path.join(root, "playwright-core")):
            return os.path.join(root, "playwright-core")
    missing("playwright-core (npm)", f"npm install --prefix {NODE_TOOLS} playwright-core")


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    missing("a chromium browser", "apt-get install chromium")
