"""``ortops.InferenceSession``, ``convert`` and ``register``.

``InferenceSession`` is an ``onnxruntime.InferenceSession`` whose RNN, GRU and
LSTM nodes run on the Vulkan device. Every other node, and every recurrent
node the GPU path cannot take, runs on ONNX Runtime as usual; ``placement``
says which is which.

Weights: with constant weights the session builds each layer once (its
weights uploaded to the device once) and the custom node gets no weight
inputs; each run copies only X, the states and sequence_lens. A converted
model (``convert``) is standalone instead: its weights stay initializers
feeding the node, so onnxruntime-extensions copies them into fresh numpy
arrays on every run (about a memcpy of the weight bytes, plus a comparison
with the cached copy) and the uploaded layer is reused while they are
unchanged.
"""

from __future__ import annotations

import uuid
import weakref
from typing import TYPE_CHECKING, Any, Sequence, TypeAlias

import numpy as np
import onnxruntime as ort

from ortops._onnxruntime import require_version

require_version(ort.__version__)  # below the admitted bound: a clear ImportError, not odd results
from ortops._typing import DeviceSpec
from ortops.ort import customop
from ortops.ort.rewrite import ModelError, NodePlacement, load_model, rewrite

if TYPE_CHECKING:
    import os

    import onnx

#: A model: a path, the serialized bytes, or an onnx.ModelProto.
ModelIn: TypeAlias = "str | os.PathLike[str] | bytes | onnx.ModelProto"

_MARK = "ortops.custom_ops_registered"

__all__ = ["InferenceSession", "convert", "register", "placement", "ModelError", "NodePlacement"]


