"""Prove a rule with Z3: uninterpreted operators plus the axioms' ForAll formulas (TASO's
method). The goal asserts that some mapped output differs; unsat means proved.

Parameter variables of a parametric rule are free Z3 constants, so a proof holds for
every value (the parametric axioms quantify over parameters). When the witness shapes of
the rule are known, the shape of every goal subterm is asserted, which lets shape-guarded
axioms (split sizes, enlarged kernels, ...) fire. Which axioms were needed is read from
the unsat core.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import z3

from taso.opspecs import TENSOR, spec_by_name
from taso.opspecs._z3 import param_sort
from taso.substitutions.generate._axiom_bank import (
    SHAPE,
    axiom_bank,
    find_axiom,
    guarded_instances,
    shape_literal,
)
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    ProofStatus,
    Rule,
    evaluate_expression,
)

HELPER_OPS = frozenset({"Concat", "Split", "Add", "Mul", "ScalarMul", "Transpose", "ConstFill"})
SOLVER = f"z3 {z3.get_version_string()}"


@dataclass(frozen=True)
class ProofResult:
    status: ProofStatus
    seconds: float
    axioms_used: tuple[str, ...]
    detail: str = ""


@dataclass
class _Goal:
    terms: dict[str, z3.ExprRef]
    shapes: dict[str, tuple[int, ...]]
    facts: list[z3.BoolRef]


def _param(spec_name: str, name: str, value: object, bindings: Mapping[str, object]) -> object:
    kind = spec_by_name(spec_name).param(name).kind
    if isinstance(value, ParamVar):
        return z3.Const(f"param.{value.name}", param_sort(kind))
    if isinstance(value, ParamExpr):
        return evaluate_expression(value.expr, bindings)
    return value


def _encode(pattern: Pattern, goal: _Goal, bindings: Mapping[str, object], prefix: str,
            inputs: frozenset[str]) -> None:
    """Add the pattern's node outputs to ``goal`` (refs prefixed, rule inputs shared)."""

    def ref_of(ref: str) -> str:
        return ref if ref in inputs else prefix + ref

    for node in pattern.nodes:
        spec = spec_by_name(node.op)
        refs = [ref_of(r) for r in node.inputs]
        params = {k: _param(node.op, k, v, bindings) for k, v in node.params}
        outs = spec.z3_term([goal.terms[r] for r in refs], params)
        shapes = _shapes(node, refs, goal, bindings)
        for index, term in enumerate(outs):
            ref = prefix + node.id + (f":{index}" if index else "")
            goal.terms[ref] = term
            if index == 0:
                goal.terms[f"{prefix}{node.id}:0"] = term
            if shapes is not None:
                goal.shapes[ref] = tuple(shapes[index])
                goal.facts.append(SHAPE(term) == shape_literal(tuple(shapes[index])))


def _shapes(node, refs: list[str], goal: _Goal,  # noqa: ANN001
            bindings: Mapping[str, object]) -> tuple | None:
    if any(r not in goal.shapes for r in refs):
        return None
    params = {}
    for k, v in node.params:
        if isinstance(v, ParamVar):
            if v.name not in bindings:
                return None
            v = bindings[v.name]
        elif isinstance(v, ParamExpr):
            v = evaluate_expression(v.expr, bindings)
        params[k] = v
    return spec_by_name(node.op).infer_shapes([goal.shapes[r] for r in refs], params)


