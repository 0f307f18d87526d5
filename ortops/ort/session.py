"""``ortops.InferenceSession``, ``convert`` and ``register``.

``InferenceSession`` is an ``onnxruntime.InferenceSession`` whose RNN, GRU and
LSTM nodes run on the Vulkan device. Every other node, and every recurrent
node the GPU path cannot take, runs on ONNX Runtime as usual; ``placement``
says which is which.

Two doors to the same native core. ``InferenceSession`` hands the model to ONNX Runtime as it
is, with the ortops execution provider first (``ortops.ep``, ``src/ep/``): the EP takes each
recurrent node its native checker accepts and runs it through the core, constant weights
uploaded once when the session is created. :func:`convert` instead rewrites the recurrent
nodes into ortops custom nodes, for hosts that can only load an op library, which the
custom-op library runs (:func:`register`, :func:`library_path`). Under ``placement="auto"``
the report and the EP decide each node with the native core's cost model and one shared
calibration. Either way each run copies X, the states and sequence_lens in and the outputs out, once each, with no
Python on the way.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import TYPE_CHECKING, Any, Sequence, TypeAlias

import numpy as np
import onnxruntime as ort

from ortops._onnxruntime import require_version

require_version(ort.__version__)  # below the admitted bound: a clear ImportError, not odd results
from ortops._typing import DeviceSpec
from ortops.device import Device, refusal
from ortops.ep import EP_NAME, register_ep
from ortops.modes import check_mode
from ortops.ort import customop, policy
from ortops.ort.nodeconfig import NodeConfig
from ortops.ort.placement import node_key, node_name, outputs_key
from ortops.ort.rewrite import (ModelError, NodePlacement, default_opset, has_recurrent, load_model,
                                recurrent_nodes, rewrite, survey)

if TYPE_CHECKING:
    import onnx

#: A model: a path, the serialized bytes, or an onnx.ModelProto.
ModelIn: TypeAlias = "str | os.PathLike[str] | bytes | onnx.ModelProto"

_MARK = "ortops.custom_ops_library"

log = logging.getLogger("ortops")

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
            mode: str | None = None, require_gpu: bool = False) -> onnx.ModelProto:
    """Return a standalone model whose recurrent nodes run on the GPU.

    Any onnxruntime session loads it after :func:`register` of its options (or, from another
    language, after registering :func:`library_path`). Constant weights become initializers
    of the custom nodes, uploaded once per session. Nodes the GPU path cannot take stay
    standard nodes, each reported through the ``ortops`` logger (warning level) with the
    reason the native checker gave, the reason the execution provider gives for the same node
    (see :func:`placement`). ``device``: the device the nodes run on, written by UUID (None:
    ``ORTOPS_DEVICE`` or the default device where the model runs). ``placement``: ``"gpu"`` or
    ``"auto"``, as for :class:`InferenceSession`; ``mode`` (ortops.modes) is written into every
    node's config. ``require_gpu``: raise ValueError listing every node left unchanged and why.
    """
    out = rewrite(model, device=_named_device(device), placement=placement, mode=mode)
    left = [p for p in out.placement if p.where != "gpu"]
    for p in left:
        node = f"{p.path} / {p.op} {p.name!r}" if p.path else f"{p.op} {p.name!r}"
        log.warning("ortops.convert: %s left unchanged (ONNX Runtime's own kernel runs it): %s", node, p.reason)
    if require_gpu and left:
        raise ValueError("ortops.convert: recurrent node(s) not taken by the GPU path: "
                         + "; ".join(p.describe() for p in left))
    return out.model


def _source(model: ModelIn, proto: onnx.ModelProto):
    """What ONNX Runtime loads: the caller's path or bytes as given (a path keeps its external
    data files where ORT looks for them, beside it); a ModelProto serialized."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return proto.SerializeToString()


def _has_custom_nodes(proto: onnx.ModelProto) -> bool:
    """Whether the model is one :func:`convert` wrote (it imports the ortops domain)."""
    return any(o.domain == customop.DOMAIN for o in proto.opset_import)


def placement(model: ModelIn, *, device: DeviceSpec = None, policy: str = "gpu",
              mode: str | None = None) -> list[NodePlacement]:
    """Where each recurrent node of ``model`` would run under the placement ``policy``
    (``"gpu"`` or ``"auto"``; builds and drops the layers)."""
    return rewrite(model, device=_named_device(device), placement=policy, mode=mode).placement


