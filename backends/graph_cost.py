"""Cost models for the search (`taso.search.CostModel`): measured on ORT CPU, or analytical.

`MeasuredCostModel` (the default) prices a graph the way ONNX Runtime runs it, under
ORT_ENABLE_ALL with its fusions and layout choices (on CPU, the blocked NCHWc layout,
Conv+activation fusion and reorders around Split/Slice/broadcasts decide speed; FLOP
and node counts mislead both ways). The input graph's cost is its measured end-to-end
latency. A rewrite is priced differentially: the changed nodes plus `hops` steps of
producers and consumers around them are cut out of the parent and of the child as two
standalone models (`taso.backends._region`), measured interleaved (spinning off), and

    cost(child) = cost(parent) + (latency(child region) - latency(parent region)).

The neighbourhood is in both regions, so fusions and layout transitions across the
border of the change are inside what is measured. Region latencies are cached
persistently in `CostCache` by region signature (structure, shapes, weights' shapes),
so repeated blocks and re-runs cost nothing. Regions that cannot be cut out (no static
shape, internal ops without a folder, ORT refuses) fall back to the analytical delta;
`records` lists every region priced, and how.

`AnalyticalCostModel` sums `AnalyticalBackend`'s per-node roofline (no device), optionally
with the nodes ORT folds into a Conv free (`Folds.ORT`: the prior of the ORT sweeps), and
is exactly incremental: removed nodes' costs out, added nodes' costs in, and the readers
next to them re-priced.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort

from taso._onnx_export import node_to_proto
from taso.backends._ort_fusions import conv_context, folded_into_conv, same_context
from taso.backends._region import (
    Region,
    RegionError,
    ShapeOf,
    extract_region,
    fusion_closure,
    neighbourhood,
)
from taso.backends._region_shapes import ConcreteShapes
from taso.backends._session import ModelSource
from taso.backends.analytical import AnalyticalBackend, _itemsize, _NodeShapes
from taso.backends.cost_cache import CostCache, CostKey
from taso.backends.inputs import make_inputs
from taso.backends.ort_backends import OrtCpuBackend, OrtCudaBackend
from taso.backends.profiles import ShapeProfile
from taso.backends.timing import measure_interleaved, measure_latency
from taso.errors import BackendError
from taso.ir import INTERNAL_DOMAIN, Dim, Graph, Node, TensorType
from taso.search import Rewrite

BACKEND_NAME = "ort-cpu-region"


class UseDefault(enum.Enum):
    """Marker for "the default value" where None means something else."""

    CACHE = "the default CostCache (TASO_CACHE_DIR or the user cache dir)"


class CostSource(enum.Enum):
    """Where a region's latency came from."""

    MEASURED = "measured"
    CACHED = "cached"
    ANALYTICAL = "analytical"


@dataclass(frozen=True)
class RegionRecord:
    """One priced region: its signature (None for analytical), size and latency."""

    signature: str | None
    nodes: int
    ms: float
    source: CostSource
    note: str = ""


@dataclass(frozen=True)
class Timing:
    """How long to measure: until `target_s` of timed runs, within [min, max] repeats."""

    target_s: float = 0.05
    min_repeats: int = 20
    max_repeats: int = 2000
    warmup: int = 5
    noise_floor: float = 0.03
    """A region delta smaller than this fraction of the parent region is noise: priced 0.
    Repeated region measurements here spread by 3-7% (more under load). A 10% floor was
    tried: it also zeroed re-formed activations (5-10% of their region) and lost the
    real gain, so the floor stays low and the end-to-end measurement decides."""

    def repeats_for(self, per_run_ms: float) -> int:
        wanted = int(self.target_s * 1e3 / max(per_run_ms, 1e-3))
        return max(self.min_repeats, min(self.max_repeats, wanted))


class Folds(enum.Enum):
    """Which runtime's constant folds into a Conv the analytical model counts as free."""

    NONE = "none"  # a plain roofline: every node costs what it computes and moves
    ORT = "ort"  # ORT folds BatchNormalization and per-channel Mul/Add into a Conv (`_ort_fusions`)


