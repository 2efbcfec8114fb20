"""Per-channel and scalar conv axioms are asserted only at the shapes where they hold.

``conv(x, w) * c = conv(x, w * reshape(c, (M, 1, 1, 1)))`` holds for c per output channel
((1, M, 1, 1), (M, 1, 1)) or one scalar, not for c of shape (1, 1, 1, W): that one scales
the output along its width, the reshaped one its channels. Stated without a condition the
prover asserted it for every tensor, and proved ``cv-fold_mul_conv`` with its shape
constraints removed. With the condition the axiom is shape-guarded: its instances exist
only at shapes where it holds, so the copy without constraints is not proved, while every
shipped rule built on these axioms still proves (at its witness configs' shapes).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from taso.opspecs.axioms import find_axiom
from taso.pipeline._rewriting import default_rules
from taso.substitutions.generate._axiom_bank import axiom_bank
from taso.substitutions.generate._prove import prove, prove_at_witnesses
from taso.substitutions.rule import ProofStatus

RULES = {r.id: r for r in default_rules()}
RLIMIT = 400_000  # a wrong rule must not be proved at any limit

WRONG_SHAPES = {
    "conv_linear_weight": {"x": (1, 2, 3, 3), "w": (2, 2, 1, 1), "w2": (1, 1, 1, 1)},
    "conv_bias_add": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "c": (1, 1, 1, 3)},
    "conv_bias_add_again": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": (1, 1, 1, 3)},
    "conv_mul_channel": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": (1, 1, 1, 3)},
    "conv_mul_channel_nobias": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "c": (1, 1, 1, 3)},
    "conv_scale_input": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "s": (1, 2, 1, 1)},
    "conv_scale_input_nobias": {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "s": (1, 1, 1, 3)},
}
"""A config of each axiom where it does not hold (c scales the width, not the channels)."""

WIDTH_SCALED = {"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "c": (1, 1, 1, 3)}
CONV_DEFAULTS = {"group": 1, "pads": (0, 0, 0, 0), "strides": (1, 1)}


def _fold_mul_conv_unconstrained():  # noqa: ANN202
    rule = RULES["cv-fold_mul_conv"]
    assert rule.constraints
    return replace(rule, id="wrong-fold_mul_conv", constraints=())


def test_fold_mul_conv_without_its_shape_constraints_is_not_proved() -> None:
    result = prove(_fold_mul_conv_unconstrained(), rlimit=RLIMIT)
    assert result.status is not ProofStatus.PROVED, result


def test_fold_mul_conv_at_a_width_scaling_constant_is_not_proved() -> None:
    result = prove(_fold_mul_conv_unconstrained(), rlimit=RLIMIT, shapes=WIDTH_SCALED,
                   bindings=CONV_DEFAULTS)
    assert result.status is not ProofStatus.PROVED, result


@pytest.mark.parametrize("name", sorted(WRONG_SHAPES))
def test_condition_rejects_a_wrong_shape_and_keeps_the_listed_configs(name: str) -> None:
    axiom = find_axiom(name)
    assert not axiom.condition(WRONG_SHAPES[name], {})
    assert all(axiom.condition(c.shapes, axiom.bind(c)) for c in axiom.configs)


@pytest.mark.parametrize("name", sorted(WRONG_SHAPES))
def test_the_prover_asserts_them_shape_guarded(name: str) -> None:
    assert next(a for a in axiom_bank() if a.name == name).guarded


@pytest.mark.parametrize("rule_id", sorted(i for i in RULES if i.startswith("cv-fold_")
                                           and "bn" not in i))
def test_shipped_folds_still_prove_at_their_witness_shapes(rule_id: str) -> None:
    result = prove_at_witnesses(RULES[rule_id], rlimit=2_000_000)
    assert result.status is ProofStatus.PROVED, result
