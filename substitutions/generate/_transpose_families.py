"""Rules of `transpose_{add,mul}_const[_scalar]`: a Transpose moved above an Add or Mul by a
constant, the constant transposed with it (a scalar stays as it is).

``transpose(op(x, c), p) = op(transpose(x, p), transpose(c, p))``: the same values, permuted,
so the rewrite is bit-exact. One sweep moves a Transpose up a whole chain of such ops
(`apply_all` finds the next link after each applied one). Keras models exported by tf2onnx
run their preprocessing (Rescaling, Normalization) on the NHWC input before the Transpose to
NCHW: ``Mul(x, s) -> Add(c[1,1,1,3]) -> Mul(d[1,1,1,3]) -> Transpose``, where ORT's broadcast
over an innermost axis of 3 took 0.48 ms per op (6.5% of EfficientNetV2-B0); after the
Transpose the constants are per channel, (1, 3, 1, 1). Moved by hand: 1.058x on
keras_efficientnet_v2_b0, outputs identical. The permutation is a parameter variable read at
match time, which the axioms' configs cannot express as one rule: each rule is an instance
of its validated axiom (`taso.opspecs.axioms.layout`), with the axiom's configs as witnesses.

Also here, as instances of their axioms in `taso.opspecs.axioms.converter`: a dense layer's
layer scale folded into its columns where it is written after the permute back to NCHW,
``transpose(x @ w + b, p) * g``, or at the product's rank, ``(x @ w + b) * g(1, 1, 1, N)``
(ConvNeXt's, before and after the canonical stage sinks that permute).
"""

from __future__ import annotations

import json

from taso.opspecs import Exactness
from taso.opspecs.axioms import find_axiom
from taso.substitutions.generate._witness import axiom_rule
from taso.substitutions.rule import ParamVar, Pattern, PatternInput, PatternNode, Rule

PERM = (("perm", ParamVar("perm")),)


def _witness(name: str) -> str:
    return json.dumps([{"shapes": {k: list(v) for k, v in c.shapes.items()},
                        "bindings": {k: list(v) for k, v in c.params.items() if k == "perm"},
                        "positive": [], "values": {}} for c in find_axiom(name).configs], sort_keys=True)


def _rule(op: str, *, scalar: bool) -> Rule:
    name = f"transpose_{op.lower()}_const{'_scalar' if scalar else ''}"
    source = Pattern((PatternNode("n0", op, ("x", "c")), PatternNode("n1", "Transpose", ("n0",), PERM)))
    nodes = [PatternNode("t0", "Transpose", ("x",), PERM)]
    if not scalar:
        nodes.append(PatternNode("tc", "Transpose", ("c",), PERM))
    nodes.append(PatternNode("r", op, ("t0", "c" if scalar else "tc")))
    constraints = ("not is_const('x')", "is_const('c')", "len(perm) == rank('x')",
                   "shape('c') == ()" if scalar else "rank('c') == rank('x')")
    return axiom_rule(name, find_axiom(name).math, (PatternInput("x"), PatternInput("c")), source,
                      Pattern(tuple(nodes)), (("n1", "r"),), constraints, Exactness.EXACT, _witness(name))


def transpose_two_const_rules(first: str, second: str) -> list[Rule]:
    """transpose(second(first(x, c), d), p) -> second(first(transpose(x, p), transpose(c, p)), transpose(d, p))."""
    name = f"transpose_{first.lower()}_{second.lower()}_const"
    source = Pattern((PatternNode("n0", first, ("x", "c")), PatternNode("n1", second, ("n0", "d")),
                      PatternNode("n2", "Transpose", ("n1",), PERM)))
    target = Pattern((PatternNode("t0", "Transpose", ("x",), PERM), PatternNode("tc", "Transpose", ("c",), PERM),
                      PatternNode("td", "Transpose", ("d",), PERM), PatternNode("r0", first, ("t0", "tc")),
                      PatternNode("r1", second, ("r0", "td"))))
    constraints = ("not is_const('x')", "is_const('c')", "is_const('d')", "len(perm) == rank('x')",
                   "rank('c') == rank('x')", "rank('d') == rank('x')")
    inputs = tuple(PatternInput(n) for n in ("x", "c", "d"))
    return [axiom_rule(name, find_axiom(name).math, inputs, source, target, (("n2", "r1"),), constraints,
                       Exactness.EXACT, _witness(name))]


