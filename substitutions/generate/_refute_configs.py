"""Small concrete configurations for refuting a rule, drawn from its constraints alone.

A configuration is a shape for every pattern input, a value for every parameter variable
and the fixed value of every input a `value(k) == c` constraint pins. Nothing is read
from the rule file's witness: the sampler

1. reads what it can from the constraints (`rank(x) == r`, `shape(x) == (2, 3)`,
   `shape(x) == shape(y)`, `all(d == 1 for d in shape(k))`, `value(k) == c`);
2. draws the remaining ranks (0-4) and every dim from a small pool (1-4; a pool per
   attempt, so that dims coincide where the operators need them to; where no draw meets
   the rule, from 1, 2 and 16 or 32, the channels of wide groups), and a value from
   `VALUE_DRAWS` for every input whose value a constraint or target parameter reads
   otherwise (``0 < value('s')``, ``clip(...; min value('t'))``): one value fills it;
3. binds each parameter variable when the source first reads it, from a domain that
   depends on the node's input shapes (a permutation of the input's rank, a split that
   sums to the split dim, a divisor of the channels for a group, a reshape target of the
   same size, adversarial floats for epsilon/alpha/beta);
4. keeps the draw when every constraint holds and both sides infer shapes (the specs'
   shape inference), and orders the kept configurations smallest first, then prefers
   non-degenerate ones (batch > 1, channels > 1, non-square).
"""

from __future__ import annotations

import ast
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from taso.opspecs import ParamKind, ShapeError, spec_by_name
from taso.substitutions.generate._witness import infer_pattern_shapes
from taso.substitutions.rule import (
    MATCH_FILTERS_WHILE_PROVING,
    ParamExpr,
    ParamVar,
    Rule,
    evaluate_expression,
)

Shape = tuple[int, ...]
VALUE_DRAWS = (-1.5, -0.5, 0.0, 0.5, 2.0)
_POOLS = ((2, 3), (1, 2, 3), (2, 3, 4), (1, 2), (3, 4), (2,), (1, 2, 3, 4))
_WIDE_POOLS = ((1, 2, 16), (1, 2, 32))
"""Dims drawn when the small pools give a rule no config at all: the channel counts that
regrouping a conv to 16- or 32-channel groups needs (dims of 1-4 never met those rules'
constraints, so they went unchecked)."""
_RANKS = (0, 1, 2, 3, 4)
_PATIENCE = 40  # attempts without a new config before the sampler stops
ATTEMPTS = 3000
"""Draws before the sampler gives up; most fail at once (a shape a node refuses), so a rule
whose constraints few draws meet, two convs whose pads must be related, still gets one."""
_FLOATS = (-1.5, 0.5, 2.0, 1e-3, 0.0)
_FAILURES = (ShapeError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError,
             ArithmeticError, NameError)


@dataclass(frozen=True)
class Config:
    """Input shapes, parameter bindings and pinned constant values of one draw."""

    shapes: Mapping[str, Shape]
    bindings: Mapping[str, object]
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(math.prod(s) for s in self.shapes.values())

    def key(self) -> str:
        return repr((sorted(self.shapes.items()), sorted(self.bindings.items()), sorted(self.values.items())))


@dataclass(frozen=True)
class _Facts:
    """What the constraints say directly about the inputs."""

    ranks: Mapping[str, int]
    fixed: Mapping[str, Shape]
    ones: frozenset[str]
    values: Mapping[str, float]
    same: Mapping[str, str]  # input -> the representative of its equal-shape class
    derived: Mapping[str, tuple[str, str]]  # input -> ("==" or "in", an expression)
    pinned: Mapping[str, object]  # parameter variable -> the literal a constraint fixes
    valued: frozenset[str] = frozenset()  # inputs whose value is read, not pinned: drawn


_RANK = re.compile(r"^rank\('(\w+)'\) == (\d+)$")
_FIXED = re.compile(r"^shape\('(\w+)'\) == (\(.*\))$")
_SAME = re.compile(r"^shape\('(\w+)'\) == shape\('(\w+)'\)$")
_ONES = re.compile(r"^all\(d == 1 for d in shape\('(\w+)'\)\)$")
_VALUE = re.compile(r"^value\('(\w+)'\) == (\S+)$")
_PINNED = re.compile(r"^(?:tuple\((\w+)\)|(\w+)) == (.+)$")
_READS_VALUE = re.compile(r"value\('(\w+)'\)")
_DERIVED = re.compile(r"^shape\('(\w+)'\) (==|in) (.*shape\(.*)$")


