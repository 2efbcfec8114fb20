"""Kernel cost model: a graph costs what the kernels ONNX Runtime compiles it to cost.

ORT_ENABLE_ALL rewrites a model before running it (Conv+activation and Conv+Mul/Add
fusions, QuickGelu and Gelu fusions, the NCHWc layout with reorders where a layout
changes), so the graph that decides speed is ORT's, not ours: FLOP and node counts
mislead both ways. `KernelCostModel.cost(graph)`:

1. has ORT compile the graph (`_kernels.compile_kernels`: session creation only);
2. looks every kernel up by signature (op, attributes, shapes, weight positions) in the
   persistent `CostCache`;
3. if some kernel was never seen, profiles the compiled graph once in context
   (`_kernels.profile_kernels`) and caches every new kernel's fastest run, scaled by how
   the already-known kernels of the same run compare with their cached times (the
   machine's speed drifts; the known kernels are the yardstick);
4. returns the sum of the kernels' times.

Two graphs that ORT compiles to the same kernels cost the same, whatever their node
counts (a Mul that ORT folds into a Conv is free); a rewrite that breaks the NCHWc layout
pays for the reorders ORT inserts. Kernels repeat across candidates, so after the first
graphs most candidates are priced from the cache without running anything.

Compiling costs what ORT needs to load and save the model: 0.1 s for MobileNetV3, 2.7 s
for BERT-base (340 MB of weights written out). Graphs with more than `WHOLE_GRAPH_BYTES`
of weights are priced differentially instead (`cost_after`): the changed nodes and
`hops` steps around them are cut out of parent and child, both regions are compiled and
priced by their kernels, and the child costs the parent's cost plus the difference.
"""

from __future__ import annotations

import statistics
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

from taso._proto_size import tensor_byte_bound
from taso.backends._kernels import (
    KernelGraph,
    KernelProfile,
    ProfileRuns,
    compile_kernels,
    profile_kernels,
)
from taso.backends._region import Region, RegionError, extract_region
from taso.backends._region_shapes import ConcreteShapes
from taso.backends.cost_cache import CostCache, CostKey
from taso.backends.graph_cost import AnalyticalCostModel, UseDefault, concrete_shapes, regions
from taso.backends.inputs import make_inputs
from taso.backends.ort_backends import OrtCpuBackend
from taso.backends.profiles import ShapeProfile
from taso.errors import BackendError
from taso.ir import Graph
from taso.search import Rewrite

BACKEND_NAME = "ort-cpu-kernel-fastest"
"""The cache's name for these prices (a kernel's fastest profiled run; the medians corrected
for the profiler that an earlier version cached under "ort-cpu-kernel" are not mixed in)."""
DEFAULT_RUNS = ProfileRuns()
WHOLE_GRAPH_BYTES = 48 << 20
"""Graphs with at most this much weight are compiled whole for every candidate."""
_YARDSTICK_SHARE = 0.3  # known kernels must make up this share of a profile to rescale it
_MAX_DRIFT = 2.0


def _drift(measured: Mapping[str, float], cached: Mapping[str, float | None]) -> float:
    """How much faster the machine ran the known kernels when cached than now (1: no
    yardstick: known kernels are under `_YARDSTICK_SHARE` of the profile)."""
    known = [sig for sig, ms in cached.items() if ms is not None]
    now = sum(measured[sig] for sig in known)
    if not known or now < _YARDSTICK_SHARE * sum(measured.values()):
        return 1.0
    then = sum(cached[sig] for sig in known)  # type: ignore[misc]
    return min(max(then / now, 1 / _MAX_DRIFT), _MAX_DRIFT)


def weight_bytes(graph: Graph) -> int:
    """An upper bound of the bytes of `graph`'s weights (what ORT must load and save)."""
    return sum(tensor_byte_bound(init.proto) for init in graph.initializers.values())


@dataclass(frozen=True)
class KernelRecord:
    """One graph priced: its kernel count, how many were new, and its cost."""

    kernels: int
    new_kernels: int
    ms: float