class AnalyticalCostModel:
    """Per-node roofline sum (`AnalyticalBackend`), incremental by construction."""

    def __init__(
        self, backend: AnalyticalBackend | None = None, *, profile: ShapeProfile | None = None,
        folds: Folds = Folds.NONE,
    ):
        self.backend = backend or AnalyticalBackend()
        self.profile = profile
        self.folds = folds
        self._shapes: ConcreteShapes | None = None
        self._memo: dict[int, tuple[Node, float]] = {}

    def cost(self, graph: Graph) -> float:
        return sum(self.node_cost(graph, node) for node in graph.nodes.values())

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        return parent_cost + self.delta(parent, rewrite)

    def delta(self, parent: Graph, rewrite: Rewrite) -> float:
        child = rewrite.graph
        added = sum(self.node_cost(child, child.nodes[i]) for i in rewrite.added)
        removed = sum(self.node_cost(parent, parent.nodes[i]) for i in rewrite.removed)
        kept = _readers_around(child, rewrite.added) | _readers_around(parent, rewrite.removed)
        kept = {i for i in kept if i in child.nodes and i in parent.nodes}
        around = sum(self.node_cost(child, child.nodes[i]) - self.node_cost(parent, parent.nodes[i]) for i in kept)
        return added - removed + around

    def node_cost(self, graph: Graph, node: Node) -> float:
        """Roofline milliseconds of one node: 0 for internal weight transforms and, with
        `Folds.ORT`, for the nodes ORT folds into the Conv before them."""
        context = conv_context(graph, node) if self.folds is Folds.ORT else None
        known = self._memo.get(id(node))
        if known is not None and known[0] is node and same_context(known[1], context):
            return known[2]
        free = node.domain == INTERNAL_DOMAIN or folded_into_conv(graph, node, context)
        cost = 0.0 if free else self._roofline(graph, node)
        self._memo[id(node)] = (node, context, cost)
        return cost

    def _roofline(self, graph: Graph, node: Node) -> float:
        shapes = self.shapes_for(graph)
        names = [n for n in (*node.inputs, *node.outputs) if n]
        found, sizes = {}, {}
        for name in names:
            init = graph.initializers.get(name)
            declared = init.type if init is not None else graph.types.get(name)
            shape = shapes.shape(name, declared)
            if shape is not None:
                found[name] = shape
                sizes[name] = _itemsize(declared.elem_type) if declared else 4
        proto = node.proto if node.proto is not None else node_to_proto(node)
        return self.backend.node_cost_ms(proto, _NodeShapes(found, sizes))

    def shapes_for(self, graph: Graph) -> ConcreteShapes:
        """Concrete shapes, inferred once from the first graph priced."""
        if self._shapes is None:
            self._shapes = concrete_shapes(graph, self.profile)
        return self._shapes


def _readers_around(graph: Graph, node_ids: Iterable[int]) -> set[int]:
    """Nodes that read an input or output of `node_ids`: their ORT folding may change."""
    out: set[int] = set()
    for node_id in node_ids:
        node = graph.nodes[node_id]
        for name in (*node.inputs, *node.outputs):
            out.update(graph.consumers.get(name, ()))
    return out


def concrete_shapes(graph: Graph, profile: ShapeProfile | None) -> ConcreteShapes:
    """Shapes of `graph`, or for an If/Loop/Scan body, of the main graph it belongs to
    (`context.main`): a body's outer-scope reads are none of its inputs."""
    graph = getattr(graph.context, "main", None) or graph
    try:
        whole = extract_region(graph, graph.nodes, _declared_shape).model
    except RegionError:  # e.g. internal ops and no folder: infer from the inputs only
        whole = extract_region(graph, [], _declared_shape).model
    return ConcreteShapes.of(graph, profile, whole)


def _declared_shape(name: str, declared: TensorType | None) -> tuple[Dim, ...] | None:
    return None if declared is None else declared.shape


