"""Fold weight transforms: internal-domain nodes over constants become initializers.

Rewrites that change weights (scale a conv kernel per channel, concatenate kernels,
enlarge a kernel) do not touch arrays during the search: they add nodes of the domain
`taso.internal` whose inputs are constants. Before export, each such node is evaluated
once with its spec's NumPy semantics (the same semantics the axioms were checked
against) and replaced by an initializer carrying the node's output name.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from taso.errors import VerificationError
from taso.ir import INTERNAL_DOMAIN, Graph, Initializer, Node, TensorType


def has_internal_nodes(graph: Graph) -> bool:
    return any(node.domain == INTERNAL_DOMAIN for node in graph.nodes.values())


def fold_constants(graph: Graph) -> Graph:
    """A graph without internal nodes; raises VerificationError if one reads a non-constant."""
    if not has_internal_nodes(graph):
        return graph
    from taso.opspecs import spec_by_name

    folded: dict[str, np.ndarray] = {}
    new_inits: list[Initializer] = []
    remove: list[int] = []
    for node_id in graph.topological_order:
        node = graph.nodes[node_id]
        if node.domain != INTERNAL_DOMAIN:
            continue
        arrays = [_constant(graph, folded, name, node) for name in node.inputs]
        outputs = spec_by_name(node.op_type).evaluate(arrays, dict(node.attributes))
        for name, array in zip(node.outputs, outputs, strict=True):
            folded[name] = np.asarray(array)
            new_inits.append(_initializer(name, folded[name]))
        remove.append(node_id)
    return graph.rewrite(remove=remove, initializers=new_inits, types={i.name: i.type for i in new_inits})


def _constant(graph: Graph, folded: dict[str, np.ndarray], name: str, node: Node) -> np.ndarray:
    if name in folded:
        return folded[name]
    init = graph.initializers.get(name)
    if init is None or name in graph.inputs:
        raise VerificationError(f"weight transform {node.op_type} reads '{name}', which is not a constant")
    return init.array()


def _initializer(name: str, array: np.ndarray) -> Initializer:
    proto = numpy_helper.from_array(np.ascontiguousarray(array), name)
    return Initializer(name=name, type=TensorType(proto.data_type, tuple(array.shape)), proto=proto)