def _named_device(device: DeviceSpec) -> DeviceSpec:
    """``device`` as the :class:`Device` it names; None stays None (the device is then chosen
    where the model runs). A selection that matches no device, ``device`` or ``ORTOPS_DEVICE``,
    is a ValueError naming it and listing the devices."""
    from ortops.device import no_device_error, select

    if device is None and not os.environ.get("ORTOPS_DEVICE", "").strip():
        return None   # nothing named: no device needs to be there yet
    try:
        chosen = select(device)
    except no_device_error():   # no Vulkan device here: each node's report says so
        return device
    return None if device is None else chosen


def _ep_providers(providers: Sequence[Any] | None, provider_options: Sequence[dict] | None,
                  options: dict) -> list:
    """The providers list for ``onnxruntime.InferenceSession``: the ortops EP first with
    ``options``, then the caller's ``providers`` (default: ONNX Runtime's CPU provider) with
    their ``provider_options``. An ``OrtopsExecutionProvider`` among them is dropped: the
    session's own device, mode and placement are its options.

    By name rather than through ``SessionOptions.add_provider_for_devices`` (what
    ``ortops.ep_session_options`` does): ONNX Runtime uses only the ``providers`` argument when
    both are given (onnxruntime 1.29 and 1.32 warn and drop the options' EP devices), and the
    caller's ``sess_options`` is left unchanged, so it can serve further sessions."""
    rest = list(providers) if providers is not None else ["CPUExecutionProvider"]
    if provider_options is not None and len(provider_options) != len(rest):
        raise ValueError(f"provider_options has {len(provider_options)} entries for {len(rest)} providers")
    out: list = [(EP_NAME, options)]
    for i, p in enumerate(rest):
        name, opts = p if isinstance(p, tuple) else (p, provider_options[i] if provider_options else {})
        if name != EP_NAME:
            out.append((name, dict(opts)) if opts else name)
    return out


def intra_op_options(intra_op_threads: int | None) -> ort.SessionOptions | None:
    """Session options with ``intra_op_threads`` intra-op threads for a model's other nodes
    (ONNX Runtime's ``intra_op_num_threads``), or None (the session's defaults) for None or 0.
    One suits a session shared by threads whose other nodes are light (docs/onnxruntime.md,
    "Threads"; ortops.serve's replicas, ``ortops run --intra-op-threads``)."""
    if not intra_op_threads:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(intra_op_threads)
    return so


def _cpu_device_options() -> ort.SessionOptions:
    """Session options for a session whose Vulkan device is a CPU implementation (lavapipe):
    ONNX Runtime's intra-op threads do not spin while they wait. They spin by default, and on
    a CPU device the layers' workgroups run on the same cores: on the 2-core machine the
    recognizer took 105-107 ms a run with spinning and 76-77 ms without (the same with one
    intra-op thread; docs/perf.md, "Kernel choices"). A caller's own sess_options are used as given."""
    so = ort.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


#: The reason of a recurrent node ONNX Runtime never offered the execution provider.
NOT_OFFERED = "ONNX Runtime did not offer the node to the ortops execution provider"


def _decided(proto: onnx.ModelProto, decisions: list) -> tuple[list[NodePlacement], list[NodeConfig]]:
    """The placement report of a session with the EP: each recurrent node (every scope, in the
    survey's order) as the EP decided it (the last decision on it; a node whose path, name and
    op type another node shares is found by its output names)."""
    nodes = list(recurrent_nodes(proto.graph))
    keys = [node_key(path, node) for node, _, path in nodes]
    by_key = {d["key"]: d for d in decisions}
    by_outputs = {(d["key"], d["outputs_key"]): d for d in decisions}
    placements, configs = [], []
    for index, ((node, scope, _), key) in enumerate(zip(nodes, keys)):
        d = by_key.get(key) if keys.count(key) == 1 else by_outputs.get((key, outputs_key(node)))
        if d is None:
            d = {"taken": False, "reason": NOT_OFFERED, "dtype": None, "direction": "forward", "layout": 0,
                 "hidden_size": None, "weights": "", "outputs": ()}
        placements.append(NodePlacement.of(index, node_name(node, index), node.op_type, d, scope.describe()))
        if d["taken"]:
            configs.append(NodeConfig.from_json(d["config"]))
    return placements, configs


