"""Training images kept resident on the device between steps, by view id.

A view's image is uploaded once and kept (``target_<id>``) while the cache's room allows: its
configured limit, within what the memory budget leaves (:meth:`MemoryPlan.cache_budget`). The
least recently used image leaves first; an image without a view id, or one larger than the room,
goes to a scratch buffer and evicts every resident one (memory is short then) but the current
batch's (:meth:`TargetCache.touch`): the caller passed those without their images.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

#: device memory for training images kept resident
TARGET_CACHE_BYTES = 2 << 30


class TargetCache:
    def __init__(self, pool, loss, plan, limit: int = TARGET_CACHE_BYTES) -> None:
        self.pool, self.loss, self.plan = pool, loss, plan
        self.limit = int(limit)
        self._entries: OrderedDict = OrderedDict()   # view id -> (pool name, nbytes)
        self.bytes = 0
        self._batch: frozenset = frozenset()         # the ids the last touch() kept

    def holds(self, view_id) -> bool:
        return view_id is not None and view_id in self._entries

    def touch(self, views) -> None:
        """Mark the batch's resident images most recently used and keep them until the next
        batch, so that uploading one view of the batch never evicts another (the caller passed
        None for those)."""
        self._batch = frozenset(v.view_id for v in views if v.view_id in self._entries)
        for view_id in self._batch:
            self._entries.move_to_end(view_id)

    def resident(self, target: np.ndarray | None, view_id) -> str:
        """The pool name of view ``view_id``'s image, uploading ``target`` when it is not
        resident."""
        hit = self._entries.get(view_id) if view_id is not None else None
        if hit is not None:
            self._entries.move_to_end(view_id)
            return hit[0]
        if target is None:
            raise ValueError(f"view {view_id!r} is not resident on the device: pass its image")
        img = np.ascontiguousarray(target, np.float32)
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"target must be (H, W, 3), got {img.shape}")
        room = self.plan.cache_budget(self.limit, self.bytes)
        if view_id is None or img.nbytes > room:
            while self._evict():      # memory is short: no resident image stays (but the batch's)
                pass
            return self.loss.upload_target(img, "target_scratch")
        while self.bytes + img.nbytes > room and self._evict():
            pass
        if self.bytes + img.nbytes > room:   # the batch's own images fill the room
            return self.loss.upload_target(img, "target_scratch")
        name = f"target_{view_id}"
        self.loss.upload_target(img, name)
        self._entries[view_id] = (name, img.nbytes)
        self.bytes += img.nbytes
        return name

    def _evict(self) -> bool:
        """Free the least recently used image outside the batch; False when there is none."""
        victim = next((k for k in self._entries if k not in self._batch), None)
        if victim is None:
            return False
        old, nbytes = self._entries.pop(victim)
        self.pool.free(old)
        self.bytes -= nbytes
        return True
