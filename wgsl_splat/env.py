"""Every environment variable the package reads, declared, parsed and bounded in one place.

One :class:`EnvVar` per variable says its name, its type (a size in bytes, a choice, a path), its
bounds and what it means; :meth:`EnvVar.read` is how a reader gets its value. A value the
declaration does not accept is an :class:`EnvError` whose message is one line naming the variable,
its value and what it accepts (the GPU runtime turns it into its own error type, which the
commands print as that line). A size below the declared minimum is refused, with the minimum.

This module imports nothing from the rest of the package, so any module may read through it.
:data:`VARIABLES` lists them all (``python -m wgsl_splat.env`` prints them).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["EnvError", "EnvVar", "VARIABLES", "MAX_BINDING", "DEVICE_MEMORY", "DEVICE_PROFILE",
           "SENTINELS", "DXC", "CACHE", "PORTABILITY_TOOLS", "size_text"]

KIB, MIB, GIB, TIB, PIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50
_SUFFIX = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": TIB}


class EnvError(ValueError):
    """An environment variable holds a value its declaration does not accept (one line)."""


def size_text(nbytes: float) -> str:
    """``64 KiB``, ``1.5 MiB``, ``118 MiB``, ``2.31 GiB`` (three significant digits)."""
    for unit, size in (("PiB", PIB), ("TiB", TIB), ("GiB", GIB), ("MiB", MIB)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes / KIB:.3g} KiB"


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: ``kind`` is ``bytes`` (``262144``, ``256K``, ``1.5G``: binary
    units, bounded by ``minimum`` and ``maximum``), ``choice`` (one of ``choices``, any case) or
    ``path`` (any text). ``unset`` says what happens without it; an empty value is unset, except
    where ``empty`` says what an empty value means."""

    name: str
    kind: str
    meaning: str
    unset: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    empty: str | None = None

    def accepts(self) -> str:
        """What the variable takes, for messages and help."""
        if self.kind == "bytes":
            return (f"a size in bytes from {size_text(self.minimum)} to {size_text(self.maximum)}"
                    f" (e.g. 262144, 256K, 1.5M, 6G)")
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        return "a path" + (f" (empty: {self.empty})" if self.empty else "")

    def _refuse(self, text: str, why: str):
        raise EnvError(f"{self.name}={text!r} {why}: it takes {self.accepts()}")

    def parse(self, text: str):
        """The value of ``text`` (set, not empty-as-unset); an :class:`EnvError` otherwise."""
        if self.kind == "bytes":
            return self._parse_bytes(text)
        if self.kind == "choice":
            key = text.strip().lower()
            if key not in self.choices:
                self._refuse(text, "is not accepted")
            return key
        return text

    def _parse_bytes(self, text: str) -> int:
        t = text.strip().upper().removesuffix("B").removesuffix("I")
        unit = t[-1:] if t[-1:] in _SUFFIX and not t[-1:].isdigit() else ""
        try:
            value = float(t[:len(t) - len(unit)]) * _SUFFIX[unit]
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            self._refuse(text, "is not a size in bytes")
        if value < self.minimum:
            self._refuse(text, f"is below the minimum of {size_text(self.minimum)}")
        if value > self.maximum:
            self._refuse(text, f"is above the maximum of {size_text(self.maximum)}")
        return int(value)

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, None when unset (or empty, where empty is unset)."""
        text = (os.environ if environ is None else environ).get(self.name)
        if text is None or (self.empty is None and not text.strip()):
            return None
        return text

    def read(self, environ: Mapping[str, str] | None = None):
        """The parsed value (None when unset); an :class:`EnvError` for a value not accepted."""
        text = self.raw(environ)
        return None if text is None else self.parse(text)

    def setting(self, environ: Mapping[str, str] | None = None) -> str | None:
        """``NAME=value`` as set (None when unset), for a message citing a limit it sets."""
        text = self.raw(environ)
        return None if text is None else f"{self.name}={text.strip()}"


MAX_BINDING = EnvVar(
    "WGSL_SPLAT_MAX_BINDING", "bytes",
    "the max-storage-buffer-binding-size asked of the device instead of the adapter's, rounded "
    "down to 256 bytes (a debug option: data spanning several bindings runs at a size a test can "
    "afford); the minimum holds a few pages of the smallest state",
    unset="the adapter's limit (under a device profile, the stricter of the two)",
    minimum=64 * KIB, maximum=PIB)
DEVICE_MEMORY = EnvVar(
    "WGSL_SPLAT_DEVICE_MEMORY", "bytes",
    "the device memory the trainer and the renderer may fill (WebGPU does not tell an adapter's)",
    unset="half of the host's physical memory on a CPU adapter; on a GPU no budget (growth asks "
          "the driver)",
    minimum=64 * KIB, maximum=PIB)
DEVICE_PROFILE = EnvVar(
    "WGSL_SPLAT_DEVICE_PROFILE", "choice",
    "expose only the optional features and limits of a platform (gpu/profiles.py PROFILES, "
    "docs/portability.md)",
    unset="full: everything the adapter offers",
    choices=("full", "webgpu", "metal-apple7", "dx12"))
SENTINELS = EnvVar(
    "WGSL_SPLAT_SENTINELS", "choice",
    "a debug mode: every storage buffer of a GPU buffer pool gets a tail of sentinel words beyond "
    "its size, inside every read-write binding of it, and the training step checks the tails "
    "after each step (and a buffer's when it is freed or re-made), naming a buffer written past "
    "its end (gpu/pool.py)",
    unset="off: no tails, no checks",
    choices=("off", "on"))
DXC = EnvVar(
    "WGSL_SPLAT_DXC", "path",
    "the dxcompiler.dll wgpu's DX12 backend compiles with (Windows)",
    unset="a dxcompiler.dll in wgpu-py's resources folder, else FXC",
    empty="FXC")
CACHE = EnvVar(
    "WGSL_SPLAT_CACHE", "path",
    "the folder of the cache of decoded, downscaled images when the dataset's folder is not "
    "writable",
    unset="the user's cache folder (XDG_CACHE_HOME, ~/Library/Caches, LOCALAPPDATA) / wgsl_splat")
PORTABILITY_TOOLS = EnvVar(
    "WGSL_SPLAT_PORTABILITY_TOOLS", "path",
    "the folder of the portability check's tools (the npm webgpu and naga-wasm packages, "
    "hlslc.exe and its Wine prefix)",
    unset=".portability/ in the repository")

#: every variable the package reads, by name
VARIABLES = {v.name: v for v in (MAX_BINDING, DEVICE_MEMORY, DEVICE_PROFILE, SENTINELS, DXC,
                                 CACHE, PORTABILITY_TOOLS)}


def describe() -> str:
    """One paragraph per variable: name, what it takes, what it means, what unset means."""
    return "\n".join(f"{v.name}: {v.accepts()}. {v.meaning[0].upper()}{v.meaning[1:]}. "
                     f"Unset: {v.unset}." for v in VARIABLES.values())


if __name__ == "__main__":  # pragma: no cover
    print(describe())
