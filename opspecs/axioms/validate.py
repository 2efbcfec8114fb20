"""Checks an axiom on random tensors (NumPy semantics) and by bounded symbolic evaluation.

Symbolic evaluation runs the same NumPy semantics on object arrays of Z3 reals
and asks Z3 to prove ``lhs == rhs`` elementwise; non-polynomial scalar
functions are uninterpreted, so a proof holds for every such function.  A
failed check carries a ready-to-run reproducer.

The listed configs are not trusted alone (they may be degenerate: 1x1 matrices commute):
`validate_axiom` also checks the axiom numerically on configs it draws near each listed
one (`draws`: other dims, strides, pads, axes, permutations), keeping the draws that
satisfy the side condition and where both sides pass the specs' shape inference; the
others are counted (`AxiomReport.skipped_draws`). Every numeric check also compares each
operator's inferred output shape with the shape its NumPy semantics produce.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import z3

from taso.opspecs._registry import spec_by_name
from taso.opspecs._types import Exactness, ShapeError
from taso.opspecs._z3 import as_real, symbolic_array
from taso.opspecs.axioms._core import ArrayAlgebra, Axiom, AxiomConfig
from taso.opspecs.axioms.draws import FIXED, param_draws, pattern, seed_of, shape_draws

SYMBOLIC_MAX_ELEMENTS = 400  # skip symbolic evaluation of configs larger than this
SYMBOLIC_TIMEOUT_MS = 20_000
DRAWS_PER_CONFIG = 4  # drawn configs kept near each listed config
DRAW_TRIES = 16  # candidates tried near each listed config


class Method(enum.Enum):
    NUMERIC = "numeric"
    SYMBOLIC = "symbolic"
    DRAWN = "drawn"  # numeric, on a config drawn near a listed one (`AxiomCheck.config`)


class Status(enum.Enum):
    PASSED = "passed"  # numeric agreement / Z3 proof
    FAILED = "failed"  # values differ, counterexample, or evaluation error
    UNKNOWN = "unknown"  # Z3 timeout
    SKIPPED = "skipped"  # config too large for symbolic evaluation


@dataclass(frozen=True)
class AxiomCheck:
    """Result of one check of one axiom on one config."""

    axiom: str
    config_index: int
    method: Method
    status: Status
    detail: str
    seconds: float
    reproducer: str = ""
    config: AxiomConfig | None = None  # the config checked, for a drawn one


@dataclass(frozen=True)
class AxiomReport:
    axiom: str
    checks: tuple[AxiomCheck, ...]
    skipped_draws: int = 0  # drawn configs outside the side condition or not type-checking

    @property
    def ok(self) -> bool:
        return all(c.status in (Status.PASSED, Status.SKIPPED) for c in self.checks) and any(
            c.method is Method.SYMBOLIC and c.status is Status.PASSED for c in self.checks
        )

    @property
    def failures(self) -> tuple[AxiomCheck, ...]:
        return tuple(c for c in self.checks if c.status not in (Status.PASSED, Status.SKIPPED))


def reproducer(axiom: Axiom, index: int, method: Method, seed: int = 0) -> str:
    """Python snippet re-running one check (axiom looked up by name, mutants included)."""
    config = axiom.configs[index]
    return (
        "from taso.opspecs.axioms import find_axiom\n"
        "from taso.opspecs.axioms.validate import check_numeric, check_symbolic\n"
        f"axiom = find_axiom({axiom.name!r})\n"
        f"# shapes={dict(config.shapes)!r} params={dict(config.params)!r}\n"
        f"print(check_{method.value}(axiom, {index}"
        + (f", seed={seed}))" if method is Method.NUMERIC else "))")
    )


class _ExactConstants:
    """`ArrayAlgebra`, except that a `ConstFill` of a literal the axiom rounds is its exact
    value (a Z3 rational in symbolic evaluation, the float64 nearest it numerically)."""

    def __init__(self, exact: Mapping[float, Fraction], *, symbolic: bool) -> None:
        self.exact, self.symbolic, self.inner = exact, symbolic, ArrayAlgebra()

    def __call__(self, op: str, *inputs: object, **params: object) -> object:
        value = params.get("value")
        if op != "ConstFill" or value not in self.exact:
            params = {k: self._exact(v) if k != "shape" else v for k, v in params.items()}
            return self.inner(op, *inputs, **params)
        exact = self.exact[value]  # type: ignore[index]
        shape = tuple(params.get("shape", ()))  # type: ignore[arg-type]
        if not self.symbolic:
            return np.full(shape, float(exact))
        out = np.empty(shape, dtype=object)
        out[...] = z3.RealVal(f"{exact.numerator}/{exact.denominator}")
        return out


    def _exact(self, value: object) -> object:
        """A float parameter (HardSigmoid's alpha) that is a rounded literal, as its exact value."""
        if not isinstance(value, float) or value not in self.exact:
            return value
        exact = self.exact[value]
        return z3.RealVal(f"{exact.numerator}/{exact.denominator}") if self.symbolic else float(exact)


def _algebra(axiom: Axiom, *, symbolic: bool) -> object:
    if not axiom.exact_constants:
        return ArrayAlgebra()
    return _ExactConstants(axiom.exact_constants, symbolic=symbolic)


def _rounding_error(axiom: Axiom) -> str:
    """A rounded literal must be the float32 nearest its exact value, and only a
    `ROUNDS_CONSTANTS` axiom may have one."""
    if axiom.exact_constants and axiom.exactness is not Exactness.ROUNDS_CONSTANTS:
        return "exact constants declared, but the axiom is not rounds-constants"
    if axiom.exactness is Exactness.ROUNDS_CONSTANTS and not axiom.exact_constants:
        return "a rounds-constants axiom must declare its exact constants"
    for literal, exact in axiom.exact_constants.items():
        if float(np.float32(float(exact))) != literal:
            return f"{literal!r} is not the float32 nearest {exact}"
    return ""


def _random_inputs(axiom: Axiom, config: AxiomConfig, rng: np.random.Generator) -> dict:
    values = {}
    for name in axiom.inputs:
        shape = tuple(int(d) for d in config.shapes[name])
        low = 0.5 if name in axiom.positive else -2.0
        values[name] = rng.uniform(low, 2.0, size=shape)
    return values


def _condition_error(axiom: Axiom, config: AxiomConfig) -> str:
    rounding = _rounding_error(axiom)
    if rounding:
        return rounding
    if not axiom.condition(config.shapes, config.params):
        return f"config violates the axiom's side condition: {config}"
    return ""


def check_numeric(axiom: Axiom, index: int, *, seed: int = 0, trials: int = 2) -> AxiomCheck:
    """lhs and rhs agree (relative 1e-9) on random float64 tensors of a listed config."""
    detail, seconds = _numeric(axiom, axiom.configs[index], seed, trials)
    return AxiomCheck(axiom.name, index, Method.NUMERIC, _status(detail), detail or "agree",
                      seconds, reproducer(axiom, index, Method.NUMERIC, seed) if detail else "")


def check_config(axiom: Axiom, config: AxiomConfig, *, seed: int = 0, trials: int = 2,
                 index: int = -1) -> AxiomCheck:
    """`check_numeric` on any config: one drawn by `draw_configs` (numbered `index`)."""
    detail, seconds = _numeric(axiom, config, seed, trials)
    return AxiomCheck(axiom.name, index, Method.DRAWN, _status(detail), detail or "agree",
                      seconds, drawn_reproducer(axiom, config, seed) if detail else "", config)


def drawn_reproducer(axiom: Axiom, config: AxiomConfig, seed: int) -> str:
    """Python snippet re-running the numeric check of one drawn config."""
    return (
        "from taso.opspecs.axioms import AxiomConfig, find_axiom\n"
        "from taso.opspecs.axioms.validate import check_config\n"
        f"axiom = find_axiom({axiom.name!r})\n"
        f"config = AxiomConfig({dict(config.shapes)!r}, {dict(config.params)!r})\n"
        f"print(check_config(axiom, config, seed={seed}))"
    )


def _status(detail: str) -> Status:
    return Status.FAILED if detail else Status.PASSED


def _numeric(axiom: Axiom, config: AxiomConfig, seed: int, trials: int) -> tuple[str, float]:
    """What differs ('' if nothing) on `trials` random tensor sets, and the seconds taken."""
    start = time.perf_counter()
    detail = _condition_error(axiom, config)
    rng = np.random.default_rng(seed)
    for _ in range(trials if not detail else 0):
        try:
            inputs = _random_inputs(axiom, config, rng)
            algebra = _InferenceChecked(_algebra(axiom, symbolic=False))
            lhs, rhs = axiom.sides(algebra, inputs, axiom.bind(config))
            detail = algebra.mismatch or _compare_numeric(lhs, rhs)
        except (ValueError, IndexError, TypeError, KeyError) as err:
            detail = f"evaluation error: {type(err).__name__}: {err}"
        if detail:
            break
    return detail, time.perf_counter() - start


class _InferenceChecked:
    """An algebra that also checks each operator's inferred output shapes against the
    shapes its NumPy semantics produce (`mismatch`: the first disagreement, or '')."""

    def __init__(self, inner: object) -> None:
        self.inner, self.mismatch = inner, ""

    def __call__(self, op: str, *inputs: object, **params: object) -> object:
        out = self.inner(op, *inputs, **params)  # type: ignore[operator]
        if not self.mismatch:
            self.mismatch = _inference_mismatch(op, [np.shape(v) for v in inputs], params,
                                                out if isinstance(out, tuple) else (out,))
        return out


def _inference_mismatch(op: str, shapes: list[tuple[int, ...]], params: Mapping[str, object],
                        outs: tuple) -> str:
    try:
        inferred = [tuple(s) for s in spec_by_name(op).infer_shapes(shapes, params)]
    except ShapeError as err:
        return f"shape inference refuses {op}{shapes}, which NumPy evaluates: {err}"
    actual = [np.shape(o) for o in outs]
    if inferred != actual:
        return f"shape inference of {op}{shapes} gives {inferred}, NumPy gives {actual}"
    return ""


def _compare_numeric(lhs: tuple, rhs: tuple) -> str:
    if len(lhs) != len(rhs):
        return f"{len(lhs)} outputs vs {len(rhs)}"
    for i, (a, b) in enumerate(zip(lhs, rhs, strict=True)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return f"output {i}: shape {a.shape} vs {b.shape}"
        if not np.allclose(a, b, rtol=1e-9, atol=1e-9):
            return f"output {i}: max abs difference {np.max(np.abs(a - b)):.3g}"
    return ""


def check_symbolic(axiom: Axiom, index: int, *, timeout_ms: int = SYMBOLIC_TIMEOUT_MS) -> AxiomCheck:
    """Z3 proves lhs == rhs elementwise with every tensor element a free real."""
    config, start = axiom.configs[index], time.perf_counter()
    size = sum(int(np.prod(config.shapes[n])) for n in axiom.inputs)
    if size > SYMBOLIC_MAX_ELEMENTS:
        return AxiomCheck(axiom.name, index, Method.SYMBOLIC, Status.SKIPPED,
                          f"{size} input elements > {SYMBOLIC_MAX_ELEMENTS}", 0.0)
    status, detail = _prove(axiom, config, timeout_ms)
    repro = reproducer(axiom, index, Method.SYMBOLIC) if status is not Status.PASSED else ""
    return AxiomCheck(axiom.name, index, Method.SYMBOLIC, status, detail,
                      time.perf_counter() - start, repro)


def _prove(axiom: Axiom, config: AxiomConfig, timeout_ms: int) -> tuple[Status, str]:
    error = _condition_error(axiom, config)
    if error:
        return Status.FAILED, error
    inputs = {n: symbolic_array(n, config.shapes[n]) for n in axiom.inputs}
    try:
        lhs, rhs = axiom.sides(_algebra(axiom, symbolic=True), inputs, axiom.bind(config))
    except (ValueError, IndexError, TypeError, KeyError) as err:
        return Status.FAILED, f"evaluation error: {type(err).__name__}: {err}"
    pairs = list(_element_pairs(lhs, rhs))
    if isinstance(pairs[-1], str):
        return Status.FAILED, pairs[-1]
    assumptions = [v > 0 for name in axiom.positive for v in inputs[name].reshape(-1)]
    status, detail = _portfolio(assumptions, [a != b for a, b in pairs], timeout_ms)
    if status is not Status.UNKNOWN:
        return status, detail
    # One query per element is smaller; each must be proved.
    for a, b in pairs:
        status, detail = _portfolio(assumptions, [a != b], timeout_ms)
        if status is not Status.PASSED:
            return status, detail
    return Status.PASSED, f"proved {len(pairs)} elements one at a time"


class Solver(enum.Enum):
    GENERAL = "general"  # Z3's default solver, picked by the query's logic
    NONLINEAR_REAL = "QF_NRA"  # nlsat, complete for polynomial real arithmetic


@dataclass(frozen=True)
class Attempt:
    solver: Solver
    seed: int


PORTFOLIO = (Attempt(Solver.GENERAL, 0), Attempt(Solver.NONLINEAR_REAL, 0),
             Attempt(Solver.GENERAL, 1), Attempt(Solver.GENERAL, 2))
"""Z3's nonlinear search is erratic: one element of conv_bn_relu_affine_as_clip took 0.01 s
to 5 s, or over 20 s, by random seed and by what the process had asked before (it failed
CI twice). A query is tried under these attempts in turn, each with its share of the
timeout. nlsat decides that element in milliseconds, but gives up on queries the general
solver proves at once (relu6_as_clip), so it comes second."""


def _portfolio(assumptions: list, differences: list, timeout_ms: int) -> tuple[Status, str]:
    """The first decisive answer of `_refute` over `PORTFOLIO`; UNKNOWN if none."""
    share = max(1, timeout_ms // len(PORTFOLIO))
    for attempt in PORTFOLIO:
        status, detail = _refute(assumptions, differences, share, attempt)
        if status is not Status.UNKNOWN:
            return status, detail
    tried = ", ".join(f"{a.solver.value} seed {a.seed}" for a in PORTFOLIO)
    return Status.UNKNOWN, f"{detail} under {tried}"


def _refute(assumptions: list, differences: list, timeout_ms: int,
            attempt: Attempt = PORTFOLIO[0]) -> tuple[Status, str]:
    """PASSED when no assignment satisfying the assumptions makes any difference true."""
    solver = z3.Solver() if attempt.solver is Solver.GENERAL else z3.SolverFor(attempt.solver.value)
    solver.set("timeout", timeout_ms)
    solver.set("random_seed", attempt.seed)
    solver.add(*assumptions)
    solver.add(z3.Or(*differences))  # type: ignore[misc]
    try:
        result = solver.check()
    except z3.Z3Exception as err:  # a solver that cannot take the query's theory
        return Status.UNKNOWN, f"z3 {attempt.solver.value}: {err}"
    if result == z3.unsat:
        return Status.PASSED, f"proved {len(differences)} elements"
    if result == z3.sat:
        return Status.FAILED, f"counterexample: {_short_model(solver.model())}"
    return Status.UNKNOWN, f"z3 {result}: {solver.reason_unknown()}"


def _element_pairs(lhs: tuple, rhs: tuple) -> Iterator:
    if len(lhs) != len(rhs):
        yield f"{len(lhs)} outputs vs {len(rhs)}"
        return
    for i, (a, b) in enumerate(zip(lhs, rhs, strict=True)):
        a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
        if a.shape != b.shape:
            yield f"output {i}: shape {a.shape} vs {b.shape}"
            return
        for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True):
            yield as_real(x), as_real(y)


def _short_model(model: z3.ModelRef, limit: int = 6) -> str:
    items = [f"{d.name()}={model[d]}" for d in list(model.decls())[:limit]]
    return ", ".join(items) + (" ..." if len(model.decls()) > limit else "")


# -- drawn configs -------------------------------------------------------------------


@dataclass(frozen=True)
class _Shaped:
    """A tensor known only by its shape (the values of `ShapeAlgebra`)."""

    dims: tuple[int, ...]


class ShapeAlgebra:
    """Runs the specs' shape inference: raises `ShapeError` where an operator refuses."""

    def __call__(self, op: str, *inputs: _Shaped, **params: object) -> object:
        outs = spec_by_name(op).infer_shapes([i.dims for i in inputs], params)
        shaped = tuple(_Shaped(tuple(int(d) for d in o)) for o in outs)
        return shaped[0] if len(shaped) == 1 else shaped


@dataclass(frozen=True)
class Draws:
    configs: tuple[AxiomConfig, ...]  # drawn, admissible, new
    skipped: int  # drawn but outside the side condition or not type-checking


_REFUSED = (ValueError, IndexError, TypeError, KeyError, ArithmeticError)


def admissible(axiom: Axiom, config: AxiomConfig) -> bool:
    """The side condition holds and both sides pass the specs' shape inference."""
    variables = {n: _Shaped(tuple(int(d) for d in config.shapes[n])) for n in axiom.inputs}
    try:
        if not axiom.condition(config.shapes, config.params):
            return False
        axiom.sides(ShapeAlgebra(), variables, axiom.bind(config))
    except _REFUSED:  # ShapeError is a ValueError
        return False
    return True


def draw_configs(axiom: Axiom, *, per_config: int = DRAWS_PER_CONFIG, seed: int = 0) -> Draws:
    """Up to `per_config` admissible configs drawn near each listed one (seeded by the
    axiom's name, `seed` and the listed config's index)."""
    kept: list[AxiomConfig] = []
    skipped, seen = 0, {_config_key(c) for c in axiom.configs}
    listed = [dict(c.params) for c in axiom.configs]
    for index, config in enumerate(axiom.configs if per_config > 0 else ()):
        rng = np.random.default_rng(seed_of(axiom.name, seed, index))
        found = 0
        for candidate in _candidates(config, listed, rng):
            key = _config_key(candidate)
            if key in seen:
                continue
            seen.add(key)
            if admissible(axiom, candidate):
                kept.append(candidate)
                found += 1
                if found == per_config:
                    break
            else:
                skipped += 1
    return Draws(tuple(kept), skipped)


def _candidates(config: AxiomConfig, listed: list[dict], rng: np.random.Generator) -> Iterator[AxiomConfig]:
    """Shape draws (a fixed draw with the listed parameters, a random one with new
    parameters every other time), and after every second one new parameters alone."""
    def rank(shapes: Mapping) -> int:
        return max((len(s) for s in shapes.values()), default=0)

    for attempt, (draw, shapes) in enumerate(shape_draws(config.shapes, rng, DRAW_TRIES)):
        listed_params = draw in FIXED or attempt % 4 == 1
        yield AxiomConfig(shapes, dict(config.params) if listed_params else
                          param_draws(config.params, listed, rank(shapes), rng))
        if attempt % 2:
            yield AxiomConfig(dict(config.shapes), param_draws(config.params, listed,
                                                               rank(config.shapes), rng))


def _config_key(config: AxiomConfig) -> str:
    """Draws with equal keys test the same thing (`draws.pattern`, same parameters)."""
    return repr((pattern(config.shapes), sorted(config.params.items(), key=lambda kv: kv[0])))


def validate_axiom(axiom: Axiom, *, seed: int = 0, draws: int = DRAWS_PER_CONFIG) -> AxiomReport:
    """Numeric check on every listed config, symbolic proof on every small-enough one, and
    a numeric check on up to `draws` configs drawn near each listed one (0: none)."""
    if len(axiom.configs) < 3:
        raise ValueError(f"axiom {axiom.name} has {len(axiom.configs)} configs; 3 required")
    checks = []
    for i in range(len(axiom.configs)):
        checks.append(check_numeric(axiom, i, seed=seed + i))
        checks.append(check_symbolic(axiom, i))
    drawn = draw_configs(axiom, per_config=draws, seed=seed)
    for j, config in enumerate(drawn.configs):
        checks.append(check_config(axiom, config, seed=seed + len(axiom.configs) + j,
                                   trials=1, index=len(axiom.configs) + j))
    return AxiomReport(axiom.name, tuple(checks), drawn.skipped)
