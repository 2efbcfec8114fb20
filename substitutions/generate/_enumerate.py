"""Enumeration: every graph of up to K operators over a typed universe of input tensors.

A `Universe` names the operators to use, the input tensors (activations and weights with
concrete shapes) and constant tensors (ConstOnes, identity matrices...). Graphs are
enumerated depth first, one node at a time, in a *canonical* order: a DAG is produced only
in its lexicographically smallest topological order (a new node must sort after every
node that was already available before its last producer), identical nodes are not
repeated (CSE), so each graph appears exactly once and no de-duplication set is needed.
Each node's validity comes from the specs (`OpSpec.check`); weights (and tensors computed
only from weights) may feed an operator only at its weight inputs (`EnumHints`), unless
every input is a weight (a weight transform). Graphs whose nodes do not share tensors
(disconnected), or whose outputs are all weights, are skipped: they only combine smaller
rules. The enumeration is split into tasks by the first node, for worker processes.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from taso.opspecs import OpSpec
from taso.opspecs import spec_by_name as _spec_by_name
from taso.substitutions.generate._fingerprint import FieldEvaluator, digest

COMMUTATIVE = frozenset({"Add", "Mul"})


@functools.cache
def spec_by_name(name: str) -> OpSpec:
    return _spec_by_name(name)


class Role(enum.Enum):
    ACTIVATION = "activation"
    WEIGHT = "weight"


@dataclass(frozen=True)
class Leaf:
    """A universe tensor: an input variable, or a constant op (``op`` set) with params."""

    name: str
    shape: tuple[int, ...]
    role: Role
    op: str = ""
    params: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Universe:
    name: str
    ops: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    param_values: tuple[tuple[str, str, tuple], ...] = ()  # (op, param, values) overrides
    max_outputs: int = 2
    arities: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (op, input counts) overrides

    def __post_init__(self) -> None:
        for op, counts in self.arities:
            lo, hi = spec_by_name(op).arity
            if op not in self.ops or not counts or any(
                    n < lo or (hi is not None and n > hi) for n in counts):
                raise ValueError(f"universe {self.name}: arity {counts} of {op} is not "
                                 f"within {op}'s arity ({lo}, {hi}) or {op} is not used")


@dataclass(frozen=True, order=True)
class Node:
    """One operator application; inputs are tensor ids (leaves first, then node outputs)."""

    key: tuple[int, int]  # (op index, params index): the canonical order
    op: str = field(compare=False)
    params: tuple[tuple[str, object], ...] = field(compare=False)
    inputs: tuple[int, ...] = ()


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]  # tensor ids, ordered by output digest


@dataclass
class _Tensor:
    shape: tuple[int, ...]
    const: bool
    producer: int  # node index, -1 for leaves
    values: np.ndarray
    digest: bytes


@dataclass
class _State:
    universe: Universe
    evaluator: FieldEvaluator
    tensors: list[_Tensor]
    nodes: list[Node] = field(default_factory=list)
    checked: dict = field(default_factory=dict)  # (key, shapes) -> (params, out shapes) | None


def op_choices(universe: Universe) -> list[tuple[int, int, str, dict]]:
    """(op index, params index, op, params) for every operator and hinted parameter set."""
    overrides = {(op, name): values for op, name, values in universe.param_values}
    out = []
    for oi, op in enumerate(universe.ops):
        spec = spec_by_name(op)
        hinted = {p.name: overrides.get((op, p.name), spec.hints.param_values.get(p.name))
                  for p in spec.params}
        names = [n for n, v in hinted.items() if v]
        combos = itertools.product(*(hinted[n] for n in names))
        for pi, combo in enumerate(combos):
            out.append((oi, pi, op, dict(zip(names, combo, strict=True))))
    return out


def initial_state(universe: Universe, evaluator: FieldEvaluator, seed: int) -> _State:
    rng = np.random.default_rng(seed)
    tensors = []
    for leaf in universe.leaves:
        if leaf.op:
            values = evaluator.evaluate(leaf.op, [], dict(leaf.params))[0]
        else:
            values = evaluator.random_tensor(rng, leaf.shape)
        tensors.append(_Tensor(leaf.shape, leaf.role is Role.WEIGHT, -1, values, digest([values])))
    return _State(universe, evaluator, tensors)


def _arities(universe: Universe, op: str) -> tuple[int, ...]:
    """Input counts to enumerate: the universe's override (Conv with and without its
    bias), else two for variadic ops and the minimum for ops with optional inputs."""
    for name, counts in universe.arities:
        if name == op:
            return counts
    lo, hi = spec_by_name(op).arity
    return (2,) if hi is None else (lo,)


def _split_params(op: str, params: dict, shape: tuple[int, ...]) -> dict | None:
    """Split sizes are not hinted: halves of the split axis."""
    if op != "Split":
        return params
    axis = int(params.get("axis", 0))
    if not -len(shape) <= axis < len(shape) or shape[axis] % 2:
        return None
    half = shape[axis] // 2
    return {**params, "split": (half, half)}


def _roles_ok(state: _State, op: str, inputs: tuple[int, ...]) -> bool:
    consts = [state.tensors[i].const for i in inputs]
    if all(consts):
        return True
    weights = spec_by_name(op).hints.weight_inputs
    return all(not c or pos in weights for pos, c in enumerate(consts))


def _canonical(state: _State, node: Node) -> bool:
    if node in state.nodes:
        return False
    last = max((state.tensors[i].producer for i in node.inputs), default=-1)
    return all(state.nodes[i] < node for i in range(last + 1, len(state.nodes)))


def candidate_nodes(state: _State, choices: list) -> Iterator[tuple[Node, tuple]]:
    count = len(state.tensors)
    for oi, pi, op, params in choices:
        spec = spec_by_name(op)
        arity = _arities(state.universe, op)
        for inputs in itertools.chain(*(itertools.product(range(count), repeat=n) for n in arity)):
            if op in COMMUTATIVE and inputs[0] > inputs[1] and len(
                    {state.tensors[i].const for i in inputs}) == 1:
                continue  # input ordering: one of x+y, y+x
            checked = _check(state, spec, (oi, pi), params, inputs)
            if checked is None or not _roles_ok(state, op, inputs):
                continue
            node = Node((oi, pi), op, checked[0], inputs)
            if _canonical(state, node):
                yield node, checked


def _check(state: _State, spec: OpSpec, key: tuple[int, int], params: dict,
           inputs: tuple[int, ...]) -> tuple | None:
    """(sorted params, output shapes) if the op is valid on these input shapes (cached)."""
    shapes = tuple(state.tensors[i].shape for i in inputs)
    cache_key = (key, shapes)
    if cache_key not in state.checked:
        full = _split_params(spec.name, params, shapes[0]) if shapes else params
        result = None
        if full is not None and spec.check(shapes, full).ok:
            result = (tuple(sorted(full.items())), spec.infer(shapes, spec.complete(full)))
        state.checked[cache_key] = result
    return state.checked[cache_key]


def push(state: _State, node: Node, checked: tuple) -> None:
    arrays = [state.tensors[i].values for i in node.inputs]
    shapes = checked[1]
    outs = state.evaluator.evaluate(node.op, arrays, dict(node.params))
    const = all(state.tensors[i].const for i in node.inputs)
    index = len(state.nodes)
    state.nodes.append(node)
    for shape, values in zip(shapes, outs, strict=True):
        state.tensors.append(_Tensor(tuple(shape), const, index, values, digest([values])))


def pop(state: _State) -> None:
    node = state.nodes.pop()
    index = len(state.nodes)
    while state.tensors and state.tensors[-1].producer == index:
        state.tensors.pop()
    del node


def graph_outputs(state: _State) -> tuple[int, ...] | None:
    """Unconsumed node outputs ordered by digest, or None if the graph is not worth keeping."""
    leaves = len(state.universe.leaves)
    used = {i for n in state.nodes for i in n.inputs}
    outs = [i for i in range(leaves, len(state.tensors)) if i not in used]
    if not outs or len(outs) > state.universe.max_outputs:
        return None
    if all(state.tensors[i].const for i in outs) or not _connected(state):
        return None
    return tuple(sorted(outs, key=lambda i: state.tensors[i].digest))


def _connected(state: _State) -> bool:
    """Nodes linked through shared tensors (a common input, or producer and consumer)."""
    if len(state.nodes) < 2:
        return True
    groups = [set(n.inputs) for n in state.nodes]
    for t, tensor in enumerate(state.tensors):
        if tensor.producer >= 0:
            groups[tensor.producer].add(t)
    merged, rest = groups[0], groups[1:]
    changed = True
    while changed and rest:
        changed = False
        for g in list(rest):
            if g & merged:
                merged |= g
                rest.remove(g)
                changed = True
    return not rest


def graph_key(state: _State, outputs: tuple[int, ...]) -> bytes:
    """Bucket key: the outputs' digests (sorted), with their shapes."""
    return b"".join(state.tensors[i].digest for i in outputs)


def enumerate_task(state: _State, first: tuple[Node, tuple], max_ops: int,
                   choices: list) -> Iterator[tuple[Graph, bytes]]:
    """Every canonical graph whose first node is ``first`` (depth first, deterministic)."""
    push(state, *first)
    yield from _dfs(state, max_ops, choices)
    pop(state)


def _dfs(state: _State, max_ops: int, choices: list) -> Iterator[tuple[Graph, bytes]]:
    outputs = graph_outputs(state)
    if outputs is not None:
        yield Graph(tuple(state.nodes), outputs), graph_key(state, outputs)
    if len(state.nodes) == max_ops:
        return
    for node, checked in list(candidate_nodes(state, choices)):
        push(state, node, checked)
        yield from _dfs(state, max_ops, choices)
        pop(state)
