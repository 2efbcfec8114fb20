"""Mutations of real models for the reliability fuzzer (`benchmarks.fuzz_reliability`).

Each mutation edits a model in place and returns a one-line note of what it did, or None
where it does not apply (no initializer to move, one node only...). Some make the model
invalid (a dropped producer, a node defined twice), some keep it valid (dead code, an
overridable initializer, a metadata entry): the fuzzer asks the onnx checker which.
The hostile external-data mutations only pick a tensor; the fuzzer writes its bytes where
the location says (`Hostile`), since a proto alone cannot say where a file lies.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh


class Hostile(enum.Enum):
    """Where an externalized tensor's data is put, relative to the model's folder."""

    ABSOLUTE = "absolute path to a file outside the folder"
    PARENT = "'../x.bin': a file in the parent folder"
    SYMLINK = "a symlink in the folder pointing outside it"
    OUTPUT_DATA = "the output's own '.data' file (the model sits in the output folder)"


@dataclass(frozen=True)
class Applied:
    """What one mutation did; `hostile` names the tensor to externalize and how."""

    note: str
    hostile: tuple[Hostile, str] | None = None


Mutation = Callable[[onnx.ModelProto, random.Random], Applied | None]

HUGE_DIM = 100_000
OPSETS = (11, 13, 17)


def drop_node(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Delete a node: its consumers (or the graph output) read an undefined value."""
    nodes = model.graph.node
    if len(nodes) < 2:
        return None
    k = rng.randrange(len(nodes))
    node = nodes[k]
    note = f"dropped node #{k} {node.op_type} -> {list(node.output)}"
    del nodes[k]
    return Applied(note)


