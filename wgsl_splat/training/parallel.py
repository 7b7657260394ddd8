"""Data-parallel training: one replica of the training state per device, on one machine or many.

A batch of B views is split across G replicas (view j goes to replica j mod G). Each replica runs
:meth:`~wgsl_splat.contract.step.TrainStep.accumulate` on its views, then the replicas' gradient sums and
densification statistics are reduced -- summed (gradients, grad_accum, denom) and maxed
(max_radii) -- and the same reduced arrays are written back to every replica, which then applies
the identical update (:meth:`~wgsl_splat.contract.step.TrainStep.finish`). Replicas therefore stay
bit-identical: same parameters, same statistics, same densification decisions (same seed). Every
``check_every`` steps a hash of each replica's parameters is compared; a difference is an error
that names the step.

Only the first replica keeps the statistics accumulated before the step; the others start the
step from zero (:meth:`~wgsl_splat.contract.step.TrainStep.clear_stats`), so the sum counts the earlier
totals once.

Two reducers: :class:`LocalReducer` (devices of one process, summed on the host in replica
order) and :class:`MpiReducer` (one process per rank under ``mpirun``/``srun``: each rank reduces
its own replicas, then ``MPI_Allreduce``; with 2 ranks the sum is the one-process sum, bit for
bit, as a + b = b + a in IEEE arithmetic). The reduction also carries the stop flag, so that a
SIGTERM seen by any rank stops every rank after the same step.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import time

import numpy as np

from ..contract.state import TrainState
from ..contract.step import TrainStep
from .errors import TrainingError


class ReplicaDivergence(TrainingError):
    """Replicas that must be identical are not."""


class LocalReducer:
    """Reduction over the replicas of this process only."""

    rank, size = 0, 1

    def reduce(self, sums: np.ndarray, maxima: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sums, maxima

    def gather(self, items: list) -> list:
        """Every process's ``items``, concatenated in rank order."""
        return list(items)

    def minimum(self, value: int) -> int:
        return value


class MpiReducer(LocalReducer):
    """Reduction across MPI ranks (``comm``: an mpi4py communicator)."""

    def __init__(self, comm) -> None:
        from mpi4py import MPI  # noqa: PLC0415

        self.MPI, self.comm = MPI, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank = node.Get_rank()   # picks this rank's adapter among its node's
        node.Free()

    def reduce(self, sums, maxima):
        MPI = self.MPI
        sums = np.ascontiguousarray(sums, np.float32)
        maxima = np.ascontiguousarray(maxima, np.float32)
        self.comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
        self.comm.Allreduce(MPI.IN_PLACE, maxima, op=MPI.MAX)
        return sums, maxima

    def gather(self, items):
        return [v for part in self.comm.allgather(list(items)) for v in part]

    def minimum(self, value: int) -> int:
        return int(self.comm.allreduce(int(value), op=self.MPI.MIN))


def mpi_world() -> MpiReducer:
    """The MPI world of this process (``--distributed``), or a one-line error when MPI for Python
    is not installed."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        from ..errors import UserError

        raise UserError(f"--distributed needs MPI for Python ({exc}): pip install "
                        f"'wgsl_splat[mpi]', then run under mpirun -n K or srun") from None
    return MpiReducer(MPI.COMM_WORLD)


def parameter_hash(step: TrainStep) -> str:
    """SHA-256 of a replica's parameters (every group, in order)."""
    h = hashlib.sha256()
    for a in step.get_model().arrays().values():
        h.update(np.ascontiguousarray(a, np.float32).tobytes())
    return h.hexdigest()