class KernelCostModel:
    """Prices graphs by ORT's kernels, each measured once in context and cached.

    `cache`: the user's persistent `CostCache` unless given; None keeps costs in memory
    only (every process starts cold).
    """

    def __init__(
        self,
        *,
        profile: ShapeProfile | None = None,
        threads: int = 2,
        cache: CostCache | None | UseDefault = UseDefault.CACHE,
        runs: ProfileRuns = DEFAULT_RUNS,
        hops: int = 2,
        whole_graph_bytes: float = WHOLE_GRAPH_BYTES,
    ):
        self.profile = profile
        self.hops = hops
        self.whole_graph_bytes = whole_graph_bytes
        self.threads = threads
        self.cache = CostCache() if cache is UseDefault.CACHE else cache
        self.runs = runs
        self.records: list[KernelRecord] = []
        self._memory: dict[str, float] = {}
        self._costs: dict[bytes, float] = {}
        self._seeded: dict[bytes, float] = {}
        self.profiled_when_priced: dict[bytes, int] = {}
        """New kernels each whole graph had when it was priced (0: priced from the cache)."""
        self._shapes: ConcreteShapes | None = None
        self._whole: bool | None = None
        self._device = OrtCpuBackend(threads=threads, cache=None).device
        self.fallback = AnalyticalCostModel(profile=profile)

    # ----- CostModel ------------------------------------------------------------------
    def cost(self, graph: Graph) -> float:
        """Predicted latency of `graph` in milliseconds (a latency given by `seed` stands in
        for a graph too large to compile whole; the analytical model's for one that ORT
        cannot compile or that has no static shapes)."""
        known = self._costs.get(graph.structural_hash)
        if known is None and not self.whole(graph):
            known = self._seeded.get(graph.structural_hash)
        if known is None:
            try:
                known = self._price_whole(graph)
            except (RegionError, BackendError):
                known = self._seeded.get(graph.structural_hash) or self.fallback.cost(graph)
            self._costs[graph.structural_hash] = known
        return known

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        try:
            if self.whole(rewrite.graph):
                return self._whole_after(parent, parent_cost, rewrite)
            before, after = regions(parent, rewrite, self.hops, self.shapes_for(parent).shape)
            return parent_cost + self._price_region(after) - self._price_region(before)
        except (RegionError, BackendError):
            return parent_cost + self.fallback.delta(parent, rewrite)

    def _whole_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        child = rewrite.graph
        if child.structural_hash not in self._costs:
            self._costs[child.structural_hash] = self._price_whole(child)
        return self._costs[child.structural_hash]

    def _price_whole(self, graph: Graph) -> float:
        cost = self._price_region(extract_region(graph, graph.nodes, self.shapes_for(graph).shape))
        self.profiled_when_priced[graph.structural_hash] = self.records[-1].new_kernels
        return cost

    def seed(self, graph: Graph, latency_ms: float) -> None:
        """`graph`'s measured latency: its cost, if it is too large to compile whole."""
        self._seeded[graph.structural_hash] = latency_ms

    def whole(self, graph: Graph) -> bool:
        """Are this model's graphs compiled whole (small enough), or priced by regions?
        Decided once, on the first graph asked about."""
        if self._whole is None:
            self._whole = weight_bytes(graph) <= self.whole_graph_bytes
        return self._whole

    def shapes_for(self, graph: Graph) -> ConcreteShapes:
        if self._shapes is None:
            self._shapes = concrete_shapes(graph, self.profile)
        return self._shapes

    # ----- pricing ----------------------------------------------------------------------
    def _price_region(self, region: Region) -> float:
        with tempfile.TemporaryDirectory(prefix="taso-kernels-") as folder:
            kernels = compile_kernels(region.source, Path(folder), threads=self.threads)
            return self._price(kernels, lambda: make_inputs(region.model))

    def _price(self, graph: KernelGraph, inputs: object) -> float:
        times = {k.signature: self._lookup(k.signature) for k in graph.kernels if k.signature}
        signatures = {k.name: k.signature for k in graph.kernels}
        new = 0
        if not graph.shapes_known or None in times.values():
            profile = profile_kernels(graph, inputs(), runs=self.runs, threads=self.threads)  # type: ignore[operator]
            signatures = {name: sig or profile.signatures.get(name, "") for name, sig in signatures.items()}
            new = self._learn(profile, signatures)
            times = {sig: self._lookup(sig) for sig in signatures.values() if sig}
        priced = [times.get(sig) for sig in signatures.values()]
        total = sum(t for t in priced if t is not None)
        self.records.append(KernelRecord(len(priced), new, total))
        return total

    def _learn(self, profile: KernelProfile, signatures: Mapping[str, str]) -> int:
        """Cache the kernels this profile saw first; return how many were new.

        Each kernel costs its fastest profiled run, whatever else the profile holds (a
        price never depends on the rest of the graph it was measured in, so a candidate's
        new kernels and the ones they replace, measured in different profiles, compare
        fairly). Kernels already cached are the yardstick of the machine's current speed:
        new ones are scaled by how the known ones compare.
        """
        by_signature: dict[str, list[float]] = defaultdict(list)
        for name, ms in profile.kernel_ms.items():
            if signatures.get(name):
                by_signature[signatures[name]].append(ms)
        measured = {sig: statistics.median(values) for sig, values in by_signature.items()}
        cached = {sig: self._lookup(sig) for sig in measured}
        fresh = [sig for sig, ms in cached.items() if ms is None]
        scale = _drift(measured, cached)
        for sig in fresh:
            self._store(sig, measured[sig] * scale)
        return len(fresh)

    def _key(self, signature: str) -> CostKey:
        return CostKey(BACKEND_NAME, self._device, ort.__version__, f"{signature}|threads={self.threads}")

    def _lookup(self, signature: str) -> float | None:
        if signature in self._memory:
            return self._memory[signature]
        found = self.cache.get(self._key(signature)) if self.cache is not None else None
        if found is not None:
            self._memory[signature] = found
        return found

    def _store(self, signature: str, ms: float) -> None:
        self._memory[signature] = ms
        if self.cache is not None:
            self.cache.put(self._key(signature), ms)
