"""Rules as data: `Rule` = source pattern, target pattern, mapped outputs, constraints, proof.

A pattern is a small DAG of `PatternNode`s over operator specs (`taso.opspecs` names).
Node inputs name either a pattern input (a tensor variable such as "x" or "w") or an
output of an earlier node ("n0" for output 0, "n0:1" for output 1). Parameters are
literals, `ParamVar`s (a variable bound by matching: rules are parametric) or
`ParamExpr`s (computed from bound variables, in the target only). Constraints are
expressions over bound parameters and tensor shapes, in a small safe language:

    names       parameter variables;  shape(x), rank(x), is_const(x) for tensor variables,
                value(c): the value of a constant scalar (or all-equal constant) tensor, else None;
                after_linear(x): x comes from a Conv/ConvTranspose/Gemm/MatMul/BatchNormalization,
                directly or through Add/Sub/Mul/Div by constants (ORT folds a constant after it);
                feeds_unpadded_conv(n): pattern node n's output is read only as the data input
                of convs without padding (match filters: they decide where a rule pays, not
                whether it holds, and are False for pattern inputs while proving)
    operators   + - * // % == != < <= > >= and or not, indexing, tuples, len, all, any,
                min, max, abs

Rules are frozen and validated when built (`Rule.validate`) and when loaded from JSON
(`load_rules`): unknown ops, arity, unbound variables and dangling references are errors.
"""

from __future__ import annotations

import ast
import enum
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType

from taso.errors import VerificationError
from taso.opspecs import Exactness, spec_by_name

FORMAT_VERSION = 1


class RuleError(VerificationError):
    """A rule (or rule file) is malformed."""


class TensorRole(enum.Enum):
    """What a pattern input may bind to."""

    ANY = "any"  # any value
    CONST = "const"  # an initializer or constant-foldable value (a weight)
    COMPUTED = "computed"  # a value computed at run time, never a constant


class ProofStatus(enum.Enum):
    PROVED = "proved"  # unsat within the timeout
    REFUTED = "refuted"  # a counterexample exists
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"
    UNCHECKED = "unchecked"


class Scope(enum.Enum):
    """What a rule's proof covers (the numeric witness and refuter check other shapes too)."""

    ANY_SHAPE = "any shape"  # every rank and size the constraints allow
    LISTED_SHAPES = "listed shapes"  # the witness configs' shapes only


@dataclass(frozen=True)
class ParamVar:
    """A parameter bound by matching (same name, same value everywhere in the rule)."""

    name: str


@dataclass(frozen=True)
class ParamExpr:
    """A parameter computed from bound variables, e.g. `ParamExpr("(p[0]+1, p[1]+1)")`."""

    expr: str


ParamValue = int | float | str | tuple | ParamVar | ParamExpr


@dataclass(frozen=True)
class PatternInput:
    name: str
    role: TensorRole = TensorRole.ANY


@dataclass(frozen=True)
class PatternNode:
    id: str
    op: str  # spec name
    inputs: tuple[str, ...]
    params: tuple[tuple[str, ParamValue], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(sorted(self.params, key=lambda kv: kv[0])))

    def param_map(self) -> dict[str, ParamValue]:
        return dict(self.params)


@dataclass(frozen=True)
class Pattern:
    nodes: tuple[PatternNode, ...]

    def node(self, node_id: str) -> PatternNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


@dataclass(frozen=True)
class Proof:
    status: ProofStatus = ProofStatus.UNCHECKED
    method: str = ""  # e.g. "axioms" (uninterpreted functions + axioms)
    solver: str = ""  # e.g. "z3 4.15.4"
    seconds: float = 0.0
    axioms_used: tuple[str, ...] = ()
    witness_configs: int = 0  # concrete shape configurations checked numerically
    scope: Scope = Scope.LISTED_SHAPES  # files written before the field read as listed


