"""Rules read directly off the axioms: an axiom instance is a proved rule (method "axiom").

Where the axiom's builders only pass parameters through, the rule is parametric: each
parameter becomes a `ParamVar` (one rule for all strides, pads, groups, axes, alphas).
Otherwise there is one concrete rule per validation config, and if the axiom depends on
shapes (``derive``, shape side conditions) the rule is restricted to the config's shapes
by constraints. Literal constants on the source side (the 3 and 6 of a decomposed
HardSwish) become CONST inputs with a ``value(k) == 3.0`` constraint, so they match scalar
initializers. Both directions are emitted when the reverse is well-formed. Every rule
keeps the axiom's configs as numeric witnesses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from taso.opspecs import spec_by_name
from taso.opspecs.axioms import Axiom, Term, TermAlgebra, Var
from taso.substitutions.generate._axiom_bank import SHAPE_DEPENDENT, bank_axioms
from taso.substitutions.generate._axiom_families import FAMILIES
from taso.substitutions.generate._converter_forms import RULE_CONSTRAINTS
from taso.substitutions.generate._witness import guarded
from taso.substitutions.rule import (
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Proof,
    ProofStatus,
    Rule,
    RuleError,
    TensorRole,
)


class _VarAlgebra(TermAlgebra):
    """Term trees, refusing parameters computed from parameter variables."""

    def __call__(self, op: str, *inputs: object, **params: object) -> object:
        for value in params.values():
            if isinstance(value, tuple) and any(isinstance(v, ParamVar) for v in value):
                raise TypeError("computed parameter")
        return super().__call__(op, *inputs, **params)


@dataclass
class _Builder:
    """Turns term trees into a pattern (hash-consed: equal subterms share a node)."""

    literal_inputs: bool  # ConstFill scalars become CONST inputs with value constraints
    nodes: list[PatternNode] = field(default_factory=list)
    memo: dict = field(default_factory=dict)
    consts: dict[str, float] = field(default_factory=dict)

    def ref(self, term: Term | Var) -> str:
        if isinstance(term, Var):
            return term.name
        key = (term.op, term.inputs, term.params)
        if key not in self.memo:
            params = dict(term.params)
            if self.literal_inputs and term.op == "ConstFill" and tuple(params["shape"]) == ():
                if isinstance(params["value"], ParamVar):
                    raise TypeError("a literal whose value is a parameter variable")
                name = f"k{len(self.consts)}"
                self.consts[name] = float(params["value"])  # type: ignore[arg-type]
                self.memo[key] = name
                return name
            inputs = tuple(self.ref(t) for t in term.inputs)
            node_id = f"n{len(self.nodes)}"
            self.nodes.append(PatternNode(node_id, term.op, inputs, tuple(term.params)))
            self.memo[key] = node_id
        base = self.memo[key]
        return base if term.output == 0 else f"{base}:{term.output}"


def _params(axiom: Axiom) -> dict[str, object]:
    keys: dict[str, object] = {}
    for config in axiom.configs:
        keys.update(config.params)
    return {k: ParamVar(k) for k in sorted(keys)}


def _terms(axiom: Axiom, params: dict) -> tuple[tuple, tuple] | None:
    try:
        return axiom.sides(_VarAlgebra(), {n: Var(n) for n in axiom.inputs}, params)
    except Exception:  # noqa: BLE001 - builders that compute with parameters
        return None


def _rule(axiom: Axiom, lhs: tuple, rhs: tuple, suffix: str, witness: list[dict],
          constraints: tuple[str, ...]) -> Rule | None:
    src, tgt = _Builder(literal_inputs=True), _Builder(literal_inputs=False)
    outputs = tuple((src.ref(a), tgt.ref(b)) for a, b in zip(lhs, rhs, strict=True))
    if not src.nodes:
        return None
    inputs = tuple(PatternInput(n) for n in axiom.inputs)
    inputs += tuple(PatternInput(k, TensorRole.CONST) for k in sorted(src.consts))
    values = tuple(f"value({k!r}) == {v!r}" for k, v in sorted(src.consts.items()))
    constraints = RULE_CONSTRAINTS.get(axiom.name, ()) + constraints
    constraints += _parameter_conditions(axiom, lhs + rhs)
    for config in witness:
        config["shapes"].update({k: [] for k in src.consts})
        config["values"] = dict(src.consts)
    provenance = (("axiom", axiom.name), ("method", "axiom"),
                  ("witness", json.dumps(witness, sort_keys=True)))
    try:
        return guarded(Rule(f"ax-{axiom.name}{suffix}", axiom.math, inputs, Pattern(tuple(src.nodes)),
                    Pattern(tuple(tgt.nodes)), outputs, constraints + values, axiom.exactness,
                    Proof(ProofStatus.PROVED, "axiom", "", 0.0, (axiom.name,), 0),
                    tuple(sorted(provenance))).validate())
    except RuleError:
        return None


PARAMETER_CONDITIONS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "global_avgpool_as_avgpool": (("AveragePool", "kernel_shape", "tuple(shape('x')[2:]) == tuple({})"),),
    "avgpool_as_conv": (("ConstPoolKernel", "channels", "shape('x')[1] == {}"),),
}
"""Axiom conditions relating an operator's parameter to input shapes, as rule constraints
(op, parameter, template): `{}` becomes the rule's parameter variable where it keeps one,
else the literal it was built with. Without them ``AveragePool(x; kernel 3x3) ->
GlobalAveragePool(x)`` matched x of unknown H and W (the applier refuses a contradicting
shape only where both are known), and the refuter could draw no config for a rule whose
pooling-kernel channel count was left free (the source type-checks only at x's)."""


def _parameter_conditions(axiom: Axiom, terms: tuple) -> tuple[str, ...]:
    out = []
    for op, key, template in PARAMETER_CONDITIONS.get(axiom.name, ()):
        value = _parameter_of(terms, op, key)
        if value is not None:
            out.append(template.format(value))
    return tuple(out)


def _parameter_of(terms: tuple, op: str, key: str) -> str | None:
    """The variable's name where the op's parameter is a variable, else its literal, else None."""
    for term in terms:
        if not isinstance(term, Term):
            continue
        if term.op == op:
            value = dict(term.params).get(key)
            if isinstance(value, ParamVar):
                return value.name
            if value is not None:
                return repr(tuple(value)) if isinstance(value, list | tuple) else repr(value)
        found = _parameter_of(term.inputs, op, key)
        if found is not None:
            return found
    return None


def _witness(axiom: Axiom, *, bind: bool) -> list[dict]:
    out = []
    for config in axiom.configs:
        params = axiom.bind(config)
        bindings = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()
                    if not isinstance(v, dict)} if bind else {}
        out.append({"shapes": {k: list(v) for k, v in config.shapes.items()},
                    "bindings": bindings, "positive": sorted(axiom.positive)})
    return out


