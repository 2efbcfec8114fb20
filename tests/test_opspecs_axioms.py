"""Every axiom holds on random tensors (>= 3 configs) and is proved by bounded symbolic
evaluation with Z3; failures print a ready-to-run reproducer."""

from __future__ import annotations

import pytest
import z3

from taso.opspecs import all_specs
from taso.opspecs.axioms import all_axioms, axioms_for, find_axiom
from taso.opspecs.axioms.validate import Method, Status, validate_axiom

AXIOMS = all_axioms()


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_axiom_holds(axiom) -> None:  # noqa: ANN001
    assert len(axiom.configs) >= 3
    report = validate_axiom(axiom)
    messages = [f"config {c.config_index} {c.method.value}: {c.detail}\n{c.reproducer}"
                for c in report.failures]
    assert report.ok, "\n".join(messages)
    proved = [c for c in report.checks if c.method is Method.SYMBOLIC]
    assert any(c.status is Status.PASSED for c in proved)


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_axiom_configs_satisfy_side_condition(axiom) -> None:  # noqa: ANN001
    for config in axiom.configs:
        assert axiom.condition(config.shapes, config.params), config


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_axiom_uninterpreted_form_builds(axiom) -> None:  # noqa: ANN001
    formula = axiom.z3_formula(axiom.configs[0])
    assert z3.is_bool(formula)
    lhs, rhs = axiom.terms(axiom.configs[0])
    assert lhs and rhs


def test_axiom_names_and_math_are_documented() -> None:
    assert len(AXIOMS) >= 60
    for axiom in AXIOMS:
        assert axiom.math and "\n" not in axiom.math
        assert find_axiom(axiom.name) is axiom


def test_taso_core_ops_have_axioms() -> None:
    core = ("Add", "Mul", "Relu", "ScalarMul", "Enlarge", "Concat", "Split", "Transpose",
            "Conv", "MatMul", "AveragePool", "MaxPool", "ConstPoolKernel", "ConstIdentityConv",
            "ConstIdentityMatrix", "ConstOnes", "BatchNormalization", "Gemm", "Reshape",
            "HardSigmoid", "HardSwish", "SiLU", "Gelu")
    for name in core:
        assert axioms_for(name), name
    mentioned = {op for a in AXIOMS for op in a.ops()}
    assert {s.name for s in all_specs()} - mentioned <= {"Tanh"}


def test_failing_check_carries_reproducer() -> None:
    from taso.opspecs.axioms.mutants import MUTANTS
    from taso.opspecs.axioms.validate import check_numeric

    check = check_numeric(MUTANTS[0], 0)
    assert check.status is Status.FAILED
    namespace: dict = {}
    exec(check.reproducer.replace("print(", "result = ("), namespace)  # noqa: S102
    assert namespace["result"].status is Status.FAILED


def test_instance_respects_side_condition() -> None:
    axiom = find_axiom("conv_enlarge_kernel")
    shapes = {"x": (1, 2, 5, 5), "w": (4, 2, 1, 1)}
    assert axiom.instance(shapes, {"kernel_shape": (3, 3)}) is not None
    assert axiom.instance(shapes, {"kernel_shape": (3, 3), "dilations": (2, 2)}) is None
    assert "kernel_shape" in axiom.param_names


def test_uninterpreted_axioms_prove_a_rule() -> None:
    """The Z3 form is usable by a prover: relu(concat(x, y)) and concat(relu(x), relu(y))
    are equal under the axiom instance for those parameters."""
    from taso.opspecs import TENSOR, spec_by_name

    axiom = find_axiom("relu_concat")
    x, y = z3.Const("x", TENSOR), z3.Const("y", TENSOR)
    concat, relu = spec_by_name("Concat"), spec_by_name("Relu")
    lhs = relu.z3_term(concat.z3_term([x, y], {"axis": 1}), {})[0]
    rhs = concat.z3_term([relu.z3_term([x], {})[0], relu.z3_term([y], {})[0]], {"axis": 1})[0]
    solver = z3.Solver()
    solver.add(axiom.instance({"x": (2, 2), "y": (2, 1)}, {"axis": 1}))
    solver.add(lhs != rhs)
    assert solver.check() == z3.unsat
