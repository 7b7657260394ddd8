"""Device buffers that live across renders, sized by capacity; cached bind groups.

Every buffer has a name. ``pool.get(name, nbytes)`` returns the existing buffer when it is big
enough, otherwise creates a bigger one (at least ``growth`` × the old size, never shrinking) and
bumps the name's *generation*; bind groups are cached by (layout, buffers, generations), so a
regrown buffer invalidates exactly the bind groups that referenced it.

Counters (``buffers_created``, ``bytes_allocated``, ``current_bytes``, ``peak_bytes``,
``bind_groups_created``, ``readbacks``, ``readback_bytes``) let tests assert that steady-state
renders allocate nothing and read nothing back; :attr:`BufferPool.peak_sizes` is every buffer's
size at the moment of the peak (the per-buffer memory report of ``bench``).

A buffer is bound whole unless its user binds windows of it (``(name, offset, size)`` entries of
:meth:`BufferPool.bind_group`): ``get`` refuses a buffer beyond one storage binding unless asked
with ``windowed=True`` (then the adapter's largest buffer bounds it). ``exact=True`` sizes a
buffer to the request (rounded to 256 bytes) instead of growing it geometrically, shrinking it
too: per-Gaussian buffers are re-made at each densification round, where 1.5x slack would be
memory for nothing. Read-backs go through one staging buffer of at most
:data:`STAGING_CHUNK` bytes, in chunks, so reading the whole state back (a checkpoint) adds no
state-sized copy to the device's memory.

**Sentinel tails** (a debug mode: ``sentinels=True``, by default ``WGSL_SPLAT_SENTINELS=on``).
Every storage buffer gets :data:`SENTINEL_BYTES` more than its size, filled with
:data:`SENTINEL_WORD`, and a read-write binding of the whole buffer covers the tail too: a kernel
that writes past its data (a padding invocation without a bound) then writes into the tail on
every backend, where Vulkan would drop the write and Metal clamp it onto the binding's last
element, real data. :meth:`BufferPool.check_sentinels` reads every tail back and raises
:class:`SentinelError` naming each buffer whose tail changed (the training step calls it after
each step); a buffer's tail is also checked when the buffer is freed or replaced. The sizes, windows, read-backs and counters are those of
the buffers without their tails. Off, nothing is added.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..env import size_text
from .runtime import GpuContext, GpuError, GpuOutOfMemoryError, sentinels_on

_ALIGN = 256
#: the largest staging (MAP_READ) buffer; bigger read-backs go in chunks of this size
STAGING_CHUNK = 4 << 20
#: the sentinel mode's tail (bytes: a write up to 256 bytes past a buffer's end lands in it) and
#: the word that fills it
SENTINEL_BYTES = 256
SENTINEL_WORD = 0xDEADBEEF
_SENTINEL_TAIL = np.full(SENTINEL_BYTES // 4, SENTINEL_WORD, np.uint32)


class SentinelError(GpuError):
    """A buffer's sentinel tail changed: something wrote past the buffer's size."""


def _wgpu():
    import wgpu  # noqa: PLC0415

    return wgpu


def buffer_usage(*names: str) -> int:
    """``wgpu.BufferUsage`` flags by name, e.g. ``buffer_usage("UNIFORM", "COPY_DST")``."""
    u = 0
    for n in names:
        u |= getattr(_wgpu().BufferUsage, n)
    return u


UNIFORM_USAGE = ("UNIFORM", "COPY_DST")     # parameter blocks the host rewrites


def _round_up(n: int, a: int = _ALIGN) -> int:
    return max(a, (int(n) + a - 1) // a * a)


@dataclass
class _Entry:
    buffer: object
    size: int
    usage: int
    generation: int
    tail: int = 0           # sentinel bytes after ``size`` (the sentinel mode)


class BufferPool:
    def __init__(self, ctx: GpuContext, growth: float = 1.5, *,
                 sentinels: bool | None = None) -> None:
        if not 1.0 < growth <= 4.0:
            raise ValueError("growth must be in (1, 4]")
        self.ctx = ctx
        self.growth = growth
        #: bytes of sentinel tail per storage buffer (0: the mode is off)
        self.sentinel_bytes = SENTINEL_BYTES if (
            sentinels_on() if sentinels is None else sentinels) else 0
        self._sentinel_staging = None
        self._entries: dict[str, _Entry] = {}
        self._bind_groups: dict = {}
        self.buffers_created = 0
        self.bytes_allocated = 0
        self.current_bytes = 0
        self.peak_bytes = 0
        self.peak_sizes: dict[str, int] = {}
        self.bind_groups_created = 0
        self.readbacks = 0
        self.readback_bytes = 0

    # -- buffers ------------------------------------------------------------------------------------
    @staticmethod
    def default_usage() -> int:
        return buffer_usage("STORAGE", "COPY_SRC", "COPY_DST")

    def get(self, name: str, nbytes: int, usage: int | None = None, *,
            keep_contents: bool = False, exact: bool = False, windowed: bool = False):
        """The buffer ``name`` with room for at least ``nbytes`` bytes (grown if needed; with
        ``exact``, of exactly that size rounded to 256 bytes, re-made when it differs)."""
        usage = self.default_usage() if usage is None else int(usage)
        entry = self._entries.get(name)
        # A buffer bound whole may not outgrow one binding; growing by the growth factor stops at
        # that limit (lavapipe died near 0.45M Gaussians by overshooting). Windowed buffers are
        # bound in parts of at most one binding each: the adapter's largest buffer bounds them.
        limit = self.ctx.max_buffer_bytes if windowed else self.ctx.max_binding_bytes
        cap = limit - limit % _ALIGN

        def sized(n: int) -> int:
            return max(min(_round_up(n), cap), _round_up(n, 4))

        if entry is not None and (entry.usage & usage) == usage and (
                entry.size == sized(nbytes) if exact else entry.size >= nbytes):
            return entry.buffer
        if nbytes > limit:
            what, lim = (("makes buffers of at most", "max-buffer-size") if windowed else
                         ("binds at most", "max-storage-buffer-binding-size"))
            setting = None if windowed else getattr(self.ctx, "binding_setting", None)
            raise GpuOutOfMemoryError(
                f"buffer {name!r} needs {size_text(nbytes)}; this adapter {what} "
                f"{size_text(limit)} ({lim}{f', set by {setting}' if setting else ''})")
        size = _round_up(nbytes)
        if entry is not None:
            if not exact:
                size = max(size, _round_up(int(entry.size * self.growth)))
            usage |= entry.usage
        size = max(min(size, cap), _round_up(nbytes, 4))
        wgpu = _wgpu()
        if keep_contents and entry is not None:
            usage |= wgpu.BufferUsage.COPY_DST
        tail = 0
        if self.sentinel_bytes and usage & wgpu.BufferUsage.STORAGE and \
                size + self.sentinel_bytes <= self.ctx.max_buffer_bytes:
            tail = self.sentinel_bytes
            usage |= wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        with self.ctx.guard(f"allocating buffer {name!r} of {size} bytes"):
            buf = self.ctx.device.create_buffer(size=size + tail, usage=usage, label=name)
            if tail:
                self.ctx.queue.write_buffer(buf, size, _SENTINEL_TAIL[:tail // 4])
        self.buffers_created += 1
        self.bytes_allocated += size
        self.current_bytes += size
        generation = 0
        if entry is not None:
            generation = entry.generation + 1
            if keep_contents:
                enc = self.ctx.device.create_command_encoder()
                enc.copy_buffer_to_buffer(entry.buffer, 0, buf, 0, min(entry.size, size))
                self.ctx.queue.submit([enc.finish()])
        self._note_peak(name, size, entry)
        self._entries[name] = _Entry(buf, size, usage, generation, tail)
        if entry is not None:
            self._release(name, entry)
        return buf

    def _note_peak(self, name: str, size: int, replaced: _Entry | None) -> None:
        """Record the peak of ``current_bytes`` (which already counts the new buffer of ``name``
        beside the one it replaces) and every buffer's size at that moment."""
        if self.current_bytes > self.peak_bytes:
            self.peak_bytes = self.current_bytes
            sizes = {n: e.size for n, e in self._entries.items()}
            if replaced is not None:      # both exist for a moment: the copy of the old contents
                sizes[f"{name} (being replaced)"] = replaced.size
            sizes[name] = size
            self.peak_sizes = sizes

    def adopt(self, name: str, source: str) -> None:
        """Make ``source``'s buffer the buffer ``name`` (the old one freed): a row operation
        writes a state array's new rows into a fresh buffer and adopts it under the array's name.
        Bind groups of either name are invalidated (the generation grows)."""
        src = self._entries.pop(source)
        self._bind_groups = {k: v for k, v in self._bind_groups.items() if source not in k[2]}
        old = self._entries.get(name)
        generation = 0
        if old is not None:
            generation = old.generation + 1
        self._entries[name] = _Entry(src.buffer, src.size, src.usage,
                                     max(generation, src.generation + 1), src.tail)
        if old is not None:
            self._release(name, old)

    def _release(self, name: str, entry: _Entry) -> None:
        self._bind_groups = {k: v for k, v in self._bind_groups.items() if name not in k[2]}
        self.current_bytes -= entry.size
        try:
            if entry.tail:    # its last chance: the buffer is gone after this
                self._check_tails([(name, entry)])
        finally:
            try:
                entry.buffer.destroy()
            except Exception:  # noqa: BLE001
                pass

    def __getitem__(self, name: str):
        return self._entries[name].buffer

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def size(self, name: str) -> int:
        return self._entries[name].size

    def generation(self, name: str) -> int:
        return self._entries[name].generation

    def names(self) -> list[str]:
        return sorted(self._entries)

    def free(self, name: str) -> None:
        entry = self._entries.pop(name, None)
        if entry is not None:
            self._release(name, entry)

    def clear(self) -> None:
        for name in list(self._entries):
            self.free(name)

    def encode_clear(self, enc, name: str) -> None:
        """Record the zeroing of buffer ``name`` into command encoder ``enc`` (its size: a
        sentinel tail is not data)."""
        entry = self._entries[name]
        enc.clear_buffer(entry.buffer, 0, entry.size)

    # -- sentinel tails -----------------------------------------------------------------------------
    def sentinel_names(self) -> list[str]:
        """The buffers that have a sentinel tail (none unless the mode is on)."""
        return sorted(n for n, e in self._entries.items() if e.tail)

    def check_sentinels(self) -> int:
        """Read every sentinel tail back (one copy per tail, one submit and map per 4 MiB of
        tails, not counted as read-backs) and raise :class:`SentinelError` naming each buffer
        whose tail changed; returns the number of tails checked (0 with the mode off)."""
        tails = [(n, e) for n, e in sorted(self._entries.items()) if e.tail]
        per = STAGING_CHUNK // SENTINEL_BYTES
        for first in range(0, len(tails), per):
            self._check_tails(tails[first:first + per])
        return len(tails)

    def _check_tails(self, tails: list) -> None:
        wgpu = _wgpu()
        nbytes = sum(e.tail for _, e in tails)
        staging = self._sentinel_staging
        if staging is None or staging.size < nbytes:
            size = max(_round_up(nbytes), 64 * SENTINEL_BYTES)
            with self.ctx.guard("allocating the sentinel check's staging buffer"):
                staging = self.ctx.device.create_buffer(
                    size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST,
                    label="__sentinel_staging")
            self._sentinel_staging = staging
        with self.ctx.guard("reading the sentinel tails back"):
            enc = self.ctx.device.create_command_encoder(label="sentinel tails")
            at = 0
            for _, e in tails:
                enc.copy_buffer_to_buffer(e.buffer, e.size, staging, at, e.tail)
                at += e.tail
            self.ctx.queue.submit([enc.finish()])
            staging.map_sync("READ", 0, nbytes)
            try:
                words = np.frombuffer(bytes(staging.read_mapped(0, nbytes, copy=True)), np.uint32)
            finally:
                staging.unmap()
        bad, at = [], 0
        for name, e in tails:
            got = words[at // 4:(at + e.tail) // 4]
            at += e.tail
            hit = np.flatnonzero(got != SENTINEL_WORD)
            if hit.size:
                bad.append(f"{name!r} ({hit.size} of {got.size} words, the first at byte "
                           f"{e.size + 4 * hit[0]}: 0x{int(got[hit[0]]):08x})")
        if bad:
            raise SentinelError(f"written past the end of buffer{'s' * (len(bad) > 1)} "
                                f"{', '.join(bad)}: a kernel wrote beyond its data (the "
                                f"{self.sentinel_bytes}-byte sentinel tails, "
                                f"WGSL_SPLAT_SENTINELS)")

    # -- data movement ------------------------------------------------------------------------------
    def write(self, name: str, data, offset: int = 0) -> None:
        arr = np.ascontiguousarray(data)
        if arr.dtype.names:   # a WGSL struct (shaders.struct_dtype): its bytes
            arr = arr.reshape(-1).view(np.uint8)
        nbytes = arr.nbytes
        if nbytes == 0:
            return
        if nbytes % 4:
            arr = np.frombuffer(arr.tobytes() + b"\0" * (4 - nbytes % 4), np.uint8)
        with self.ctx.guard(f"writing {nbytes} bytes to buffer {name!r}"):
            self.ctx.queue.write_buffer(self._entries[name].buffer, offset, arr)

    def staging(self, nbytes: int):
        """The pooled MAP_READ buffer used for read-backs (grown like any other buffer, up to
        :data:`STAGING_CHUNK`; larger reads go in chunks)."""
        u = _wgpu().BufferUsage
        if nbytes > STAGING_CHUNK:
            raise ValueError(f"a staging copy of {nbytes} bytes: read in chunks of {STAGING_CHUNK}")
        # small reads (counts, losses) grow it as usual; a large one takes the whole chunk at once
        want = nbytes if nbytes <= STAGING_CHUNK // 8 else STAGING_CHUNK
        return self.get("__readback_staging", want, u.MAP_READ | u.COPY_DST, windowed=True)

    def map_staging(self, nbytes: int) -> bytes:
        """Wait for the staging buffer's copy (already submitted) and return its first bytes."""
        buf = self["__readback_staging"]
        with self.ctx.guard("reading results back from the GPU"):
            buf.map_sync("READ", 0, _round_up(nbytes, 4) if nbytes < buf.size else buf.size)
            try:
                data = bytes(buf.read_mapped(0, nbytes, copy=True)) if nbytes else b""
            finally:
                buf.unmap()
        self.readbacks += 1
        self.readback_bytes += nbytes
        return data

    def read(self, name: str, nbytes: int | None = None, offset: int = 0) -> bytes:
        """Blocking read-back of ``nbytes`` of buffer ``name`` (one copy + submit + map per chunk
        of at most :data:`STAGING_CHUNK` bytes)."""
        entry = self._entries[name]
        if nbytes is None:
            nbytes = entry.size - offset
        parts = []
        done = 0
        while True:
            n4 = min(_round_up(nbytes - done, 4), STAGING_CHUNK)
            staging = self.staging(n4)
            enc = self.ctx.device.create_command_encoder()
            enc.copy_buffer_to_buffer(entry.buffer, offset + done, staging, 0, n4)
            self.ctx.queue.submit([enc.finish()])
            parts.append(self.map_staging(n4)[:nbytes - done])
            done += n4
            if done >= nbytes:
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_array(self, name: str, dtype, count: int, offset: int = 0) -> np.ndarray:
        dtype = np.dtype(dtype)
        return np.frombuffer(self.read(name, dtype.itemsize * count, offset), dtype).copy()

    # -- bind groups --------------------------------------------------------------------------------
    def bind_group(self, module, group: int, entries: dict):
        """Cached bind group for ``module``'s layout ``group``.

        ``entries`` maps the WGSL variable name of every binding of the group (``var<storage,
        read> params: ...`` -> ``"params"``) to a buffer name, or to (name, offset, size) for a
        sub-range (dynamic uniform slots use size = slot size). A missing or unknown variable is an
        error, so a shader and its host code cannot silently disagree on a binding.
        """
        slots = module.binding_slots(group)
        unknown = sorted(map(str, set(entries) - set(slots)))
        missing = sorted(set(slots) - set(entries))
        if unknown or missing:
            raise KeyError(f"shaders/{module.source.name}.wgsl group {group}: "
                           + "; ".join(f"{what} {', '.join(map(str, v))}" for what, v in
                                       (("no binding named", unknown), ("unbound", missing)) if v))
        norm = []
        for var, spec in entries.items():
            name, off, size = (spec, 0, None) if isinstance(spec, str) else spec
            norm.append((slots[var], name, off, size))
        norm.sort()
        names = tuple(n for _, n, _, _ in norm)
        key = (id(module.layouts[group]), tuple((b, n, o, s, self._entries[n].generation)
                                                 for b, n, o, s in norm), names)
        bg = self._bind_groups.get(key)
        if bg is None:
            res = []
            kinds = module.binding_kinds(group) if self.sentinel_bytes else {}
            for b, n, o, s in norm:
                e = self._entries[n]
                size = (e.size - o) if s is None else s
                # the sentinel mode: a read-write binding of the whole buffer covers its tail
                if s is None and e.tail and kinds[b] == ("storage", False) and \
                        size + e.tail <= self.ctx.max_binding_bytes:
                    size += e.tail
                r = {"buffer": e.buffer, "offset": o, "size": size}
                res.append({"binding": b, "resource": r})
            with self.ctx.guard(f"creating a bind group for shaders/{module.source.name}.wgsl "
                                f"group {group} ({', '.join(names)})"):
                bg = self.ctx.device.create_bind_group(layout=module.layouts[group], entries=res)
            self._bind_groups[key] = bg
            self.bind_groups_created += 1
        return bg

    def report(self) -> list[tuple[str, int]]:
        """(name, bytes) of the buffers held at the peak, largest first (``bench``'s memory per
        buffer)."""
        return sorted(self.peak_sizes.items(), key=lambda kv: (-kv[1], kv[0]))

    def counters(self) -> dict:
        return {k: getattr(self, k) for k in ("buffers_created", "bytes_allocated", "current_bytes",
                                              "peak_bytes", "bind_groups_created", "readbacks",
                                              "readback_bytes")}
