"""Candidate pairs from fingerprint buckets, pruned step by step, in rounds by size.

A bucket (equal first fingerprint) splits into *classes* (equal second fingerprint too).
Within a class only the pairs (representative, member) are kept, the representative
being the member with fewest operators: any other pair follows by transitivity. Each
pair then goes through the pruning steps of `_prune` (common subgraph, common
supergraph), the pruning by smaller rules of `_implied`, leaf merging (an instance of
a proved pair with interchangeable inputs identified) and renaming; every step is
counted. Pairs are handed out in rounds of increasing member size and, within a size,
decreasing number of inputs read, so the caller can prove one round before pruning the
next with its results (`Rounds.learn`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from taso.substitutions.generate._enumerate import Graph, Universe
from taso.substitutions.generate._implied import is_reducible, member_text
from taso.substitutions.generate._prune import (
    canonical_pair,
    has_common_subgraph,
    has_common_supergraph,
    merged_instances,
    used_leaves,
)

STAGES = ("after transitivity", "after common subgraph", "after common supergraph",
          "after smaller rules", "after leaf merging", "after renaming")


@dataclass
class Evaluated:
    """An enumerated graph with its bucket key, confirming key and per-tensor digests."""

    graph: Graph
    key: bytes
    confirm: bytes
    digests: dict[int, bytes]


@dataclass(frozen=True)
class Pair:
    rep: Graph
    member: Graph
    text: str  # canonical text of the unordered pair (minimum over renamings)


@dataclass
class Rounds:
    """The classes of one universe and what is known so far about their members."""

    universe: Universe
    classes: list[list[Evaluated]]
    rewritable: set[str] = field(default_factory=set)  # member texts known = their rep
    proved: set[str] = field(default_factory=set)  # pair texts proved
    implied: set[str] = field(default_factory=set)  # pair texts implied by proved ones
    seen: set[str] = field(default_factory=set)  # pair texts handed out
    pending: dict[str, str] = field(default_factory=dict)  # member text -> pair text

    def schedule(self, max_ops: int) -> list[tuple[int, int]]:
        """(member size, inputs read) of each round: fewer operators first, then more
        inputs first, so that general pairs are proved before their merged instances."""
        widths = {len(used_leaves(self.universe, m[0].graph, o.graph))
                  for m in self.classes for o in m[1:]}
        return [(size, width) for size in range(1, max_ops + 1)
                for width in sorted(widths, reverse=True)]

    def pairs(self, size: int, width: int, counts: Counter) -> list[Pair]:
        """The pairs whose member has ``size`` operators and that read ``width`` inputs,
        after every pruning step."""
        out = []
        for members in self.classes:
            rep = members[0]
            for member in members[1:]:
                if len(member.graph.nodes) != size:
                    continue
                if len(used_leaves(self.universe, rep.graph, member.graph)) != width:
                    continue
                pair = self._pruned(rep, member, counts)
                if pair is not None:
                    out.append(pair)
        return out

    def learn(self, proved: Iterable[Pair]) -> None:
        """Record the pairs proved in the last round."""
        for pair in proved:
            self.proved.add(pair.text)
            self.implied |= merged_instances(self.universe, pair.rep, pair.member)
        self.rewritable.update(m for m, t in self.pending.items() if t in self.proved)
        self.pending.clear()

    def _pruned(self, rep: Evaluated, member: Evaluated, counts: Counter) -> Pair | None:
        universe, a, b = self.universe, rep.graph, member.graph
        counts[STAGES[0]] += 1
        if has_common_subgraph(universe, a, b):
            return None
        counts[STAGES[1]] += 1
        if has_common_supergraph(a, b, rep.digests, member.digests, len(universe.leaves)):
            return None
        counts[STAGES[2]] += 1
        if is_reducible(universe, b, self.rewritable):
            self.rewritable.add(member_text(universe, b))
            return None
        counts[STAGES[3]] += 1
        text = canonical_pair(universe, a, b)
        if text in self.implied:
            self.rewritable.add(member_text(universe, b))
            return None
        counts[STAGES[4]] += 1
        self.pending[member_text(universe, b)] = text
        if text in self.seen:
            return None
        self.seen.add(text)
        counts[STAGES[5]] += 1
        return Pair(a, b, text)


def equal_classes(buckets: Sequence[Sequence[Evaluated]], counts: Counter
                  ) -> list[list[Evaluated]]:
    """Classes of two or more graphs equal on both evaluations, fewest operators first
    (ties keep enumeration order, so the representative is deterministic)."""
    out = []
    for group in buckets:
        counts["fingerprint pairs"] += len(group) * (len(group) - 1) // 2
        classes: dict[bytes, list[Evaluated]] = {}
        for member in group:
            classes.setdefault(member.confirm, []).append(member)
        for members in classes.values():
            counts["candidate pairs"] += len(members) * (len(members) - 1) // 2
            if len(members) > 1:
                out.append(sorted(members, key=lambda m: len(m.graph.nodes)))
    return out
