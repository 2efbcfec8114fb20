"""Refute a wrong rule with a counterexample the verifier finds itself.

`refute(rule)` never reads the rule file's witness. It

1. draws a few small well-typed configurations from the rule's constraints and the
   specs' parameter domains (`_refute_configs.choose_configs`);
2. numeric search: runs source and target with the specs' NumPy semantics (float64) on
   random inputs (several seeds) and adversarial ones (small integers with zeros and mixed
   signs, all negative, large magnitudes, tiny positives) at every configuration;
3. element-wise Z3: where that finds nothing, evaluates both sides at the smallest
   configuration on NumPy object arrays of Z3 reals (the same semantics; transcendental
   scalar functions are uninterpreted) and asks for bounded inputs where an output element
   differs by more than `Z3_GAP`. A model is a counterexample only once the NumPy
   semantics confirm it (so an uninterpreted function or a division by zero in the model
   cannot refute a right rule).

Source and target agree on an element when both are within `RTOL` of each other, plus
an absolute slack proportional to the largest value either side computes (rounding of a
reassociated float sum stays far below it; for a `rounds-constants` rule, float32's
epsilon of it, the error of a rounded constant); an element where either side is not finite
(a NaN outside the rule's domain, as `sqrt` of a negative variance) never disagrees. A
shape difference between the mapped outputs disagrees. So an `exact`, `reassociates` or
`rounds-constants` rule is refuted only by a real difference.
"""

from __future__ import annotations

import enum
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import z3

from taso.opspecs import Exactness
from taso.opspecs._z3 import as_real, symbolic_array
from taso.substitutions.generate._refute_configs import Config, Shape, choose_configs
from taso.substitutions.generate._witness import run_pattern
from taso.substitutions.rule import Rule, rule_to_json

RTOL = 1e-6
SCALE_ATOL = 1e-9  # absolute slack, relative to the largest magnitude either side computes
ROUNDING_ATOL = 2.0**-23
"""The absolute slack of a `rounds-constants` rule, relative to that largest magnitude:
float32's epsilon, since the target computes with a float32-rounded constant (fl(1/6)),
whose error times an input of that magnitude survives a cancellation near zero
(``x * fl(1/6) + 0.5`` at x = -2.97)."""
CONFIGS = 4
SEEDS = 2
Z3_TIMEOUT_MS = 400
Z3_MAX_ELEMENTS = 48  # input elements of the smallest config beyond which Z3 is skipped
Z3_BOUND = 8  # |every input element| <= this in the Z3 query
Z3_GAP = 1e-2  # an output element must differ by more than this in the Z3 query
BUDGET_S = 2.0  # per rule; the numeric search stops and Z3 gets what is left
_FAILURES = (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError, ArithmeticError)


class Method(enum.Enum):
    NUMERIC = "numeric"
    Z3 = "z3"


@dataclass(frozen=True, eq=False)
class Refutation:
    """Where a rule's sides differ: the configuration, the inputs and what differs."""

    method: Method
    shapes: Mapping[str, Shape]
    bindings: Mapping[str, object]
    inputs: Mapping[str, np.ndarray]
    detail: str
    reproducer: str
    seconds: float


def refute(rule: Rule, *, budget_s: float = BUDGET_S) -> Refutation | None:
    """A counterexample to `rule`, or None where none was found within the budget."""
    start = time.perf_counter()
    deadline = start + budget_s
    configs = choose_configs(rule, count=CONFIGS)
    for config in configs:
        for label, inputs in _input_sets(rule, config):
            detail = compare_sides(rule, inputs, config.bindings)
            if detail:
                return _refutation(rule, Method.NUMERIC, config, inputs,
                                   f"{label} inputs: {detail}", start)
            if time.perf_counter() > deadline:
                return None
    for config in sorted(configs, key=lambda c: c.size):
        inputs = z3_counterexample(rule, config, deadline=deadline)
        if inputs is False:
            continue  # not evaluable on Z3 reals at this config: try the next
        if inputs is None:
            return None
        detail = compare_sides(rule, inputs, config.bindings)
        return _refutation(rule, Method.Z3, config, inputs, f"Z3 model: {detail}", start)
    return None


