"""`check-axioms` does not trust an axiom's listed configs alone (issue 19, item 3): it also
checks each axiom on configs it draws near them (other dims, strides, pads, axes,
permutations) and compares the specs' shape inference with the NumPy semantics.

The `DEGENERATE` mutants hold on every config they list (1x1 matrices commute, a stride-2
window never reads the row that is off by one, axis -1 is axis 1 at rank 2): validation
without drawn configs accepts them, with drawn configs it refutes every one with a
counterexample config.
"""

from __future__ import annotations

import dataclasses

import pytest

from taso.opspecs.axioms import AxiomConfig, all_axioms, find_axiom
from taso.opspecs.axioms import validate as validate_module
from taso.opspecs.axioms.mutants import DEGENERATE, MUTANTS
from taso.opspecs.axioms.validate import (
    Method,
    Status,
    admissible,
    check_config,
    draw_configs,
    validate_axiom,
)

ISSUE_EXAMPLES = ("bad_matmul_comm_1x1", "bad_conv_pad_off_by_one", "bad_concat_nested_last_axis")


def _run_reproducer(text: str) -> object:
    namespace: dict = {}
    exec(text.replace("print(", "result = ("), namespace)  # noqa: S102
    return namespace["result"]


def test_at_least_twenty_mutants_all_refuted_with_a_counterexample() -> None:
    assert len(MUTANTS) >= 20
    reports = [validate_axiom(m) for m in MUTANTS]
    survivors = [r.axiom for r in reports if r.ok]
    assert survivors == [], f"kill rate {1 - len(survivors) / len(MUTANTS):.0%}: {survivors}"
    for report in reports:
        assert all(f.detail and f.reproducer for f in report.failures), report.axiom


def test_the_issue_examples_are_degenerate_mutants() -> None:
    names = {m.name for m in DEGENERATE}
    assert set(ISSUE_EXAMPLES) <= names and len(names) >= 5


@pytest.mark.parametrize("mutant", DEGENERATE, ids=[m.name for m in DEGENERATE])
def test_degenerate_mutant_holds_on_its_listed_configs(mutant) -> None:  # noqa: ANN001
    """Without drawn configs (validation as it was) the wrong axiom is accepted."""
    assert validate_axiom(mutant, draws=0).ok


@pytest.mark.parametrize("mutant", DEGENERATE, ids=[m.name for m in DEGENERATE])
def test_degenerate_mutant_is_refuted_on_a_drawn_config(mutant) -> None:  # noqa: ANN001
    report = validate_axiom(mutant)
    drawn = [c for c in report.failures if c.method is Method.DRAWN]
    assert not report.ok and drawn
    check = drawn[0]
    assert check.config is not None and check.config not in mutant.configs
    assert admissible(mutant, check.config)
    assert _run_reproducer(check.reproducer).status is Status.FAILED


def test_every_real_axiom_holds_on_drawn_configs() -> None:
    """Most axioms get several drawn configs (tests/test_opspecs_axioms.py validates each
    axiom whole, drawn configs included)."""
    with_draws = 0
    for axiom in all_axioms():
        drawn = draw_configs(axiom).configs
        failed = [(c, check.detail) for c in drawn
                  if (check := check_config(axiom, c, trials=1)).status is not Status.PASSED]
        assert failed == [], axiom.name
        with_draws += len(drawn) >= 3
    assert with_draws >= 0.9 * len(all_axioms())


def test_drawn_configs_are_reproducible_new_and_admissible() -> None:
    axiom = find_axiom("matmul_assoc")
    first, again = draw_configs(axiom), draw_configs(axiom)
    assert first == again and first.configs
    assert draw_configs(axiom, seed=1) != first
    for config in first.configs:
        assert config not in axiom.configs and admissible(axiom, config)
    assert any(all(d >= 2 for s in c.shapes.values() for d in s) for c in first.configs)
    assert draw_configs(axiom, per_config=0).configs == ()


def test_draws_outside_the_side_condition_or_ill_typed_are_counted_not_run() -> None:
    axiom = find_axiom("conv_identity_kernel")  # x's channels must equal the kernel's
    report = validate_axiom(axiom)
    assert report.ok and report.skipped_draws > 0
    assert not admissible(axiom, AxiomConfig({"x": (1, 3, 3, 3)}, {"c": 2, "k": 1, "group": 1}))


def test_a_missing_side_condition_is_found() -> None:
    """reshape(x, s) = x needs s to be x's own shape; bn(x) as x * reshape(k) + ... needs
    the reshape to fit x's rank: without those conditions, drawn configs refute both."""
    for name in ("reshape_identity", "bn_decompose"):
        axiom = find_axiom(name)
        unconditional = dataclasses.replace(axiom, condition=lambda s, p: True)
        assert validate_axiom(axiom).ok
        assert not validate_axiom(unconditional).ok, name


def test_shape_inference_is_checked_against_the_numpy_semantics(monkeypatch) -> None:  # noqa: ANN001
    """A spec whose inferred shape is not what its semantics compute fails validation."""
    relu = validate_module.spec_by_name("Relu")
    wrong = dataclasses.replace(relu, infer=lambda shapes, params: (tuple(shapes[0])[::-1],))
    real = validate_module.spec_by_name
    monkeypatch.setattr(validate_module, "spec_by_name",
                        lambda name: wrong if name == "Relu" else real(name))
    axiom = find_axiom("relu_idempotent")
    check = check_config(axiom, AxiomConfig({"x": (2, 3)}, {}))
    assert check.status is Status.FAILED and "shape inference" in check.detail
