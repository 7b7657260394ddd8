"""The per-Gaussian state in pages that each fit one storage binding (docs/design.md §3).

WebGPU binds a storage buffer, or a window of one, of at most ``max-storage-buffer-binding-size``
bytes (128 MiB on lavapipe and in the WebGPU baseline: 570 000 Gaussians of SH degree 3). The
state is therefore kept in **pages** of :attr:`Paging.rows` Gaussians:

- the arrays with a row of ``4·(11 + 3K)`` bytes — parameters, Adam moments, gradients — and the
  statistics are one buffer per page, each in the flat layout of its own row count (means 3n |
  log-scales 3n | quats 4n | opacity n | SH 3Kn, statistics one plane of n floats each): page 0
  of ``params`` is the pool buffer ``params``, page p > 0 ``params@p``. With one page this is the
  layout of a single buffer, unchanged;
- the per-Gaussian kernels (projection and its backward pass, Adam, the row operations, the 3D
  filter) run once per page with the page's row count and offsets in their uniforms and the rows'
  window of every per-row buffer (``splats``, ``rects``, the sort's keys, ``filter3d``,
  ``grad2d``) bound at the page's first row: a binding may be a window of a larger buffer;
- the kernels that reach a splat by its id — emission, rasterisation and its backward pass — bind
  the splat records and their screen-space gradients in two buffers, ids below :attr:`Paging.split`
  in ``splats``/``grad2d`` and the others in ``splats_hi``/``grad2d_hi`` (a page never straddles
  the split). Their storage bindings are the limit here: raster backward uses all eight WebGPU
  allows (the last contributor and the final transmittance share one buffer for that).

:class:`PagedArrays` is that storage on one device: N and K, and the pages of each array, which
the renderer, the backward pass, Adam and the row operations bind (the training step owns it;
a renderer alone makes its own). So N is bounded by the device's memory, and by two bindings of 48-byte splat records: 4.5 M
Gaussians at 128 MiB bindings (SH degree 3), hundreds of millions on GPUs with 2-4 GiB bindings.
Pages start at multiples of :data:`ROW_ALIGN` rows, so every window of 4-byte rows is aligned as
WebGPU requires (256 bytes) and a page's workgroups of 256 threads start at a whole workgroup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import PARAM_FLOATS, param_offsets, sh_degree_from_coeffs
from .runtime import GpuError

ROW_ALIGN = 256            # rows: a page's first row is a multiple (256 B windows of 4-byte rows)
SPLAT_BYTES = 48           # sizeof(Splat2D), as grad2d's 12 floats
RECT_BYTES = 16            # the tile rectangle of a splat (vec4<u32>), bound whole by emission


class ModelTooLargeError(GpuError):
    """The model has more Gaussians than the adapter's memory or its splat bindings hold."""


@dataclass(frozen=True)
class Page:
    index: int
    base: int              # first row
    count: int             # rows


def page_name(name: str, p: int) -> str:
    """The pool name of page ``p`` of the paged array ``name``."""
    return name if p == 0 else f"{name}@{p}"


def row_bytes(sh_coeffs: int) -> int:
    """Bytes of one row of the parameters (and of each Adam moment and the gradients)."""
    return 4 * (PARAM_FLOATS + 3 * int(sh_coeffs))