def register(sess_options: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """Register the ortops custom ops with ``sess_options`` (created if None)
    and return it. Idempotent: registering the same options again is a no-op.

    A session created with these options can load a model from
    :func:`convert`.
    """
    from onnxruntime_extensions import get_library_path

    customop.register_ops()
    so = sess_options if sess_options is not None else ort.SessionOptions()
    try:
        if so.get_session_config_entry(_MARK) == "1":
            return so
    except RuntimeError:  # ORT raises when the entry does not exist yet
        pass
    so.register_custom_ops_library(get_library_path())
    so.add_session_config_entry(_MARK, "1")
    return so


def convert(model: ModelIn, *, device: DeviceSpec = None, placement: str = "gpu",
            mode: str | None = None) -> onnx.ModelProto:
    """Return a standalone model whose recurrent nodes run on the GPU.

    Any onnxruntime session loads it after :func:`register` of its options.
    The weights stay inside the model as initializers feeding the custom
    nodes, so each run copies them once (onnxruntime-extensions copies every
    input) and compares them with the uploaded copy; the layer is rebuilt
    only when they changed. ``ortops.InferenceSession`` avoids that copy.
    Nodes the GPU path cannot take stay standard nodes (see
    :func:`placement`). ``placement``: ``"gpu"`` or ``"auto"``, as for :class:`InferenceSession`;
    ``mode`` (ortops.modes) is written into every node's config.
    """
    proto = load_model(model)
    rw = rewrite(proto, weights="inline", device=device, tag=_convert_tag(proto, device, placement, mode),
                 placement=placement, mode=mode)
    return rw.model


def _convert_tag(proto: onnx.ModelProto, device: DeviceSpec, placement: str, mode: str | None) -> str:
    """The layer keys' prefix of a converted model: a digest of the model and the arguments
    that shape its layers. Converting the same model again gives the same keys (and the same
    bytes), so its layers replace the earlier conversion's in the converted-model cache
    instead of adding to it (ortops.ort.registry.INLINE_LAYERS bounds the rest)."""
    import hashlib
    import os

    from ortops.device import Device

    dev = f"{device.uuid}/{device.index}" if isinstance(device, Device) else repr(device)
    h = hashlib.sha256(proto.SerializeToString(deterministic=True))
    h.update(repr((dev, os.environ.get("ORTOPS_DEVICE"), placement, mode)).encode())
    return "convert-" + h.hexdigest()[:16]


def placement(model: ModelIn, *, device: DeviceSpec = None, policy: str = "gpu",
              mode: str | None = None) -> list[NodePlacement]:
    """Where each recurrent node of ``model`` would run under the placement ``policy``
    (``"gpu"`` or ``"auto"``; builds and drops the layers)."""
    rw = rewrite(model, weights="registry", device=device, tag="placement-" + uuid.uuid4().hex[:8],
                 placement=policy, mode=mode)
    _release(rw)   # the layers built to decide go now, not at the next full collection
    return rw.placement


def _release(rw) -> None:
    """Empty what ``rw`` holds once the caller has taken its part (the layers are in the
    registry, the model serialized), so the session's layers go when it is closed or
    collected even if something still refers to ``rw``: rewrite() used to leave it inside a
    reference cycle (its nested closures), which kept the layers (device memory, plans,
    pipelines) and the model until the next full collection of the cyclic garbage collector,
    0.9 MB a session under validation on lavapipe (docs/memory.md)."""
    rw.layers.clear()
    rw.devices.clear()
    rw.model.Clear()


def _token_array(token: int) -> np.ndarray:
    """The value fed to the run-token input (customop's docstring, "Errors")."""
    return np.array([token], dtype=np.int64)


def _node_error(token: int):
    """The first node error recorded under ``token`` (all are taken), or None."""
    errors = customop.REGISTRY.take_errors(token)
    return errors[0] if errors else None


class InferenceSession:
    """Drop-in ``onnxruntime.InferenceSession`` running RNN/GRU/LSTM on the GPU.

    model: a path, serialized bytes or ``onnx.ModelProto``.
    sess_options, providers, and further keyword arguments go to
    ``onnxruntime.InferenceSession``; the ortops custom ops are registered
    into ``sess_options`` (see :func:`register`).
    device: the Vulkan device for the recurrent layers (a ``Device``, its
    name or index; None: ``ORTOPS_DEVICE`` or the default device).
    require_gpu: raise ValueError if any recurrent node stays on ORT's CPU
    kernel (by default such nodes run there and show in ``placement``).
    placement: ``"gpu"`` (the default: every recurrent node the device can run goes to it) or
    ``"auto"`` (a node stays on ORT CPU where the calibrated cost model predicts ORT CPU
    faster, ``ortops.ort.policy``; the report says both predictions). Nodes kept on the CPU by
    "auto" count as not taken for ``require_gpu``.
    mode: the numerical mode of every recurrent node: "deterministic" (default) or
    "exact" (the same bits on every Vulkan device, docs/exact.md).
    """

    def __init__(self, model: ModelIn, sess_options: ort.SessionOptions | None = None,
                 providers: Sequence[Any] | None = None, *, device: DeviceSpec = None,
                 require_gpu: bool = False, placement: str = "gpu", mode: str | None = None,
                 **kwargs: Any) -> None:
        proto = load_model(model)
        rw = rewrite(proto, weights="registry", device=device, placement=placement, mode=mode)
        self._keys = list(rw.keys)
        self._run_input = rw.run_input
        self.placement: list[NodePlacement] = rw.placement
        if require_gpu:
            cpu = [p for p in rw.placement if p.where != "gpu"]
            if cpu:
                _release(rw)
                raise ValueError("recurrent node(s) not taken by the GPU path: "
                                 + "; ".join(p.describe() for p in cpu))
        customop.REGISTRY.add_session(rw.layers, rw.devices)
        # Layers go with the session: freed when it is closed or collected.
        self._finalizer = weakref.finalize(self, customop.REGISTRY.forget, list(self._keys))
        so = register(sess_options)
        serialized = rw.model.SerializeToString()
        _release(rw)
        try:
            self._sess = ort.InferenceSession(serialized, so, providers=providers, **kwargs)
            # What a feed may name, fixed for the session's life (not asked of ORT every run).
            inputs = frozenset(i.name for i in self.get_inputs())
            self._feed_names = (inputs, inputs | {i.name for i in self._sess.get_overridable_initializers()})
        except Exception as e:
            self._finalizer()
            left = [p.describe() for p in rw.placement if p.where != "gpu"]
            if left and hasattr(e, "add_note"):
                # ORT's own message says only that it has no kernel; say why
                # the node was not on the GPU (keeping ORT's exception type).
                e.add_note("ortops: recurrent node(s) left to ONNX Runtime: " + "; ".join(left))
            raise

    # -- running -------------------------------------------------------------
    #
    # Concurrency (docs/onnxruntime.md, "Threads"): run() may be called from many threads at
    # once, as with onnxruntime. Each run gets its own token, fed to every ortops node, under
    # which a failing node records its error; the run raises that error and only that one.
    # The layers give each concurrent run its own plan (ortops.layer), and the native module
    # locks each device queue around a submission.

    def _session(self) -> ort.InferenceSession:
        """The underlying session; a clear error once :meth:`close` was called."""
        sess = self.__dict__.get("_sess")
        if sess is None:
            raise RuntimeError("ortops.InferenceSession is closed (close() was called); create a new session")
        return sess

    def _guarded(self, call):
        """Run ``call(token)`` with a fresh run token; a recurrent node's own error (a
        ``customop.NodeRunError``) replaces ORT's report of the failed check."""
        token = customop.REGISTRY.new_token()
        try:
            return call(token)
        except Exception:
            err = _node_error(token)
            if err is not None:
                # The node's error, caused by what failed inside it (ORT's report of the
                # failed check only repeats that the node failed).
                raise err from err.__cause__
            raise
        finally:
            customop.REGISTRY.take_errors(token)

    def _checked_feed(self, input_feed) -> dict:
        """``input_feed`` with its names checked and its numpy arrays in native byte order.

        Names: the graph inputs and, as in ONNX Runtime, the overridable initializers (an
        initializer that is also a graph input, e.g. a weight W: a fed W runs with that W).
        Byte order: ONNX Runtime 1.32 reads the bytes of a non-native-order array (``>f4`` on
        x86) as native ones, i.e. wrong values; the values are kept here instead.
        """
        inputs, known = self._feed_names
        unknown = [k for k in input_feed if k not in known]
        if unknown:
            extra = sorted(known - inputs)
            raise ValueError(f"unknown input name(s) {unknown}; the model's inputs are {sorted(inputs)}"
                             + (f" and its overridable initializers {extra}" if extra else ""))
        return {k: v.astype(v.dtype.newbyteorder("=")) if isinstance(v, np.ndarray) and not v.dtype.isnative else v
                for k, v in input_feed.items()}

    def _with_token(self, feed: dict, token: int, wrap=lambda a: a) -> dict:
        if self._run_input is None:
            return feed
        return {**feed, self._run_input: wrap(_token_array(token))}

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
            run_options: ort.RunOptions | None = None) -> list[Any]:
        """Like ``onnxruntime.InferenceSession.run``, and like it safe to call from many
        threads at once. A recurrent node that fails (e.g. sequence_lens out of range) raises
        ``customop.NodeRunError`` (a ValueError) naming the node."""
        sess = self._session()
        feed = self._checked_feed(input_feed)
        return self._guarded(lambda token: sess.run(output_names, self._with_token(feed, token), run_options))

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_with_ort_values``."""
        sess = self._session()   # OrtValues keep their byte order: no _checked_feed
        return self._guarded(lambda token: sess.run_with_ort_values(
            output_names, self._with_token(input_dict_ort_values, token, ort.OrtValue.ortvalue_from_numpy),
            run_options))

    def run_with_iobinding(self, iobinding, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_with_iobinding`` (binds the run token into
        ``iobinding`` too)."""
        sess = self._session()

        def call(token):
            if self._run_input is not None:
                iobinding.bind_cpu_input(self._run_input, _token_array(token))
            return sess.run_with_iobinding(iobinding, run_options)

        return self._guarded(call)

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_async``. A failing recurrent node's message
        is given to ``callback`` as the error text."""
        sess = self._session()
        feed = self._checked_feed(input_feed)
        token = customop.REGISTRY.new_token()

        def done(results, data, err):
            node_err = _node_error(token)
            callback(results, data, str(node_err) if node_err is not None and err else err)

        return sess.run_async(output_names, self._with_token(feed, token), done, user_data, run_options)

    # -- what differs from the underlying session -------------------------------

    def get_inputs(self):
        """Graph inputs (the original model's; the run token is fed by ``run`` itself)."""
        return [i for i in self._session().get_inputs() if i.name != self._run_input]

    @property
    def ort_session(self) -> ort.InferenceSession:
        """The underlying ``onnxruntime.InferenceSession`` (rewritten model; its extra input
        ``ortops_run`` takes the run token, see docs/onnxruntime.md, "Errors")."""
        return self._session()

    @property
    def on_gpu(self) -> list[NodePlacement]:
        """Recurrent nodes running on the GPU."""
        return [p for p in self.placement if p.where == "gpu"]

    def __getattr__(self, name):
        # Everything else onnxruntime's session offers (get_outputs, get_providers,
        # get_overridable_initializers, io_binding, end_profiling, ...) is forwarded unchanged.
        if name.startswith("_"):
            raise AttributeError(name)
        if self.__dict__.get("_sess") is None and not hasattr(ort.InferenceSession, name):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self._session(), name)

    def close(self) -> None:
        """Release the device layers now (the session is unusable after)."""
        self._finalizer()
        self._sess = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