def duplicate_node(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Insert a copy of a node right after it, defining the same outputs twice."""
    nodes = model.graph.node
    k = rng.randrange(len(nodes))
    nodes.insert(k + 1, _copy(nodes[k]))
    return Applied(f"node #{k} {nodes[k].op_type} duplicated with the same outputs {list(nodes[k].output)}")


def duplicate_node_renamed(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Insert a copy of a node whose outputs are renamed: valid dead code."""
    nodes = model.graph.node
    k = rng.randrange(len(nodes))
    twin = _copy(nodes[k])
    for i, name in enumerate(twin.output):
        if name:
            twin.output[i] = f"{name}__fuzz_dup"
    twin.name = f"{twin.name}__fuzz_dup" if twin.name else ""
    nodes.insert(k + 1, twin)
    return Applied(f"node #{k} {twin.op_type} duplicated as dead code with outputs {list(twin.output)}")


def rename_dim_param(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Make an input dim symbolic: '?', '', 'N', or the same symbol as another dim (a clash)."""
    dims = _input_dims(model)
    if not dims:
        return None
    where, dim = rng.choice(dims)
    before = _dim_text(dim)
    others = [(w, d) for w, d in dims if d is not dim]
    choice = rng.choice(["?", "", "N", "clash"])
    if choice == "clash" and others:
        other_where, other = rng.choice(others)
        symbol = other.dim_param or "fuzz_clash"
        note = f"{where} {before} and {other_where} {_dim_text(other)} both renamed {symbol!r}"
        other.dim_param = symbol
        dim.dim_param = symbol
        return Applied(note)
    dim.dim_param = "N" if choice == "clash" else choice
    return Applied(f"{where} {before} renamed {dim.dim_param!r}")


def set_dim(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Set an input dim to 0, -1 or a huge size."""
    dims = _input_dims(model)
    if not dims:
        return None
    where, dim = rng.choice(dims)
    before = _dim_text(dim)
    dim.dim_value = rng.choice([0, -1, HUGE_DIM])
    return Applied(f"{where} {before} set to {dim.dim_value}")


def initializer_to_input_kept(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Declare an initializer as a graph input too: an overridable default."""
    init = _movable_initializer(model, rng)
    if init is None:
        return None
    model.graph.input.append(h.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    return Applied(f"initializer {init.name!r} {list(init.dims)} also declared as a graph input")


def initializer_to_input_removed(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Turn an initializer into a real graph input (its values are gone)."""
    init = _movable_initializer(model, rng)
    if init is None:
        return None
    model.graph.input.append(h.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    model.graph.initializer.remove(init)
    return Applied(f"initializer {init.name!r} {list(init.dims)} made a graph input (values removed)")


def _external(kind: Hostile) -> Mutation:
    def externalize(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
        inits = [t for t in model.graph.initializer if t.data_type != onnx.TensorProto.STRING]
        if not inits:
            return None
        init = rng.choice(inits)
        return Applied(f"initializer {init.name!r} externalized: {kind.value}", hostile=(kind, init.name))

    externalize.__doc__ = f"Put one initializer's data in external data: {kind.value}."
    return externalize


def duplicate_node_names(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Give two nodes (or every node) the same name."""
    nodes = model.graph.node
    if len(nodes) < 2:
        return None
    if rng.random() < 0.3:
        for node in nodes:
            node.name = "fuzz_same"
        return Applied("every node named 'fuzz_same'")
    a, b = rng.sample(range(len(nodes)), 2)
    nodes[b].name = nodes[a].name or "fuzz_same"
    nodes[a].name = nodes[b].name
    return Applied(f"nodes #{a} and #{b} both named {nodes[a].name!r}")


def unused_sparse_initializer(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Add a sparse initializer nothing reads."""
    size = rng.randint(4, 64)
    positions = sorted(rng.sample(range(size), 3))
    values = nh.from_array(np.array([rng.uniform(-1, 1) for _ in positions], np.float32), "fuzz_sparse")
    indices = nh.from_array(np.array(positions, np.int64), "fuzz_sparse_indices")
    model.graph.sparse_initializer.append(h.make_sparse_tensor(values, indices, [size]))
    return Applied(f"unused sparse initializer 'fuzz_sparse' [{size}] with values at {positions}")


def _wrap_output(kind: str) -> Mutation:
    def wrap(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
        outputs = [v for v in model.graph.output if v.type.HasField("tensor_type")]
        if not outputs:
            return None
        value = rng.choice(outputs)
        elem = onnx.TypeProto()
        elem.CopyFrom(value.type)
        wrapper = value.type.optional_type if kind == "optional" else value.type.sequence_type
        wrapper.elem_type.CopyFrom(elem)
        return Applied(f"graph output {value.name!r} declared as {kind}(tensor)")

    wrap.__doc__ = f"Declare a graph output's type as {kind}(tensor) instead of tensor."
    return wrap


def training_info(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Add training info whose algorithm reads an initializer and binds an update to it."""
    inits = list(model.graph.initializer)
    if not inits:
        return None
    init = rng.choice(inits)
    algorithm = h.make_graph(
        [h.make_node("Identity", [init.name], ["fuzz_updated"])], "fuzz_training", [],
        [h.make_tensor_value_info("fuzz_updated", init.data_type, list(init.dims))],
    )
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    info.update_binding.append(onnx.StringStringEntryProto(key=init.name, value="fuzz_updated"))
    model.training_info.append(info)
    return Applied(f"training_info reading and updating initializer {init.name!r}")


def metadata_entry(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Add a metadata entry: plain, empty key, odd characters, long, or a repeated key."""
    key, value = rng.choice([
        ("fuzz", "value"), ("", "empty key"), ("ключ\n\t", "значение\0"), ("long", "x" * 100_000),
        ("fuzz_twice", "first"),
    ])
    model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    if key == "fuzz_twice":
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value="second"))
    return Applied(f"metadata entry {key!r} ({len(value)} characters)" + (" twice" if key == "fuzz_twice" else ""))


def shuffle_nodes(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Shuffle the node list (no longer topologically sorted)."""
    nodes = [_copy(n) for n in model.graph.node]
    if len(nodes) < 2:
        return None
    rng.shuffle(nodes)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return Applied(f"{len(nodes)} nodes shuffled")


def change_opset(model: onnx.ModelProto, rng: random.Random) -> Applied | None:
    """Change the default-domain opset version without converting any node."""
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            before = opset.version
            opset.version = rng.choice([v for v in OPSETS if v != before])
            return Applied(f"opset {before} -> {opset.version}")
    return None


MUTATIONS: dict[str, Mutation] = {
    "drop_node": drop_node,
    "duplicate_node": duplicate_node,
    "duplicate_node_renamed": duplicate_node_renamed,
    "rename_dim_param": rename_dim_param,
    "set_dim": set_dim,
    "initializer_to_input_kept": initializer_to_input_kept,
    "initializer_to_input_removed": initializer_to_input_removed,
    "external_absolute": _external(Hostile.ABSOLUTE),
    "external_parent": _external(Hostile.PARENT),
    "external_symlink": _external(Hostile.SYMLINK),
    "external_output_data": _external(Hostile.OUTPUT_DATA),
    "duplicate_node_names": duplicate_node_names,
    "unused_sparse_initializer": unused_sparse_initializer,
    "output_optional": _wrap_output("optional"),
    "output_sequence": _wrap_output("sequence"),
    "training_info": training_info,
    "metadata_entry": metadata_entry,
    "shuffle_nodes": shuffle_nodes,
    "change_opset": change_opset,
}


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    twin = onnx.NodeProto()
    twin.CopyFrom(node)
    return twin


def _input_dims(model: onnx.ModelProto) -> list[tuple[str, onnx.TensorShapeProto.Dimension]]:
    """(where, dim) for every dim of every graph input that is not an initializer."""
    inits = {t.name for t in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in inits or not value.type.tensor_type.HasField("shape"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            found.append((f"input {value.name!r} axis {axis}", dim))
    return found


def _dim_text(dim: onnx.TensorShapeProto.Dimension) -> str:
    if dim.HasField("dim_value"):
        return f"({dim.dim_value})"
    return f"({dim.dim_param!r})" if dim.HasField("dim_param") else "(unknown)"


def _movable_initializer(model: onnx.ModelProto, rng: random.Random) -> onnx.TensorProto | None:
    declared = {v.name for v in model.graph.input}
    inits = [t for t in model.graph.initializer if t.name not in declared]
    return rng.choice(inits) if inits else None
