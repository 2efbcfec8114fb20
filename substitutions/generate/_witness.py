"""Numeric witness: run a rule's source and target on random float64 tensors of concrete
shapes with the specs' NumPy semantics and compare the mapped outputs.

The shapes and parameter bindings come from the rule's provenance (``witness``: a JSON
list of configs ``{"shapes": {...}, "bindings": {...}, "values": {...}}``, where
``values`` fixes small constants such as the 3 of ``x + 3``). A failing witness returns
a ready-to-run reproducer. `type_error` infers both sides' shapes on the same configs:
a rule that does not type-check there is reported as such, not run.

The file's configs are not trusted alone: a single 1x1 witness cannot tell x @ y from
y @ x. `check_witness` also runs `drawn_configs`, configs the checker draws itself near
the file's (`taso.opspecs.axioms.draws`: every dim >= 2, batch > 1, an extra leading dim,
broken equalities, random dims), kept where the rule's constraints and shape guards hold
and both sides type-check to the same output shapes (elsewhere the applier refuses the
rewrite); a rule whose shapes are pinned by its constraints keeps them.
Every config gets its own seed, derived from the rule id: runs are reproducible.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np

from taso.opspecs import Exactness, ShapeError, spec_by_name
from taso.opspecs.axioms.draws import pattern as dims_pattern
from taso.opspecs.axioms.draws import seed_of, shape_draws
from taso.substitutions.rule import (
    MATCH_FILTERS_WHILE_PROVING,
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Proof,
    ProofStatus,
    Rule,
    evaluate_expression,
    rule_to_json,
)

RTOL = 1e-6
EVALUATION_ERROR = "evaluation error"
DRAWS = 3  # configs drawn per rule beyond the file's (fewer where shapes are pinned)
DRAW_TRIES = 32  # candidates tried near each file config
_REFUSED = (ShapeError, ValueError, KeyError, IndexError, TypeError, ArithmeticError, NameError)


class WitnessOutcome(enum.Enum):
    AGREE = "agree"  # source and target agree on every config
    DIFFER = "differ"  # a config where they differ: a counterexample
    ERROR = "error"  # a side could not be evaluated
    MISSING = "missing"  # the rule has no witness configs


@dataclass(frozen=True)
class WitnessResult:
    ok: bool
    configs: int  # the file's configs checked
    detail: str = ""
    reproducer: str = ""
    outcome: WitnessOutcome = WitnessOutcome.AGREE
    drawn: int = 0  # configs drawn by the checker and checked


def witness_configs(rule: Rule) -> list[dict]:
    return json.loads(dict(rule.provenance).get("witness", "[]"))


def run_pattern(pattern: Pattern, env: Mapping[str, np.ndarray],
                bindings: Mapping[str, object]) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = dict(env)
    for node in pattern.nodes:
        params = _node_params(node, bindings, lambda name: tuple(values[name].shape),
                              lambda name: _value_of(values[name]))
        outs = spec_by_name(node.op).evaluate([values[r] for r in node.inputs], params)
        _record(values, node, outs)
    return values


def infer_pattern_shapes(pattern: Pattern, shapes: Mapping[str, tuple[int, ...]],
                         bindings: Mapping[str, object]) -> dict[str, tuple[int, ...]]:
    """`run_pattern` on shapes only, through the specs' shape inference (raises
    `ShapeError` where an operator does not accept its inputs or parameters)."""
    known: dict[str, tuple[int, ...]] = dict(shapes)
    for node in pattern.nodes:
        params = _node_params(node, bindings, known.__getitem__, lambda name: None)
        outs = spec_by_name(node.op).infer_shapes([known[r] for r in node.inputs], params)
        _record(known, node, [tuple(o) for o in outs])
    return known


def _value_of(array: np.ndarray) -> float | None:
    """The value of an all-equal numeric tensor (a Clip bound ``value('t')``), else None."""
    flat = np.asarray(array).reshape(-1)
    if flat.size == 0 or flat.dtype.kind not in "fiub":
        return None
    return float(flat[0]) if bool(np.all(flat == flat[0])) else None


def _node_params(node: PatternNode, bindings: Mapping[str, object], shape_of: Callable[[str], tuple[int, ...]],
                 value_of: Callable[[str], float | None]) -> dict[str, object]:
    """The node's parameters: bound variables (or the spec's default), evaluated
    expressions (which may read `shape`, `rank` and `value` of the pattern's tensors; a
    value is None where only shapes are known)."""
    helpers = {"shape": shape_of, "rank": lambda name: len(shape_of(name)), "value": value_of}
    params = {}
    for k, v in node.params:
        if isinstance(v, ParamVar):
            v = bindings.get(v.name, spec_by_name(node.op).param(k).default)
        elif isinstance(v, ParamExpr):
            v = evaluate_expression(v.expr, {**bindings, **helpers})
        params[k] = _untuple(v)
    return params


def _record(values: dict, node: PatternNode, outs: list) -> None:
    for index, out in enumerate(outs):
        values[f"{node.id}:{index}"] = out
        if index == 0:
            values[node.id] = out


def type_error(rule: Rule) -> str:
    """'' if both sides infer shapes on every witness config, else which side and why."""
    for index, config in enumerate(witness_configs(rule)):
        shapes = {k: tuple(v) for k, v in config.get("shapes", {}).items()}
        bindings = {k: _untuple(v) for k, v in config.get("bindings", {}).items()}
        for side, pattern in (("source", rule.source), ("target", rule.target)):
            try:
                infer_pattern_shapes(pattern, shapes, bindings)
            except (ShapeError, ValueError, KeyError, IndexError, TypeError) as err:
                return f"config {index}: the {side} does not type-check: {err}"
    return ""


def _untuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def check_config(rule: Rule, config: Mapping, seed: int) -> str:
    """'' if source and target agree on this config, else what differs."""
    rng = np.random.default_rng(seed)
    fixed = config.get("values", {})
    env = {}
    for item in rule.inputs:
        shape = tuple(config["shapes"][item.name])
        if item.name in fixed:
            env[item.name] = np.full(shape, float(fixed[item.name]))
        elif item.name in config.get("positive", ()):
            env[item.name] = rng.uniform(0.5, 2.0, size=shape)
        else:
            env[item.name] = rng.uniform(-2.0, 2.0, size=shape)
    bindings = {k: _untuple(v) for k, v in config.get("bindings", {}).items()}
    try:
        src = run_pattern(rule.source, env, bindings)
        tgt = run_pattern(rule.target, env, bindings)
    except (ValueError, KeyError, IndexError, TypeError) as err:
        return f"{EVALUATION_ERROR}: {type(err).__name__}: {err}"
    for a, b in rule.outputs:
        x, y = np.asarray(src[a], np.float64), np.asarray(tgt[b], np.float64)
        if x.shape != y.shape:
            return f"output {a}: shape {x.shape} vs {y.shape}"
        if not np.allclose(x, y, rtol=RTOL, atol=RTOL):
            return f"output {a}: max abs difference {np.max(np.abs(x - y)):.3g}"
    return ""


def check_witness(rule: Rule, *, seed: int = 0, draws: int = DRAWS) -> WitnessResult:
    """Source and target agree on every file config and on up to `draws` drawn ones."""
    configs = witness_configs(rule)
    if not configs:
        return WitnessResult(False, 0, "rule has no witness configs",
                             outcome=WitnessOutcome.MISSING)
    drawn = drawn_configs(rule, count=draws, seed=seed)
    for index, config in enumerate(configs + drawn):
        detail = check_config(rule, config, config_seed(rule, index, seed))
        if detail:
            outcome = (WitnessOutcome.ERROR if detail.startswith(EVALUATION_ERROR)
                       else WitnessOutcome.DIFFER)
            where = (f"config {index}" if index < len(configs) else
                     f"drawn config {index - len(configs)} (shapes {config['shapes']})")
            return WitnessResult(False, min(index, len(configs)), f"{where}: {detail}",
                                 reproducer(rule, seed), outcome, max(0, index - len(configs)))
    return WitnessResult(True, len(configs), drawn=len(drawn))


def config_seed(rule: Rule, index: int, seed: int = 0) -> int:
    """The seed of config `index` (the file's first, then the drawn ones) of `rule`."""
    return seed_of(rule.id, seed, index) % 2**32


def drawn_configs(rule: Rule, *, count: int = DRAWS, seed: int = 0) -> list[dict]:
    """Up to `count` configs near the file's, drawn round-robin over them (seeded by the
    rule id, `seed` and the file config's index), where the rule's constraints and shape
    guards hold and both sides type-check; none that only repeats a file config's pattern
    of equal, unit and odd dims."""
    configs = witness_configs(rule)
    checks = tuple(rule.constraints) + shape_guards(rule)
    seen = {_config_key(c) for c in configs}
    streams = [_candidates(c, np.random.default_rng(seed_of(rule.id, seed, "draw", i)))
               for i, c in enumerate(configs if count > 0 else ())]
    out: list[dict] = []
    while streams and len(out) < count:
        for stream in list(streams):
            candidate = next(stream, None)
            if candidate is None:
                streams.remove(stream)
            elif _config_key(candidate) not in seen and len(out) < count:
                seen.add(_config_key(candidate))
                if _admissible(rule, candidate, checks):
                    out.append(candidate)
    return out


def _candidates(config: Mapping, rng: np.random.Generator) -> Iterator[dict]:
    shapes = {k: tuple(v) for k, v in config.get("shapes", {}).items()}
    for _, drawn in shape_draws(shapes, rng, DRAW_TRIES):
        yield {**config, "shapes": {k: list(v) for k, v in drawn.items()}}


def _config_key(config: Mapping) -> str:
    shapes = {k: tuple(v) for k, v in config.get("shapes", {}).items()}
    return repr((dims_pattern(shapes), sorted(config.get("bindings", {}).items())))


def _admissible(rule: Rule, config: Mapping, checks: tuple[str, ...]) -> bool:
    """The constraints hold (every input may be a constant; `value` reads the config's
    values) and both sides pass the specs' shape inference. Sides that give a mapped output
    two shapes are kept: the rule is wrong as stated (its constraints miss a condition;
    the applier refuses a contradicting shape only where both shapes are known), and the
    witness reports the two shapes."""
    shapes = {k: tuple(v) for k, v in config["shapes"].items()}
    bindings = {k: _untuple(v) for k, v in config.get("bindings", {}).items()}
    values = config.get("values", {})
    env = {**bindings, "shape": shapes.__getitem__, "rank": lambda n: len(shapes[n]),
           "is_const": lambda n: True, "value": values.get, **MATCH_FILTERS_WHILE_PROVING}
    try:
        if not all(evaluate_expression(c, env) for c in checks):
            return False
        for side in (rule.source, rule.target):
            infer_pattern_shapes(side, shapes, bindings)
    except _REFUSED:
        return False
    return True


def reproducer(rule: Rule, seed: int) -> str:
    """A Python snippet that re-runs the failing witness."""
    text = json.dumps(rule_to_json(rule), sort_keys=True)
    return ("import json\n"
            "from taso.substitutions.rule import rule_from_json\n"
            "from taso.substitutions.generate._witness import check_witness\n"
            f"rule = rule_from_json(json.loads({text!r}))\n"
            f"print(check_witness(rule, seed={seed}))")


def shape_guards(rule: Rule) -> tuple[str, ...]:
    """Constraints that keep a rule to the shape relations it was proved and witnessed on.

    Proofs over uninterpreted tensor functions do not see shapes: `conv(x + y, w) =
    conv(x, w) + conv(y, w)` holds for equal shapes of x and y, not when the Add
    broadcasts (the fuzzer found exactly that). So every input keeps the rank it had in
    every witness configuration, and inputs whose shapes were equal in every configuration
    must stay equal. A literal constant (constrained by `value(k)`, e.g. the 3 of a
    decomposed HardSwish) may have any shape of ones: it broadcasts like a scalar."""
    configs = witness_configs(rule)
    shapes = [c.get("shapes", {}) for c in configs]
    names = [i.name for i in rule.inputs]
    if not shapes or any(n not in s for s in shapes for n in names):
        return ()
    valued = {n for n in names if f"value({n!r})" in " ".join(rule.constraints)}
    guards = [f"all(d == 1 for d in shape({n!r}))" for n in names if n in valued]  # broadcast-neutral
    tensors = [n for n in names if n not in valued]
    for name in tensors:
        ranks = {len(s[name]) for s in shapes}
        if len(ranks) == 1:
            guards.append(f"rank({name!r}) == {ranks.pop()}")
    for i, a in enumerate(tensors):
        for b in tensors[i + 1:]:
            if all(list(s[a]) == list(s[b]) for s in shapes):
                guards.append(f"shape({a!r}) == shape({b!r})")
    return tuple(g for g in guards if g not in rule.constraints)


def guarded(rule: Rule) -> Rule:
    """`rule` with its `shape_guards` added (a narrower rule: its proof still holds)."""
    extra = shape_guards(rule)
    return replace(rule, constraints=rule.constraints + extra).validate() if extra else rule


def witness_json(configs: Iterable[tuple[Mapping, Mapping]], positive: Iterable[str] = ()) -> str:
    """A hand-written rule's witness: (shapes, bindings) configs its axiom was validated at."""
    return json.dumps([{"shapes": shapes, "bindings": bindings, "positive": sorted(positive), "values": {}}
                       for shapes, bindings in configs], sort_keys=True)


def axiom_rule(name: str, math: str, inputs: tuple[PatternInput, ...], source: Pattern, target: Pattern,
               outputs: tuple[tuple[str, str], ...], constraints: tuple[str, ...], exactness: Exactness,
               witness: str, *, rule_id: str | None = None) -> Rule:
    """A hand-written rule (a family the axiom's configs cannot express, such as a parameter
    computed at match time) recorded as proved by axiom `name`, `guarded`."""
    provenance = (("axiom", name), ("method", "axiom"), ("witness", witness))
    return guarded(Rule(rule_id or f"ax-{name}", math, inputs, source, target, outputs, constraints, exactness,
                        Proof(ProofStatus.PROVED, "axiom", "", 0.0, (name,), 0),
                        tuple(sorted(provenance))).validate())
