"""The GPU path's training state: the per-Gaussian arrays stay in device buffers and densification
edits them there (:mod:`wgsl_splat.training.state`; NumPy semantics: :mod:`wgsl_splat.reference.rows`).

Buffers (the step's pool): ``params``, ``adam_m``, ``adam_v`` in the flat layout (means 3N |
log-scales 3N | quats 4N | opacity N | SH 3KN) and, for ADC, ``densify_stats`` (grad_accum N |
denom N | max_radii N). Every pool buffer grows by 1.5× when it must, so a refine round that adds
rows rarely allocates.

An edit is a row table in ``state_table`` (built by a strategy's kernels: ``adc.wgsl``,
``mcmc.wgsl``, or uploaded by a test) applied by ``state_rows.wgsl`` to each buffer into a scratch
buffer that is copied back. What comes back to the host is a handful of counts: how many rows the
new layout has (16-24 bytes per round), and, when ADC's room binds, the statistics and log-scales
that rank the candidates (24 bytes per Gaussian, only then).
"""

from __future__ import annotations

import math

import numpy as np

from ..model import PARAM_FLOATS, inverse_sigmoid, param_offsets
from ..reference import rows
from ..training.state import ADCRound, DensifyReport, HostArrays, RowEdit, RowTable, TrainState
from .adam import ParamLayout
from .pool import UNIFORM_USAGE, buffer_usage
from .sort import PrefixScan, grid_2d

WG = 256
PARAM_ARRAYS = ("params", "adam_m", "adam_v")
STATS = "densify_stats"
TABLE, RELOCATED = "state_table", "state_relocated"