class InferenceSession:
    """Drop-in ``onnxruntime.InferenceSession`` running RNN/GRU/LSTM on the GPU.

    The model goes to ONNX Runtime as it is, with the ortops execution provider
    (``OrtopsExecutionProvider``, ``ortops.ep``) first and the caller's providers after: the
    EP takes the recurrent nodes the native core's checker accepts, every other node runs on
    the next provider. ``placement`` reports each recurrent node as the EP decided it: the EP
    records each decision (taken, or the checker's reason; under ``placement="auto"`` the cost
    model's) under a key of this session (the EP option ``report_id``), read here once the
    session is created. Without the EP (no usable device, no recurrent node) the report comes
    from the same checker asked from Python (:func:`placement`, what :func:`convert` decides).

    model: a path, serialized bytes or ``onnx.ModelProto``.
    sess_options, and further keyword arguments go to ``onnxruntime.InferenceSession``
    (unchanged; the custom-op library is registered into ``sess_options`` only for a model
    already converted by :func:`convert`).
    providers: the providers after ortops (default ``["CPUExecutionProvider"]``; ONNX Runtime
    adds its CPU provider last in any case); ``provider_options`` pairs with them.
    device: the Vulkan device for the recurrent layers (a ``Device``, its name, index or
    UUID; None: ``ORTOPS_DEVICE``, else the GPU ``CUDA_VISIBLE_DEVICES`` assigns, else the
    default device: :func:`ortops.device.select`, the native core's choice). A device named
    that matches none is a ValueError naming it and listing the devices there are. Where there
    is no Vulkan device at all and none is named, every node runs on ONNX Runtime CPU, with a
    warning on the ``ortops`` logger (under ``require_gpu``, the RuntimeError instead).
    require_gpu: raise ValueError if any recurrent node stays on ORT's CPU kernel (by
    default such nodes run there and show in ``placement``).
    placement: ``"gpu"`` (the default: every recurrent node the device can run goes to it) or
    ``"auto"`` (a node stays on ORT CPU where the calibrated cost model predicts ORT CPU
    faster, ``ortops.ort.policy``; the report says both predictions). Nodes kept on the CPU by
    "auto" count as not taken for ``require_gpu``.
    mode: the numerical mode of every recurrent node: "deterministic" (default), "exact" (the
    same bits on every Vulkan device, docs/exact.md) or "fast" (docs/modes.md).
    """

    def __init__(self, model: ModelIn, sess_options: ort.SessionOptions | None = None,
                 providers: Sequence[Any] | None = None, *, device: DeviceSpec = None,
                 require_gpu: bool = False, placement: str = "gpu", mode: str | None = None,
                 **kwargs: Any) -> None:
        policy.check(placement)
        mode = check_mode(mode, "ortops.InferenceSession")
        proto = load_model(model)
        default_opset(proto)   # the survey's ModelError (no ai.onnx opset), raised here as before
        # ONNX Runtime's Python session retries a failed creation (and a run failing with
        # EPFail) on the CPU provider alone, printing to stdout: a node the EP could not
        # compile would silently leave the device. Off, unless the caller says otherwise.
        kwargs.setdefault("enable_fallback", 0)
        dev = self._device = self._choose_device(device, require_gpu)
        # The placement report is the EP's decisions, read when the session is created and made
        # into the report when first read. Only where the session has no EP does the report
        # check the nodes from Python (rewrite.survey, when first read: it would add to every
        # session's creation otherwise).
        self._report_lock = threading.Lock()
        self._survey: tuple | None = (proto, dev, mode, placement)
        self._decisions: list | None = None
        self._placement: list[NodePlacement] | None = None
        self._node_configs: list[NodeConfig] | None = None
        # The EP wherever it could take a node: a device the core's device check accepts and a
        # recurrent node in the model. With no Vulkan device there is none.
        ep_device = dev if dev is not None and refusal(dev, mode) is None and has_recurrent(proto) else None
        source: Any = _source(model, proto)
        so = register(sess_options) if _has_custom_nodes(proto) else sess_options
        if so is None and dev is not None and dev.type == "cpu":
            so = _cpu_device_options()
        report_id = None
        if ep_device is not None:
            report_id = uuid.uuid4().hex
            providers = _ep_providers(providers, kwargs.pop("provider_options", None),
                                      {"device": ep_device.uuid or str(ep_device.index), "mode": mode,
                                       "placement": placement, "report_id": report_id})
            register_ep()
        self._create(source, so, providers, kwargs, report_id)
        if require_gpu:
            cpu = [p for p in self.placement if p.where != "gpu"]
            if cpu:
                self.close()
                raise ValueError("recurrent node(s) not taken by the GPU path: "
                                 + "; ".join(p.describe() for p in cpu))

    @staticmethod
    def _choose_device(device: DeviceSpec, require_gpu: bool) -> Device | None:
        """The native core's choice (ortops.device.select); None, with a warning, where there is
        no Vulkan device at all and none was named."""
        from ortops.device import no_device_error, select

        try:
            return select(device)
        except no_device_error() as e:
            if require_gpu:
                raise type(e)(f"ortops.InferenceSession(require_gpu=True): {e}") from e
            log.warning("%s; ortops.InferenceSession runs every node of the model on ONNX Runtime CPU", e)
            return None

    @property
    def device(self) -> Device | None:
        """The Vulkan device the recurrent nodes are placed on (None: there is no Vulkan device)."""
        return self._device

    def _report(self) -> tuple[list[NodePlacement], list[NodeConfig]]:
        """The placement report and the taken nodes' configs, made on the first call from the
        EP's decisions, else surveyed (then the parsed model is dropped: the session no longer
        holds a second copy of it)."""
        with self._report_lock:
            if self._survey is not None:
                proto, dev, mode, placement = self._survey
                if self._decisions is not None:
                    self._placement, self._node_configs = _decided(proto, self._decisions)
                else:
                    plan = survey(proto, device=dev, mode=mode, placement=placement)
                    self._placement, self._node_configs = plan.placement, list(plan.configs)
                self._survey = self._decisions = None
            assert self._placement is not None and self._node_configs is not None
            return self._placement, self._node_configs

    @property
    def placement(self) -> list[NodePlacement]:
        """Where each recurrent node runs (every scope, in the survey's order), with the reason
        for each node left to ONNX Runtime."""
        return self._report()[0]

    @property
    def node_configs(self) -> list[NodeConfig]:
        """The configs of the recurrent nodes the device runs (ortops.ort.nodeconfig): device
        (UUID), mode, outputs computed, per node."""
        return self._report()[1]

    def _create(self, source, so, providers, kwargs, report_id: str | None) -> None:
        """The ONNX Runtime session and the EP's decisions (recorded under ``report_id``); a
        node's refusal (its kernel's or the EP's compile) raised as ``NodeRunError``, ORT's own
        refusal with a note on the nodes left to it."""
        from ortops.device import _native

        try:
            self._sess = ort.InferenceSession(source, so, providers=providers, **kwargs)
            # What a feed may name, fixed for the session's life (not asked of ORT every run).
            inputs = frozenset(i.name for i in self._sess.get_inputs())
            self._feed_names = (inputs, inputs | {i.name for i in self._sess.get_overridable_initializers()})
            if report_id is not None:
                self._decisions = _native().node_decisions(report_id)
        except Exception as e:
            err = customop.node_error(e)
            if err is not None:   # a node's kernel refused (its config, weights or device)
                raise err from e
            left = [p.describe() for p in self.placement if p.where != "gpu"]
            if left and hasattr(e, "add_note"):
                # ORT's own message says only that it has no kernel; say why
                # the node was not on the GPU (keeping ORT's exception type).
                e.add_note("ortops: recurrent node(s) left to ONNX Runtime: " + "; ".join(left))
            raise
        finally:
            if report_id is not None:
                _native().forget_node_decisions(report_id)

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
        """The underlying ``onnxruntime.InferenceSession`` (of the model as given, the ortops
        EP first)."""
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


from ortops._deprecated import attribute, module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "session_device": ("ortops.device.select(device) (a device that matches nothing is an error now)",
                       attribute("ortops.device", "select")),
})