def literal_constraints(rule: Rule) -> dict[str, float]:
    """``value(k) == 3.0`` constraints: CONST inputs that hold a known scalar."""
    out = {}
    for expr in rule.constraints:
        match = re.fullmatch(r"value\('?(\w+)'?\) == (-?[0-9.e+-]+)", expr.strip())
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def encode_rule(rule: Rule, shapes: Mapping[str, tuple[int, ...]] | None,
                bindings: Mapping[str, object]) -> tuple[list, list, _Goal]:
    """(source outputs, target outputs, goal) as Z3 terms; target refs are prefixed "t."."""
    goal = _Goal({}, {}, [])
    names = frozenset(i.name for i in rule.inputs)
    for name in sorted(names):
        goal.terms[name] = z3.Const(name, TENSOR)
        if shapes is not None and name in shapes:
            goal.shapes[name] = tuple(shapes[name])
            goal.facts.append(SHAPE(goal.terms[name]) == shape_literal(tuple(shapes[name])))
    for name, value in literal_constraints(rule).items():
        goal.facts.append(goal.terms[name] == spec_by_name("ConstFill").z3_term(
            [], {"shape": (), "value": value})[0])
    _encode(rule.source, goal, bindings, "", names)
    _encode(rule.target, goal, bindings, "t.", names)
    src = [goal.terms[a] for a, _ in rule.outputs]
    tgt = [goal.terms[b if b in names else "t." + b] for _, b in rule.outputs]
    return src, tgt, goal


def rule_ops(rule: Rule) -> frozenset[str]:
    return frozenset(n.op for n in (*rule.source.nodes, *rule.target.nodes))


DEFAULT_RLIMIT = 2_000_000
"""Z3 resource limit of `prove`, `taso-gen verify` (twice this) and `taso-gen merge`: high
enough that every rule of the shipped library, proved under it, proves again."""

GENERATE_RLIMIT = 250_000
"""Default resource limit per candidate pair of `taso-gen generate`. On a sample of 150
3-op pairs it proved the same 71 pairs as `DEFAULT_RLIMIT` in 1/12 of the time; a pair
that needs more is counted as timed out and not shipped. Recorded in the file's
provenance (``settings.rlimit``)."""


def premises(rule: Rule, goal: _Goal) -> list[tuple[str, z3.BoolRef]]:
    """The axiom formulas a proof of ``rule`` may use, tracked as ``ax:<axiom>:<k>``: those
    over the rule's operators (and the helpers), shape-guarded ones at the goal's shapes."""
    relevant = rule_ops(rule) | HELPER_OPS
    goal_shapes = tuple(sorted(set(goal.shapes.values())))
    out = []
    for axiom in axiom_bank():
        if not axiom.ops <= relevant:
            continue
        formulas = axiom.formulas
        if axiom.guarded:
            formulas = tuple(guarded_instances(find_axiom(axiom.name), goal_shapes))
        out += [(f"ax:{axiom.name}:{k}", formula) for k, formula in enumerate(formulas)]
    return out


def prove(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT, timeout_ms: int | None = None,
          shapes: Mapping[str, tuple[int, ...]] | None = None,
          bindings: Mapping[str, object] | None = None) -> ProofResult:
    """Try to prove ``rule`` from the axioms within Z3's deterministic resource limit
    ``rlimit`` (the same answer on any machine and load); ``timeout_ms`` adds an optional
    wall-clock cap for interactive use (not used by generation)."""
    start = time.perf_counter()
    src, tgt, goal = encode_rule(rule, shapes, bindings or {})
    solver = z3.Solver()
    solver.set("rlimit", rlimit)
    if timeout_ms is not None:
        solver.set("timeout", timeout_ms)
    for name, formula in premises(rule, goal):
        solver.assert_and_track(formula, z3.Bool(name))
    solver.add(*goal.facts)
    solver.add(z3.Or(*[a != b for a, b in zip(src, tgt, strict=True)]))
    result = solver.check()
    seconds = time.perf_counter() - start
    if result == z3.unsat:
        used = sorted({str(c).split(":")[1] for c in solver.unsat_core()})
        return ProofResult(ProofStatus.PROVED, seconds, tuple(used))
    if result == z3.sat:
        return ProofResult(ProofStatus.REFUTED, seconds, (), "z3 found a model")
    reason = solver.reason_unknown()
    out_of_budget = any(w in reason for w in ("timeout", "canceled", "resource"))
    status = ProofStatus.TIMEOUT if out_of_budget else ProofStatus.UNKNOWN
    return ProofResult(status, seconds, (), reason)
