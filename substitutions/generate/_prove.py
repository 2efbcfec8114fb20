"""Prove a rule with Z3: uninterpreted operators plus the axioms' ForAll formulas (TASO's
method). The goal asserts that some mapped output differs; unsat means proved.

Parameter variables of a parametric rule are free Z3 constants, so a proof holds for
every value (the parametric axioms quantify over parameters). When the witness shapes of
the rule are known, the shape of every goal subterm is asserted, which lets shape-guarded
axioms (split sizes, enlarged kernels, per-channel folds, ...) fire. Which axioms were
needed is read from the unsat core.

A proof's `Scope`: *any shape* when no shape was given (the goal's shapes are
uninterpreted) and every axiom used is established for every shape
(`shape_generic_axioms`); otherwise *listed shapes*: the proof holds at the witness
configs' shapes (`prove_at_witnesses`), and `prove_rule` tries to widen it.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import z3

from taso.opspecs import TENSOR, spec_by_name
from taso.opspecs._z3 import param_sort
from taso.substitutions.generate._axiom_bank import (
    SHAPE,
    BankAxiom,
    axiom_bank,
    find_axiom,
    guarded_instances,
    shape_generic_axioms,
    shape_literal,
)
from taso.substitutions.generate._witness import witness_configs
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    ProofStatus,
    Rule,
    Scope,
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
    scope: Scope = Scope.LISTED_SHAPES


@dataclass
class _Goal:
    terms: dict[str, z3.ExprRef]
    shapes: dict[str, tuple[int, ...]]
    facts: list[z3.BoolRef]
    params: list[tuple[str, dict[str, object]]] = field(default_factory=list)  # concrete ones


def _param(spec_name: str, name: str, value: object, bindings: Mapping[str, object]) -> object:
    kind = spec_by_name(spec_name).param(name).kind
    if isinstance(value, ParamVar) and value.name in bindings:
        return bindings[value.name]  # proved at one config's parameters
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
        if not any(isinstance(v, z3.ExprRef) for v in params.values()):
            goal.params.append((node.op, params))
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


def premises(rule: Rule, goal: _Goal, only: frozenset[str] | None = None
             ) -> list[tuple[str, z3.BoolRef]]:
    """The axiom formulas a proof of ``rule`` may use, tracked as ``ax:<axiom>:<k>``: those
    over the rule's operators (and the helpers), shape-guarded ones at the goal's shapes;
    with ``only``, just the axioms it names."""
    relevant = rule_ops(rule) | HELPER_OPS
    goal_shapes = tuple(sorted(set(goal.shapes.values())))
    out = []
    for axiom in axiom_bank():
        if not axiom.ops <= relevant or (only is not None and axiom.name not in only):
            continue
        formulas = axiom.formulas
        if axiom.guarded:
            formulas = tuple(guarded_instances(find_axiom(axiom.name), goal_shapes,
                                               _goal_params(axiom, goal)))
        out += [(f"ax:{axiom.name}:{k}", formula) for k, formula in enumerate(formulas)]
    return out


def _goal_params(axiom: BankAxiom, goal: _Goal) -> tuple[dict[str, object], ...]:
    """The goal's concrete parameters of the axiom's operators, for an axiom that passes
    them through (its configs' own are always tried)."""
    if not axiom.passes_params:
        return ()
    names = find_axiom(axiom.name).param_names
    found = [{k: v for k, v in params.items() if k in names}
             for op, params in goal.params if op in axiom.ops]
    return tuple(p for p in found if p)


def prove(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT, timeout_ms: int | None = None,
          shapes: Mapping[str, tuple[int, ...]] | None = None,
          bindings: Mapping[str, object] | None = None,
          only: frozenset[str] | None = None) -> ProofResult:
    """Try to prove ``rule`` from the axioms (``only`` those named, when given) within Z3's
    deterministic resource limit ``rlimit`` (the same answer on any machine and load);
    ``timeout_ms`` adds an optional wall-clock cap for interactive use (not used by
    generation)."""
    start = time.perf_counter()
    src, tgt, goal = encode_rule(rule, shapes, bindings or {})
    solver = z3.Solver()
    solver.set("rlimit", rlimit)
    if timeout_ms is not None:
        solver.set("timeout", timeout_ms)
    for name, formula in premises(rule, goal, only):
        solver.assert_and_track(formula, z3.Bool(name))
    solver.add(*goal.facts)
    solver.add(z3.Or(*[a != b for a, b in zip(src, tgt, strict=True)]))
    result = solver.check()
    seconds = time.perf_counter() - start
    if result == z3.unsat:
        used = sorted({str(c).split(":")[1] for c in solver.unsat_core()})
        generic = shapes is None and not bindings and set(used) <= shape_generic_axioms()
        scope = Scope.ANY_SHAPE if generic else Scope.LISTED_SHAPES
        return ProofResult(ProofStatus.PROVED, seconds, tuple(used), scope=scope)
    if result == z3.sat:
        return ProofResult(ProofStatus.REFUTED, seconds, (), "z3 found a model")
    reason = solver.reason_unknown()
    out_of_budget = any(w in reason for w in ("timeout", "canceled", "resource"))
    status = ProofStatus.TIMEOUT if out_of_budget else ProofStatus.UNKNOWN
    return ProofResult(status, seconds, (), reason)


def prove_at_witnesses(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT) -> ProofResult:
    """``rule`` proved at each witness config's shapes and parameters (a parameter a config
    leaves out takes its default): proved when every config is, with the axioms any used."""
    defaults = _default_bindings(rule)
    seconds, used = 0.0, set()
    for config in witness_configs(rule) or [{}]:
        shapes = {k: tuple(v) for k, v in config.get("shapes", {}).items()} or None
        bound = {k: tuple(v) if isinstance(v, list) else v for k, v in config.get("bindings", {}).items()}
        result = prove(rule, rlimit=rlimit, shapes=shapes, bindings={**defaults, **bound})
        seconds += result.seconds
        if result.status is not ProofStatus.PROVED:
            return replace(result, seconds=seconds)
        used.update(result.axioms_used)
    return ProofResult(ProofStatus.PROVED, seconds, tuple(sorted(used)))


def _default_bindings(rule: Rule) -> dict[str, object]:
    """Each parameter variable's default, from the first operator parameter it stands for."""
    out: dict[str, object] = {}
    for node in (*rule.source.nodes, *rule.target.nodes):
        for key, value in node.params:
            if isinstance(value, ParamVar):
                out.setdefault(value.name, spec_by_name(node.op).param(key).default)
    return out


class General(enum.Enum):
    """Whether `prove_rule` first tries a parametric rule for every parameter and shape."""

    TRY = "try"
    SKIP = "skip"  # straight to the witness configs (the proof can only be narrower)


def prove_rule(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT, general: General = General.TRY) -> ProofResult:
    """A parametric rule proved for every parameter value and shape, else (as every other
    rule) at its witness configs; then widened to any shape where it can be (`widen`).
    The seconds are all the attempts' together: a general attempt that runs to its limit
    (3-10 s for a converter form whose axioms are shape-guarded) counts."""
    spent = 0.0
    if general is General.TRY and "parametric" in dict(rule.provenance):
        result = prove(rule, rlimit=rlimit)
        if result.status is ProofStatus.PROVED:
            return widen(rule, result, rlimit=rlimit)
        spent = result.seconds
    result = widen(rule, prove_at_witnesses(rule, rlimit=rlimit), rlimit=rlimit)
    return replace(result, seconds=result.seconds + spent)


def widen(rule: Rule, result: ProofResult, *, rlimit: int = DEFAULT_RLIMIT) -> ProofResult:
    """A proof at listed shapes whose axioms are all shape-generic, proved again from those
    axioms alone with no shape given: any shape when that proves, else the proof as it was."""
    if (result.status is not ProofStatus.PROVED or result.scope is Scope.ANY_SHAPE
            or not set(result.axioms_used) <= shape_generic_axioms()):
        return result
    again = prove(rule, rlimit=rlimit, only=frozenset(result.axioms_used))
    if again.status is not ProofStatus.PROVED or again.scope is not Scope.ANY_SHAPE:
        return result
    return replace(again, seconds=result.seconds + again.seconds)


def instance_scope(rule: Rule) -> Scope:
    """An axiom-instance rule covers what its axiom is established for."""
    generic = dict(rule.provenance).get("axiom", "") in shape_generic_axioms()
    return Scope.ANY_SHAPE if generic else Scope.LISTED_SHAPES