def _groups(n: int) -> tuple[int, int]:
    return grid_2d(-(-max(n, 1) // WG))


class DeviceState(TrainState):
    def __init__(self, step, stat_names) -> None:
        self.step = step
        self.stat_names = tuple(stat_names)
        self.ctx, self.pool, self.lib = step.ctx, step.pool, step.lib
        self._rows = self.lib.module("state_rows")
        self._reset = self.lib.module("opacity_reset", config=step.render_config)
        self._adc = self.lib.module("adc")
        self._mcmc = self.lib.module("mcmc")
        self.scan = PrefixScan(self.lib, self.pool, "state")
        self._u = {}
        for name, module, struct in (
                [(f"rows_{a}", self._rows, "RowParams") for a in PARAM_ARRAYS + (STATS,)]
                + [("reset", self._reset, "ResetParams"), ("adc", self._adc, "AdcParams"),
                   ("mcmc", self._mcmc, "McmcParams"), ("perturb", self._mcmc, "McmcParams")]):
            self._u[name] = np.zeros((), module.struct_dtype(struct))
            self.pool.get(f"state_u_{name}", self._u[name].nbytes, buffer_usage(*UNIFORM_USAGE))
        for name in (RELOCATED, TABLE, "state_allowed", "state_weights", "state_sources"):
            self.pool.get(name, 8)
        self.pool.get("state_sigmoid", rows.SIGMOID_TABLE.nbytes)
        self.pool.write("state_sigmoid", rows.SIGMOID_TABLE)
        self.pool.get("state_counts", 8)
        self.scan.configure(1)           # its buffers exist from the start (bind groups)

    # -- sizes ----------------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.step.renderer.num

    @property
    def k(self) -> int:
        return self.step.renderer.sh_coeffs

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

    # -- transfers ------------------------------------------------------------------------------------
    def download(self) -> HostArrays:
        return self.step._download()

    def upload(self, arrays: HostArrays) -> None:
        if tuple(arrays.stats) != self.stat_names:
            raise ValueError(f"statistics {tuple(arrays.stats)} given, this state keeps "
                             f"{self.stat_names}")
        self.step._upload(arrays)
        self.rows_version += 1

    # -- the row table ----------------------------------------------------------------------------------
    def apply(self, table: RowTable, edit: RowEdit | None = None) -> None:
        """Apply a table given on the host (tests and tools; strategies build theirs on the
        device)."""
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
        arrays = list(PARAM_ARRAYS) + ([STATS] if self.stat_names else [])
        # Grow before encoding (a growing pool buffer is replaced, its contents copied).
        for name in PARAM_ARRAYS:
            self.pool.get(name, 4 * max(floats_out, 1), keep_contents=True)
        if self.stat_names:
            self.pool.get(STATS, 12 * max(n_out, 1), keep_contents=True)
        self.pool.get("state_scratch", 4 * max(floats_out, 3 * n_out, 1))
        self.pool.get(TABLE, 8 * max(n_out, 1), keep_contents=prelude is None)
        groups = _groups(n_out)
        src_offs, dst_offs = param_offsets(n_in), param_offsets(n_out)
        uniforms = {}
        for name in arrays:
            u = self._u[f"rows_{name}"]
            segs = ([(0, 0, 3), (src_offs[0], dst_offs[0], 3), (src_offs[1], dst_offs[1], 4),
                     (src_offs[2], dst_offs[2], 1), (src_offs[3], dst_offs[3], 3 * k)]
                    if name != STATS else [(0, 0, 1), (n_in, n_out, 1), (2 * n_in, 2 * n_out, 1)])
            u["rows"] = (n_out, k, groups[0], len(segs))
            u["src_offs"], u["dst_offs"] = src_offs, dst_offs
            u["edit"] = (math.log(split_div), 0.0, 0.0, 0.0)
            u["key"] = (np.uint32(key), 0, 0, 0)
            u["seg"][:] = 0
            for g, (a, b, w) in enumerate(segs):
                u["seg"][g] = (a, b, w, 0)
            uniforms[name] = self._write(f"rows_{name}")
        nbytes = {name: 4 * (floats_out if name != STATS else 3 * n_out) for name in arrays}

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

        self._submit("applying a densification row table", encode)
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
        groups = _groups(n)
        u["sizes"] = (n, param_offsets(n)[2], groups[0], param_offsets(n)[0])
        u["value"] = (np.float32(inverse_sigmoid(value)), value, 0.0, 0.0)
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

    # -- ADC ---------------------------------------------------------------------------------------------
    def densify_adc(self, rnd: ADCRound) -> DensifyReport:
        n, k = self.n, self.k
        t = rows.adc_thresholds(rnd)
        self.pool.get("state_plan", 4 * max(3 * n, 1))
        self.pool.get("state_adc_counters", 16)
        self.scan.configure(3 * n)
        u = self._u["adc"]
        groups = _groups(n)
        u["sizes"] = (n, n, rnd.split_samples, 0)
        u["offs"] = param_offsets(n)
        u["thr"] = (t["grad"], t["log_clone"], t["logit_min"], t["log_world"])
        u["thr2"] = (t["log_div"], t["screen"], 0.0, 0.0)
        u["grid"] = (groups[0], self.scan.blocks, 0, 0)

        def bind():
            return self.pool.bind_group(self._adc, 0, {
                "ap": "state_u_adc", "params": "params", "stats": STATS,
                "allowed": "state_allowed", "plan": "state_plan",
                "counters": "state_adc_counters", "table": TABLE, "scan_sums": self.scan.sums})

        def flags(enc):
            enc.clear_buffer(self.pool["state_adc_counters"])
            cpass = enc.begin_compute_pass(label="adc flags")
            if n:
                cpass.set_pipeline(self._adc.pipeline("adc_flags"))
                cpass.set_bind_group(0, bind())
                cpass.dispatch_workgroups(*groups)
                self.scan.encode(cpass, "state_plan")
            cpass.end()

        def counts():
            self._write("adc")
            parts = [("state_adc_counters", i) for i in range(4)]
            if n:   # the kept originals + clones (the split section's start), and all kept rows
                parts += [("state_plan", n), ("state_plan", 2 * n),
                          (self.scan.sums, self.scan.blocks)]
            got = self._read_u32(parts, flags)
            return got if n else np.concatenate([got, [0, 0, 0]])

        c = counts()
        n_clone, n_split = int(c[0]), int(c[1])
        capped = n_clone + (rnd.split_samples - 1) * n_split > rnd.room
        if capped:
            # The room binds: rank the candidates on the host (the statistics and the largest
            # log-scale of each Gaussian, 16 bytes a Gaussian) exactly as the NumPy path does.
            stats = self.step.backward.read_stats()
            log_scales = self.pool.read_array("params", np.float32, 3 * n, 4 * 3 * n).reshape(n, 3)
            allowed = rows.adc_budget_from(stats[0], stats[1], log_scales, rnd)
            self.pool.get("state_allowed", 4 * max(n, 1))
            self.pool.write("state_allowed", allowed.astype(np.uint32))
            u["sizes"] = (n, n, rnd.split_samples, 1)
            c = counts()
            n_clone, n_split = int(c[0]), int(c[1])
        t01, total = int(c[5]), int(c[6])
        t2 = total - t01
        n_out = t01 + rnd.split_samples * t2

        def build(enc):
            cpass = enc.begin_compute_pass(label="adc rows")
            cpass.set_pipeline(self._adc.pipeline("adc_rows"))
            cpass.set_bind_group(0, bind())
            cpass.dispatch_workgroups(*groups)
            cpass.end()

        self.pool.get(TABLE, 8 * max(n_out, 1))
        self._apply(n_out, key=rnd.key, split_div=rnd.split_scale_div,
                    prelude=build if n else None)
        self._submit("zeroing the densification statistics",
                     lambda enc: enc.clear_buffer(self.pool[STATS]))
        grown = n + n_clone + (rnd.split_samples - 1) * n_split
        max_grad = float(np.array([c[3]], np.uint32).view(np.float32)[0])
        return DensifyReport(n_clone, n_split, grown - n_out, n, n_out, int(c[2]), max_grad,
                             bool(capped))

    # -- MCMC ------------------------------------------------------------------------------------------------
    def _mcmc_bind(self, uniform: str):
        return self.pool.bind_group(self._mcmc, 0, {
            "mp": uniform, "params": "params", "weights": "state_weights",
            "scan_sums": self.scan.sums, "sources": "state_sources", "counts": "state_counts",
            "relocated": RELOCATED, "table": TABLE, "sigmoid_table": "state_sigmoid"})

    def _mcmc_draws(self, relocating: bool, draws: int, min_opacity: float, key: int) -> int:
        """Weights, their scan and the numbers the host needs (dead rows, total weight); returns
        the dead count and leaves the uniform set for the draws."""
        n = self.n
        self.pool.get("state_weights", 4 * max(n, 1))
        self.pool.get("state_counts", 4 * (n + 1))
        self.pool.get("state_sources", 4 * max(n + draws, 1))
        self.pool.get(RELOCATED, 8 * max(n, 1))
        self.scan.configure(n)
        u = self._u["mcmc"]
        groups = _groups(max(n, draws))
        u["sizes"] = (n, draws, rows.weight_bits(n), self.scan.blocks)
        u["offs"] = param_offsets(n)
        u["misc"] = (np.float32(inverse_sigmoid(min_opacity)), min_opacity, 0.0, 0.0)
        u["keys"] = (np.uint32(key), groups[0], int(relocating), 0)
        self._write("mcmc")

        def weigh(enc):
            enc.clear_buffer(self.pool["state_counts"])
            cpass = enc.begin_compute_pass(label="mcmc weights")
            cpass.set_pipeline(self._mcmc.pipeline("mcmc_weights"))
            cpass.set_bind_group(0, self._mcmc_bind("state_u_mcmc"))
            cpass.dispatch_workgroups(*groups)
            self.scan.encode(cpass, "state_weights")
            cpass.end()

        dead, total = self._read_u32([("state_counts", n), (self.scan.sums, self.scan.blocks)],
                                     weigh)
        return int(dead), int(total)

    def _mcmc_apply(self, n_out: int, draw_groups) -> None:
        n = self.n

        def build(enc):
            cpass = enc.begin_compute_pass(label="mcmc rows")
            bg = self._mcmc_bind("state_u_mcmc")
            cpass.set_bind_group(0, bg)
            for entry, groups in (("mcmc_draw", draw_groups), ("mcmc_relocated", _groups(n)),
                                  ("mcmc_rows", _groups(n_out))):
                cpass.set_pipeline(self._mcmc.pipeline(entry))
                cpass.dispatch_workgroups(*groups)
            cpass.end()

        self.pool.get(TABLE, 8 * max(n_out, 1))
        self._apply(n_out, prelude=build)

    def relocate(self, min_opacity: float, key: int) -> int:
        n = self.n
        if not n:
            return 0
        dead, total = self._mcmc_draws(True, 0, min_opacity, key)
        if dead == 0 or total == 0:
            return 0
        self._mcmc_apply(n, _groups(n))
        return dead

    def add_by_opacity(self, count: int, min_opacity: float, key: int) -> int:
        n = self.n
        if count <= 0 or not n:
            return 0
        _, total = self._mcmc_draws(False, count, min_opacity, key)
        if total == 0:
            return 0
        self._mcmc_apply(n + count, _groups(count))
        return count

    def encode_perturb(self, cpass, scale: float, key: int) -> None:
        """Record the MCMC position noise into the caller's pass (the step: before Adam)."""
        n = self.n
        if not n:
            return
        u = self._u["perturb"]
        groups = _groups(n)
        u["sizes"] = (n, 0, 0, 0)
        u["offs"] = param_offsets(n)
        u["misc"] = (0.0, 0.0, scale, 0.0)
        u["keys"] = (np.uint32(key), groups[0], 0, 0)
        name = self._write("perturb")
        cpass.set_pipeline(self._mcmc.pipeline("mcmc_perturb"))
        cpass.set_bind_group(0, self._mcmc_bind(name))
        cpass.dispatch_workgroups(*groups)

    def perturb_means(self, scale: float, key: int) -> None:
        def encode(enc):
            cpass = enc.begin_compute_pass(label="mcmc perturb")
            self.encode_perturb(cpass, scale, key)
            cpass.end()

        self._submit("perturbing the means", encode)
