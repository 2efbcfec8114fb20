"""Transposes at their lowest rank: axes that stay adjacent are moved as one.

Attention blocks split their heads with a 5-d Transpose: timm's ViT and DeiT write
``qkv.reshape(B, N, 3, h, d).permute(2, 0, 3, 1, 4)``, EdgeNeXt's cross-covariance
attention ``permute(2, 0, 3, 4, 1)``, PP-OCR's SVTR mixer the same as ViT, and ShuffleNet
shuffles channels with ``(1, 2, C/2, H, W) -> (1, C/2, 2, H, W)``. ONNX Runtime moves the
Transpose below the Split that follows and runs each part through its general
element-by-element kernel: on EdgeNeXt-XXS the three ``(1, 784, 1, 4, 12) -> (1, 1, 4, 12,
784)`` transposes of one block took 450 us where the block's output transpose of the same
37,632 floats, ``(1, 4, 12, 784) -> (1, 784, 4, 12)``, took 16 us: that one moves a single
axis, which ORT copies in contiguous runs.

Drop the axes of size 1 and merge each run of axes that are adjacent in the input and stay
adjacent, in order, in the output: ``(1, 784, 3, 4, 12)`` by ``(2, 0, 3, 4, 1)`` is
``(784, 144)`` by ``(1, 0)``, a 2-d transpose. The Transpose is then written as
``Reshape`` to the merged shape, the merged Transpose, and ``Reshape`` back to the
original output's shape (or one Reshape when the merged permutation is the identity).
Every element lands where it did (lemma `transpose_lowered`, validated by Z3 and
numerically; the rewrite copies, it computes nothing).

Only a Transpose of at least `MIN_RANK` axes of size above 1 is lowered, where merging
leaves fewer: an NCHW <-> NHWC Transpose (three such axes, merging to two) is one ORT fuses
into the reorder of its blocked conv layout, and lowered it ran 2.5-4.6% slower (ConvNeXt,
EdgeNeXt). Nor is one that only MatMul or Gemm read (`_FOLDS_TRANSPOSES`: a batch of
heads' keys, ``k.transpose(-2, -1)``), which ORT folds into them. All the Transposes are
lowered as one whole-graph rewrite, swept and judged by measurement like any rule
(`LOWER_TRANSPOSES`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from taso.ir import Graph, Initializer, Node, TensorType
from taso.opspecs.axioms.lowering import Lowering, lowering
from taso.pipeline._rewire import FreshNames, int64_initializer, transpose_perm
from taso.search.rewrite import Rewrite

LOWER_TRANSPOSES = "layout/lower-transposes"
"""The rule id under which the lowered Transposes are swept and reported."""

MIN_RANK = 4
"""Axes of size above 1 a Transpose needs to be lowered."""

_FOLDS_TRANSPOSES = frozenset({"MatMul", "Gemm"})
"""Readers ORT folds a Transpose into (MatMul as FusedMatMul with transposed or batch-
transposed operands): a Transpose read only by them is left as it is."""


def lowerable(shape: Sequence[int], perm: Sequence[int]) -> Lowering | None:
    """The lowering of a Transpose worth lowering (see the module docstring), or None."""
    rank = sum(1 for d in shape if d != 1)
    if rank < MIN_RANK:
        return None
    low = lowering(shape, perm)
    return low if len(low.shape) < rank else None


def lowered_rewrites(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
    """Every lowerable Transpose of `graph` lowered, as one `Rewrite` (none if there is
    none, or when asked only for rewrites near a change: it is a whole-graph rewrite)."""
    if near is not None:
        return
    lowered = lower_transposes(graph)
    if lowered is not None:
        yield Rewrite.between(LOWER_TRANSPOSES, graph, lowered)


def lower_transposes(graph: Graph) -> Graph | None:
    """`graph` with every lowerable Transpose lowered, or None if there is none."""
    fresh, remove, add = FreshNames(graph), [], []
    types: dict[str, TensorType] = {}
    initializers: list[Initializer] = []
    for node_id, node in graph.nodes.items():
        site = _site(graph, node)
        if site is None:
            continue
        remove.append(node_id)
        nodes, made_types, made = _lowered(node, site, fresh)
        add.extend(nodes)
        types.update(made_types)
        initializers.extend(made)
    if not remove:
        return None
    return graph.rewrite(remove=remove, add=add, types=types, initializers=initializers)


@dataclass(frozen=True)
class _Site:
    """A lowerable Transpose: its input's type and shape, its permutation, its lowering."""

    source: TensorType
    shape: tuple[int, ...]
    perm: tuple[int, ...]
    low: Lowering


def _site(graph: Graph, node: Node) -> _Site | None:
    if node.op_type != "Transpose" or len(node.inputs) != 1:  # the cheap test first: every node comes here
        return None
    source = graph.types.get(node.inputs[0])
    if source is None or not source.is_static or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    shape = tuple(int(d) for d in source.shape or ())  # type: ignore[arg-type]
    perm = transpose_perm(node, len(shape))
    if perm is None:
        return None
    readers = graph.consumers.get(node.outputs[0], ())
    if readers and all(graph.nodes[reader].op_type in _FOLDS_TRANSPOSES for reader in readers):
        return None
    low = lowerable(shape, perm)
    return None if low is None else _Site(source, shape, perm, low)


def _lowered(node: Node, site: _Site, fresh: FreshNames) -> tuple[list[Node], dict[str, TensorType], list[Initializer]]:
    """Reshape, merged Transpose, Reshape back (or one Reshape), writing `node`'s output."""
    low, name, output = site.low, node.name or "Transpose", node.outputs[0]
    back = int64_initializer(fresh, f"{output}_shape", tuple(site.shape[p] for p in site.perm))
    if low.is_reshape:
        return [Node("Reshape", "", (node.inputs[0], back.name), (output,), name=f"{name}_lowered")], {}, [back]
    into = int64_initializer(fresh, f"{output}_merged_shape", low.shape)
    merged, moved = fresh.take(f"{output}_merged"), fresh.take(f"{output}_moved")
    nodes = [
        Node("Reshape", "", (node.inputs[0], into.name), (merged,), name=f"{name}_merge"),
        Node("Transpose", "", (merged,), (moved,), attributes=(("perm", low.perm),), name=f"{name}_lowered"),
        Node("Reshape", "", (moved, back.name), (output,), name=f"{name}_unmerge"),
    ]
    elem = site.source.elem_type
    types = {merged: TensorType(elem, low.shape), moved: TensorType(elem, tuple(low.shape[p] for p in low.perm))}
    return nodes, types, [into, back]