@dataclass(frozen=True)
class Rule:
    """`source == target` on the mapped outputs, whenever `constraints` hold.

    `exactness` EXACT: bit for bit on every input. Anything else (`reassociates`: over the
    reals; floats may round differently) also carries implicit side conditions that the
    matcher enforces: constants stay finite and normal, and no decision (comparison,
    arg-max, rounding) reads a rewritten value; see `_matcher` and `_constraints`."""

    id: str
    math: str
    inputs: tuple[PatternInput, ...]
    source: Pattern
    target: Pattern
    outputs: tuple[tuple[str, str], ...]  # (source ref, target ref or target input name)
    constraints: tuple[str, ...] = ()
    exactness: Exactness = Exactness.EXACT
    proof: Proof = field(default_factory=Proof)
    provenance: tuple[tuple[str, str], ...] = ()

    def input_role(self, name: str) -> TensorRole:
        return next(i.role for i in self.inputs if i.name == name)

    def validate(self) -> Rule:
        _validate(self)
        return self


# ----- validation ------------------------------------------------------------------------

_BUILTINS = {"len": len, "all": all, "any": any, "min": min, "max": max, "abs": abs, "tuple": tuple, "range": range}
MATCH_FILTERS_WHILE_PROVING = {"after_linear": lambda name: False, "feeds_unpadded_conv": lambda name: False}
"""The match filters as the witness checker and the refuter see them: a pattern input has no
producer and no consumers, and neither decides whether a rule holds."""
_FUNCTIONS = frozenset({"shape", "rank", "is_const", "value", *MATCH_FILTERS_WHILE_PROVING,
                        *_BUILTINS})  # the helpers come from the caller's env
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Load,
    ast.Constant, ast.Tuple, ast.List, ast.Subscript, ast.Slice, ast.IfExp, ast.GeneratorExp,
    ast.comprehension, ast.Store, ast.And, ast.Or, ast.Not, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv,
    ast.Mod, ast.USub, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
)


