"""The GPU path's training state: the per-Gaussian arrays stay in device buffers and the row
operations edit them there (:mod:`wgsl_splat.training.state`; NumPy semantics:
:mod:`wgsl_splat.reference.rows`).

Buffers (the step's pool): ``params``, ``adam_m``, ``adam_v`` in the flat layout (means 3N |
log-scales 3N | quats 4N | opacity N | SH 3KN) and ``stats`` (one plane of N floats per statistic
the strategy declared, in its order). Every pool buffer grows by 1.5× when it must, so a round that
adds rows rarely allocates.

An edit is a row table in ``state_table`` (built on the device by ``grow.wgsl`` from a strategy's
decision, by ``relocation.wgsl``, or uploaded by a test) applied by ``state_rows.wgsl`` to each
buffer into a scratch buffer that is copied back. What comes back to the host is a handful of
counts (how many rows the new layout has), and, when the room of a grow binds, each row's cost and
the statistics its ranking reads.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import PARAM_FLOATS, inverse_sigmoid, param_offsets
from ..reference import rows
from ..training.state import (
    GrowReport,
    HostArrays,
    RowDecision,
    RowEdit,
    RowTable,
    TrainState,
    budget,
)
from ..training.statistics import accessors_wgsl, resolve
from .adam import ParamLayout
from .pool import UNIFORM_USAGE, buffer_usage
from .sort import PrefixScan, grid_2d

PARAM_ARRAYS = ("params", "adam_m", "adam_v")
STATS = "stats"
TABLE, RELOCATED = "state_table", "state_relocated"
PLAN, TALLIES = "state_plan", "state_tallies"


class DeviceState(TrainState):
    def __init__(self, step, stat_names) -> None:
        self.step = step
        self.stat_names = tuple(stat_names)
        self.statistics = resolve(self.stat_names)
        self.ctx, self.pool, self.lib = step.ctx, step.pool, step.lib
        self._rows = self.lib.module("state_rows")
        self._reset = self.lib.module("opacity_reset", config=step.render_config)
        self._reloc = self.lib.module("relocation")
        max_segments = self._rows.constant("MAX_SEGMENTS")
        if len(self.stat_names) > max_segments:
            raise ValueError(f"at most {max_segments} statistics, got {self.stat_names}")
        self.scan = PrefixScan(self.lib, self.pool, "state")
        self._u = {}
        for name, module, struct in (
                [(f"rows_{a}", self._rows, "RowParams") for a in PARAM_ARRAYS + (STATS,)]
                + [("reset", self._reset, "ResetParams"), ("reloc", self._reloc, "RelocateParams"),
                   ("perturb", self._reloc, "RelocateParams")]):
            self._u[name] = np.zeros((), module.struct_dtype(struct))
            self.pool.get(f"state_u_{name}", self._u[name].nbytes, buffer_usage(*UNIFORM_USAGE))
        for name in (RELOCATED, TABLE, "state_allowed", "state_weights", "state_sources", PLAN):
            self.pool.get(name, 8)
        self.pool.get("state_sigmoid", rows.SIGMOID_TABLE.nbytes)
        self.pool.write("state_sigmoid", rows.SIGMOID_TABLE)
        self.pool.get("state_counts", 8)
        self.pool.get(TALLIES, 32)
        self.scan.configure(1)           # its buffers exist from the start (bind groups)

    # -- sizes ----------------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.step.renderer.num

    @property
    def k(self) -> int:
        return self.step.renderer.sh_coeffs

    def _groups(self, module, entry: str, n: int) -> tuple[int, int]:
        """The 2D grid of workgroups of ``entry`` for ``n`` threads (its size read from the WGSL)."""
        return grid_2d(-(-max(n, 1) // module.workgroup_size(entry)[0]))

    def _write(self, name: str) -> str:
        self.pool.write(f"state_u_{name}", self._u[name])
        return f"state_u_{name}"

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
            self._submit("clearing the statistics",
                         lambda enc: enc.clear_buffer(self.pool[STATS]))

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
        """Rebuild every per-Gaussian buffer from ``state_table`` (``prelude(enc)`` first records
        the kernels that build it), then adopt ``n_out`` rows."""
        n_in, k = self.n, self.k
        floats_out = (PARAM_FLOATS + 3 * k) * n_out
        n_stats = len(self.stat_names)
        arrays = list(PARAM_ARRAYS) + ([STATS] if n_stats else [])
        # Grow before encoding (a growing pool buffer is replaced, its contents copied).
        for name in PARAM_ARRAYS:
            self.pool.get(name, 4 * max(floats_out, 1), keep_contents=True)
        if n_stats:
            self.pool.get(STATS, 4 * n_stats * max(n_out, 1), keep_contents=True)
        self.pool.get("state_scratch", 4 * max(floats_out, n_stats * n_out, 1))
        self.pool.get(TABLE, 8 * max(n_out, 1), keep_contents=prelude is None)
        groups = self._groups(self._rows, "apply_plain", n_out)
        src_offs, dst_offs = param_offsets(n_in), param_offsets(n_out)
        uniforms = {}
        for name in arrays:
            u = self._u[f"rows_{name}"]
            segs = ([(0, 0, 3), (src_offs[0], dst_offs[0], 3), (src_offs[1], dst_offs[1], 4),
                     (src_offs[2], dst_offs[2], 1), (src_offs[3], dst_offs[3], 3 * k)]
                    if name != STATS else [(j * n_in, j * n_out, 1) for j in range(n_stats)])
            u["n_out"], u["k"], u["x_groups"], u["segments"] = n_out, k, groups[0], len(segs)
            u["src_offs"], u["dst_offs"] = src_offs, dst_offs
            u["log_split_div"] = math.log(split_div)
            u["key"] = np.uint32(key)
            u["seg"][:] = 0
            for g, (a, b, w) in enumerate(segs):
                u["seg"][g] = (a, b, w, 0)
            uniforms[name] = self._write(f"rows_{name}")
        nbytes = {name: 4 * (floats_out if name != STATS else n_stats * n_out) for name in arrays}

        def encode(enc):
            if prelude is not None:
                prelude(enc)
            for name in arrays:
                if n_out:
                    cpass = enc.begin_compute_pass(label=f"rows {name}")
                    cpass.set_pipeline(self._rows.pipeline(
                        "apply_params" if name == "params" else "apply_plain"))
                    cpass.set_bind_group(0, self.pool.bind_group(self._rows, 0, {
                        "rp": uniforms[name], "src": name, "dst": "state_scratch",
                        "table": TABLE, "relocated": RELOCATED}))
                    cpass.dispatch_workgroups(*groups)
                    cpass.end()
                    enc.copy_buffer_to_buffer(self.pool["state_scratch"], 0, self.pool[name], 0,
                                              nbytes[name])

        self._submit("applying a row table", encode)
        self._adopt(n_out)

    def _adopt(self, n: int) -> None:
        """Everything sized by N follows the new count (nothing uploaded)."""
        step = self.step
        step.take_losses_into_buffer()
        with self.ctx.guard("resizing the training state"):
            step.renderer.resize(n, self.k)
            step.adam.configure(ParamLayout.from_renderer(step.renderer))
            step.backward.resize(n)
        step._verify_capacity = True
        self.rows_version += 1

    # -- opacity reset -----------------------------------------------------------------------------------
    def reset_opacity(self, value: float) -> None:
        n = self.n
        if not n:
            return
        u = self._u["reset"]
        groups = self._groups(self._reset, "reset_opacity", n)
        offs = param_offsets(n)
        u["n"], u["opacity"], u["x_groups"], u["log_scales"] = n, offs[2], groups[0], offs[0]
        u["cap_logit"], u["cap"] = np.float32(inverse_sigmoid(value)), value
        name = self._write("reset")

        def encode(enc):
            cpass = enc.begin_compute_pass(label="opacity reset")
            cpass.set_pipeline(self._reset.pipeline("reset_opacity"))
            cpass.set_bind_group(0, self.pool.bind_group(self._reset, 0, {
                "rp": name, "params": "params", "adam_m": "adam_m", "adam_v": "adam_v",
                "filter3d": "filter3d"}))
            cpass.dispatch_workgroups(*groups)
            cpass.end()

        self._submit("resetting opacities", encode)

    # -- grow ----------------------------------------------------------------------------------------------
    def _grow_module(self, decision: RowDecision):
        """``grow.wgsl`` with the decision's kernel and the accessors of this state's statistics
        (compiled once per decision class and statistics)."""
        text = accessors_wgsl(self.statistics) + "\n" + decision.wgsl
        return self.lib.module("grow", generated={"decision.wgsl": text})

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
        self.pool.get("state_u_grow", gp.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.get("state_u_decision", dp.nbytes, buffer_usage(*UNIFORM_USAGE))
        self.pool.write("state_u_decision", dp)
        self.pool.get(PLAN, 4 * max(4 * n, 1))
        self.pool.get("state_allowed", 4 * max(n, 1))
        self.scan.configure(3 * n)
        groups = self._groups(module, "grow_decide", n)
        offs = param_offsets(n)
        gp["n"], gp["samples"], gp["x_groups"] = n, decision.split_samples, groups[0]
        gp["scan_total"] = self.scan.blocks
        gp["log_scales"], gp["quats"], gp["opacity"] = offs[0], offs[1], offs[2]

        def bind():
            return self.pool.bind_group(module, 0, {
                "gp": "state_u_grow", "dp": "state_u_decision", "params": "params",
                "stats": STATS, "allowed": "state_allowed", "plan": PLAN, "tallies": TALLIES,
                "table": TABLE, "scan_sums": self.scan.sums})

        def decide(enc):
            enc.clear_buffer(self.pool[TALLIES])
            cpass = enc.begin_compute_pass(label="grow: decide")
            if n:
                cpass.set_pipeline(module.pipeline("grow_decide"))
                cpass.set_bind_group(0, bind())
                cpass.dispatch_workgroups(*groups)
                self.scan.encode(cpass, PLAN)
            cpass.end()

        def counts(use_allowed: int) -> np.ndarray:
            gp["use_allowed"] = use_allowed
            self.pool.write("state_u_grow", gp)
            parts = [(TALLIES, i) for i in range(5)]
            if n:   # the kept rows, kept rows + clones (the split section's start), all rows
                parts += [(PLAN, n), (PLAN, 2 * n), (self.scan.sums, self.scan.blocks)]
            got = self._read_u32(parts, decide)
            return got if n else np.concatenate([got, [0, 0, 0]])

        c = counts(0)
        capped = int(c[4]) > room
        if capped:
            # The room binds: rank the rows on the host as the NumPy path does (their costs and
            # the statistics the decision's score reads).
            cost = self.pool.read_array(PLAN, np.uint32, n, 4 * 3 * n)
            stats = self.read_stats()
            score = decision.score({k: stats[k] for k in decision.score_stats})
            self.pool.write("state_allowed", budget(score, cost, room).astype(np.uint32))
            c = counts(1)
        kept, kept_clones, total = int(c[5]), int(c[6]), int(c[7])
        split = total - kept_clones
        n_out = kept_clones + decision.split_samples * split

        def build(enc):
            cpass = enc.begin_compute_pass(label="grow: rows")
            cpass.set_pipeline(module.pipeline("grow_rows"))
            cpass.set_bind_group(0, bind())
            cpass.dispatch_workgroups(*groups)
            cpass.end()

        self.pool.get(TABLE, 8 * max(n_out, 1))
        self._apply(n_out, key=decision.key, split_div=decision.split_scale_div,
                    prelude=build if n else None)
        peak = float(np.array([c[3]], np.uint32).view(np.float32)[0])
        return GrowReport(n, n_out, kept, kept_clones - kept, split,
                          (int(c[0]), int(c[1]), int(c[2])), peak, bool(capped))

    # -- sampling: relocate, sample_add, perturb_means ---------------------------------------------------
    def _reloc_bind(self, uniform: str):
        return self.pool.bind_group(self._reloc, 0, {
            "mp": uniform, "params": "params", "weights": "state_weights",
            "scan_sums": self.scan.sums, "sources": "state_sources", "counts": "state_counts",
            "relocated": RELOCATED, "table": TABLE, "sigmoid_table": "state_sigmoid"})

    def _draws(self, relocating: bool, draws: int, min_opacity: float, key: int) -> tuple[int, int]:
        """Weights, their scan and the numbers the host needs (dead rows, total weight); leaves
        the uniform set for the draws."""
        n = self.n
        self.pool.get("state_weights", 4 * max(n, 1))
        self.pool.get("state_counts", 4 * (n + 1))
        self.pool.get("state_sources", 4 * max(n + draws, 1))
        self.pool.get(RELOCATED, 8 * max(n, 1))
        self.scan.configure(n)
        u = self._u["reloc"]
        groups = self._groups(self._reloc, "relocate_weights", max(n, draws))
        offs = param_offsets(n)
        u["n"], u["draws"], u["weight_bits"], u["scan_total"] = (n, draws, rows.weight_bits(n),
                                                                 self.scan.blocks)
        u["log_scales"], u["quats"], u["opacity"] = offs[0], offs[1], offs[2]
        u["dead_logit"], u["min_opacity"] = np.float32(inverse_sigmoid(min_opacity)), min_opacity
        u["key"], u["x_groups"], u["relocating"] = np.uint32(key), groups[0], int(relocating)
        self._write("reloc")

        def weigh(enc):
            enc.clear_buffer(self.pool["state_counts"])
            cpass = enc.begin_compute_pass(label="relocation weights")
            cpass.set_pipeline(self._reloc.pipeline("relocate_weights"))
            cpass.set_bind_group(0, self._reloc_bind("state_u_reloc"))
            cpass.dispatch_workgroups(*groups)
            self.scan.encode(cpass, "state_weights")
            cpass.end()

        dead, total = self._read_u32([("state_counts", n), (self.scan.sums, self.scan.blocks)],
                                     weigh)
        return int(dead), int(total)

    def _relocation_apply(self, n_out: int, draws: int) -> None:
        n = self.n

        def build(enc):
            cpass = enc.begin_compute_pass(label="relocation rows")
            cpass.set_bind_group(0, self._reloc_bind("state_u_reloc"))
            for entry, count in (("relocate_draw", draws), ("relocate_values", n),
                                 ("relocate_rows", n_out)):
                cpass.set_pipeline(self._reloc.pipeline(entry))
                cpass.dispatch_workgroups(*self._groups(self._reloc, entry, count))
            cpass.end()

        self.pool.get(TABLE, 8 * max(n_out, 1))
        self._apply(n_out, prelude=build)

    def relocate(self, min_opacity: float, key: int) -> int:
        n = self.n
        if not n:
            return 0
        dead, total = self._draws(True, 0, min_opacity, key)
        if dead == 0 or total == 0:
            return 0
        self._relocation_apply(n, n)
        return dead

    def sample_add(self, count: int, min_opacity: float, key: int) -> int:
        n = self.n
        if count <= 0 or not n:
            return 0
        _, total = self._draws(False, count, min_opacity, key)
        if total == 0:
            return 0
        self._relocation_apply(n + count, count)
        return count

    def encode_perturb(self, cpass, scale: float, key: int) -> None:
        """Record the position noise into the caller's pass (the step: before Adam)."""
        n = self.n
        if not n:
            return
        u = self._u["perturb"]
        groups = self._groups(self._reloc, "perturb_means", n)
        offs = param_offsets(n)
        u["n"], u["log_scales"], u["quats"], u["opacity"] = n, offs[0], offs[1], offs[2]
        u["noise_scale"], u["key"], u["x_groups"] = scale, np.uint32(key), groups[0]
        name = self._write("perturb")
        cpass.set_pipeline(self._reloc.pipeline("perturb_means"))
        cpass.set_bind_group(0, self._reloc_bind(name))
        cpass.dispatch_workgroups(*groups)

    def perturb_means(self, scale: float, key: int) -> None:
        def encode(enc):
            cpass = enc.begin_compute_pass(label="perturb means")
            self.encode_perturb(cpass, scale, key)
            cpass.end()

        self._submit("perturbing the means", encode)
