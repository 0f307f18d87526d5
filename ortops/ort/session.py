"""``ortops.InferenceSession``, ``convert`` and ``register``.

``InferenceSession`` is an ``onnxruntime.InferenceSession`` whose RNN, GRU and
LSTM nodes run on the Vulkan device. Every other node, and every recurrent
node the GPU path cannot take, runs on ONNX Runtime as usual; ``placement``
says which is which.

Both run the same model: :func:`convert` rewrites the recurrent nodes into ortops custom
nodes, and ONNX Runtime runs them through the native custom-op library (:func:`register`,
:func:`library_path`). Constant weights are constant inputs of the custom nodes, uploaded
once when ONNX Runtime creates each node's kernel; each run copies X, the states and
sequence_lens in and the outputs out, once each, with no Python on the way.
"""

from __future__ import annotations

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

_MARK = "ortops.custom_ops_library"

__all__ = ["InferenceSession", "convert", "register", "library_path", "placement", "ModelError",
           "NodePlacement"]


def library_path() -> str:
    """The path of the custom-op library ``libortops_ort.so``, for
    ``register_custom_ops_library`` in any ONNX Runtime (C, C++, C#, Java, Triton's ONNX
    Runtime backend; docs/onnxruntime.md)."""
    return customop.library_path()


def register(sess_options: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """Register the ortops custom-op library (:func:`library_path`) with ``sess_options``
    (created if None) and return it. Idempotent: registering the same options again is a
    no-op.

    A session created with these options can load a model from :func:`convert`.
    """
    so = sess_options if sess_options is not None else ort.SessionOptions()
    try:
        if so.get_session_config_entry(_MARK) == "1":
            return so
    except RuntimeError:  # ORT raises when the entry does not exist yet
        pass
    so.register_custom_ops_library(customop.library_path())
    so.add_session_config_entry(_MARK, "1")
    return so


def convert(model: ModelIn, *, device: DeviceSpec = None, placement: str = "gpu",
            mode: str | None = None) -> onnx.ModelProto:
    """Return a standalone model whose recurrent nodes run on the GPU.

    Any onnxruntime session loads it after :func:`register` of its options (or, from another
    language, after registering :func:`library_path`). Constant weights become initializers
    of the custom nodes, uploaded once per session. Nodes the GPU path cannot take stay
    standard nodes (see :func:`placement`). ``device``: the device the nodes run on, written
    by UUID (None: ``ORTOPS_DEVICE`` or the default device where the model runs).
    ``placement``: ``"gpu"`` or ``"auto"``, as for :class:`InferenceSession`; ``mode``
    (ortops.modes) is written into every node's config.
    """
    return rewrite(model, device=device, placement=placement, mode=mode).model


def placement(model: ModelIn, *, device: DeviceSpec = None, policy: str = "gpu",
              mode: str | None = None) -> list[NodePlacement]:
    """Where each recurrent node of ``model`` would run under the placement ``policy``
    (``"gpu"`` or ``"auto"``; builds and drops the layers)."""
    return rewrite(model, device=device, placement=policy, mode=mode).placement


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
        rw = rewrite(proto, device=device, placement=placement, mode=mode)
        self.placement: list[NodePlacement] = rw.placement
        #: The configs of the custom nodes the session runs (ortops.ort.nodeconfig): device
        #: (UUID), mode, outputs computed, per node.
        self.node_configs = list(rw.configs)
        if require_gpu:
            cpu = [p for p in rw.placement if p.where != "gpu"]
            if cpu:
                raise ValueError("recurrent node(s) not taken by the GPU path: "
                                 + "; ".join(p.describe() for p in cpu))
        so = register(sess_options)
        try:
            self._sess = ort.InferenceSession(rw.model.SerializeToString(), so, providers=providers, **kwargs)
            # What a feed may name, fixed for the session's life (not asked of ORT every run).
            inputs = frozenset(i.name for i in self._sess.get_inputs())
            self._feed_names = (inputs, inputs | {i.name for i in self._sess.get_overridable_initializers()})
        except Exception as e:
            err = customop.node_error(e)
            if err is not None:   # a node's kernel refused (its config, weights or device)
                raise err from e
            left = [p.describe() for p in rw.placement if p.where != "gpu"]
            if left and hasattr(e, "add_note"):
                # ORT's own message says only that it has no kernel; say why
                # the node was not on the GPU (keeping ORT's exception type).
                e.add_note("ortops: recurrent node(s) left to ONNX Runtime: " + "; ".join(left))
            raise

    # -- running -------------------------------------------------------------
    #
    # Concurrency (docs/onnxruntime.md, "Threads"): run() may be called from many threads at
    # once, as with onnxruntime. A failing node returns its own status to its own run (the
    # library's kernel, src/ort/kernel.cpp), so a run raises its own error and only its own.
    # The native layers give each concurrent run its own plan, and the core locks each
    # device queue around a submission.

    def _session(self) -> ort.InferenceSession:
        """The underlying session; a clear error once :meth:`close` was called."""
        sess = self.__dict__.get("_sess")
        if sess is None:
            raise RuntimeError("ortops.InferenceSession is closed (close() was called); create a new session")
        return sess

    @staticmethod
    def _guarded(call):
        """Run ``call()``; a recurrent node's status (the library's) is raised as a
        ``customop.NodeRunError`` naming the node, caused by ORT's exception."""
        try:
            return call()
        except Exception as e:
            err = customop.node_error(e)
            if err is not None:
                raise err from e
            raise

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

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
            run_options: ort.RunOptions | None = None) -> list[Any]:
        """Like ``onnxruntime.InferenceSession.run``, and like it safe to call from many
        threads at once. A recurrent node that fails (e.g. sequence_lens out of range) raises
        ``customop.NodeRunError`` (a ValueError) naming the node."""
        sess = self._session()
        feed = self._checked_feed(input_feed)
        return self._guarded(lambda: sess.run(output_names, feed, run_options))

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_with_ort_values``."""
        sess = self._session()   # OrtValues keep their byte order: no _checked_feed
        return self._guarded(lambda: sess.run_with_ort_values(output_names, input_dict_ort_values, run_options))

    def run_with_iobinding(self, iobinding, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_with_iobinding``."""
        sess = self._session()
        return self._guarded(lambda: sess.run_with_iobinding(iobinding, run_options))

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Like ``onnxruntime.InferenceSession.run_async``; a failing recurrent node's message
        (naming the node) is given to ``callback`` as the error text."""
        sess = self._session()
        feed = self._checked_feed(input_feed)
        return sess.run_async(output_names, feed, callback, user_data, run_options)

    # -- what differs from the underlying session -------------------------------

    def get_inputs(self):
        """Graph inputs (the original model's)."""
        return self._session().get_inputs()

    @property
    def ort_session(self) -> ort.InferenceSession:
        """The underlying ``onnxruntime.InferenceSession`` (of the rewritten model)."""
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
        """Release the session now (its kernels free their device memory; the session is
        unusable after)."""
        self._sess = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