def transpose_const_rules(op: str, *, scalar: bool) -> list[Rule]:
    """transpose(op(x, c), p) -> op(transpose(x, p), transpose(c, p)) (c unchanged if scalar)."""
    return [_rule(op, scalar=scalar)]


_FOLDED = Pattern((PatternNode("gc", "Reshape", ("g",), (("shape", (-1,)),)),
                   PatternNode("wg", "Mul", ("w", "gc")), PatternNode("bg", "Mul", ("b", "gc")),
                   PatternNode("m", "MatMul", ("x", "wg")), PatternNode("a", "Add", ("m", "bg"))))
"""x @ (w * g') + b * g' with g' = reshape(g, (-1,)): the layer scale folded into the columns."""

_MOVED_COLUMNS = "tuple(shape('w')[1] if axis == len(perm) - 1 else 1 for axis in perm)"
"""The layer scale's shape on the permuted product: N on the axis perm moves w's columns to."""


def transpose_layer_scale_rules() -> list[Rule]:
    """transpose(x @ w + b, p) * g -> transpose(x @ (w * g') + b * g', p), g' = reshape(g, (-1,)).

    torchvision and timm ConvNeXt (the dense-MLP blocks) permute the MLP's output back to
    NCHW, then scale it by a per-channel layer scale, (C, 1, 1) or (1, C, 1, 1); ORT runs the
    Mul as a pass of its own over the block's activations. Folded into the second dense
    layer's columns: about 1.01x on a torchvision ConvNeXt-T export (AVX-512, 2 threads; A/B
    runs of 60 to 200 pairs gave 1.005x to 1.019x), too little for the search to confirm.
    The permutation is a parameter variable, so the rule is an instance of its validated
    axiom (`taso.opspecs.axioms.converter`), with the axiom's configs as witnesses."""
    name = "transpose_matmul_bias_mul_columns"
    source = Pattern((PatternNode("n0", "MatMul", ("x", "w")), PatternNode("n1", "Add", ("n0", "b")),
                      PatternNode("n2", "Transpose", ("n1",), PERM), PatternNode("n3", "Mul", ("n2", "g"))))
    target = Pattern((*_FOLDED.nodes, PatternNode("t", "Transpose", ("a",), PERM)))
    constraints = ("not is_const('x')", "is_const('w')", "is_const('b')", "is_const('g')", "rank('w') == 2",
                   "len(perm) == rank('x')", "rank('x') >= 2", "shape('b') == (shape('w')[1],)",
                   f"shape('g') == {_MOVED_COLUMNS}[len(perm) - rank('g'):]")
    inputs = tuple(PatternInput(n) for n in ("x", "w", "b", "g"))
    return [axiom_rule(name, find_axiom(name).math, inputs, source, target, (("n3", "t"),), constraints,
                       Exactness.REASSOCIATES, _witness(name))]


def unit_layer_scale_rules() -> list[Rule]:
    """(x @ w + b) * g -> x @ (w * g') + b * g', g' = reshape(g, (-1,)), for g (1, ..., 1, N).

    The canonical stage sinks ConvNeXt's permute back to NCHW below the layer scale and
    the residual Add when that cancels Transposes, and writes the constant at the product's
    rank, (1, 1, 1, C): the fold is the same, at a shape `cv-fold_mul_matmul_bias` ((N,) or
    (1, N)) does not take; the target reshapes g so that the weight stays a matrix."""
    name = "matmul_bias_mul_unit_columns"
    source = Pattern((PatternNode("n0", "MatMul", ("x", "w")), PatternNode("n1", "Add", ("n0", "b")),
                      PatternNode("n2", "Mul", ("n1", "g"))))
    constraints = ("not is_const('x')", "is_const('w')", "is_const('b')", "is_const('g')", "rank('w') == 2",
                   "rank('x') >= 2", "shape('b') == (shape('w')[1],)", "1 <= rank('g') <= rank('x')",
                   "shape('g') == (1,) * (rank('g') - 1) + (shape('w')[1],)")
    inputs = tuple(PatternInput(n) for n in ("x", "w", "b", "g"))
    return [axiom_rule(name, find_axiom(name).math, inputs, source, _FOLDED, (("n2", "a"),), constraints,
                       Exactness.REASSOCIATES, _witness(name))]
