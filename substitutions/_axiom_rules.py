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

from taso.opspecs.axioms import Axiom, Term, TermAlgebra, Var, all_axioms
from taso.substitutions._axiom_bank import SHAPE_DEPENDENT
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
    values = tuple(f"value({k}) == {v!r}" for k, v in sorted(src.consts.items()))
    for config in witness:
        config["shapes"].update({k: [] for k in src.consts})
        config["values"] = dict(src.consts)
    provenance = (("axiom", axiom.name), ("method", "axiom"),
                  ("witness", json.dumps(witness, sort_keys=True)))
    try:
        return Rule(f"ax-{axiom.name}{suffix}", axiom.math, inputs, Pattern(tuple(src.nodes)),
                    Pattern(tuple(tgt.nodes)), outputs, constraints + values, axiom.exactness,
                    Proof(ProofStatus.PROVED, "axiom", "", 0.0, (axiom.name,), 0),
                    tuple(sorted(provenance))).validate()
    except RuleError:
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
    shape_bound = axiom.derive is not None or axiom.name in SHAPE_DEPENDENT
    sides = None if shape_bound else _terms(axiom, _params(axiom))
    rules: list[Rule | None] = []
    if sides is not None:
        lhs, rhs = sides
        try:
            rules.append(_rule(axiom, lhs, rhs, "", _witness(axiom, bind=True), ()))
            rules.append(_rule(axiom, rhs, lhs, "-rev", _witness(axiom, bind=True), ()))
            return [r for r in rules if r is not None]
        except TypeError:
            rules = []
    for index, config in enumerate(axiom.configs):
        lhs, rhs = axiom.terms(config)
        witness = [_witness(axiom, bind=False)[index]]
        shapes = tuple(f"shape({n}) == {tuple(config.shapes[n])!r}" for n in axiom.inputs)
        try:
            if not axiom.condition(config.shapes, axiom.bind(config)):
                continue
        except LookupError:
            continue
        rules.append(_rule(axiom, lhs, rhs, f"-c{index}", witness, shapes))
        rules.append(_rule(axiom, rhs, lhs, f"-c{index}-rev", [dict(witness[0])], shapes))
    return [r for r in rules if r is not None]


def axiom_rules() -> list[Rule]:
    out = []
    for axiom in all_axioms():
        out.extend(rules_from_axiom(axiom))
    return out
