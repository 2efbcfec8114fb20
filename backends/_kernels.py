"""The kernels ONNX Runtime runs for a model, and what each one costs in context.

`compile_kernels` asks ORT for the graph it will actually execute (ORT_ENABLE_ALL, the
options users run: Conv+activation and Conv+Mul/Add fusions, QuickGelu, Gelu, the NCHWc
layout with ReorderInput/ReorderOutput where a layout change is needed, ...). It builds a
session without running it (weights are not prepacked) and has ORT save its optimized
graph, large weights beside it in one file. Each node of that graph is a `Kernel` with a
signature of what its latency depends on: op, attributes, input and output shapes and
which inputs are weights (shapes from `_kernel_shapes`; never the weights' values).

`profile_kernels` runs a compiled graph under ORT's profiler (optimizations off: the
graph is already ORT's) and returns each kernel's fastest of the timed runs;
`profile_shapes` runs it once and returns the shapes ORT reports for each kernel's
inputs and outputs (the oracle the inferred shapes are tested against).
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from taso.backends._kernel_shapes import (
    KernelShapeError,
    TypedShape,
    elem_type_of,
    infer_kernel_shapes,
)
from taso.backends._session import (
    GraphOptimization,
    ModelSource,
    SessionConfig,
    Spinning,
    call_ort,
    create_session,
)

_WEIGHTS_FILE = "weights.bin"
_WEIGHTS_MIN_BYTES = 1024


@dataclass(frozen=True)
class Kernel:
    """One node of ORT's optimized graph."""

    name: str  # ORT's node name: profiler events are keyed by it
    op: str  # "domain:op_type" ("" domain: the standard ops)
    signature: str  # a digest of op, attributes, shapes and weight positions


@dataclass(frozen=True)
class KernelGraph:
    """ORT's optimized graph of a model: its kernels, in ORT's order, and where it lies."""

    kernels: tuple[Kernel, ...]
    path: Path  # ORT's optimized model (weights in `_WEIGHTS_FILE` beside it)
    shapes_known: bool  # False: signatures need shapes that only a profiled run gives


def compile_kernels(model: ModelSource, folder: Path, *, threads: int = 2) -> KernelGraph:
    """ORT's optimized graph of `model`, saved in `folder` (which the caller owns)."""
    path = folder / "kernels.onnx"
    config = SessionConfig(
        threads=threads,
        extra=(
            ("session.disable_prepacking", "1"),
            ("session.optimized_model_external_initializers_file_name", _WEIGHTS_FILE),
            ("session.optimized_model_external_initializers_min_size_in_bytes", str(_WEIGHTS_MIN_BYTES)),
        ),
        optimized_path=str(path),
    )
    session = create_session(model, config)
    del session
    structure = onnx.load(str(path), load_external_data=False)
    if _name_nodes(structure):
        onnx.save(structure, str(path))  # the profiler keys its events by node name
    try:
        shapes = infer_kernel_shapes(structure, nchwc_block())
    except KernelShapeError:
        return KernelGraph(tuple(_unsigned(n) for n in structure.graph.node), path, shapes_known=False)
    weights = {init.name for init in structure.graph.initializer}
    kernels = tuple(_kernel(node, shapes, weights) for node in structure.graph.node)
    return KernelGraph(kernels, path, shapes_known=True)


def _name_nodes(model: onnx.ModelProto) -> bool:
    """Give unnamed and same-named nodes unique names; True if any changed."""
    seen: set[str] = set()
    changed = False
    for k, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.name or node.op_type}__k{k}"
            changed = True
        seen.add(node.name)
    return changed


def _unsigned(node: onnx.NodeProto) -> Kernel:
    return Kernel(node.name, f"{node.domain}:{node.op_type}", "")


def _kernel(node: onnx.NodeProto, shapes: Mapping[str, TypedShape], weights: set[str]) -> Kernel:
    parts = [f"{node.domain}:{node.op_type}", _attributes(node)]
    for name in node.input:
        typed = shapes.get(name) if name else None
        kind = "-" if not name else ("w" if name in weights else "x")
        parts.append(f"{kind}{typed.elem_type}:{typed.shape}" if typed else kind)
    parts.append("->")
    parts.extend(f"{shapes[n].shape}" if n in shapes else "-" for n in node.output)
    return Kernel(node.name, f"{node.domain}:{node.op_type}", _digest("|".join(parts)))