def _facts(rule: Rule) -> _Facts:
    ranks: dict[str, int] = {}
    fixed: dict[str, Shape] = {}
    ones: set[str] = set()
    values: dict[str, float] = {}
    derived: dict[str, tuple[str, str]] = {}
    pinned: dict[str, object] = {}
    parent = {i.name: i.name for i in rule.inputs}

    def find(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for text in rule.constraints:
        if m := _RANK.match(text):
            ranks[m[1]] = int(m[2])
        elif (m := _FIXED.match(text)) and _literal_shape(m[2]) is not None:
            fixed[m[1]] = _literal_shape(m[2])  # type: ignore[assignment]
        elif (m := _SAME.match(text)) and m[1] in parent and m[2] in parent:
            parent[find(m[1])] = find(m[2])
        elif m := _ONES.match(text):
            ones.add(m[1])
        elif (m := _VALUE.match(text)) and _literal_float(m[2]) is not None:
            values[m[1]] = _literal_float(m[2])  # type: ignore[assignment]
        elif (m := _DERIVED.match(text)) and m[1] in parent:
            derived[m[1]] = (m[2], m[3])
        elif (m := _PINNED.match(text)) and _literal(m[3]) is not None:
            pinned[m[1] or m[2]] = _literal(m[3])
    return _Facts(ranks, fixed, frozenset(ones), values, {n: find(n) for n in parent},
                  derived, pinned, _values_read(rule) & set(parent) - set(values))


def _values_read(rule: Rule) -> frozenset[str]:
    """Inputs whose value a constraint or a target parameter reads."""
    exprs = [*rule.constraints, *(v.expr for n in rule.target.nodes for _, v in n.params if isinstance(v, ParamExpr))]
    return frozenset(name for e in exprs for name in _READS_VALUE.findall(e))


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _literal_shape(text: str) -> Shape | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    ok = isinstance(value, tuple) and all(isinstance(d, int) for d in value)
    return value if ok else None


def _literal_float(text: str) -> float | None:
    try:
        return float(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError):
        return None


def choose_configs(rule: Rule, *, count: int = 4, attempts: int = ATTEMPTS,
                   seed: int = 0) -> list[Config]:
    """Up to `count` distinct well-typed configurations, the smallest first (from wide dims
    only where small ones give none)."""
    facts = _facts(rule)
    return (_choose(rule, facts, count, attempts, seed, _POOLS)
            or _choose(rule, facts, count, attempts, seed, _WIDE_POOLS))


def _choose(rule: Rule, facts: _Facts, count: int, attempts: int, seed: int,
            pools: Sequence[Sequence[int]]) -> list[Config]:
    rng, side = random.Random(seed), random.Random(seed + 1)
    found: dict[str, Config] = {}
    last_new = 0
    for attempt in range(attempts):
        config = _draw(rule, facts, rng, pools[attempt % len(pools)], side)
        if config is not None and config.key() not in found:
            found[config.key()] = config
            last_new = attempt
        if len(found) >= 3 * count or (found and attempt - last_new > _PATIENCE):
            break
    return _pick(list(found.values()), count)


def _pick(configs: list[Config], count: int) -> list[Config]:
    """The smallest, then the least degenerate ones (fewest unit dims, non-square)."""
    if not configs:
        return []
    configs.sort(key=lambda c: (c.size, c.key()))
    rest = sorted(configs[1:], key=lambda c: (-_spread(c), c.size, c.key()))
    return [configs[0], *rest[: count - 1]]


def _spread(config: Config) -> int:
    """How non-degenerate a config is: dims above 1 and distinct dims within a shape."""
    return sum(sum(d > 1 for d in s) + len(set(s)) for s in config.shapes.values())


def _draw(rule: Rule, facts: _Facts, rng: random.Random,
          pool: Sequence[int], side: random.Random | None = None) -> Config | None:
    shapes = _draw_shapes(rule, facts, rng, pool)
    bound = _bind_source(rule, shapes, facts.pinned, rng, side)
    if bound is not None and facts.derived:
        # derived shapes again, once the source's parameters are bound (a layer scale on the
        # axis a Transpose's perm moves) and from shapes derived in the first pass (a chain:
        # conv_bias_merge_parallel_identity's), and the source re-walked
        shapes = _derive(facts, shapes, rng, bound[0])
        bound = _bind_source(rule, shapes, bound[0], rng, side)
    if bound is None:
        return None
    bindings, source = bound
    values = {k: v for k, v in facts.values.items() if k in shapes}
    values |= {k: rng.choice(VALUE_DRAWS) for k in sorted(facts.valued) if k in shapes}
    config = Config(shapes, bindings, values)
    if not constraints_hold(rule, config):
        return None
    try:
        target = infer_pattern_shapes(rule.target, shapes, bindings)
    except _FAILURES:
        return None
    # the applier refuses a target whose output shape contradicts the source's
    same = all(source[a] == tuple(target[b]) for a, b in rule.outputs)
    return config if same else None


def _draw_shapes(rule: Rule, facts: _Facts, rng: random.Random,
                 pool: Sequence[int]) -> dict[str, Shape]:
    by_class: dict[str, Shape] = {}
    for item in rule.inputs:
        name, root = item.name, facts.same[item.name]
        if name in facts.fixed:
            by_class[root] = facts.fixed[name]
    shapes = {}
    common = rng.choice(_RANKS) if rng.random() < 0.7 else None
    for item in rule.inputs:
        name, root = item.name, facts.same[item.name]
        if root not in by_class:
            rank = facts.ranks.get(name, facts.ranks.get(root))
            if rank is None and (name in facts.values or name in facts.valued):
                rank = rng.choice((0, 1, 2))
            elif rank is None:
                rank = common if common is not None else rng.choice(_RANKS)
            dims = (1,) * rank if name in facts.ones or name in facts.values or name in facts.valued else tuple(
                rng.choice(pool) for _ in range(rank))
            by_class[root] = dims
        shapes[name] = by_class[root]
    return _derive(facts, shapes, rng)


def _derive(facts: _Facts, shapes: dict[str, Shape], rng: random.Random,
            bindings: Mapping[str, object] | None = None) -> dict[str, Shape]:
    """Shapes that constraints compute from other inputs' (`shape(c) in ((1, shape(w)[0],
    1, 1), ...)`) and from bound parameters: one alternative, at random."""
    helpers = {**(bindings or {}), "shape": lambda n: tuple(shapes[n]), "rank": lambda n: len(shapes[n])}
    for name, (relation, expr) in facts.derived.items():
        try:
            value = evaluate_expression(expr, helpers)
        except _FAILURES:
            continue
        options = list(value) if relation == "in" else [value]  # type: ignore[call-overload]
        if options:
            shapes[name] = tuple(rng.choice(options))
    return shapes


def constraints_hold(rule: Rule, config: Config) -> bool:
    env = {**config.bindings, **_helpers(rule, config)}
    try:
        return all(bool(evaluate_expression(c, env)) for c in rule.constraints)
    except _FAILURES:
        return False


def _helpers(rule: Rule, config: Config) -> dict[str, Callable[[str], object]]:
    shapes = config.shapes
    varying = _required_varying(rule)
    return {"shape": lambda n: tuple(shapes[n]), "rank": lambda n: len(shapes[n]),
            # any input may be fed by a constant, except one the rule requires to vary (a rule
            # that moves a constant towards a value known only at run time)
            "is_const": lambda n: n not in varying,
            "value": lambda n: config.values.get(n), **MATCH_FILTERS_WHILE_PROVING}


_VARYING = re.compile(r"^not is_const\('(\w+)'\)$")


def _required_varying(rule: Rule) -> frozenset[str]:
    """Inputs a constraint `not is_const('x')` requires to be known only at run time."""
    return frozenset(m[1] for c in rule.constraints if (m := _VARYING.match(c)))


def _bind_source(rule: Rule, shapes: Mapping[str, Shape], pinned: Mapping[str, object],
                 rng: random.Random, side: random.Random | None = None,
                 ) -> tuple[dict[str, object], dict[str, Shape]] | None:
    """Walk the source, binding each parameter variable when first read (from its
    node's input shapes) and inferring shapes: the bindings and every value's shape,
    or None where a node refuses its inputs."""
    known: dict[str, Shape] = dict(shapes)
    bindings: dict[str, object] = dict(pinned)
    for node in rule.source.nodes:
        spec = spec_by_name(node.op)
        inputs = [known[r] for r in node.inputs]
        params: dict[str, object] = {}
        for name, value in node.params:
            if isinstance(value, ParamVar):
                if value.name not in bindings:
                    bindings[value.name] = _draw_param(node.op, name, inputs, params, rng, side)
                value = bindings[value.name]
            elif isinstance(value, ParamExpr):
                return None
            params[name] = value
        try:
            outs = spec.infer_shapes(inputs, params)
        except _FAILURES:
            return None
        for index, out in enumerate(outs):
            known[f"{node.id}:{index}"] = tuple(out)
            if index == 0:
                known[node.id] = tuple(out)
    return bindings, known


def _draw_param(op: str, name: str, inputs: Sequence[Shape], bound: Mapping[str, object],
                rng: random.Random, side: random.Random | None = None) -> object:
    drawn = _blind_param(op, name, inputs, bound, rng)
    return drawn if side is None else _fitted_param(op, name, inputs, drawn, side)


def _blind_param(op: str, name: str, inputs: Sequence[Shape], bound: Mapping[str, object],
                 rng: random.Random) -> object:
    first = inputs[0] if inputs else ()
    special = _padding if (op, name) == ("Pad", "pads") else _SPECIAL.get(name)
    if special is not None:
        drawn = special(first, bound, rng)
        if drawn is not None:
            return drawn
    spec = spec_by_name(op)
    param = spec.param(name)
    choices = [*spec.hints.param_values.get(name, ())]
    if param.default is not None:
        choices.append(param.default)
    choices.extend(_GENERIC[param.kind](param.default, rng))
    return rng.choice(choices)


def _fitted_param(op: str, name: str, inputs: Sequence[Shape], drawn: object, side: random.Random) -> object:
    """A conv's group or pads fitted to its weight, some of the time, in place of the blind
    draw: the group under which the weight reads the input's channels (grouped and
    depthwise convs alike), or the "same" pads of its kernel, which blind draws of 0 or 1
    per side rarely hit. The choice comes from its own generator, so that the blind draws,
    and so every configuration of a rule without a conv, stay as they were."""
    if op != "Conv" or len(inputs) < 2 or len(inputs[1]) != 4:
        return drawn
    if name == "group" and (group := _weight_group(inputs)) is not None and side.random() < 0.7:
        return group
    if name == "pads" and side.random() < 0.3:
        kh, kw = inputs[1][2] // 2, inputs[1][3] // 2
        return (kh, kw, kh, kw)
    return drawn


def _weight_group(inputs: Sequence[Shape]) -> int | None:
    """The group under which a conv's weight (M, C/group, ...) reads its input's C channels,
    where one exists."""
    if len(inputs) < 2 or len(inputs[0]) < 2 or len(inputs[1]) < 2 or inputs[1][1] == 0:
        return None
    channels, per_group = inputs[0][1], inputs[1][1]
    if channels % per_group or inputs[1][0] % (channels // per_group):
        return None
    return channels // per_group


def _perm(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return tuple(rng.sample(range(len(shape)), len(shape)))


def _axis(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return rng.randrange(len(shape)) if shape else 0


def _split(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    axis = int(bound.get("axis", 0) or 0)  # type: ignore[call-overload]
    if not shape or not -len(shape) <= axis < len(shape) or shape[axis] < 2:
        return None
    size = shape[axis]
    parts = 2 if size < 3 or rng.random() < 0.7 else 3
    cuts = sorted(rng.sample(range(1, size), parts - 1))
    edges = [0, *cuts, size]
    return tuple(b - a for a, b in zip(edges, edges[1:], strict=False))


def _reshape(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    """A shape of `shape`'s size (Reshape), or any small shape (ConstOnes, no input)."""
    if not shape:
        return tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    total, dims = math.prod(shape), []
    while total > 1 and len(dims) < 3:
        divisors = [d for d in range(1, total + 1) if total % d == 0]
        d = rng.choice(divisors)
        dims.append(d)
        total //= d
    return tuple([*dims, total] if total > 1 or not dims else dims)


def _group(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    channels = shape[1] if len(shape) > 1 else 1
    return rng.choice([d for d in range(1, channels + 1) if channels % d == 0])


def _axes(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones and rng.random() < 0.5:
        return (rng.choice(ones),)
    if len(shape) >= 2 and rng.random() < 0.5:  # two axes: a spatial mean's (2, 3)
        return tuple(sorted(rng.sample(range(len(shape)), 2)))
    return (rng.randrange(len(shape) + 1),)


def _padding(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return tuple(int(rng.random() < 0.3) for _ in range(2 * len(shape)))


def _window(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return (rng.randint(1, 3), rng.randint(1, 3))


def _pads(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return tuple(int(rng.random() < 0.3) for _ in range(4))


def _pairs(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return (rng.randint(1, 2), rng.randint(1, 2))


def _auto_pad(shape: Shape, bound: Mapping[str, object], rng: random.Random) -> object:
    return rng.choice(("NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))


_SPECIAL: dict[str, Callable[[Shape, Mapping[str, object], random.Random], object]] = {
    "perm": _perm, "axis": _axis, "split": _split, "shape": _reshape, "group": _group,
    "axes": _axes, "kernel_shape": _window, "strides": _pairs, "dilations": _pairs,
    "pads": _pads, "auto_pad": _auto_pad,
}


def _ints(default: object, rng: random.Random) -> list[object]:
    length = len(default) if isinstance(default, tuple) else 2
    return [tuple(rng.randint(0, 2) for _ in range(length))]


_GENERIC: dict[ParamKind, Callable[[object, random.Random], list[object]]] = {
    ParamKind.INT: lambda d, r: [r.randint(0, 3)],
    ParamKind.FLOAT: lambda d, r: [r.choice(_FLOATS)],
    ParamKind.INTS: _ints,
    ParamKind.FLOATS: lambda d, r: [],
    ParamKind.STRING: lambda d, r: [],
}
