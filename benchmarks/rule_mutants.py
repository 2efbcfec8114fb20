"""Deliberately wrong rules: one-point mutations of the shipped library (issue 19, item 2).

Each mutation changes one thing of a real rule, on its source or its target:

| kind | what changes |
|---|---|
| `perm` | a Transpose's permutation (two axes swapped, or reversed) |
| `axis` | a Concat, Split or Flatten axis (one more, one less) |
| `constant` | a literal: a `value(k) == c` constraint, a ConstFill value, Clip bounds, Gemm or HardSigmoid alpha/beta |
| `epsilon` | a BatchNormalization epsilon, or a `value(k) == eps` constant, dropped to 0 |
| `window` | Conv/pool pads shifted (top and bottom swapped), strides or dilations changed |
| `broadcast` | a Reshape target (the -1 moved to another axis), a ConstFill shape |
| `operands` | the two inputs of a Sub, Div, MatMul, Concat or Gemm swapped |
| `op` | an operator replaced by a similar one (Add/Sub/Mul/Div, Relu/Sigmoid/Tanh, MaxPool/AveragePool) |
| `output` | two mapped outputs of a multi-output rule exchanged |

A mutant is kept when it validates and it is wrong *at one of the original rule's witness
configurations* (the rule file's own shapes, bindings and values, which the refuter never
reads): both sides type-check there, the mapped outputs have the same shape (else the
applier would refuse it) and their values differ. The kept mutant carries no witness and
no axiom name (provenance ``method: mutant``), so nothing but the verifier's own search can
refute it: today's numeric witness reports it missing and the axiom-instance check is not
consulted.

`mutant_corpus()` picks a deterministic, varied corpus (every kind, at most two mutants
per shipped rule); `python -m benchmarks.rule_mutants` verifies it and prints the
verdicts, which method refuted each and the p50/p99/max refutation time.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from taso import substitutions
from taso.opspecs import spec_by_name
from taso.substitutions.generate._refute import BUDGET_S, CONFIGS, compare_sides, z3_counterexample
from taso.substitutions.generate._refute_configs import choose_configs
from taso.substitutions.generate._verify import verify_rule
from taso.substitutions.generate._witness import infer_pattern_shapes, witness_configs
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternNode,
    Proof,
    Rule,
    RuleError,
    load_rules,
)

Mutation = Callable[[Rule], Iterator[tuple[str, Rule]]]
CORPUS_SIZE = 140
PER_RULE = 2
FAST = 15  # mutants of the unmarked, quick test
RLIMIT = 400_000  # the prover's limit for mutants (a wrong rule must not prove at any limit)


# ----- editing a rule ------------------------------------------------------------------------

def _nodes(rule: Rule) -> Iterator[tuple[str, int, PatternNode]]:
    for side in ("target", "source"):
        for index, node in enumerate(getattr(rule, side).nodes):
            yield side, index, node


def _with_node(rule: Rule, side: str, index: int, node: PatternNode) -> Rule:
    nodes = list(getattr(rule, side).nodes)
    nodes[index] = node
    return replace(rule, **{side: Pattern(tuple(nodes))})


def _with_param(rule: Rule, side: str, index: int, name: str, value: object) -> Rule:
    node = getattr(rule, side).nodes[index]
    params = tuple((k, value if k == name else v) for k, v in node.params)
    return _with_node(rule, side, index, replace(node, params=params))


def _literal_params(rule: Rule, names: set[str]) -> Iterator[tuple[str, int, PatternNode, str, object]]:
    for side, index, node in _nodes(rule):
        for name, value in node.params:
            if name in names and not isinstance(value, ParamVar | ParamExpr):
                yield side, index, node, name, value


# ----- the mutations -------------------------------------------------------------------------

def perm(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node, name, value in _literal_params(rule, {"perm"}):
        if node.op != "Transpose" or not isinstance(value, tuple) or len(value) < 2:
            continue
        swapped = (value[1], value[0], *value[2:])
        for other in dict.fromkeys((swapped, tuple(reversed(value)))):
            if other != value:
                yield f"{side} {node.id} perm {value} -> {other}", _with_param(rule, side, index, name, other)


def axis(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node, name, value in _literal_params(rule, {"axis"}):
        if isinstance(value, int):
            for other in (value + 1, value - 1):
                yield f"{side} {node.id} axis {value} -> {other}", _with_param(rule, side, index, name, other)


_CONSTANT_PARAMS = {("Clip", "max"), ("Clip", "min"), ("ConstFill", "value"), ("Gemm", "alpha"),
                    ("Gemm", "beta"), ("HardSigmoid", "alpha"), ("HardSigmoid", "beta")}


def constant(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node, name, value in _literal_params(rule, {n for _, n in _CONSTANT_PARAMS}):
        if (node.op, name) in _CONSTANT_PARAMS and isinstance(value, float):
            for other in (value + 1.0, -value if value else -1.0):
                yield f"{side} {node.id} {name} {value} -> {other}", _with_param(rule, side, index, name, other)
    for position, text in enumerate(rule.constraints):
        if text.startswith("value(") and " == " in text:
            head, _, literal = text.rpartition(" == ")
            other = float(literal) + 1.0
            yield f"{head} {literal} -> {other}", _with_constraint(rule, position, f"{head} == {other}")


def epsilon(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node, name, value in _literal_params(rule, {"epsilon"}):
        yield f"{side} {node.id} epsilon {value} -> 0", _with_param(rule, side, index, name, 0.0)
    for side, index, node, name, value in _literal_params(rule, {"value"}):
        if node.op == "ConstFill" and value in (1e-5, 1e-3):
            yield f"{side} {node.id} epsilon {value} -> 0", _with_param(rule, side, index, name, 0.0)
    for position, text in enumerate(rule.constraints):
        if text.startswith("value(") and text.endswith((" == 1e-05", " == 0.001")):
            head, _, literal = text.rpartition(" == ")
            yield f"{head} {literal} -> 0", _with_constraint(rule, position, f"{head} == 0.0")


def window(rule: Rule) -> Iterator[tuple[str, Rule]]:
    names = {"pads", "strides", "dilations"}
    for side, index, node, name, value in _literal_params(rule, names):
        if not isinstance(value, tuple) or node.op not in ("Conv", "MaxPool", "AveragePool"):
            continue
        if name == "pads" and len(value) == 4:
            other = (value[2] + 1, value[1], max(value[0] - 1, 0), value[3]) if value[0] == value[2] \
                else (value[2], value[1], value[0], value[3])
        else:
            other = (value[0] % 2 + 1, value[1])
        yield f"{side} {node.id} {name} {value} -> {other}", _with_param(rule, side, index, name, other)
    for side, index, node in _nodes(rule):
        for name, value in node.params:
            if side == "target" and name == "pads" and isinstance(value, ParamVar):
                expr = ParamExpr(f"({value.name}[2] + 1, {value.name}[1], {value.name}[0], {value.name}[3])")
                yield f"target {node.id} pads -> top + 1", _with_param(rule, side, index, name, expr)


def broadcast(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node, name, value in _literal_params(rule, {"shape"}):
        if node.op == "Reshape" and isinstance(value, tuple) and len(value) > 1 and -1 in value:
            other = (*value[1:], value[0])
            yield f"{side} {node.id} reshape {value} -> {other}", _with_param(rule, side, index, name, other)
        if node.op == "ConstFill" and value == ():
            yield f"{side} {node.id} fill shape () -> (2,)", _with_param(rule, side, index, name, (2,))


_SWAPPABLE = {"Sub", "Div", "MatMul", "Concat", "Gemm"}


def operands(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node in _nodes(rule):
        if node.op in _SWAPPABLE and len(node.inputs) >= 2 and node.inputs[0] != node.inputs[1]:
            swapped = (node.inputs[1], node.inputs[0], *node.inputs[2:])
            yield f"{side} {node.id} {node.op} operands swapped", _with_node(
                rule, side, index, replace(node, inputs=swapped))


_SIMILAR = {"Add": ("Sub", "Mul"), "Sub": ("Add",), "Mul": ("Add", "Div"), "Div": ("Mul",),
            "Relu": ("Sigmoid", "Tanh"), "Sigmoid": ("Tanh",), "Tanh": ("Sigmoid",),
            "MaxPool": ("AveragePool",), "AveragePool": ("MaxPool",)}


def op(rule: Rule) -> Iterator[tuple[str, Rule]]:
    for side, index, node in _nodes(rule):
        for other in _SIMILAR.get(node.op, ()):
            known = {p.name for p in spec_by_name(other).params}
            params = tuple((k, v) for k, v in node.params if k in known)
            yield f"{side} {node.id} {node.op} -> {other}", _with_node(
                rule, side, index, replace(node, op=other, params=params))


def output(rule: Rule) -> Iterator[tuple[str, Rule]]:
    if len(rule.outputs) >= 2:
        (a, b), (c, d), *rest = rule.outputs
        yield "outputs 0 and 1 exchanged", replace(rule, outputs=((a, d), (c, b), *rest))


def _with_constraint(rule: Rule, position: int, text: str) -> Rule:
    constraints = list(rule.constraints)
    constraints[position] = text
    return replace(rule, constraints=tuple(constraints))


MUTATIONS: dict[str, Mutation] = {
    "perm": perm, "axis": axis, "constant": constant, "epsilon": epsilon, "window": window,
    "broadcast": broadcast, "operands": operands, "op": op, "output": output,
}


# ----- keeping the wrong ones ----------------------------------------------------------------

def wrong_at_witness(original: Rule, mutant: Rule) -> bool:
    """The mutant's sides differ in value (same output shapes) at one of the original
    rule's witness configs, with its constants pinned as `value(k) == c` now says."""
    for config in witness_configs(original):
        shapes = {k: tuple(v) for k, v in config.get("shapes", {}).items()}
        bindings = {k: tuple(v) if isinstance(v, list) else v
                    for k, v in config.get("bindings", {}).items()}
        try:
            src = infer_pattern_shapes(mutant.source, shapes, bindings)
            tgt = infer_pattern_shapes(mutant.target, shapes, bindings)
        except (ValueError, KeyError, IndexError, TypeError, NameError):
            continue
        if any(tuple(src[a]) != tuple(tgt[b]) for a, b in mutant.outputs):
            continue
        for seed in range(2):
            if compare_sides(mutant, _inputs(mutant, config, shapes, seed), bindings):
                return True
    return False


