"""Random, valid inputs for a model: `make_inputs`.

Every real graph input (graph inputs that are also initializers are optional overrides
and are skipped) gets a deterministic random tensor of its dtype and of the shape that
`resolve_shapes` derives from the profile (a sequence input: a list of two such
tensors; an optional input: present). Inputs too large for this machine are refused
with a BackendError before anything is allocated. Values are chosen so that the model runs:

* floats: standard normal (float16/float64 as declared);
* integers used as indices: an input that reaches the indices of Gather /
  GatherElements / GatherND (directly or through value-preserving ops such as Cast,
  Reshape, Unsqueeze) is drawn from [0, size of the indexed axis) when that size is known
  (initializer, Constant, or another input's resolved shape);
* inputs whose name contains "mask": all ones (all True); random masks can blank whole
  rows and turn softmaxes into NaN;
* other integers: [0, 8) for 16 bits and wider, the full range for 8-bit types
  (quantized images); bools: fair coin; strings: short random words.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict, deque
from collections.abc import Iterator, Mapping

import numpy as np
import onnx

from taso.backends._session import ModelSource, load_structure
from taso.backends.profiles import (
    InputKind,
    Shape,
    ShapeProfile,
    real_inputs,
    resolve_shapes,
    tensor_type,
)
from taso.errors import BackendError

DEFAULT_INT_HIGH = 8
_MASK_NAME = re.compile(r"mask", re.IGNORECASE)
# Ops that pass their data input's values through unchanged (position 0, or any for Concat).
_VALUE_PRESERVING = frozenset(
    {
        "Cast",
        "Identity",
        "Reshape",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Expand",
        "Transpose",
        "Slice",
        "Tile",
        "Concat",
    }
)
# Indexing ops: the input position holding indices.
_INDEXING = {"Gather": 1, "GatherElements": 1, "GatherND": 1}
_FLOATS = (np.float16, np.float32, np.float64)
_INTS = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)


def make_inputs(
    model: ModelSource, *, profile: ShapeProfile | None = None, seed: int = 0
) -> dict[str, Feed]:
    """Deterministic random inputs for every real input of `model` (see module doc)."""
    structure = load_structure(model)
    shapes = resolve_shapes(structure, profile)
    bounds = _index_bounds(structure.graph, shapes)
    rng = np.random.default_rng(seed)
    inputs = [(value, *tensor_type(value)) for value in real_inputs(structure.graph)]
    _check_size({value.name: (_numpy_dtype(value.name, t), kind, shapes[value.name]) for value, kind, t in inputs})
    values: dict[str, Feed] = {}
    for value, kind, tensor in inputs:
        dtype, shape = _numpy_dtype(value.name, tensor), shapes[value.name]
        # np.asarray: for a scalar input NumPy returns a scalar (np.bool_), which ORT refuses
        arrays = [np.asarray(_random_tensor(value.name, dtype, shape, bounds, rng)) for _ in range(_copies(kind))]
        values[value.name] = arrays if kind is InputKind.SEQUENCE else arrays[0]
    return values


Feed = np.ndarray | list[np.ndarray]
SEQUENCE_LENGTH = 2
"""Elements fed to a sequence input: two, so that position-dependent code runs."""


def _copies(kind: InputKind) -> int:
    return SEQUENCE_LENGTH if kind is InputKind.SEQUENCE else 1


MAX_INPUT_FRACTION = 1 / 16
"""Generated inputs may take at most this share of the machine's memory: the activations
of a run are many times the inputs (a 1x3x100000x100000 input asked for 120 GB and ended
in MemoryError mid-run)."""


def _check_size(inputs: Mapping[str, tuple[np.dtype, InputKind, Shape]]) -> None:
    """Refuse, before allocating anything, inputs too large to run the model with."""
    total = sum(
        math.prod(shape) * dtype.itemsize * _copies(kind) for dtype, kind, shape in inputs.values()
    )
    limit = _memory_bytes() * MAX_INPUT_FRACTION
    if total > limit:
        shapes = ", ".join(f"{name}={'x'.join(map(str, shape))}" for name, (_, _, shape) in inputs.items())
        raise BackendError(
            f"inputs at {shapes} would take {total / 2**30:.1f} GiB, more than "
            f"{MAX_INPUT_FRACTION:.0%} of this machine's memory ({limit / 2**30:.1f} GiB)"
        )


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _numpy_dtype(name: str, tensor: onnx.TypeProto.Tensor) -> np.dtype:
    elem_type = tensor.elem_type
    if elem_type == onnx.TensorProto.STRING:
        return np.dtype(object)
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        dtype = np.dtype(np.void)
    if dtype.type not in (*_FLOATS, *_INTS, np.bool_):
        label = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise BackendError(f"input {name!r} has dtype {label}; no inputs can be generated for it")
    return dtype


def _random_tensor(
    name: str, dtype: np.dtype, shape: Shape, bounds: Mapping[str, int], rng: np.random.Generator
) -> np.ndarray:
    if dtype.type in _FLOATS:
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    if _MASK_NAME.search(name) and dtype.type is not np.object_:
        return np.ones(shape, dtype=dtype)
    if dtype.type is np.bool_:
        return rng.random(shape) < 0.5
    if dtype.type is np.object_:
        words = np.array(["a", "bb", "ccc", "taso", "onnx"], dtype=object)
        return rng.choice(words, size=shape)
    low, high = _int_range(dtype, bounds.get(name))
    return rng.integers(low, high, size=shape, dtype=dtype, endpoint=False)


def _int_range(dtype: np.dtype, bound: int | None) -> tuple[int, int]:
    if bound is not None:
        return 0, max(bound, 1)
    if dtype.itemsize == 1:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max) + 1
    return 0, DEFAULT_INT_HIGH


def _index_bounds(graph: onnx.GraphProto, shapes: Mapping[str, Shape]) -> dict[str, int]:
    """For each input reaching an indexing op's indices, the smallest indexed axis size."""
    consumers = _consumers(graph)
    known = _static_shapes(graph, shapes)
    bounds: dict[str, int] = {}
    for name in shapes:
        sizes = [size for size in _indexed_sizes(name, consumers, known) if size is not None]
        if sizes:
            bounds[name] = min(sizes)
    return bounds


