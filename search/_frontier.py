"""The search's bookkeeping: a bounded priority queue and a seen-set with collision check.

The queue orders entries by (cost, insertion counter), so ties resolve in insertion
order and the search is deterministic. When it grows past `2 * cap` it is trimmed to
the `cap` cheapest entries (amortized O(log n) per push); trimmed graphs stay in the
seen-set, so they are not rediscovered and re-priced.

The seen-set keys graphs by `Graph.structural_hash` and, for every hit, confirms with
`Graph.structurally_equal`, so a hash collision can never drop a distinct graph.
"""

from __future__ import annotations

import hashlib
import heapq
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from taso.ir import Graph
from taso.search.rewrite import Move, Rewrite


@dataclass(frozen=True, eq=False)
class Entry:
    """A discovered graph: its cost, how it was reached, and (once expanded) its moves."""

    graph: Graph
    cost: float
    parent: Entry | None = None
    rule_id: str | None = None
    near: frozenset[int] | None = None
    moves: list[Move] = field(default_factory=list, repr=False)
    deltas: list[float] = field(default_factory=list, repr=False)  # cost change of each move (inf: unpriced)
    combined: set[int] = field(default_factory=set, repr=False)  # moves last combined into one child
    base: Entry | None = field(default=None, repr=False)
    """Whose moves to rebase, when not the parent (a combined child rebases the entry it
    was combined from; its parent chain only records the path)."""
    pending: list[Iterator[tuple[Move, Rewrite]]] = field(default_factory=list, repr=False)
    """The rest of a partially expanded entry's rewrites (at most one iterator)."""

    def path(self) -> list[str]:
        """Rule ids from the input graph to this one, in order."""
        rules: list[str] = []
        entry: Entry | None = self
        while entry is not None and entry.rule_id is not None:
            rules.append(entry.rule_id)
            entry = entry.parent
        return rules[::-1]


@dataclass
class Frontier:
    """Min-queue of entries by (cost, insertion order), trimmed to `cap` entries."""

    cap: int
    dropped: int = 0
    _heap: list[tuple[float, int, Entry]] = field(default_factory=list)
    _counter: int = 0

    def push(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (entry.cost, self._counter, entry))
        self._counter += 1
        if len(self._heap) > 2 * self.cap:
            kept = heapq.nsmallest(self.cap, self._heap)
            self.dropped += len(self._heap) - len(kept)
            self._heap = kept
            heapq.heapify(self._heap)

    def pop(self) -> Entry:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)


def lighten(graph: Graph) -> Graph:
    """Drop the graph's derived caches (DAG, value hashes, ...) except its structural hash.

    Queued and seen graphs would otherwise keep a networkx DAG and a hash per value
    alive: about 1.5 MB per 1000-node graph. They are recomputed if needed again.
    """
    cached = vars(graph)
    for name, attribute in vars(type(graph)).items():
        if isinstance(attribute, cached_property) and name != "structural_hash":
            cached.pop(name, None)
    return graph


def canonical_digest(graph: Graph) -> bytes:
    """A second digest, of the exact form `structurally_equal` compares
    (`Graph.canonical_form`). Independent of `structural_hash`'s Merkle scheme."""
    return hashlib.blake2b(repr(graph.canonical_form()).encode(), digest_size=16, person=b"taso-seen").digest()


@dataclass
class SeenGraphs:
    """Graphs already discovered, by structural hash, with a check on every hit.

    A hit is confirmed exactly with `structurally_equal` while the earlier graph is
    alive (queued, or on the path of a queued graph). Seen graphs are held weakly so the
    set stays small; once one is gone, a hit is confirmed by comparing `canonical_digest`s
    (a digest of the very form `structurally_equal` compares, so a false "seen" then
    needs two independent 128-bit collisions at once).
    """

    collisions: int = 0
    _buckets: dict[bytes, list[tuple[weakref.ref[Graph], bytes]]] = field(default_factory=dict)

    def add(self, graph: Graph) -> bool:
        """Record `graph`; False if a structurally equal graph was already recorded."""
        bucket = self._buckets.setdefault(graph.structural_hash, [])
        digest = canonical_digest(graph)
        for reference, other_digest in bucket:
            other = reference()
            same = other.structurally_equal(graph) if other is not None else other_digest == digest
            if same:
                return False
        if bucket:
            self.collisions += 1
        bucket.append((weakref.ref(graph), digest))
        return True

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets.values())