def expression_names(expr: str) -> set[str]:
    """Free names of a constraint/parameter expression; raises RuleError if unsafe."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise RuleError(f"bad expression {expr!r}: {exc.msg}") from None
    bound: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise RuleError(f"expression {expr!r} uses {type(node).__name__}, which is not allowed")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS):
            raise RuleError(f"expression {expr!r} calls something other than {sorted(_FUNCTIONS)}")
        if isinstance(node, ast.comprehension) and isinstance(node.target, ast.Name):
            bound.add(node.target.id)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
    return names - bound - _FUNCTIONS


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str) -> CodeType:
    """Validate (`expression_names`) and compile an expression once (matching is a hot path)."""
    expression_names(expr)
    return compile(expr, "<rule>", "eval")


def evaluate_expression(expr: str, env: Mapping[str, object]) -> object:
    """Evaluate a validated expression with `env` (parameters and shape/rank/is_const/value helpers).

    The environment is passed as globals so that names inside generator expressions
    (`all(d == k for d in s)`) resolve to parameters too."""
    return eval(_compiled(expr), {"__builtins__": _BUILTINS, **env})  # noqa: S307


def _validate(rule: Rule) -> None:
    where = f"rule {rule.id}"
    names = [i.name for i in rule.inputs]
    if len(set(names)) != len(names):
        raise RuleError(f"{where}: duplicate pattern inputs")
    source_vars = _check_pattern(rule.source, set(names), f"{where} source", allow_expr=False)
    _check_pattern(rule.target, set(names), f"{where} target", allow_expr=True, bound=source_vars)
    if not rule.outputs:
        raise RuleError(f"{where}: no mapped outputs")
    source_refs, target_refs = _refs(rule.source), _refs(rule.target) | set(names)
    for src, dst in rule.outputs:
        if src not in source_refs:
            raise RuleError(f"{where}: mapped output {src!r} is not a source node output")
        if dst not in target_refs:
            raise RuleError(f"{where}: mapped output {dst!r} is not a target output or input")
    known = source_vars | {"_"}
    for expr in rule.constraints:
        unbound = expression_names(expr) - known
        if unbound:
            raise RuleError(f"{where}: constraint {expr!r} uses unbound names {sorted(unbound)}")


def _check_pattern(
    pattern: Pattern, tensors: set[str], where: str, *, allow_expr: bool, bound: set[str] | None = None
) -> set[str]:
    if not pattern.nodes and "source" in where:
        raise RuleError(f"{where}: empty pattern")
    variables: set[str] = set()
    available = set(tensors)
    ids: set[str] = set()
    for node in pattern.nodes:
        if node.id in ids or node.id in tensors:
            raise RuleError(f"{where}: duplicate node id {node.id!r}")
        try:
            spec = spec_by_name(node.op)
        except KeyError:
            raise RuleError(f"{where}: unknown op {node.op!r}") from None
        lo, hi = spec.arity
        if len(node.inputs) < lo or (hi is not None and len(node.inputs) > hi):
            raise RuleError(f"{where}: {node.op} takes {lo}..{hi} inputs, got {len(node.inputs)}")
        for ref in node.inputs:
            if ref not in available:
                raise RuleError(f"{where}: node {node.id} reads {ref!r}, which is not defined before it")
        known_params = {p.name for p in spec.params}
        for name, value in node.params:
            if name not in known_params:
                raise RuleError(f"{where}: {node.op} has no parameter {name!r}")
            if isinstance(value, ParamVar):
                if bound is not None and value.name not in bound:
                    raise RuleError(f"{where}: parameter variable {value.name!r} is unbound")
                variables.add(value.name)
            elif isinstance(value, ParamExpr):
                if not allow_expr:
                    raise RuleError(f"{where}: expressions are only allowed in the target")
                unbound = expression_names(value.expr) - (bound or set())
                if unbound:
                    raise RuleError(f"{where}: expression {value.expr!r} uses unbound names {sorted(unbound)}")
        ids.add(node.id)
        available.add(node.id)
        available.update(f"{node.id}:{k}" for k in range(8))
    return variables


def _refs(pattern: Pattern) -> set[str]:
    refs: set[str] = set()
    for node in pattern.nodes:
        refs.add(node.id)
        refs.update(f"{node.id}:{k}" for k in range(8))
    return refs


def split_ref(ref: str) -> tuple[str, int]:
    """"n0" -> ("n0", 0); "n0:1" -> ("n0", 1)."""
    node, _, index = ref.partition(":")
    return node, int(index or 0)


# ----- JSON ---------------------------------------------------------------------------------


def rule_to_json(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.id,
        "math": rule.math,
        "inputs": [[i.name, i.role.value] for i in rule.inputs],
        "source": [_node_to_json(n) for n in rule.source.nodes],
        "target": [_node_to_json(n) for n in rule.target.nodes],
        "outputs": [list(pair) for pair in rule.outputs],
        "constraints": list(rule.constraints),
        "exactness": rule.exactness.value,
        "proof": {
            "status": rule.proof.status.value,
            "method": rule.proof.method,
            "solver": rule.proof.solver,
            "seconds": round(rule.proof.seconds, 4),
            "axioms_used": list(rule.proof.axioms_used),
            "witness_configs": rule.proof.witness_configs,
            "scope": rule.proof.scope.value,
        },
        "provenance": dict(rule.provenance),
    }


def _node_to_json(node: PatternNode) -> dict[str, object]:
    return {"id": node.id, "op": node.op, "inputs": list(node.inputs),
            "params": {k: _param_to_json(v) for k, v in node.params}}


def _param_to_json(value: ParamValue) -> object:
    if isinstance(value, ParamVar):
        return {"var": value.name}
    if isinstance(value, ParamExpr):
        return {"expr": value.expr}
    if isinstance(value, tuple):
        return {"tuple": [_param_to_json(v) for v in value]}
    return value


def rule_from_json(data: Mapping[str, object]) -> Rule:
    if not isinstance(data, Mapping):
        raise RuleError(f"a rule is a JSON {type(data).__name__}, not an object")
    try:
        proof = dict(data.get("proof", {}))  # type: ignore[call-overload]
        rule = Rule(
            id=str(data["id"]),
            math=str(data.get("math", "")),
            inputs=tuple(PatternInput(str(k), TensorRole(v)) for k, v in data["inputs"]),  # type: ignore[attr-defined]
            source=Pattern(tuple(_node_from_json(n) for n in data["source"])),  # type: ignore[attr-defined]
            target=Pattern(tuple(_node_from_json(n) for n in data["target"])),  # type: ignore[attr-defined]
            outputs=tuple((str(a), str(b)) for a, b in data["outputs"]),  # type: ignore[attr-defined]
            constraints=tuple(str(c) for c in data.get("constraints", ())),  # type: ignore[attr-defined]
            exactness=Exactness(data.get("exactness", "exact")),
            proof=Proof(
                status=ProofStatus(proof.get("status", "unchecked")),
                method=str(proof.get("method", "")),
                solver=str(proof.get("solver", "")),
                seconds=float(proof.get("seconds", 0.0)),
                axioms_used=tuple(proof.get("axioms_used", ())),
                witness_configs=int(proof.get("witness_configs", 0)),
                scope=Scope(proof.get("scope", Scope.LISTED_SHAPES.value)),
            ),
            provenance=tuple(sorted((str(k), str(v)) for k, v in dict(data.get("provenance", {})).items())),  # type: ignore[call-overload]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RuleError(f"rule {data.get('id', '?')}: malformed ({exc})") from None
    return rule.validate()


def _node_from_json(data: Mapping[str, object]) -> PatternNode:
    params = dict(data.get("params", {}))  # type: ignore[call-overload]
    return PatternNode(
        id=str(data["id"]),
        op=str(data["op"]),
        inputs=tuple(str(i) for i in data["inputs"]),  # type: ignore[attr-defined]
        params=tuple(sorted((k, _param_from_json(v)) for k, v in params.items())),
    )


def _param_from_json(value: object) -> ParamValue:
    if isinstance(value, dict):
        if "var" in value:
            return ParamVar(str(value["var"]))
        if "expr" in value:
            return ParamExpr(str(value["expr"]))
        if "tuple" in value:
            return tuple(_param_from_json(v) for v in value["tuple"])
        raise RuleError(f"unknown parameter form {value!r}")
    if isinstance(value, list):
        return tuple(_param_from_json(v) for v in value)
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class RuleLibrary:
    """A rule file: rules plus file-level provenance (generator version, spec hash, seed...)."""

    rules: tuple[Rule, ...]
    provenance: tuple[tuple[str, object], ...] = ()


def dump_rules(library: RuleLibrary) -> str:
    """Deterministic JSON text (sorted keys, one rule per list entry)."""
    data = {
        "format": FORMAT_VERSION,
        "provenance": dict(library.provenance),
        "rules": [rule_to_json(r) for r in library.rules],
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load_rules(source: str | Path | Iterable[Mapping[str, object]]) -> RuleLibrary:
    """Load and validate a rule file (path or JSON text) or a list of rule dicts.

    Every problem with a file (unreadable, not JSON, not a rule file) is a `RuleError`
    whose one-line message starts with the file's path.
    """
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        path = Path(source)
        try:
            return _library_from_text(path.read_text(encoding="utf-8"))
        except RuleError as exc:
            raise RuleError(f"{path}: {exc}") from None
        except UnicodeDecodeError:
            raise RuleError(f"{path}: not a rule file (not UTF-8 text)") from None
        except IsADirectoryError:
            raise RuleError(f"{path}: not a file (a folder)") from None
        except FileNotFoundError:
            raise RuleError(f"{path}: no such rule file") from None
        except OSError as exc:
            raise RuleError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if isinstance(source, str):
        return _library_from_text(source)
    return RuleLibrary(tuple(rule_from_json(r) for r in source))


def _library_from_text(text: str) -> RuleLibrary:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuleError(f"not a rule file (not JSON: {exc})") from None
    if not isinstance(data, dict):
        raise RuleError(f'not a rule file (a JSON {type(data).__name__}, not an object with "format" and "rules")')
    if data.get("format") != FORMAT_VERSION:
        found = "no" if "format" not in data else f"{data['format']!r} as"
        raise RuleError(f"not a rule file of format {FORMAT_VERSION} ({found} \"format\")")
    entries = data.get("rules")
    if not isinstance(entries, list):
        raise RuleError(f'not a rule file ("rules" is {type(entries).__name__}, not a list of rules)')
    rules = tuple(rule_from_json(r) for r in entries)
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise RuleError("rule file has duplicate rule ids")
    provenance = data.get("provenance", {})
    if not isinstance(provenance, dict):
        raise RuleError('"provenance" is not an object')
    return RuleLibrary(rules, tuple(sorted(provenance.items())))