class ReplicatedState(TrainState):
    """The replicas' states seen as one, by one rule: what only reads (the sizes and the
    operations in :attr:`READS`) is answered by the first replica; every other operation, the contract's and
    a strategy's own (e.g. 3DGS-MCMC's ``relocate``), runs on each replica, each deciding from
    its own identical data, and all must return the same result (else
    :class:`ReplicaDivergence`). Operations take host values, never one device's objects."""

    #: the contract's operations that only read
    READS = frozenset({"download", "read_stats"})

    def __init__(self, replicas: list[TrainStep]) -> None:
        self.replicas = replicas

    @property
    def first(self) -> TrainState:
        return self.replicas[0].state

    @property
    def stat_names(self):
        return self.first.stat_names

    @property
    def rows_version(self) -> int:
        return self.first.rows_version

    @property
    def n(self) -> int:
        return self.first.n

    def on_every_replica(self, op: str, *args, **kwargs):
        """Run operation ``op`` on each replica's state; their results must agree."""
        results = [getattr(r.state, op)(*args, **kwargs) for r in self.replicas]
        if any(repr(x) != repr(results[0]) for x in results[1:]):
            raise ReplicaDivergence(f"replicas disagree on {op}: {results}")
        return results[0]

    def __getattr__(self, name: str):
        """A strategy's own operation (a state extension), run on every replica."""
        if name.startswith("__") or name == "replicas":
            raise AttributeError(name)
        attr = getattr(self.first, name)
        if not callable(attr):
            return attr
        return functools.partial(self.on_every_replica, name)


def _forward_the_contract(cls):
    """Each operation :class:`TrainState` declares and ``cls`` does not define: a read
    (``cls.READS``) asks the first replica, any other runs on every replica."""
    def forwarder(op: str):
        if op in cls.READS:
            def forward(self, *args, **kwargs):
                return getattr(self.first, op)(*args, **kwargs)
        else:
            def forward(self, *args, **kwargs):
                return self.on_every_replica(op, *args, **kwargs)
        forward.__name__, forward.__qualname__ = op, f"{cls.__name__}.{op}"
        return forward

    for op in sorted(TrainState.__abstractmethods__ - set(vars(cls))):
        setattr(cls, op, forwarder(op))
    return abc.update_abstractmethods(cls)


_forward_the_contract(ReplicatedState)


