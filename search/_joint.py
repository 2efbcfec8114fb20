"""Joint sweeps: two rules' sweeps applied together, for rewrites that pay only as a pair.

On ORT CPU a rewrite often pays only when its neighbour is rewritten too: in a
squeeze-and-excitation block, `ReduceMean` over H, W as `GlobalAveragePool` keeps the
pooled branch in the blocked NCHWc layout, and the channel gate `x * g` with `g` of
shape (N, C, 1, 1) stays in it only once `g` is brought to x's shape; each alone leaves a
reorder where the other one is, and measures no faster (timm EfficientNet-B0: 1.006x
and 0.999x alone, 1.035x together; torchvision MobileNetV3 dynamo export 1.044x
together). Judging one rule at a time never keeps either.

So when a round of single sweeps keeps nothing, pairs of rules whose matches meet (a
match of one reads or writes a value that a match of the other reads or writes, or one
op lies between them: `meeting`) are
swept together, one rule's sweep then the other's on its result, and priced by the
screen (a measured cost model of the kernels ORT compiles). A pair is judged only where
the screen predicts it faster than `min_predicted` and than the two singles' predicted
speedups multiplied (`JOINT_MARGIN`): the pair does something neither does alone. Such
a pair is then extended by a third rule whose matches meet it (`extended`), judged where
the screen predicts the three more than the pair and the third alone multiplied. The
judge, as for every sweep, decides.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from taso.ir import Graph
from taso.search._candidates import Candidate, RuleExpand, apply_all

JOINT_MARGIN = 1.02
"""A joint sweep is judged only if the screen predicts it at least this much faster than
the product of its two rules' predicted speedups (an interaction, not two small wins
added up: those are judged one by one)."""

MAX_JOINT_PAIRS = 12
"""Pairs built and screened per round at most, most promising first (`promising`; each
screen compiles and profiles a whole candidate)."""

MAX_JOINT_TRIPLES = 4
"""Pairs extended by a third rule (`extended`) and screened per round at most; only pairs
the screen found interacting are extended."""

Promise = Mapping[str, float | None]
"""Each single sweep's screened speedup, by rule; None for a sweep the screen priced exactly
like the current graph (ORT runs the same kernels)."""


def pair_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


@dataclass(frozen=True)
class Reach:
    """The values a sweep's matches read or write, and every value of a node reading or
    writing one of them."""

    values: frozenset[str]
    near: frozenset[str]


def reach(graph: Graph, single: Candidate) -> Reach:
    values = _values(graph, single.removed)
    producers, consumers = graph.producers, graph.consumers
    touching = {producers[v][0] for v in values if v in producers}
    touching.update(node_id for v in values for node_id in consumers.get(v, ()))
    return Reach(frozenset(values), frozenset(values | _values(graph, frozenset(touching))))


def meeting(a: Reach, b: Reach) -> bool:
    """Whether a match of one sweep and one of the other read or write a common value, or
    one node reads or writes a value of each (one op between them).

    Why one op: a layout change carries through the elementwise op next to it. PP-OCR's
    squeeze-and-excitation gate is `x * hardsigmoid(conv(...))`; widening the squeeze convs
    to the NCHWc block rewrites the conv, the gate rule the Mul, the HardSigmoid lies
    between, and only the two together pay (1.11-1.13x on the text-direction classifier)."""
    return not a.values.isdisjoint(b.near)


def joint_candidates(
    graph: Graph, singles: list[Candidate], expand_rule: RuleExpand, *, tried: set[frozenset[str]],
    promise: Promise | None = None,
) -> Iterator[Candidate]:
    """Pairs of `singles` (sweeps of `graph`, in the prior's order) whose matches meet and
    were not tried before, each as `a`'s sweep with `b`'s rule swept on top of it (at
    most `MAX_JOINT_PAIRS`, lazily: the caller stops when its time is up), most promising
    first by the singles' screened speedups (`promising`), else in the prior's order."""
    built, reaches = 0, {single.rule_id: reach(graph, single) for single in singles}
    for a, b in promising(itertools.combinations(singles, 2), promise):
        if built >= MAX_JOINT_PAIRS:
            return
        key = pair_key(a.rule_id, b.rule_id)
        if a.joint or b.joint or key in tried or not meeting(reaches[a.rule_id], reaches[b.rule_id]):
            continue
        tried.add(key)
        pair = on_top(graph, a, b, expand_rule)
        if pair is not None:
            built += 1
            yield pair


def extended(graph: Graph, pair: Candidate, singles: list[Candidate], expand_rule: RuleExpand, *,
             tried: set[frozenset[str]]) -> Iterator[Candidate]:
    """`pair` (a joint sweep of `graph`) with a third rule swept on top: each of `singles`
    not in it whose matches meet the pair's, in `singles`' order, each set of three once.

    Why: timm's squeeze-and-excitation blocks pool with `ReduceMean`, and their squeeze
    convs have 4 to 28 channels; the pooled branch stays in the NCHWc layout only with
    all three of `ReduceMean` as `GlobalAveragePool`, the gate brought to the activation's
    shape and the squeeze convs widened to the block. On timm EfficientNet-B0 (AVX2) the
    first two together measured 1.009x, all three 1.056x by hand and 1.060-1.080x in the
    sweeps of two runs."""
    rules = {rule_id for rule_id, _ in pair.counts}
    near = reach(graph, pair)
    for third in singles:
        key = frozenset((*rules, third.rule_id))
        if third.rule_id in rules or third.joint or key in tried:
            continue
        theirs = reach(graph, third)
        if not (meeting(near, theirs) or meeting(theirs, near)):
            continue
        tried.add(key)
        triple = on_top(graph, pair, third, expand_rule)
        if triple is not None:
            yield triple


def on_top(graph: Graph, base: Candidate, other: Candidate, expand_rule: RuleExpand) -> Candidate | None:
    """`other`'s rule swept on top of `base`'s sweep (None: no match left there, or the
    result is a graph one of them alone gives: one rule undoing the other)."""
    refind = expand_rule(other.rule_id)
    found = [r for r in refind(base.graph, None) if r.rule_id == other.rule_id]
    swept, count = apply_all(base.graph, found, refind)
    if not count or swept.structural_hash in (graph.structural_hash, base.graph.structural_hash,
                                              other.graph.structural_hash):
        return None
    return Candidate(base.rule_id, swept, base.rewrites, base.predicted_delta + other.predicted_delta,
                     max(base.size_ratio, other.size_ratio), base.site, removed=base.removed | other.removed,
                     joint=(*base.joint, (other.rule_id, count)))


def promising(pairs: Iterable[tuple[Candidate, Candidate]],
              promise: Promise | None) -> Iterable[tuple[Candidate, Candidate]]:
    """`pairs` (given in the prior's order) reordered: first the pairs of two rules that each
    change the kernels ORT runs, then the rest; within each, by the product of the two
    singles' screened speedups, highest first (a single not screened counts 1.0).

    Why: the pairs worth judging are two layout changes that pay only together, and the
    prior's order let one rule take every place. On PP-OCR's text-direction classifier the
    12 places went to a HardSwish re-form that ORT compiles to the same kernels and to
    Mul re-associations predicted 0.98x, paired with everything they met, while widening
    the SE blocks' squeeze convs to the NCHWc block (1.00x alone) with the channel gate
    brought to the activation's shape (0.95x alone), 1.11-1.13x together, was never built."""
    if promise is None:
        return pairs

    def key(pair: tuple[Candidate, Candidate]) -> tuple[bool, float]:
        speedups = [promise.get(single.rule_id, 1.0) for single in pair]
        same_kernels = None in speedups
        return same_kernels, -math.prod(1.0 if p is None else p for p in speedups)

    return sorted(pairs, key=key)  # stable: ties keep the prior's order


def interacts(joint: float, singles: tuple[float, float], min_predicted: float) -> bool:
    """Whether a pair predicted `joint` is worth judging, its rules predicted `singles` alone."""
    return joint >= min_predicted and joint >= singles[0] * singles[1] * JOINT_MARGIN


def _values(graph: Graph, nodes: frozenset[int]) -> set[str]:
    found: set[str] = set()
    for node_id in nodes:
        node = graph.nodes.get(node_id)
        if node is not None:
            found.update(v for v in (*node.inputs, *node.outputs) if v and v not in graph.initializers)
    return found