def _indexed_sizes(
    start: str,
    consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]],
    known: Mapping[str, Shape],
) -> Iterator[int | None]:
    """Sizes of the axes indexed by `start`'s values, following value-preserving ops."""
    queue, seen = deque([start]), {start}
    while queue:
        for node, position in consumers.get(queue.popleft(), ()):
            if _INDEXING.get(node.op_type) == position and not node.domain:
                yield _indexed_axis_size(node, known)
            elif node.op_type in _VALUE_PRESERVING and (position == 0 or node.op_type == "Concat"):
                for output in node.output:
                    if output and output not in seen:
                        seen.add(output)
                        queue.append(output)


def _indexed_axis_size(node: onnx.NodeProto, known: Mapping[str, Shape]) -> int | None:
    data_shape = known.get(node.input[0])
    if not data_shape:
        return None
    if node.op_type == "GatherND":
        return min(data_shape)
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    return data_shape[axis % len(data_shape)]


def _consumers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = defaultdict(list)
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name:
                consumers[name].append((node, position))
    return consumers


def _static_shapes(graph: onnx.GraphProto, inputs: Mapping[str, Shape]) -> dict[str, Shape]:
    """Shapes known without inference: initializers, Constant outputs, resolved inputs."""
    known: dict[str, Shape] = {t.name: tuple(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and not node.domain:
            for attribute in node.attribute:
                if attribute.name == "value":
                    known[node.output[0]] = tuple(attribute.t.dims)
    known.update(inputs)
    return known