class ReplicatedStep(TrainStep):
    """A :class:`~wgsl_splat.contract.step.TrainStep` over replicas (module doc). ``replicas``: this
    process's steps, all built from the same state; ``reducer``: how they meet the other
    processes' (``rank``-th of ``size`` processes, each with the same number of replicas)."""

    def __init__(self, replicas: list[TrainStep], reducer: LocalReducer | None = None, *,
                 check_every: int = 100, start_step: int = 0) -> None:
        first = replicas[0]
        super().__init__(first.config, first.background, first.loss_config, first.render_config)
        self.replicas = list(replicas)
        self.reducer = reducer or LocalReducer()
        self.world = len(self.replicas) * self.reducer.size
        self.offset = len(self.replicas) * self.reducer.rank   # global index of replicas[0]
        self.check_every = int(check_every)
        self.steps = int(start_step)
        self._state = ReplicatedState(self.replicas)
        self.renderer = first.renderer
        #: seconds per step phase of the reduction: read-back + upload, and the all-reduce
        self.exchange_seconds = {"host read-back/upload": 0.0, "all-reduce": 0.0}
        self._stop_agreed = False

    @property
    def state(self) -> ReplicatedState:
        return self._state

    @property
    def stop_agreed(self) -> bool:
        return self._stop_agreed

    @property
    def blocked_seconds(self) -> float:
        return sum(r.blocked_seconds for r in self.replicas)

    # -- the step ----------------------------------------------------------------------------------
    def views_of(self, views: list, k: int) -> list:
        """The views of local replica ``k``: every world-th view from its global index."""
        return views[self.offset + k::self.world]

    def step_batch(self, views, active_sh_degree=None, noise=None) -> None:
        if len(views) < self.world:
            raise ValueError(f"a batch of {len(views)} views cannot feed {self.world} replicas: "
                             f"--batch-size must be at least the number of devices")
        for k, r in enumerate(self.replicas):   # submits only: devices work concurrently
            if self.offset + k:
                r.clear_stats()
            r.accumulate(self.views_of(views, k), active_sh_degree)
        for r in self.replicas:    # device time (counted as blocked), apart from the transfers
            r.synchronize()
        t = time.perf_counter()
        parts = [r.read_reduction() for r in self.replicas]
        sums, maxima = parts[0][0].copy(), parts[0][1].copy()
        for s, m in parts[1:]:            # one fixed order: replica 0, 1, ...
            sums += s
            np.maximum(maxima, m, out=maxima)
        maxima = np.append(maxima, np.float32(self.stop_requested))
        t2 = time.perf_counter()
        sums, maxima = self.reducer.reduce(sums, maxima)
        t3 = time.perf_counter()
        self._stop_agreed = bool(maxima[-1])
        for r in self.replicas:
            r.write_reduction(sums, maxima[:-1])
            r.finish(len(views), noise)
        self.exchange_seconds["host read-back/upload"] += (t2 - t) + (time.perf_counter() - t3)
        self.exchange_seconds["all-reduce"] += t3 - t2
        self.steps += 1
        if self.check_every and self.steps % self.check_every == 0:
            self.check_replicas()

    def check_replicas(self) -> str:
        """Compare every replica's parameter hash (all ranks: a collective); raise
        :class:`ReplicaDivergence` naming the step when they differ, else return a log line."""
        hashes = self.reducer.gather([parameter_hash(r) for r in self.replicas])
        if len(set(hashes)) > 1:
            odd = [i for i, h in enumerate(hashes) if h != hashes[0]]
            raise ReplicaDivergence(f"replicas diverged by step {self.steps}: the parameters of "
                                    f"replica(s) {odd} differ from replica 0's")
        return (f"replicas agree at step {self.steps}: parameter hash {hashes[0][:16]} on all "
                f"{len(hashes)}")

    def accumulate(self, views, active_sh_degree=None, fresh=True) -> None:
        raise NotImplementedError("a replicated step is driven by step_batch")

    def finish(self, batch_size, noise=None) -> None:
        raise NotImplementedError("a replicated step is driven by step_batch")

    def read_reduction(self):
        raise NotImplementedError("replicated steps do not nest")

    write_reduction = clear_stats = read_reduction

    def observe(self, views, weights, into, active_sh_degree=None):
        """One observation for every replica: the first replica of each process observes, and
        every replica takes global replica 0's result (through the reduction: the others add
        zeros), so that all decide alike (a device's atomic sums have no fixed order)."""
        first = self.replicas[0]
        first.observe(views, weights, into, active_sh_degree)
        stats = first.state.read_stats()
        mine = np.concatenate([stats[k] for k in into]).astype(np.float32)
        if self.offset:
            mine[:] = 0
        total, _ = self.reducer.reduce(mine, np.zeros(0, np.float32))
        n = len(stats[into[0]])
        for r in self.replicas:
            arrays = r.state.download()
            for j, k in enumerate(into):
                arrays.stats[k] = np.asarray(total[j * n:(j + 1) * n], np.float32).copy()
            r.state.upload(arrays)

    def take_losses(self) -> list[float]:
        """This process's views' losses (every replica's, replica by replica)."""
        return [x for r in self.replicas for x in r.take_losses()]

    # -- everything else: the first replica answers, every replica acts ---------------------------
    def get_model(self):
        return self.replicas[0].get_model()

    def render(self, camera, active_sh_degree=None):
        return self.replicas[0].render(camera, active_sh_degree)

    def view_errors(self, views, active_sh_degree=None):
        return self.replicas[0].view_errors(views, active_sh_degree)

    def set_filter_cameras(self, cameras) -> None:
        for r in self.replicas:
            r.set_filter_cameras(cameras)

    def update_filter_3d(self) -> None:
        for r in self.replicas:
            r.update_filter_3d()

    def filter_3d(self):
        return self.replicas[0].filter_3d()

    @property
    def max_gaussians(self):
        caps = [r.max_gaussians for r in self.replicas]
        cap = min(caps) if None not in caps else None
        return None if cap is None else self.reducer.minimum(cap)

    def holds_target(self, view_id) -> bool:
        return all(r.holds_target(view_id) for r in self.replicas)

    def enable_profiling(self, on: bool = True) -> bool:
        return self.replicas[0].enable_profiling(on)

    def stage_times(self):
        return self.replicas[0].stage_times()

    @property
    def counters(self) -> dict:
        return self.replicas[0].counters
