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