def _inputs(rule: Rule, config: dict, shapes: dict, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    pinned = _pinned(rule)
    out = {}
    for item in rule.inputs:
        shape = shapes[item.name]
        if item.name in pinned:
            out[item.name] = np.full(shape, pinned[item.name])
        elif item.name in config.get("positive", ()):
            out[item.name] = rng.uniform(0.5, 2.0, size=shape)
        else:
            out[item.name] = rng.uniform(-2.0, 2.0, size=shape)
    return out


def _pinned(rule: Rule) -> dict[str, float]:
    out = {}
    for text in rule.constraints:
        if text.startswith("value('") and " == " in text:
            head, _, literal = text.rpartition(" == ")
            out[head[len("value('"):-2]] = float(literal)
    return out


def _as_mutant(original: Rule, kind: str, number: int, label: str, mutant: Rule) -> Rule | None:
    provenance = (("method", "mutant"), ("mutant_of", original.id), ("mutation", f"{kind}: {label}"))
    candidate = replace(mutant, id=f"{original.id}~{kind}{number}",
                        math=f"{original.math}  [mutant {kind}: {label}]",
                        proof=Proof(method="axioms"), provenance=provenance)
    try:
        candidate.validate()
    except RuleError:
        return None
    return candidate if wrong_at_witness(original, candidate) else None


def mutants_of(rule: Rule) -> Iterator[Rule]:
    """The first kept mutant of each kind of one rule."""
    for kind, mutation in MUTATIONS.items():
        for number, (label, mutant) in enumerate(mutation(rule)):
            kept = _as_mutant(rule, kind, number, label, mutant)
            if kept is not None:
                yield kept
                break


LIBRARY = Path(substitutions.__file__).parent / "library" / "rules.json"
"""The shipped rule file the mutants are made from."""


@functools.cache
def mutant_corpus(size: int = CORPUS_SIZE) -> tuple[Rule, ...]:
    """`size` mutants of the shipped library, round-robin over the kinds (so every kind
    is represented), at most `PER_RULE` per shipped rule; deterministic."""
    by_kind: dict[str, list[Rule]] = {kind: [] for kind in MUTATIONS}
    for rule in load_rules(LIBRARY).rules:
        for mutant in mutants_of(rule):
            by_kind[_kind(mutant)].append(mutant)
    chosen: list[Rule] = []
    per_rule: Counter[str] = Counter()
    queues = {kind: iter(items) for kind, items in by_kind.items()}
    while len(chosen) < size and queues:
        for kind in list(queues):
            mutant = next((m for m in queues[kind] if per_rule[_origin(m)] < PER_RULE), None)
            if mutant is None:
                del queues[kind]
                continue
            per_rule[_origin(mutant)] += 1
            chosen.append(mutant)
            if len(chosen) == size:
                break
    return tuple(chosen)


def fast_subset(corpus: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The first `FAST` mutants: the corpus takes the kinds in turn, so every kind."""
    return corpus[:FAST]


def _kind(mutant: Rule) -> str:
    return dict(mutant.provenance)["mutation"].split(":")[0]


def _origin(mutant: Rule) -> str:
    return dict(mutant.provenance)["mutant_of"]


# ----- the benchmark -------------------------------------------------------------------------

def _z3_refutes(mutant: Rule) -> bool:
    """Whether element-wise Z3 alone (no numeric search) refutes the mutant."""
    deadline = time.perf_counter() + BUDGET_S
    configs = sorted(choose_configs(mutant, count=CONFIGS), key=lambda c: c.size)
    for config in configs:
        found = z3_counterexample(mutant, config, deadline=deadline)
        if found is not False:
            return found is not None
    return False


def main() -> int:
    """Verify the corpus; print verdicts, refuting method and refutation time."""
    corpus = mutant_corpus()
    checks = [verify_rule(m, rlimit=RLIMIT) for m in corpus]
    times = sorted(c.refute_seconds for c in checks)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    print(json.dumps({
        "mutants": len(corpus),
        "kinds": Counter(_kind(m) for m in corpus),
        "verdicts": Counter(c.verdict.value for c in checks),
        "refuted_by": Counter(c.refuted_by or "-" for c in checks),
        "prover": Counter(c.status.value for c in checks),
        "z3_alone_refutes": sum(_z3_refutes(m) for m in corpus),
        "refute_seconds": {"p50": round(statistics.median(times), 4), "p99": round(p99, 4),
                           "max": round(times[-1], 4), "total": round(sum(times), 3)},
    }, indent=1))
    for check in checks:
        if not check.counterexample:
            print(f"{check.verdict.value} {check.rule}: {check.detail}")
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"{time.perf_counter() - started:.1f}s", file=sys.stderr)
    sys.exit(code)
