"""The GPU path's training state: the per-Gaussian arrays stay in device buffers and the row
operations edit them there (:mod:`wgsl_splat.contract.state`; NumPy semantics:
:mod:`wgsl_splat.reference.rows`).

Buffers (the step's pool), paged (:mod:`.pages`: page p of ``params`` is ``params@p``, each page
in the flat layout of its own rows): ``params``, ``adam_m``, ``adam_v`` (means 3n | log-scales 3n
| quats 4n | opacity n | SH 3Kn) and ``stats`` (one plane of n floats per statistic the strategy
declared, in its order).

An edit is a row table in ``state_table`` (built on the device by ``grow.wgsl`` from a strategy's
decision, by ``relocation.wgsl``, or uploaded by a test) applied by ``state_rows.wgsl`` to each
array into new pages of exactly the new row count, which then become the array: one array at a
time, after the buffers that are rebuilt at every step anyway (the splats, their gradients and
rectangles, the depth sort's, the gradients of a batched step) were freed, so an edit never needs
more device memory than the state it leaves behind or the step before it. What comes back to the
host is a handful of counts (how many rows the new layout has), and, when the room of a grow
binds, each row's cost and the statistics its ranking reads.
"""

from __future__ import annotations

import math

import numpy as np

from ..contract import rows
from ..contract.state import (
    GrowReport,
    HostArrays,
    RowDecision,
    RowEdit,
    RowTable,
    TrainState,
    budget,
)
from ..contract.statistics import resolve
from ..model import inverse_sigmoid, param_offsets
from . import kernels
from .pages import MOMENTS, PARAMS, STATS, Page, page_name, row_bytes
from .pool import UNIFORM_USAGE, buffer_usage
from .sort import PrefixScan, grid_2d

TABLE, RELOCATED = "state_table", "state_relocated"
PLAN, TALLIES = "state_plan", "state_tallies"
RANK_KEYS, RANK_HIST, RANK_CUT = "state_rank_keys", "state_rank_hist", "state_rank_cut"
SLOT = 256                       # bytes per dynamic uniform slot of the row operation