def _refutation(rule: Rule, method: Method, config: Config, inputs: Mapping[str, np.ndarray],
                detail: str, start: float) -> Refutation:
    shapes = dict(config.shapes)
    text = f"{detail} at shapes {shapes}" + (f", {dict(config.bindings)}" if config.bindings else "")
    return Refutation(method, shapes, dict(config.bindings), dict(inputs), text,
                      reproducer(rule, inputs, config.bindings), time.perf_counter() - start)


# ----- numeric search ----------------------------------------------------------------------

def _input_sets(rule: Rule, config: Config) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Random inputs (`SEEDS` seeds) and adversarial ones; pinned constants keep their value."""
    for seed in range(SEEDS):
        uniform = np.random.default_rng(seed).uniform
        yield f"random (seed {seed})", _fill(rule, config, lambda s, u=uniform: u(-2, 2, s))
    rng = np.random.default_rng(SEEDS)
    draws = {
        "small integer": lambda s: rng.integers(-3, 4, s).astype(np.float64),
        "negative": lambda s: rng.uniform(-3, -0.5, s),
        "large": lambda s: rng.uniform(-1e3, 1e3, s),
        "tiny positive": lambda s: rng.uniform(1e-3, 1e-2, s),
    }
    for label, draw in draws.items():
        yield label, _fill(rule, config, draw)


def _fill(rule: Rule, config: Config, draw) -> dict[str, np.ndarray]:  # noqa: ANN001
    out = {}
    for item in rule.inputs:
        shape = tuple(config.shapes[item.name])
        if item.name in config.values:
            out[item.name] = np.full(shape, float(config.values[item.name]))
        else:
            out[item.name] = np.asarray(draw(shape), dtype=np.float64).reshape(shape)
    return out


def compare_sides(rule: Rule, inputs: Mapping[str, np.ndarray],
                  bindings: Mapping[str, object]) -> str:
    """'' where the mapped outputs agree (see the module docstring), else what differs.
    A side that cannot be evaluated agrees (no counterexample)."""
    with np.errstate(all="ignore"):
        return _compare(rule, inputs, bindings)


def _compare(rule: Rule, inputs: Mapping[str, np.ndarray], bindings: Mapping[str, object]) -> str:
    try:
        src = run_pattern(rule.source, inputs, bindings)
        tgt = run_pattern(rule.target, inputs, bindings)
    except _FAILURES:
        return ""
    scale = max(_magnitude(src.values()), _magnitude(tgt.values()), 1.0)
    slack = (ROUNDING_ATOL if rule.exactness is Exactness.ROUNDS_CONSTANTS else SCALE_ATOL) * scale
    for a, b in rule.outputs:
        x, y = np.asarray(src[a], np.float64), np.asarray(tgt[b], np.float64)
        if x.shape != y.shape:
            return f"output {a}: shape {x.shape} vs {y.shape}"
        both = np.isfinite(x) & np.isfinite(y)
        gap = np.where(both, np.abs(x - y), 0.0)
        bound = RTOL * np.maximum(np.abs(x), np.abs(y)) + slack
        bad = both & (gap > bound)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return f"output {a}{list(at)}: source {x[at]!r} vs target {y[at]!r}"
    return ""


def _magnitude(arrays) -> float:  # noqa: ANN001
    largest = 0.0
    for array in arrays:
        values = np.asarray(array, dtype=np.float64)
        finite = values[np.isfinite(values)]
        if finite.size:
            largest = max(largest, float(np.max(np.abs(finite))))
    return largest


# ----- element-wise Z3 ---------------------------------------------------------------------

def z3_counterexample(rule: Rule, config: Config, *,
                      deadline: float) -> dict[str, np.ndarray] | None | bool:
    """Inputs where the sides differ, found by Z3 and confirmed by the NumPy semantics;
    None when Z3 finds none in time; False when the config is too large or the rule's
    semantics cannot be evaluated on Z3 reals there (a 0-d value through some helpers of
    `opspecs._arith`, an infinity from a division by zero)."""
    left_ms = int((deadline - time.perf_counter()) * 1000)
    if left_ms <= 0:
        return None
    if config.size > Z3_MAX_ELEMENTS:
        return False
    symbols = {i.name: _symbolic(i.name, config) for i in rule.inputs}
    try:
        with np.errstate(all="ignore"):
            differs = _differences(rule, symbols, config.bindings)
    except (*_FAILURES, AttributeError, z3.Z3Exception):  # an op not evaluable on Z3 reals
        return False
    if differs is None:
        return False
    solver = z3.Solver()
    solver.set("timeout", min(Z3_TIMEOUT_MS, left_ms))
    solver.add(*_bounds(symbols), z3.Or(*differs) if differs else z3.BoolVal(False))
    if solver.check() != z3.sat:
        return None
    inputs = _from_model(solver.model(), symbols)
    return inputs if compare_sides(rule, inputs, config.bindings) else None


def _differences(rule: Rule, symbols: Mapping[str, np.ndarray],
                 bindings: Mapping[str, object]) -> list[z3.BoolRef] | None:
    """One formula per mapped output element: the sides are `Z3_GAP` apart there."""
    src = run_pattern(rule.source, symbols, bindings)
    tgt = run_pattern(rule.target, symbols, bindings)
    differs = []
    for a, b in rule.outputs:
        x, y = np.asarray(src[a]), np.asarray(tgt[b])
        if x.shape != y.shape:
            return None  # the numeric search reports shape differences
        differs += [_apart(p, q) for p, q in zip(x.reshape(-1), y.reshape(-1), strict=True)]
    return differs


def _symbolic(name: str, config: Config) -> np.ndarray:
    shape = tuple(config.shapes[name])
    if name not in config.values:
        return symbolic_array(name, shape)
    out = np.empty(shape, dtype=object)
    out[...] = as_real(config.values[name])
    return out


def _apart(p: object, q: object) -> z3.BoolRef:
    d = as_real(p) - as_real(q)
    return z3.Or(d > Z3_GAP, d < -Z3_GAP)


def _bounds(symbols: Mapping[str, np.ndarray]) -> list[z3.BoolRef]:
    out = []
    for array in symbols.values():
        for v in array.reshape(-1):
            if z3.is_const(v) and not z3.is_rational_value(v):
                out += [v >= -Z3_BOUND, v <= Z3_BOUND]
    return out


def _from_model(model: z3.ModelRef, symbols: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, array in symbols.items():
        flat = [_number(model.eval(v, model_completion=True)) for v in array.reshape(-1)]
        out[name] = np.asarray(flat, dtype=np.float64).reshape(array.shape)
    return out


def _number(value: z3.ExprRef) -> float:
    if z3.is_rational_value(value):
        return float(Fraction(value.numerator_as_long(), value.denominator_as_long()))
    if z3.is_algebraic_value(value):
        return float(value.approx(20).as_fraction())
    return math.nan


# ----- reproducer --------------------------------------------------------------------------

def reproducer(rule: Rule, inputs: Mapping[str, np.ndarray], bindings: Mapping[str, object]) -> str:
    """A ready-to-run Python snippet: the rule, the inputs, and the difference printed."""
    text = json.dumps(rule_to_json(rule), sort_keys=True)
    arrays = ", ".join(f"{k!r}: np.array({v.tolist()!r})" for k, v in inputs.items())
    return ("import json\n"
            "import numpy as np\n"
            "from taso.substitutions.rule import rule_from_json\n"
            "from taso.substitutions.generate._refute import compare_sides\n"
            f"rule = rule_from_json(json.loads({text!r}))\n"
            f"inputs = {{{arrays}}}\n"
            f"print(compare_sides(rule, inputs, {dict(bindings)!r}))  # '' if they agree")
