"""Checks an axiom on random tensors (NumPy semantics) and by bounded symbolic evaluation.

Symbolic evaluation runs the same NumPy semantics on object arrays of Z3 reals
and asks Z3 to prove ``lhs == rhs`` elementwise; non-polynomial scalar
functions are uninterpreted, so a proof holds for every such function.  A
failed check carries a ready-to-run reproducer.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import z3

from taso.opspecs._types import Exactness
from taso.opspecs._z3 import as_real, symbolic_array
from taso.opspecs.axioms._core import ArrayAlgebra, Axiom, AxiomConfig

SYMBOLIC_MAX_ELEMENTS = 400  # skip symbolic evaluation of configs larger than this
SYMBOLIC_TIMEOUT_MS = 20_000


class Method(enum.Enum):
    NUMERIC = "numeric"
    SYMBOLIC = "symbolic"


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


@dataclass(frozen=True)
class AxiomReport:
    axiom: str
    checks: tuple[AxiomCheck, ...]

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
    """lhs and rhs agree (relative 1e-9) on random float64 tensors."""
    config, start = axiom.configs[index], time.perf_counter()
    detail = _condition_error(axiom, config)
    rng = np.random.default_rng(seed)
    for _ in range(trials if not detail else 0):
        try:
            inputs = _random_inputs(axiom, config, rng)
            lhs, rhs = axiom.sides(_algebra(axiom, symbolic=False), inputs, axiom.bind(config))
            detail = _compare_numeric(lhs, rhs)
        except (ValueError, IndexError, TypeError, KeyError) as err:
            detail = f"evaluation error: {type(err).__name__}: {err}"
        if detail:
            break
    status = Status.FAILED if detail else Status.PASSED
    return AxiomCheck(axiom.name, index, Method.NUMERIC, status, detail or "agree",
                      time.perf_counter() - start,
                      reproducer(axiom, index, Method.NUMERIC, seed) if detail else "")


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
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    for name in axiom.positive:
        solver.add(*[v > 0 for v in inputs[name].reshape(-1)])
    solver.add(z3.Or(*[a != b for a, b in pairs]))  # type: ignore[misc]
    result = solver.check()
    if result == z3.unsat:
        return Status.PASSED, f"proved {len(pairs)} elements"
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


def validate_axiom(axiom: Axiom, *, seed: int = 0) -> AxiomReport:
    """Numeric check on every config, symbolic proof on every small-enough config."""
    if len(axiom.configs) < 3:
        raise ValueError(f"axiom {axiom.name} has {len(axiom.configs)} configs; 3 required")
    checks = []
    for i in range(len(axiom.configs)):
        checks.append(check_numeric(axiom, i, seed=seed + i))
        checks.append(check_symbolic(axiom, i))
    return AxiomReport(axiom.name, tuple(checks))