class MeasuredCostModel:
    """ORT latency: whole graph once, then differential region measurements.

    On ORT CPU unless `runner` (an ORT backend: its `providers` and `device`) says
    otherwise: `ort-cuda` prices candidates this way on the CUDA execution provider.

    `hops`: neighbourhood radius around a change (1 by default; see the fidelity notes
    in `benchmarks.fidelity`). `cache`: the user's persistent `CostCache` unless given;
    None disables caching (every region is measured).
    """

    def __init__(
        self,
        *,
        profile: ShapeProfile | None = None,
        threads: int = 2,
        hops: int = 1,
        cache: CostCache | None | UseDefault = UseDefault.CACHE,
        timing: Timing = Timing(),
        fallback: AnalyticalCostModel | None = None,
        runner: OrtCpuBackend | OrtCudaBackend | None = None,
    ):
        runner = runner or OrtCpuBackend(threads=threads, cache=None)
        self.providers = runner.providers
        self.profile = profile
        self.threads = threads
        self.hops = hops
        self.cache = CostCache() if cache is UseDefault.CACHE else cache
        self.timing = timing
        self.fallback = fallback or AnalyticalCostModel(profile=profile)
        self.records: list[RegionRecord] = []
        self._shapes: ConcreteShapes | None = None
        self._seeded: dict[bytes, float] = {}
        self._device = runner.device

    # ----- CostModel ------------------------------------------------------------------
    def cost(self, graph: Graph) -> float:
        """Measured end-to-end latency of `graph` in milliseconds.

        A latency given by `seed` for this graph stands in for a measurement the cache
        does not have: the whole graph is the base that region deltas are added to, and
        measuring it to this model's precision takes seconds on a large model.
        """
        region = extract_region(graph, graph.nodes, self.shapes_for(graph).shape)
        seeded = self._seeded.get(graph.structural_hash)
        if seeded is not None and (self.cache is None or self.cache.get(self._key(region)) is None):
            return seeded
        return self._latencies([region])[0]

    def seed(self, graph: Graph, latency_ms: float) -> None:
        """`graph`'s end-to-end latency, already measured elsewhere (not cached)."""
        self._seeded[graph.structural_hash] = latency_ms

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        return parent_cost + self.delta(parent, rewrite)

    # ----- pieces -----------------------------------------------------------------------
    def delta(self, parent: Graph, rewrite: Rewrite) -> float:
        """latency(child region) - latency(parent region), or the analytical delta."""
        try:
            before, after = self.regions(parent, rewrite)
            parent_ms, child_ms = self._latencies([before, after])
        except (RegionError, BackendError) as error:
            estimate = self.fallback.delta(parent, rewrite)
            nodes = len(rewrite.removed) + len(rewrite.added)
            self.records.append(RegionRecord(None, nodes, estimate, CostSource.ANALYTICAL, str(error)))
            return estimate
        delta = child_ms - parent_ms
        return 0.0 if abs(delta) < self.timing.noise_floor * parent_ms else delta

    def regions(self, parent: Graph, rewrite: Rewrite) -> tuple[Region, Region]:
        """The parent's and the child's region around `rewrite`, with a common border."""
        return regions(parent, rewrite, self.hops, self.shapes_for(parent).shape)

    def shapes_for(self, graph: Graph) -> ConcreteShapes:
        if self._shapes is None:
            self._shapes = concrete_shapes(graph, self.profile)
        return self._shapes

    def measured(self) -> list[RegionRecord]:
        """Records of regions timed on the device in this model's lifetime."""
        return [r for r in self.records if r.source is CostSource.MEASURED]

    # ----- measuring ----------------------------------------------------------------------
    def _key(self, region: Region) -> CostKey:
        signature = f"{region.signature}|threads={self.threads}"
        return CostKey(BACKEND_NAME, self._device, ort.__version__, signature)

    def _latencies(self, regions: list[Region]) -> list[float]:
        """Latency of each region: from the cache, else measured (interleaved if two)."""
        known = [self.cache.get(self._key(r)) if self.cache is not None else None for r in regions]
        fresh = self._measure(regions) if None in known else [None] * len(regions)
        latencies = []
        for region, cached, measured in zip(regions, known, fresh, strict=True):
            source = CostSource.CACHED if cached is not None else CostSource.MEASURED
            ms = float(cached if cached is not None else measured)  # type: ignore[arg-type]
            self.records.append(RegionRecord(region.signature, len(region.node_ids), ms, source))
            if source is CostSource.MEASURED and self.cache is not None:
                self.cache.put(self._key(region), ms)
            latencies.append(ms)
        return latencies

    def _measure(self, regions: list[Region]) -> list[float]:
        inputs = _merged_inputs(r.model for r in regions)
        if len(regions) == 1:
            return [self._measure_one(regions[0].source, inputs)]
        first, second = (r.source for r in regions)
        probe = measure_interleaved(first, second, inputs, repeats=3, warmup=1, threads=self.threads,
                                    providers=self.providers)
        repeats = self.timing.repeats_for(probe.a.median_ms + probe.b.median_ms)
        timing = measure_interleaved(
            first, second, inputs, repeats=repeats, warmup=self.timing.warmup, threads=self.threads,
            providers=self.providers,
        )
        return [timing.a.median_ms, timing.b.median_ms]

    def _measure_one(self, model: ModelSource, inputs: Mapping[str, np.ndarray]) -> float:
        probe = measure_latency(model, inputs, repeats=3, warmup=1, threads=self.threads, providers=self.providers)
        repeats = self.timing.repeats_for(probe.median_ms)
        stats = measure_latency(model, inputs, repeats=repeats, warmup=self.timing.warmup, threads=self.threads,
                                providers=self.providers)
        return stats.median_ms


def regions(parent: Graph, rewrite: Rewrite, hops: int, shapes: ShapeOf) -> tuple[Region, Region]:
    """The parent's and the child's region around `rewrite`, with a common border:
    the changed nodes, `hops` producer/consumer steps around them, and the chains that
    reach from there to the nearest fusion anchors (`fusion_closure`)."""
    child = rewrite.graph
    changed = rewrite.removed | rewrite.added
    around_parent = fusion_closure(parent, neighbourhood(parent, rewrite.removed, hops))
    around_child = fusion_closure(child, neighbourhood(child, rewrite.added, hops))
    border = (around_parent | around_child) - changed
    before = extract_region(parent, rewrite.removed | {i for i in border if i in parent.nodes}, shapes)
    after = extract_region(child, rewrite.added | {i for i in border if i in child.nodes}, shapes)
    return before, after


def _merged_inputs(models: Iterable[onnx.ModelProto]) -> dict[str, np.ndarray]:
    """Random inputs for every model (regions of one graph agree on shared names)."""
    merged: dict[str, np.ndarray] = {}
    for model in models:
        for name, value in make_inputs(model).items():
            merged.setdefault(name, value)
    return merged
