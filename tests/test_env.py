"""The environment variables (wgsl_splat/env.py): one declaration each, parsed and bounded there;
a value not accepted is one line naming the variable, its value and what it takes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from wgsl_splat import env
from wgsl_splat.app.cli import main

PACKAGE = Path(env.__file__).parent
SIZES = (env.MAX_BINDING, env.DEVICE_MEMORY)
BAD_SIZES = [("nan", "is not a size in bytes"), ("inf", "is not a size in bytes"),
             ("-1", "is not a size in bytes"), ("0", "is not a size in bytes"),
             ("garbage", "is not a size in bytes"), ("1e400", "is not a size in bytes"),
             ("1", "is below the minimum of 64 KiB"), ("4K", "is below the minimum of 64 KiB"),
             ("65535", "is below the minimum of 64 KiB"),
             ("1e20", "is above the maximum of 1 PiB")]


@pytest.mark.parametrize("var", SIZES, ids=lambda v: v.name)
def test_sizes_parse_as_before(var):
    """Valid values keep their meaning: bytes, binary units, an optional B or iB, any case."""
    for text, value in (("262144", 262144), ("65536", 65536), ("256K", 256 << 10),
                        ("1.5M", 3 << 19), (" 6G ", 6 << 30), ("6GiB", 6 << 30),
                        ("512kb", 512 << 10), ("2T", 2 << 40), ("1e6", 1_000_000)):
        assert var.read({var.name: text}) == value, text
    assert var.read({}) is None and var.read({var.name: "  "}) is None      # unset


@pytest.mark.parametrize("var", SIZES, ids=lambda v: v.name)
@pytest.mark.parametrize("text, why", BAD_SIZES)
def test_a_size_not_accepted_is_one_line_naming_the_variable(var, text, why):
    with pytest.raises(env.EnvError) as exc:
        var.read({var.name: text})
    msg = str(exc.value)
    assert msg == (f"{var.name}={text!r} {why}: it takes a size in bytes from 64 KiB to 1 PiB "
                   f"(e.g. 262144, 256K, 1.5M, 6G)")


def test_choices_and_paths():
    assert env.DEVICE_PROFILE.read({env.DEVICE_PROFILE.name: " WebGPU "}) == "webgpu"
    with pytest.raises(env.EnvError, match=r"^WGSL_SPLAT_DEVICE_PROFILE='metal-m9' is not "
                                           r"accepted: it takes one of full, webgpu, "):
        env.DEVICE_PROFILE.read({env.DEVICE_PROFILE.name: "metal-m9"})
    assert env.SENTINELS.read({env.SENTINELS.name: " On "}) == "on"
    with pytest.raises(env.EnvError, match=r"^WGSL_SPLAT_SENTINELS='1' is not accepted: it takes "
                                           r"one of off, on$"):
        env.SENTINELS.read({env.SENTINELS.name: "1"})
    assert env.DXC.read({env.DXC.name: ""}) == ""            # empty: FXC, not unset
    assert env.DXC.read({}) is None
    assert env.CACHE.read({env.CACHE.name: ""}) is None      # empty: unset
    assert env.CACHE.read({env.CACHE.name: "/c"}) == "/c"
    assert env.MAX_BINDING.setting({env.MAX_BINDING.name: " 256K"}) == "WGSL_SPLAT_MAX_BINDING=256K"


def test_size_text():
    assert [env.size_text(n) for n in (64 << 10, 800_000, 1 << 20, 3 << 19, 118 << 20, 6 << 30)] \
        == ["64 KiB", "781 KiB", "1 MiB", "1.5 MiB", "118 MiB", "6 GiB"]


def test_every_variable_the_package_names_is_declared_and_env_imports_nothing_of_it():
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"\bWGSL_SPLAT_[A-Z_]*[A-Z]\b", path.read_text()))
    assert named and named <= set(env.VARIABLES), named - set(env.VARIABLES)
    for var in env.VARIABLES.values():
        assert var.kind in ("bytes", "choice", "path") and var.meaning and var.unset
    tree = ast.parse((PACKAGE / "env.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("wgsl_splat")
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("wgsl_splat") for a in node.names)


def test_the_profile_choices_are_the_runtimes_profiles():
    from wgsl_splat.gpu.profiles import PROFILE_NAMES

    assert env.DEVICE_PROFILE.choices == PROFILE_NAMES


@pytest.mark.gpu
@pytest.mark.parametrize("var", SIZES, ids=lambda v: v.name)
@pytest.mark.parametrize("text", ["nan", "inf", "-1", "garbage", "1K"])
def test_train_with_a_bad_size_is_one_line_naming_the_variable(tmp_path, monkeypatch, var, text):
    """Through the command: read before an adapter is looked for, so the same line on every
    machine (with or without an adapter), never a traceback nor a fall-back to the NumPy path."""
    monkeypatch.setenv(var.name, text)
    res = CliRunner().invoke(main, ["train", "--preset", "smoke", "--iters", "1", "-r", "8",
                                    "--out", str(tmp_path / "run")])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.exception
    assert res.output.splitlines()[-1].startswith(f"Error: {var.name}={text!r} "), res.output
    assert "Traceback" not in res.output and not (tmp_path / "run" / "checkpoints").exists()