class DeviceState(TrainState):
    def __init__(self, step, stat_names) -> None:
        self.step = step
        self.stat_names = tuple(stat_names)
        self.statistics = resolve(self.stat_names)
        self.ctx, self.pool, self.lib = step.ctx, step.pool, step.lib
        self._rows = kernels.STATE_ROWS.variant().module(self.lib)
        self._reset = kernels.OPACITY_RESET.variant(step.render_config).module(self.lib)
        self._reloc = kernels.RELOCATION.variant().module(self.lib)
        self._rank_module = None         # rank.wgsl, compiled when a round's growth is first capped
        max_segments = self._rows.constant("MAX_SEGMENTS")
        if len(self.stat_names) > max_segments:
            raise ValueError(f"at most {max_segments} statistics, got {self.stat_names}")
        self.scan = PrefixScan(self.lib, self.pool, "state")
        self._row_dtype = self._rows.struct_dtype("RowParams", stride=SLOT)
        self._row_bytes = self._rows.struct_dtype("RowParams").itemsize
        self._u = {}
        for name, module, struct in (("reset", self._reset, "ResetParams"),
                                     ("reloc", self._reloc, "RelocateParams"),
                                     ("perturb", self._reloc, "RelocateParams")):
            self._u[name] = np.zeros((), module.struct_dtype(struct))
            self.pool.get(f"state_u_{name}", self._u[name].nbytes, buffer_usage(*UNIFORM_USAGE))
        for name in (RELOCATED, TABLE, "state_allowed", "state_weights", "state_sources", PLAN,
                     RANK_KEYS):
            self.pool.get(name, 8)
        self.pool.get("state_sigmoid", rows.SIGMOID_TABLE.nbytes)
        self.pool.write("state_sigmoid", rows.SIGMOID_TABLE)
        self.pool.get("state_counts", 8)
        self.pool.get(TALLIES, 32)
        self.scan.configure(1)           # its buffers exist from the start (bind groups)

    # -- sizes ----------------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.step.arrays.num

    @property
    def k(self) -> int:
        return self.step.arrays.sh_coeffs

    @property
    def pages(self) -> list[Page]:
        return self.step.arrays.pages

    def _groups(self, module, entry: str, n: int) -> tuple[int, int]:
        """The 2D grid of workgroups of ``entry`` for ``n`` threads (its size read from the WGSL)."""
        return grid_2d(-(-max(n, 1) // module.workgroup_size(entry)[0]))

    def _write(self, name: str, page: Page | None = None, u=None) -> str:
        """Write uniform ``name`` (of page ``page``: its own buffer) and return its pool name."""
        u = self._u[name] if u is None else u
        pool_name = f"state_u_{name}" if page is None else page_name(f"state_u_{name}", page.index)
        self.pool.get(pool_name, u.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write(pool_name, u)
        return pool_name

    def _submit(self, what: str, encode) -> None:
        with self.ctx.guard(what):
            enc = self.ctx.device.create_command_encoder(label=what)
            encode(enc)
            self.ctx.queue.submit([enc.finish()])

    def _read_u32(self, parts: list[tuple[str, int]], encode=None) -> np.ndarray:
        """Run ``encode`` (into a fresh encoder), then copy the u32 at each (buffer, index) into
        the staging buffer: one submit, one small blocking read."""
        staging = self.pool.staging(4 * len(parts))
        with self.ctx.guard("reading densification counts"):
            enc = self.ctx.device.create_command_encoder(label="state counts")
            if encode is not None:
                encode(enc)
            for j, (name, index) in enumerate(parts):
                enc.copy_buffer_to_buffer(self.pool[name], 4 * index, staging, 4 * j, 4)
            self.ctx.queue.submit([enc.finish()])
            data = self.pool.map_staging(4 * len(parts))
        return np.frombuffer(data, np.uint32).copy()

    # -- transfers and statistics ----------------------------------------------------------------------
    def download(self) -> HostArrays:
        return self.step._download()

    def upload(self, arrays: HostArrays) -> None:
        if tuple(arrays.stats) != self.stat_names:
            raise ValueError(f"statistics {tuple(arrays.stats)} given, this state keeps "
                             f"{self.stat_names}")
        self.step._upload(arrays)
        self.rows_version += 1

    def read_stats(self) -> dict[str, np.ndarray]:
        planes = self.step.backward.read_stats()
        return {name: planes[j].copy() for j, name in enumerate(self.stat_names)}

    def clear_stats(self) -> None:
        if self.stat_names:
            def clear(enc):
                for page in self.pages or [Page(0, 0, 0)]:
                    self.pool.encode_clear(enc, page_name(STATS, page.index))
            self._submit("clearing the statistics", clear)

    # -- the row table ----------------------------------------------------------------------------------
    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        """Apply a table given on the host (tests and tools; the operations below build theirs on
        the device)."""
        edit = edit or RowEdit()
        entries = np.stack([table.src.astype(np.uint32),
                            table.kind | (table.sample << np.uint32(8))], axis=1)
        self.pool.get(TABLE, max(entries.nbytes, 8))
        self.pool.write(TABLE, entries)
        if edit.relocated is not None:
            rel = np.ascontiguousarray(edit.relocated, np.float32)
            self.pool.get(RELOCATED, max(rel.nbytes, 8))
            self.pool.write(RELOCATED, rel)
        self._apply(len(table), key=edit.key, split_div=edit.split_scale_div)

    def _apply(self, n_out: int, *, key: int = 0, split_div: float = 1.6, prelude=None) -> None:
        """Rebuild every per-Gaussian array from ``state_table`` (``prelude(enc)`` first records
        the kernels that build it), then adopt ``n_out`` rows: each array's new pages are written
        from the old ones (one dispatch per pair of pages) and replace them, one array at a time."""
        step, k = self.step, self.k
        src_pages = list(self.pages)
        dst_pages = step.arrays.paging.pages(n_out)
        n_stats = len(self.stat_names)
        names = [PARAMS, *MOMENTS] + ([STATS] if n_stats else [])
        self.pool.get(TABLE, 8 * max(n_out, 1), keep_contents=prelude is None)
        step.release_transients()
        pairs = [(d, src) for d in dst_pages for src in src_pages]
        flat = np.zeros(max(len(pairs), 1), self._row_dtype)   # params, moments: the flat layout
        for j, (d, src) in enumerate(pairs):
            u = flat[j]
            u["n_out"], u["k"] = d.count, k
            u["x_groups"] = self._groups(self._rows, "apply_plain", d.count)[0]
            so, do = param_offsets(src.count), param_offsets(d.count)
            u["src_offs"], u["dst_offs"] = so, do
            u["log_split_div"] = math.log(split_div)
            u["key"] = np.uint32(key)
            u["src_base"], u["src_rows"], u["dst_base"] = src.base, src.count, d.base
            u["zero_new"] = int(src.index == 0)
            segs = [(0, 0, 3), (so[0], do[0], 3), (so[1], do[1], 4), (so[2], do[2], 1),
                    (so[3], do[3], 3 * k)]
            u["segments"] = len(segs)
            for g, (a, b, w) in enumerate(segs):
                u["seg"][g] = (a, b, w, 0)
        planes = flat.copy()                                 # statistics: one plane each
        planes["seg"] = 0
        planes["segments"] = n_stats
        for j, (d, src) in enumerate(pairs):
            for g in range(n_stats):
                planes[j]["seg"][g] = (g * src.count, g * d.count, 1, 0)
        for name, data in (("state_u_rows", flat), ("state_u_rows_stats", planes)):
            self.pool.get(name, data.nbytes, buffer_usage(*UNIFORM_USAGE))
            self.pool.write(name, data)
        pending = [prelude] if prelude is not None else []
        for name in names:
            record = 4 * max(n_stats, 1) if name == STATS else row_bytes(k)
            new = f"{name}~new"
            step.arrays.alloc(new, record, dst_pages)
            uniform = "state_u_rows_stats" if name == STATS else "state_u_rows"

            def encode(enc, name=name, new=new, uniform=uniform):
                while pending:
                    pending.pop()(enc)
                if not pairs:
                    return
                cpass = enc.begin_compute_pass(label=f"rows {name}")
                cpass.set_pipeline(self._rows.pipeline(
                    "apply_params" if name == PARAMS else "apply_plain"))
                for j, (d, src) in enumerate(pairs):
                    cpass.set_bind_group(0, self.pool.bind_group(self._rows, 0, {
                        "rp": (uniform, 0, self._row_bytes), "src": page_name(name, src.index),
                        "dst": page_name(new, d.index), "table": TABLE,
                        "relocated": RELOCATED}), [j * SLOT])
                    cpass.dispatch_workgroups(*self._groups(self._rows, "apply_plain", d.count))
                cpass.end()

            self._submit("applying a row table", encode)
            for d in dst_pages or [Page(0, 0, 0)]:
                self.pool.adopt(page_name(name, d.index), page_name(new, d.index))
            step.arrays.free_from(name, max(len(dst_pages), 1))
        self._adopt(n_out)

    def _adopt(self, n: int) -> None:
        """Everything sized by N follows the new count (nothing uploaded)."""
        step = self.step
        step.take_losses_into_buffer()
        with self.ctx.guard("resizing the training state"):
            step.resize(n)
        step._verify_capacity = True
        self.rows_version += 1

    # -- opacity reset -----------------------------------------------------------------------------------
    def reset_opacity(self, value: float) -> None:
        if not self.n:
            return
        r = self.step.renderer
        binds = []
        for page in self.pages:
            u = self._u["reset"].copy()
            groups = self._groups(self._reset, "reset_opacity", page.count)
            offs = param_offsets(page.count)
            u["n"], u["opacity"], u["x_groups"], u["log_scales"] = (page.count, offs[2], groups[0],
                                                                   offs[0])
            u["cap_logit"], u["cap"] = np.float32(inverse_sigmoid(value)), value
            name = self._write("reset", page, u)
            binds.append((self.pool.bind_group(self._reset, 0, {
                "rp": name, "params": page_name(PARAMS, page.index),
                "adam_m": page_name(MOMENTS[0], page.index),
                "adam_v": page_name(MOMENTS[1], page.index), "filter3d": r.filter_window(page)}),
                groups))

        def encode(enc):
            cpass = enc.begin_compute_pass(label="opacity reset")
            cpass.set_pipeline(self._reset.pipeline("reset_opacity"))
            for bg, groups in binds:
                cpass.set_bind_group(0, bg)
                cpass.dispatch_workgroups(*groups)
            cpass.end()

        self._submit("resetting opacities", encode)

    # -- grow ----------------------------------------------------------------------------------------------
    def _grow_module(self, decision: RowDecision):
        """``grow.wgsl`` with the decision's kernel and the accessors of this state's statistics
        (compiled once per decision class, rank statistic and statistics)."""
        return kernels.grow(self.statistics, decision.wgsl, decision.rank_stat).module(self.lib)

    def grow(self, decision: RowDecision, room: int) -> GrowReport:
        n = self.n
        module = self._grow_module(decision)
        gp = np.zeros((), module.struct_dtype("GrowParams"))
        dp = np.zeros((), module.struct_dtype("DecisionParams"))
        values = decision.params()
        missing = set(dp.dtype.names) - set(values)
        if missing:
            raise KeyError(f"{type(decision).__name__}.params() lacks {sorted(missing)}")
        for field, value in values.items():
            dp[field] = value
        self.pool.get("state_u_decision", dp.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write("state_u_decision", dp)
        self.pool.get(PLAN, 4 * max(4 * n, 1))
        self.pool.get("state_allowed", 4 * max(n, 1))
        self.pool.get(RANK_KEYS, 4 * max(n, 1))
        self.scan.configure(3 * n)
        gp["samples"], gp["scan_total"], gp["total"] = decision.split_samples, self.scan.blocks, n

        def uniforms(use_allowed: int) -> list:
            """Per page: (bind group, grid) of grow_decide; then grow_rows' over all rows."""
            gp["use_allowed"] = use_allowed
            out = []
            for page in self.pages:
                u = gp.copy()
                offs = param_offsets(page.count)
                groups = self._groups(module, "grow_decide", page.count)
                u["n"], u["base"], u["x_groups"] = page.count, page.base, groups[0]
                u["log_scales"], u["quats"], u["opacity"] = offs[0], offs[1], offs[2]
                out.append((bind(self._write("grow", page, u), page.index), groups))
            return out

        def bind(uniform: str, p: int):
            return self.pool.bind_group(module, 0, {
                "gp": uniform, "dp": "state_u_decision", "params": page_name(PARAMS, p),
                "stats": page_name(STATS, p), "allowed": "state_allowed", "plan": PLAN,
                "tallies": TALLIES, "table": TABLE, "scan_sums": self.scan.sums,
                "rank_keys": RANK_KEYS})

        def decide(enc, passes):
            self.pool.encode_clear(enc, TALLIES)
            cpass = enc.begin_compute_pass(label="grow: decide")
            if n:
                cpass.set_pipeline(module.pipeline("grow_decide"))
                for bg, groups in passes:
                    cpass.set_bind_group(0, bg)
                    cpass.dispatch_workgroups(*groups)
                self.scan.encode(cpass, PLAN)
            cpass.end()

        def counts(use_allowed: int) -> np.ndarray:
            passes = uniforms(use_allowed)
            parts = [(TALLIES, i) for i in range(5)]
            if n:   # the kept rows, kept rows + clones (the split section's start), all rows
                parts += [(PLAN, n), (PLAN, 2 * n), (self.scan.sums, self.scan.blocks)]
            got = self._read_u32(parts, lambda enc: decide(enc, passes))
            return got if n else np.concatenate([got, [0, 0, 0]])

        c = counts(0)
        room = self.step.room_for(n, min(int(c[4]), room))
        capped = int(c[4]) > room
        if capped and decision.ranked_on_device:     # rank.wgsl: nothing read back
            self._submit("ranking the rows that may grow", lambda enc: self._rank(enc, n, room))
            c = counts(1)
        elif capped:
            # rank the rows on the host as the NumPy path does (their costs and the statistics
            # the decision's score reads)
            cost = self.pool.read_array(PLAN, np.uint32, n, 4 * 3 * n)
            stats = self.read_stats()
            score = decision.score({k: stats[k] for k in decision.score_stats})
            self.pool.write("state_allowed", budget(score, cost, room).astype(np.uint32))
            c = counts(1)
        kept, kept_clones, total = int(c[5]), int(c[6]), int(c[7])
        split = total - kept_clones
        n_out = kept_clones + decision.split_samples * split
        self.pool.get(TABLE, 8 * max(n_out, 1))
        rows_u = gp.copy()      # grow_rows: every row at once (it reads only the plan)
        groups = self._groups(module, "grow_rows", n)
        rows_u["n"], rows_u["base"], rows_u["x_groups"] = n, 0, groups[0]
        rows_uniform = self._write("grow", None, rows_u)

        def build(enc):
            cpass = enc.begin_compute_pass(label="grow: rows")
            cpass.set_pipeline(module.pipeline("grow_rows"))
            cpass.set_bind_group(0, bind(rows_uniform, 0))
            cpass.dispatch_workgroups(*groups)
            cpass.end()

        self._apply(n_out, key=decision.key, split_div=decision.split_scale_div,
                    prelude=build if n else None)
        peak = float(np.array([c[3]], np.uint32).view(np.float32)[0])
        return GrowReport(n, n_out, kept, kept_clones - kept, split,
                          (int(c[0]), int(c[1]), int(c[2])), peak, bool(capped))

    def _rank(self, enc, n: int, room: int) -> None:
        """Record rank.wgsl: the rows of grow_decide's plan allowed to grow within ``room``
        (``budget`` by each row's rank key): four byte levels of the key, four of the index for
        the rows at the cut key, then ``state_allowed``."""
        if self._rank_module is None:
            self._rank_module = kernels.RANK.variant().module(self.lib)
        module = self._rank_module
        self.pool.get(RANK_HIST, 4 * 256)
        self.pool.get(RANK_CUT, 16)
        self.pool.write(RANK_CUT, np.array([room, 0, 0, 0], np.uint32))
        self.pool.encode_clear(enc, RANK_HIST)
        rows = module.constant("ROWS")
        groups = self._groups(module, "rank_histogram", -(-n // rows))
        allow_groups = self._groups(module, "rank_allow", n)
        entries = {"plan": PLAN, "keys": RANK_KEYS, "hist": RANK_HIST, "cut": RANK_CUT,
                   "allowed": "state_allowed"}
        passes = [(phase, level) for phase in (0, 1) for level in range(4)]
        binds = []
        for item in passes + [None]:     # the histogram levels, then rank_allow
            u = np.zeros((), module.struct_dtype("RankParams"))
            u["n"], u["x_groups"] = n, (groups if item else allow_groups)[0]
            if item:
                u["phase"], u["level"] = item
            name = self._write("rank_{}_{}".format(*item) if item else "rank_allow", None, u)
            binds.append(self.pool.bind_group(module, 0, {"rp": name, **entries}))
        cpass = enc.begin_compute_pass(label="grow: rank")
        for bg in binds[:-1]:
            cpass.set_bind_group(0, bg)
            cpass.set_pipeline(module.pipeline("rank_histogram"))
            cpass.dispatch_workgroups(*groups)
            cpass.set_pipeline(module.pipeline("rank_select"))
            cpass.dispatch_workgroups(1)
        cpass.set_bind_group(0, binds[-1])
        cpass.set_pipeline(module.pipeline("rank_allow"))
        cpass.dispatch_workgroups(*allow_groups)
        cpass.end()

    # -- 3DGS-MCMC's operations (MCMCState: declared by strategy/mcmc.py, not the contract) ------------
    def _reloc_bind(self, uniform: str, p: int = 0):
        return self.pool.bind_group(self._reloc, 0, {
            "mp": uniform, "params": page_name(PARAMS, p), "weights": "state_weights",
            "scan_sums": self.scan.sums, "sources": "state_sources", "counts": "state_counts",
            "relocated": RELOCATED, "table": TABLE, "sigmoid_table": "state_sigmoid"})

    def _reloc_uniform(self, name: str, page: Page | None, entry: str, threads: int,
                       tag: str = "", **fields) -> tuple:
        """The relocation uniform ``name`` for ``page`` (None: a dispatch over all rows, with
        page 0's offsets): its bind group and grid for ``threads`` threads of ``entry``."""
        u = self._u[name].copy()
        count = page.count if page is not None else self.n
        offs = param_offsets(count)
        groups = self._groups(self._reloc, entry, threads)
        u["n"], u["base"], u["total"] = count, page.base if page is not None else 0, self.n
        u["log_scales"], u["quats"], u["opacity"] = offs[0], offs[1], offs[2]
        u["x_groups"] = groups[0]
        for k, v in fields.items():
            u[k] = v
        uniform = self._write(f"{name}_{entry}{tag}", page, u)
        return self._reloc_bind(uniform, page.index if page is not None else 0), groups

    def _draws(self, relocating: bool, draws: int, min_opacity: float, key: int) -> tuple[int, int]:
        """Weights, their scan and the numbers the host needs (dead rows, total weight); leaves
        the uniforms set for the draws."""
        n = self.n
        self.pool.get("state_weights", 4 * max(n, 1))
        self.pool.get("state_counts", 4 * (n + 1))
        self.pool.get("state_sources", 4 * max(n + draws, 1))
        self.pool.get(RELOCATED, 8 * max(n, 1))
        self.scan.configure(n)
        u = self._u["reloc"]
        u["draws"], u["weight_bits"], u["scan_total"] = draws, rows.weight_bits(n), self.scan.blocks
        u["dead_logit"], u["min_opacity"] = np.float32(inverse_sigmoid(min_opacity)), min_opacity
        u["key"], u["relocating"], u["new_rows"] = np.uint32(key), int(relocating), 0
        weigh_passes = [self._reloc_uniform("reloc", page, "relocate_weights", page.count)
                        for page in self.pages]

        def weigh(enc):
            self.pool.encode_clear(enc, "state_counts")
            cpass = enc.begin_compute_pass(label="relocation weights")
            cpass.set_pipeline(self._reloc.pipeline("relocate_weights"))
            for bg, groups in weigh_passes:
                cpass.set_bind_group(0, bg)
                cpass.dispatch_workgroups(*groups)
            self.scan.encode(cpass, "state_weights")
            cpass.end()

        dead, total = self._read_u32([("state_counts", n), (self.scan.sums, self.scan.blocks)],
                                     weigh)
        return int(dead), int(total)

    def _relocation_apply(self, n_out: int, draws: int, relocating: bool) -> None:
        self.pool.get(TABLE, 8 * max(n_out, 1))
        passes = []     # (entry, bind group, grid)
        if relocating:
            passes += [("relocate_draw", *self._reloc_uniform("reloc", p, "relocate_draw", p.count))
                       for p in self.pages]
        else:
            passes.append(("relocate_draw", *self._reloc_uniform("reloc", None, "relocate_draw",
                                                                  draws)))
        passes += [("relocate_values", *self._reloc_uniform("reloc", p, "relocate_values", p.count))
                   for p in self.pages]
        passes += [("relocate_rows", *self._reloc_uniform("reloc", p, "relocate_rows", p.count))
                   for p in self.pages]
        if draws:
            passes.append(("relocate_rows", *self._reloc_uniform(
                "reloc", None, "relocate_rows", draws, "_new", new_rows=1)))

        def build(enc):
            cpass = enc.begin_compute_pass(label="relocation rows")
            for entry, bg, groups in passes:
                cpass.set_pipeline(self._reloc.pipeline(entry))
                cpass.set_bind_group(0, bg)
                cpass.dispatch_workgroups(*groups)
            cpass.end()

        self._apply(n_out, prelude=build)

    def relocate(self, min_opacity: float, key: int) -> int:
        n = self.n
        if not n:
            return 0
        dead, total = self._draws(True, 0, min_opacity, key)
        if dead == 0 or total == 0:
            return 0
        self._relocation_apply(n, 0, True)
        return dead

    def sample_add(self, count: int, min_opacity: float, key: int) -> int:
        n = self.n
        count = self.step.room_for(n, count)
        if count <= 0 or not n:
            return 0
        _, total = self._draws(False, count, min_opacity, key)
        if total == 0:
            return 0
        self._relocation_apply(n + count, count, False)
        return count

    def encode_perturb(self, cpass, scale: float, key: int) -> None:
        """Record the position noise into the caller's pass (the step: before Adam)."""
        if not self.n:
            return
        cpass.set_pipeline(self._reloc.pipeline("perturb_means"))
        for page in self.pages:
            bg, groups = self._reloc_uniform("perturb", page, "perturb_means", page.count,
                                             noise_scale=scale, key=np.uint32(key))
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(*groups)

    def perturb_means(self, scale: float, key: int) -> None:
        def encode(enc):
            cpass = enc.begin_compute_pass(label="perturb means")
            self.encode_perturb(cpass, scale, key)
            cpass.end()

        self._submit("perturbing the means", encode)
