"""Quantized activations written as uint8: one normal form of a QDQ model, values unchanged.

Quantizers (onnxruntime.quantization's default, QuantFormat.QDQ) write every activation as
``QuantizeLinear -> DequantizeLinear`` with an int8 zero point. ORT's x86 CPU provider fuses
a DQ -> op -> Q group into an integer kernel (QLinearConv, QLinearAdd, QLinearMul,
QLinearGlobalAveragePool) only for uint8 activations, and its own int8 -> uint8 pass
(QDQS8ToU8) converts only a Q read by a single DQ. A DQ with two readers (an SE block's
input, a residual) is first split by ORT into two DQs of one Q, so that pass skips it and
both readers stay float ops between a DQ and a Q, with NCHW <-> NHWC Transposes around the
fused kernels next to them (MobileNetV3-small: 11 of 52 convs float, 42 Transposes).

Here each activation's Q and its DQ readers are written with uint8 zero points, each shifted
by 128. For every real ``x`` and integer ``v = round(x / s)``::

    Q_u8(x; s, z + 128) = clamp(v + z + 128, 0, 255) = clamp(v + z, -128, 127) + 128 = Q_s8(x; s, z) + 128
    DQ_u8(q + 128; s', z' + 128) = ((q + 128) - (z' + 128)) * s' = (q - z') * s' = DQ_s8(q; s', z')

so every float value the model computes is the same, bit for bit (the integer differences
are exact; rounding happens before the zero point is added, as the ONNX spec writes it).
The uint8 tensor between them gets a fresh name, so no stale int8 declaration of the old one
survives export.

A site is a standard-domain ``QuantizeLinear`` with a computed input (a constant one is a
weight: ORT wants int8 weights), a one-element constant int8 zero point and no
``output_dtype``, whose output is no graph output, is read by no subgraph, and is read only
as the data input of ``DequantizeLinear`` nodes that each have a one-element constant int8
zero point.

Wiring (pipeline/_canonical.py): ``graph, qdq_counts = unsigned_activations(graph)`` in
``canonicalize``, ``counts.update(qdq_counts)``, and ``SIMPLIFICATIONS[UNSIGNED_ACTIVATIONS]
= SIMPLIFICATION_ID`` so the measured decision keeps it where no rule applied.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from taso._constness import Constness
from taso.ir import Graph, Initializer, Node, TensorType
from taso.pipeline._rewire import STANDARD, FreshNames, rewired

UNSIGNED_ACTIVATIONS = "int8 activation Q -> DQ written as uint8"
SIMPLIFICATION_ID = "canonical/qdq-uint8-activations"

_INT8, _UINT8 = onnx.TensorProto.INT8, onnx.TensorProto.UINT8
_SHIFT = 128  # int8 [-128, 127] + 128 = uint8 [0, 255]


@dataclass(frozen=True)
class _Site:
    """One activation: its QuantizeLinear and the DequantizeLinear nodes that read it."""

    quantize: int
    dequantizes: tuple[int, ...]


def unsigned_activations(graph: Graph) -> tuple[Graph, dict[str, int]]:
    """`graph` with every int8 activation Q -> DQ written as uint8 (see the module
    docstring), and how many activations changed."""
    constness = Constness(graph)
    captured = graph.captured
    sites = [site for node_id in graph.nodes if (site := _site(graph, constness, captured, node_id))]
    if not sites:
        return graph, {}
    names = FreshNames(graph)
    points = _shifted_points(graph, constness, sites, names)
    removed: list[int] = []
    added: list[Node] = []
    types: dict[str, TensorType] = {}
    for site in sites:
        quantize = graph.nodes[site.quantize]
        old = quantize.outputs[0]
        new = names.take(f"{old}_u8")
        known = graph.types.get(old)
        types[new] = TensorType(_UINT8, known.shape if known is not None else None)
        added.append(rewired(quantize, {2: points[quantize.inputs[2]].name}, outputs=(new,)))
        for reader in site.dequantizes:
            dequantize = graph.nodes[reader]
            added.append(rewired(dequantize, {0: new, 2: points[dequantize.inputs[2]].name}))
        removed += [site.quantize, *site.dequantizes]
    graph = graph.rewrite(remove=removed, add=added, types=types, initializers=points.values())
    return graph, {UNSIGNED_ACTIVATIONS: len(sites)}


# ----- which activations ----------------------------------------------------------------------
def _site(graph: Graph, constness: Constness, captured: set[str], node_id: int) -> _Site | None:
    node = graph.nodes[node_id]
    if not _is_standard(node, "QuantizeLinear") or len(node.inputs) != 3 or len(node.outputs) != 1:
        return None
    if node.attr("output_dtype", 0) or constness.is_constant(node.inputs[0]):
        return None
    if _int8_point(constness, node.inputs[2]) is None:
        return None
    out = node.outputs[0]
    readers = graph.consumers.get(out, ())
    if not readers or out in graph.outputs or out in captured:
        return None
    if not all(_reads_as_data(graph, constness, reader, out) for reader in readers):
        return None
    return _Site(node_id, tuple(readers))


def _reads_as_data(graph: Graph, constness: Constness, reader: int, value: str) -> bool:
    """`reader` is a DequantizeLinear reading `value` as its data input only, with an int8
    one-element constant zero point."""
    node = graph.nodes[reader]
    if not _is_standard(node, "DequantizeLinear") or len(node.inputs) != 3:
        return False
    return node.inputs[0] == value and value not in node.inputs[1:] and _int8_point(constness, node.inputs[2]) is not None


def _is_standard(node: Node, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in STANDARD


def _int8_point(constness: Constness, name: str) -> np.ndarray | None:
    """The value of `name` if it is a one-element int8 constant."""
    if not name:
        return None
    value = constness.small_value(name, 1)
    return value if value is not None and value.size == 1 and value.dtype == np.int8 else None


# ----- the rewrite ------------------------------------------------------------------------------
def _shifted_points(
    graph: Graph, constness: Constness, sites: Iterable[_Site], names: FreshNames
) -> dict[str, Initializer]:
    """Each int8 zero point the sites read -> its uint8 twin (the same shape, value + 128)."""
    readers = [graph.nodes[i] for site in sites for i in (site.quantize, *site.dequantizes)]
    points: dict[str, Initializer] = {}
    for node in readers:
        name = node.inputs[2]
        if name in points:
            continue
        value = _int8_point(constness, name)
        assert value is not None  # checked by _site
        shifted = (value.astype(np.int16) + _SHIFT).astype(np.uint8)
        fresh = names.take(f"{name}_u8")
        points[name] = Initializer(fresh, TensorType(_UINT8, shifted.shape), numpy_helper.from_array(shifted, fresh))
    return points