@dataclass(frozen=True)
class Paging:
    """How N rows of a state with ``sh_coeffs`` SH coefficients split into pages on an adapter
    whose bindings hold ``binding`` bytes (``rows`` per page, ``split`` rows in the first splat
    buffer)."""

    binding: int
    sh_coeffs: int

    @property
    def rows(self) -> int:
        rows = self.binding // max(row_bytes(self.sh_coeffs), SPLAT_BYTES) // ROW_ALIGN * ROW_ALIGN
        if rows < ROW_ALIGN:
            raise GpuError(f"storage bindings of {self.binding} bytes hold fewer than {ROW_ALIGN} "
                           f"Gaussians at {self.sh_coeffs} SH coefficients")
        return rows

    @property
    def split(self) -> int:
        """Rows of the first splat buffer: whole pages, as many as one binding holds."""
        return self.rows * max(1, self.binding // (SPLAT_BYTES * self.rows))

    @property
    def max_rows(self) -> int:
        """The most Gaussians the bindings reach: two splat buffers, and the buffers emission and
        the depth sort bind whole (rectangles, 16 bytes a row)."""
        return min(2 * self.split, self.binding // RECT_BYTES)

    def pages(self, n: int) -> list[Page]:
        rows = self.rows
        return [Page(p, base, min(rows, n - base)) for p, base in enumerate(range(0, n, rows))]

    def count(self, n: int) -> int:
        return -(-int(n) // self.rows)

    def splat_window(self, name: str, page: Page, record: int = SPLAT_BYTES) -> tuple:
        """The binding of ``page``'s rows of the two-buffer array ``name`` (splats, grad2d)."""
        if page.base < self.split:
            return (name, record * page.base, record * max(page.count, 1))
        return (f"{name}_hi", record * (page.base - self.split), record * max(page.count, 1))


def row_window(name: str, page: Page, record: int) -> tuple:
    """The binding of ``page``'s rows of the one-buffer per-row array ``name``."""
    return (name, record * page.base, record * max(page.count, 1))


# the pool names of the paged arrays: parameters, statistics, gradients, Adam's moments
PARAMS, STATS, GRADS, MOMENTS = "params", "stats", "grads", ("adam_m", "adam_v")


class PagedArrays:
    """The per-Gaussian storage of one device: N rows (and K SH coefficients), each array a pool
    buffer per page. Parameters, Adam moments and gradients have rows of :func:`row_bytes` in each
    page's flat layout; the statistics one plane per statistic in each page. The renderer, the
    backward pass, Adam and the state's row operations bind the pages this holds."""

    def __init__(self, pool, binding: int) -> None:
        self.pool = pool
        self.binding = int(binding)
        self.num = 0
        self.sh_coeffs = 1
        self.paging = Paging(self.binding, 1)
        self.pages: list[Page] = []
        self.offsets = (0, 0, 0, 0)

    @property
    def sh_degree(self) -> int:
        return sh_degree_from_coeffs(self.sh_coeffs)

    @property
    def num_params(self) -> int:
        """Floats of the parameters (all pages)."""
        return self.offsets[3] + self.num * self.sh_coeffs * 3 if self.num else 0

    def resize(self, n: int, k: int) -> None:
        """Adopt ``n`` rows of ``k`` SH coefficients: the pages, the flat offsets and the
        parameters' pages (kept, contents and all, where their size is unchanged)."""
        self.num = int(n)
        self.sh_coeffs = int(k)
        self.paging = Paging(self.binding, self.sh_coeffs)
        self.pages = self.paging.pages(self.num)
        self.offsets = param_offsets(self.num)
        self.alloc(PARAMS)

    def alloc(self, name: str, record: int | None = None, pages: list[Page] | None = None) -> None:
        """Make the pages of array ``name`` exactly the size of ``pages`` (default: the current
        rows' pages) with ``record`` bytes a row (default: a parameter row); pages of that size
        are kept, contents and all, and the pages beyond are freed."""
        record = row_bytes(self.sh_coeffs) if record is None else int(record)
        pages = (self.pages if pages is None else pages) or [Page(0, 0, 0)]
        for page in pages:
            self.pool.get(page_name(name, page.index), record * max(page.count, 1), exact=True)
        self.free_from(name, len(pages))

    def free_from(self, name: str, first: int) -> None:
        """Free the pages of array ``name`` from page ``first`` on."""
        p = first
        while page_name(name, p) in self.pool:
            self.pool.free(page_name(name, p))
            p += 1

    def page_names(self, name: str) -> list[str]:
        """The pool names of the pages array ``name`` has now."""
        out = []
        while page_name(name, len(out)) in self.pool:
            out.append(page_name(name, len(out)))
        return out

    def write(self, name: str, model) -> None:
        """Write the rows of ``model`` (a GaussianModel) into the pages of ``name``, each page
        in its own flat layout."""
        arrays = [model.means, model.log_scales, model.quats, model.opacity_logits, model.sh]
        for page in self.pages:
            sl = slice(page.base, page.base + page.count)
            flat = np.concatenate([np.asarray(a[sl], np.float32).ravel() for a in arrays])
            self.pool.write(page_name(name, page.index), flat)

    def read(self, name: str):
        """The rows of ``name`` as a GaussianModel (blocking reads, page by page)."""
        from ..model import GaussianModel  # noqa: PLC0415
        from .adam import ParamLayout  # noqa: PLC0415

        k = self.sh_coeffs
        parts = [ParamLayout.unpack(self.pool.read_array(page_name(name, p.index), np.float32,
                                                         row_bytes(k) // 4 * p.count), p.count, k)
                 for p in self.pages]
        if not parts:
            return ParamLayout.unpack(np.zeros(0, np.float32), 0, k)
        return GaussianModel(*(np.concatenate([getattr(m, f) for m in parts])
                               for f in ("means", "log_scales", "quats", "opacity_logits", "sh")))

    def write_planes(self, name: str, planes: np.ndarray) -> None:
        """Write ``planes`` (S, N) into the pages of ``name``: each page its rows of every
        plane, plane by plane."""
        for page in self.pages:
            sl = slice(page.base, page.base + page.count)
            self.pool.write(page_name(name, page.index), np.ascontiguousarray(planes[:, sl]))

    def read_planes(self, name: str, planes: int) -> np.ndarray:
        """(S, N) float32: the ``planes`` planes of ``name`` (blocking reads, page by page)."""
        parts = [self.pool.read_array(page_name(name, p.index), np.float32,
                                      planes * p.count).reshape(planes, p.count)
                 for p in self.pages]
        return np.concatenate(parts, axis=1) if parts else np.zeros((planes, 0), np.float32)