def rules_from_axiom(axiom: Axiom) -> list[Rule]:
    family = FAMILIES.get(axiom.name)
    if family is not None:  # a parameter computed at match time: rules written per family
        return family()
    shape_bound = axiom.derive is not None or axiom.name in SHAPE_DEPENDENT
    sides = None if shape_bound else _terms(axiom, _params(axiom))
    rules: list[Rule | None] = []
    if sides is not None and _consistent(axiom, *sides):
        rules = list(_parametric_rules(axiom, *sides))
        if len(rules) == 2:
            return rules  # type: ignore[return-value]
    done = {r.id for r in rules if r is not None}
    for index, config in enumerate(axiom.configs):
        lhs, rhs = axiom.terms(config)
        witness = [_witness(axiom, bind=False)[index]]
        shapes = tuple(f"shape({n!r}) == {tuple(config.shapes[n])!r}" for n in axiom.inputs
                       ) if shape_bound else ()
        try:
            if not axiom.condition(config.shapes, axiom.bind(config)):
                continue
        except LookupError:
            continue
        if f"ax-{axiom.name}" not in done:
            rules.append(_rule(axiom, lhs, rhs, f"-c{index}", witness, shapes))
        if f"ax-{axiom.name}-rev" not in done:
            rules.append(_rule(axiom, rhs, lhs, f"-c{index}-rev", [dict(witness[0])], shapes))
    return [r for r in rules if r is not None]


def _substitute(term: object, values: dict[str, object]) -> object:
    """A term tree with parameter variables replaced and parameters completed by defaults."""
    if not isinstance(term, Term):
        return term
    params = {k: values.get(v.name, _ABSENT) if isinstance(v, ParamVar) else v
              for k, v in term.params}
    params = {k: v for k, v in params.items() if v is not _ABSENT}
    full = tuple(sorted(spec_by_name(term.op).complete(params).items()))
    inputs = tuple(_substitute(t, values) for t in term.inputs)
    return (term.op, inputs, repr(full), term.output)


_ABSENT = object()


def _consistent(axiom: Axiom, lhs: tuple, rhs: tuple) -> bool:
    """The parametric sides equal the concrete ones on every config (builders that branch on
    a parameter value, like Gemm's transA, are not pass-through and stay concrete)."""
    for config in axiom.configs:
        values = axiom.bind(config)
        try:
            concrete = axiom.terms(config)
        except Exception:  # noqa: BLE001
            return False
        mine = tuple(tuple(_substitute(t, values) for t in side) for side in (lhs, rhs))
        theirs = tuple(tuple(_substitute(t, values) for t in side) for side in concrete)
        if mine != theirs:
            return False
    return True


def _parametric_rules(axiom: Axiom, lhs: tuple, rhs: tuple) -> list[Rule]:
    """Both directions; a direction whose source holds a parameter-valued literal is skipped."""
    out = []
    for a, b, suffix in ((lhs, rhs, ""), (rhs, lhs, "-rev")):
        try:
            rule = _rule(axiom, a, b, suffix, _witness(axiom, bind=True), ())
        except TypeError:
            continue
        if rule is not None:
            out.append(rule)
    return out


def axiom_rules() -> list[Rule]:
    out = []
    for axiom in bank_axioms():
        out.extend(rules_from_axiom(axiom))
    return out
