"""What the custom nodes find outside their config: the process-wide :class:`Registry`.

``ortops.InferenceSession`` puts its prebuilt layers (and the devices of its nodes whose
weights are inputs) here when it is created and takes them out when it is closed or
collected; converted models keep their layers in the inline cache, rebuilt only when the
weights fed change; every run's node errors wait here under the run's token until the
session takes them (``customop``'s module docstring, "Errors"). Sessions run from many
threads (docs/onnxruntime.md, "Threads"), so every table is read and written under the
registry's lock; layers are built outside it.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any, Callable, Iterable

import numpy as np

from ortops.cells import CELLS
from ortops.ort.nodeconfig import NodeConfig

#: The weights of any cell (W R B P), uploaded once per layer.
WEIGHTS = tuple(dict.fromkeys(w for c in CELLS.values() for w in c.weights))

#: Converted-model layers the inline cache keeps (least recently used dropped beyond it). Nothing
#: tells the registry when the last session of a converted model is gone, so without a bound
#: every ``ortops.convert`` of a new model kept its layers (device memory, plans, pipelines)
#: for the life of the process: 10 MB per convert of the small two-layer recognizer on
#: lavapipe (docs/memory.md). A dropped layer that is still used is rebuilt on its next run
#: (its weights uploaded again), as when the weights fed change.
INLINE_LAYERS = 64


def _same_bits(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    # Compare bit patterns as unsigned integers: exact for NaNs and -0.0, and
    # ~40x faster than comparing memoryviews (1 ms for 4 MB).
    as_int = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(as_int), b.view(as_int)))


class _OwnedLock:
    """A lock that knows which thread holds it. A session's weakref finalizer calls
    :meth:`Registry.forget`, and the garbage collector runs finalizers at any allocation, also
    inside a locked section of the registry on the same thread: with a plain lock that
    finalizer waited for itself forever (seen in CI: ``seed_inline`` -> collection ->
    ``forget``). ``on_release`` runs, still locked, before each release."""

    def __init__(self, on_release: Callable[[], None]):
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._on_release = on_release

    def __enter__(self) -> "_OwnedLock":
        self._lock.acquire()
        self._owner = threading.get_ident()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._on_release()
        finally:
            self._owner = None
            self._lock.release()

    def held_here(self) -> bool:
        return self._owner == threading.get_ident()


class Registry:
    """Layers and devices by node key, and node errors by run token.

    * prebuilt layers of sessions (weights uploaded once), by ``NodeConfig.key``;
    * devices of session nodes whose weights are inputs (the config holds only a device
      name, and a session may have been given a device object);
    * the inline cache: key -> (weights, layer) for weights that arrive as inputs;
    * node errors by run token (only tokens of running sessions: each run takes its own).

    ``key in registry`` says whether a prebuilt layer is registered under ``key``.
    """

    def __init__(self):
        self._forgotten: collections.deque[tuple[str, ...]] = collections.deque()
        self._lock = _OwnedLock(self._drop_forgotten)
        self._layers: dict[str, Any] = {}
        self._devices: dict[str, Any] = {}
        self._inline: collections.OrderedDict[str, tuple[tuple, Any]] = collections.OrderedDict()
        self._errors: dict[int, list[BaseException]] = {}
        self._tokens = itertools.count(1)

    # -- sessions ------------------------------------------------------------------

    def add_session(self, layers: dict[str, Any], devices: dict[str, Any]) -> None:
        """Register a session's prebuilt layers and the devices of its other nodes."""
        with self._lock:
            self._layers.update(layers)
            self._devices.update(devices)

    def forget(self, keys: Iterable[str]) -> None:
        """Drop the layers, devices and cached layers of these keys: now, or, when called by
        the garbage collector inside one of this registry's locked sections on this thread,
        as that section ends (:class:`_OwnedLock`)."""
        self._forgotten.append(tuple(keys))   # deque.append needs no lock
        if self._lock.held_here():
            return
        with self._lock:
            pass   # dropped on release

    def _drop_forgotten(self) -> None:
        # Called with the lock held. Dropping a layer may start a collection whose finalizers
        # call forget() again: they append here, and the loop takes them too.
        while self._forgotten:
            for k in self._forgotten.popleft():
                self._layers.pop(k, None)
                self._devices.pop(k, None)
                self._inline.pop(k, None)

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._layers

    def prebuilt(self, key: str):
        """The prebuilt layer of ``key`` (None when its session is closed)."""
        with self._lock:
            return self._layers.get(key)

    # -- weights as inputs -----------------------------------------------------------

    def layer_for(self, cfg: NodeConfig, weights: dict, build: Callable) -> Any:
        """Layer for weights fed as inputs: the cached one if the bits match, else
        ``build(op, weights, attrs, device, mode=)`` (outside the lock), cached under the key."""
        key = cfg.key
        with self._lock:
            cached = self._inline.get(key)
            if cached is not None:
                self._inline.move_to_end(key)
            device = self._devices.get(key, cfg.device)
        order = tuple(weights.get(n) for n in WEIGHTS)
        if cached is not None and all(_same_bits(a, b) for a, b in zip(cached[0], order)):
            return cached[1]
        layer = build(cfg.op, weights, cfg.attrs, device, mode=cfg.mode)
        with self._lock:
            self._keep_inline(key, (order, layer))
        return layer

    def seed_inline(self, key: str, weights: dict, layer) -> None:
        """Pre-populate the inline cache (``convert`` built the layer already)."""
        with self._lock:
            self._keep_inline(key, (tuple(weights.get(n) for n in WEIGHTS), layer))

    def _keep_inline(self, key: str, entry: tuple) -> None:
        # Called with the lock held; the least recently used entries beyond INLINE_LAYERS go.
        self._inline[key] = entry
        self._inline.move_to_end(key)
        while len(self._inline) > INLINE_LAYERS:
            self._inline.popitem(last=False)

    def clear_inline(self) -> None:
        """Drop every cached converted-model layer (frees their device memory)."""
        with self._lock:
            self._inline.clear()

    # -- errors by run -----------------------------------------------------------------

    def new_token(self) -> int:
        """A process-unique token for one run (never 0, which means "no session listening")."""
        return next(self._tokens)   # itertools.count's next is atomic under the GIL

    def record_error(self, token: int, err: BaseException) -> None:
        with self._lock:
            self._errors.setdefault(token, []).append(err)

    def take_errors(self, token: int) -> list[BaseException]:
        """Remove and return the node errors recorded for one run, in the order they happened."""
        with self._lock:
            return self._errors.pop(token, [])