def _attributes(node: onnx.NodeProto) -> str:
    items = []
    for attr in sorted(node.attribute, key=lambda a: a.name):
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, onnx.TensorProto):
            value = ("tensor", value.data_type, tuple(value.dims))
        elif attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            value = "graph"
        items.append(f"{attr.name}={value!r}")
    return ",".join(items)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16, person=b"taso-kernel").hexdigest()


@functools.cache
def nchwc_block() -> int:
    """ORT's NCHWc channel block on this CPU (16 with AVX-512, 8 with AVX2; 1: no NCHWc),
    read off the reordered weights of a probe Conv with 3 output channels."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 4, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(np.ones((3, 8, 1, 1), np.float32), "w")
    node = onnx.helper.make_node("Conv", ["x", "w"], ["y"])
    graph = onnx.helper.make_graph([node], "probe", [x], [y], [w])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory(prefix="taso-nchwc-") as folder:
        path = Path(folder) / "probe.onnx"
        create_session(model, SessionConfig(threads=1, optimized_path=str(path)))
        saved = onnx.load(str(path))
    reordered = [init for init in saved.graph.initializer if len(init.dims) == 4]
    return int(reordered[0].dims[0]) if reordered and reordered[0].dims[0] > 3 else 1


@dataclass(frozen=True)
class KernelProfile:
    """Each kernel's time in a profiled graph (by kernel name): its fastest timed run.

    The fastest run, not the median: on a shared machine another process slows some runs
    of a kernel and never speeds one up, so the fastest run is the one least disturbed.
    Medians of 5-12 runs moved single kernels 2x between profiles of the same graph, and
    correcting them to the graph's plain run time (the profiler's overhead, spread over the
    kernels) moved them 20x, since that one plain median was as noisy as the rest: PP-OCRv4
    rec's fold sweep (1.21x measured) was predicted 0.90x to 1.96x by fresh cost models; by
    the fastest runs, 1.10x to 1.29x. The profiler's own overhead in the fastest runs is
    about 1 us a kernel (the sum of the kernels' fastest runs is within a few percent of the
    graph's fastest plain run), so no correction is made.
    """

    kernel_ms: Mapping[str, float]
    signatures: Mapping[str, str]  # profiler-derived signatures (only for unsigned graphs)


@dataclass(frozen=True)
class ProfileRuns:
    """How long to profile: about `target_ms` of runs, at least `min_runs`, at most
    `max_runs` and `max_kernel_runs` kernel events in all (the profiler's trace grows by
    three events per kernel and run: parsing 50 runs of a 300-kernel graph took 0.5 s).

    A kernel costs its fastest run, so the runs should span more time than a burst of
    another process's work: twelve runs of PP-OCR's 0.8 ms direction classifier took 10 ms,
    and one profile of its padded graph, taken in one slow stretch, priced it 0.999x of the
    original where other profiles gave 1.06x to 1.18x (measured 1.15x)."""

    target_ms: float = 100.0
    min_runs: int = 5
    max_runs: int = 60
    max_kernel_runs: int = 3000
    warmup: int = 3

    def runs_for(self, per_run_ms: float, kernels: int = 1) -> int:
        most = min(self.max_runs, self.max_kernel_runs // max(kernels, 1))
        return max(self.min_runs, min(most, int(self.target_ms / max(per_run_ms, 1e-3))))


def profile_kernels(
    graph: KernelGraph, inputs: Mapping[str, np.ndarray], *, runs: ProfileRuns = ProfileRuns(), threads: int = 2
) -> KernelProfile:
    """Run `graph` (optimizations off, spinning off) under ORT's profiler: each kernel's
    fastest timed run (`fastest_runs`)."""
    config = SessionConfig(
        threads=threads,
        optimization=GraphOptimization.DISABLE,
        spinning=Spinning.OFF,
        profile_prefix=str(graph.path.parent / "profile"),
    )
    session = create_session(graph.path, config)
    feeds = _feeds(session, inputs)
    warm = _timed_runs(session, feeds, runs.warmup)
    count = runs.runs_for(min(warm), len(graph.kernels))
    _timed_runs(session, feeds, count)
    events = _kernel_events(session)
    durations: dict[str, list[float]] = defaultdict(list)
    shapes: dict[str, ReportedShapes] = {}
    for name, event in events:
        durations[name].append(event["dur"] / 1e3)
        shapes[name] = _reported(event.get("args", {}))
    signatures = {} if graph.shapes_known else _profiled_signatures(graph, shapes)
    return KernelProfile(fastest_runs(durations, count), signatures)


def fastest_runs(durations: Mapping[str, Sequence[float]], timed: int) -> dict[str, float]:
    """Each kernel's fastest of its last `timed` runs (the earlier ones are warm-up runs)."""
    return {name: min(values[-timed:]) for name, values in durations.items()}


@dataclass(frozen=True)
class ReportedShapes:
    """The dtypes and shapes ORT's profiler reported for one kernel's inputs and outputs
    (in order; absent optional ones left out)."""

    inputs: tuple[TypedShape, ...]
    outputs: tuple[TypedShape, ...]


def profile_shapes(
    graph: KernelGraph, inputs: Mapping[str, np.ndarray], *, threads: int = 1
) -> dict[str, ReportedShapes]:
    """Run `graph` once under ORT's profiler: the shapes it reports, by kernel name."""
    config = SessionConfig(
        threads=threads,
        optimization=GraphOptimization.DISABLE,
        extra=(("session.disable_prepacking", "1"),),  # a prepacked weight is reported as no input
        profile_prefix=str(graph.path.parent / "shapes"),
    )
    session = create_session(graph.path, config)
    _timed_runs(session, _feeds(session, inputs), 1)
    return {name: _reported(event.get("args", {})) for name, event in _kernel_events(session)}


def _feeds(session: ort.InferenceSession, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    wanted = {i.name for i in session.get_inputs()}
    return {k: v for k, v in inputs.items() if k in wanted}


def _kernel_events(session: ort.InferenceSession) -> list[tuple[str, dict[str, object]]]:
    """End `session`'s profiling: its kernel events, in order, as (kernel name, event)."""
    trace = Path(call_ort("profiling the kernel graph", session.end_profiling))
    events = json.loads(trace.read_text())
    trace.unlink()
    suffix = "_kernel_time"
    return [
        (event["name"][: -len(suffix)], event)
        for event in events
        if event.get("cat") == "Node" and event["name"].endswith(suffix)
    ]


def _reported(args: Mapping[str, object]) -> ReportedShapes:
    return ReportedShapes(_typed(args.get("input_type_shape")), _typed(args.get("output_type_shape")))


def _typed(entries: object) -> tuple[TypedShape, ...]:
    """The profiler's `[{"float": [1, 3, 224, 224]}, ...]` as TypedShapes."""
    typed = []
    for entry in entries or []:  # type: ignore[attr-defined]
        ((dtype, dims),) = entry.items()
        typed.append(TypedShape(elem_type_of(dtype), tuple(dims)))
    return tuple(typed)


def _timed_runs(session: ort.InferenceSession, feeds: Mapping[str, np.ndarray], count: int) -> list[float]:
    names = [o.name for o in session.get_outputs()]
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call_ort("running the kernel graph", lambda: session.run(names, feeds))
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _profiled_signatures(graph: KernelGraph, reported: Mapping[str, ReportedShapes]) -> dict[str, str]:
    """Signatures from the value shapes the profiler reports (every node's outputs), so
    they equal the ones inferred shapes would have given."""
    structure = onnx.load(str(graph.path), load_external_data=False)
    shapes = {init.name: TypedShape(init.data_type, tuple(init.dims)) for init in structure.graph.initializer}
    for value in structure.graph.input:
        tensor = value.type.tensor_type
        shapes.setdefault(value.name, TypedShape(tensor.elem_type, tuple(d.dim_value for d in tensor.shape.dim)))
    for node in structure.graph.node:
        outputs = reported[node.name].outputs if node.name in reported else ()
        shapes.update(zip([n for n in node.output if n], outputs, strict=False))
    weights = {init.name for init in structure.graph.initializer}
    return {node.name: _kernel(node, shapes, weights).signature for node in structure.graph.node}
