"""Hypothesis strategies for random valid ONNX models: the fuzzer's input generator.

A model is described by a `Recipe` (input shape, a tuple of `Step`s, extra outputs) that
`build` turns into a ModelProto deterministically: weights come from per-step seeds, so a
recipe printed by a failing test is a complete, copy-pasteable reproducer (the
regression tests in `tests/regressions/` are such recipes).

Steps cover the operators with specs (Conv with groups/strides/pads/dilations, Add/Sub/
Mul/Div with scalar, per-channel and full constants, activations and their decompositions,
MatMul/Gemm, Transpose, Reshape, Flatten, Concat/Split, pools, BatchNormalization) and
opaque ones ORT can run (Cos, Softplus, Neg, LRN). A `twin` draw repeats an earlier step
on the same operands with new weights, so parallel branches that share inputs (what
merge rules match) are common. With `batch="N"` the batch dim is symbolic; every step
then keeps it at axis 0 (no Concat/Split over it, Transpose fixes axis 0).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17
IR_VERSION = 10

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Step:
    """One operator application: `kind` from `KINDS`, operand value indices, chosen params."""

    kind: str
    args: tuple[int, ...]
    params: tuple[tuple[str, object], ...] = ()
    seed: int = 0

    def param(self, name: str) -> object:
        return dict(self.params)[name]


@dataclass(frozen=True)
class Recipe:
    """A whole model: NCHW input shape, optional symbolic batch name, steps, extra outputs."""

    input_shape: Shape
    steps: tuple[Step, ...]
    extra_outputs: tuple[int, ...] = ()
    batch: str | None = None
    n_inputs: int = 1


@dataclass
class _Builder:
    """Replays steps: ONNX nodes, initializers and the (concrete) shape of every value."""

    recipe_batch: str | None
    values: list[tuple[str, Shape]] = field(default_factory=list)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    consumed: set[int] = field(default_factory=set)
    counter: itertools.count = field(default_factory=itertools.count)

    @property
    def symbolic(self) -> bool:
        return self.recipe_batch is not None

    def shape(self, index: int) -> Shape:
        return self.values[index][1]

    def name(self, index: int) -> str:
        self.consumed.add(index)
        return self.values[index][0]

    def fresh(self, hint: str) -> str:
        return f"{hint}{next(self.counter)}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.inits.append(nh.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], shapes: list[Shape], **attrs: object) -> None:
        outputs = [self.fresh("v") for _ in shapes]
        self.nodes.append(h.make_node(op, inputs, outputs, name=self.fresh(op.lower()), **attrs))
        self.values.extend(zip(outputs, shapes, strict=True))


# ----- emitting each kind ------------------------------------------------------------------


def _rng(step: Step) -> np.random.Generator:
    return np.random.default_rng(step.seed)


def _conv_out(size: int, k: int, s: int, pads: tuple[int, int], d: int) -> int:
    return (size + pads[0] + pads[1] - d * (k - 1) - 1) // s + 1


def _emit_conv(b: _Builder, step: Step) -> None:
    n, c, hh, ww = b.shape(step.args[0])
    g, cout, k, s, d = (int(step.param(p)) for p in ("group", "cout", "k", "stride", "dilation"))  # type: ignore[call-overload]
    pads = tuple(step.param("pads"))  # type: ignore[arg-type]
    w = _rng(step).standard_normal((cout, c // g, k, k)) / np.sqrt(c // g * k * k)
    inputs = [b.name(step.args[0]), b.const(w.astype(np.float32), "w")]
    if step.param("bias"):
        inputs.append(b.const(_rng(step).standard_normal(cout).astype(np.float32) * 0.1, "b"))
    out = (n, cout, _conv_out(hh, k, s, (pads[0], pads[2]), d), _conv_out(ww, k, s, (pads[1], pads[3]), d))
    b.node("Conv", inputs, [out], group=g, kernel_shape=[k, k], strides=[s, s], pads=list(pads), dilations=[d, d])


def _const_of(step: Step, shape: Shape, op: str) -> np.ndarray:
    rng = _rng(step)
    if op in ("Mul", "Div"):
        value = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        value = rng.standard_normal(shape)
    return np.asarray(value, dtype=np.float32)


def _emit_binary_const(b: _Builder, step: Step) -> None:
    x, op = step.args[0], str(step.param("op"))
    const = b.const(_const_of(step, tuple(step.param("const_shape")), op))  # type: ignore[arg-type]
    operands = [const, b.name(x)] if step.param("const_first") else [b.name(x), const]
    b.node(op, operands, [b.shape(x)])


def _emit_binary_values(b: _Builder, step: Step) -> None:
    x, y = step.args
    b.node(str(step.param("op")), [b.name(x), b.name(y)], [b.shape(x)])


def _emit_unary(b: _Builder, step: Step) -> None:
    x, op = step.args[0], str(step.param("op"))
    attrs = dict(step.param("attrs"))  # type: ignore[call-overload]
    inputs = [b.name(x)]
    if op == "Clip":
        low, high = attrs.pop("min"), attrs.pop("max")
        inputs += [b.const(np.float32(low), "lo") if low is not None else "", b.const(np.float32(high), "hi")]
    b.node(op, inputs, [b.shape(x)], **attrs)


def _emit_decomposed(b: _Builder, step: Step) -> None:
    """Activation decompositions as exporters write them (what fusion rules look for)."""
    x, form = step.args[0], str(step.param("form"))
    shape, name = b.shape(x), b.name(x)
    scalar = lambda v, hint: b.const(np.float32(v), hint)  # noqa: E731
    last = lambda: b.values[-1][0]  # noqa: E731
    if form == "silu":
        b.node("Sigmoid", [name], [shape])
        b.node("Mul", [name, last()], [shape])
    elif form == "relu6":
        b.node("Clip", [name, scalar(0.0, "lo"), scalar(6.0, "hi")], [shape])
    elif form == "hardsigmoid":
        b.node("Mul", [name, scalar(1 / 6, "k")], [shape])
        b.node("Add", [last(), scalar(0.5, "k")], [shape])
        b.node("Clip", [last(), scalar(0.0, "lo"), scalar(1.0, "hi")], [shape])
    else:  # hardswish: x * clip(x + 3, 0, 6) / 6
        b.node("Add", [name, scalar(3.0, "k")], [shape])
        b.node("Clip", [last(), scalar(0.0, "lo"), scalar(6.0, "hi")], [shape])
        b.node("Mul", [name, last()], [shape])
        b.node("Div", [last(), scalar(6.0, "k")], [shape])


def _emit_pool(b: _Builder, step: Step) -> None:
    n, c, hh, ww = b.shape(step.args[0])
    op, k, s, p = str(step.param("op")), int(step.param("k")), int(step.param("stride")), int(step.param("pad"))  # type: ignore[call-overload]
    attrs: dict[str, object] = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(step.param("count_include_pad"))  # type: ignore[call-overload]
    out = (n, c, _conv_out(hh, k, s, (p, p), 1), _conv_out(ww, k, s, (p, p), 1))
    b.node(op, [b.name(step.args[0])], [out], **attrs)


def _emit_global_pool(b: _Builder, step: Step) -> None:
    n, c, _, _ = b.shape(step.args[0])
    b.node("GlobalAveragePool", [b.name(step.args[0])], [(n, c, 1, 1)])


def _emit_lrn(b: _Builder, step: Step) -> None:
    b.node("LRN", [b.name(step.args[0])], [b.shape(step.args[0])], size=int(step.param("size")))  # type: ignore[call-overload]


def _emit_transpose(b: _Builder, step: Step) -> None:
    perm = tuple(step.param("perm"))  # type: ignore[arg-type]
    shape = b.shape(step.args[0])
    b.node("Transpose", [b.name(step.args[0])], [tuple(shape[i] for i in perm)], perm=list(perm))


def _emit_reshape(b: _Builder, step: Step) -> None:
    target = tuple(step.param("shape"))  # type: ignore[arg-type]
    written = np.array((0, *target[1:]), dtype=np.int64)  # 0 copies the (maybe symbolic) batch dim
    b.node("Reshape", [b.name(step.args[0]), b.const(written, "shape")], [target])


def _emit_flatten(b: _Builder, step: Step) -> None:
    shape, axis = b.shape(step.args[0]), int(step.param("axis"))  # type: ignore[call-overload]
    out = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
    b.node("Flatten", [b.name(step.args[0])], [out], axis=axis)


def _emit_concat(b: _Builder, step: Step) -> None:
    x, y = step.args
    axis = int(step.param("axis"))  # type: ignore[call-overload]
    shape = list(b.shape(x))
    shape[axis] += b.shape(y)[axis]
    b.node("Concat", [b.name(x), b.name(y)], [tuple(shape)], axis=axis)


def _emit_split(b: _Builder, step: Step) -> None:
    shape, axis, first = b.shape(step.args[0]), int(step.param("axis")), int(step.param("first"))  # type: ignore[call-overload]
    sizes = (first, shape[axis] - first)
    outs = [tuple(d if i != axis else s for i, d in enumerate(shape)) for s in sizes]
    split = b.const(np.array(sizes, dtype=np.int64), "split")
    b.node("Split", [b.name(step.args[0]), split], outs, axis=axis)


def _emit_matmul(b: _Builder, step: Step) -> None:
    shape, k = b.shape(step.args[0]), int(step.param("k"))  # type: ignore[call-overload]
    w = _rng(step).standard_normal((shape[-1], k)) / np.sqrt(shape[-1])
    b.node("MatMul", [b.name(step.args[0]), b.const(w.astype(np.float32), "w")], [(*shape[:-1], k)])


def _emit_gemm(b: _Builder, step: Step) -> None:
    (m, kk), n = b.shape(step.args[0]), int(step.param("n"))  # type: ignore[call-overload]
    trans_b = int(step.param("trans_b"))  # type: ignore[call-overload]
    w = (_rng(step).standard_normal((kk, n)) / np.sqrt(kk)).astype(np.float32)
    inputs = [b.name(step.args[0]), b.const(w.T.copy() if trans_b else w, "w")]
    bias = step.param("bias")
    if bias:
        inputs.append(b.const(_rng(step).standard_normal(tuple(bias)).astype(np.float32), "b"))  # type: ignore[arg-type]
    b.node("Gemm", inputs, [(m, n)], transB=trans_b, alpha=float(step.param("alpha")))  # type: ignore[arg-type]


def _emit_batchnorm(b: _Builder, step: Step) -> None:
    c, rng = b.shape(step.args[0])[1], _rng(step)
    consts = [
        rng.uniform(0.5, 1.5, c), rng.standard_normal(c) * 0.1, rng.standard_normal(c) * 0.1, rng.uniform(0.5, 1.5, c)
    ]
    names = [b.const(a.astype(np.float32), "bn") for a in consts]
    b.node("BatchNormalization", [b.name(step.args[0]), *names], [b.shape(step.args[0])], epsilon=1e-5)


EMIT: dict[str, Callable[[_Builder, Step], None]] = {
    "conv": _emit_conv, "binary_const": _emit_binary_const, "binary_values": _emit_binary_values,
    "unary": _emit_unary, "decomposed": _emit_decomposed, "pool": _emit_pool,
    "global_pool": _emit_global_pool, "lrn": _emit_lrn, "transpose": _emit_transpose,
    "reshape": _emit_reshape, "flatten": _emit_flatten, "concat": _emit_concat, "split": _emit_split,
    "matmul": _emit_matmul, "gemm": _emit_gemm, "batchnorm": _emit_batchnorm,
}


# ----- building a model from a recipe ----------------------------------------------------------


def _replay(recipe: Recipe) -> _Builder:
    builder = _Builder(recipe.batch)
    for i in range(recipe.n_inputs):
        builder.values.append((f"x{i}", recipe.input_shape))
    for step in recipe.steps:
        EMIT[step.kind](builder, step)
    return builder


def _declared(shape: Shape, batch: str | None) -> list[int | str]:
    return [batch, *shape[1:]] if batch is not None else list(shape)


def build(recipe: Recipe) -> onnx.ModelProto:
    """The ONNX model a recipe describes (valid: passes the full onnx checker)."""
    b = _replay(recipe)
    first_real = recipe.n_inputs
    leaves = [i for i in range(first_real, len(b.values)) if i not in b.consumed]
    extra = [i for i in recipe.extra_outputs if first_real <= i < len(b.values)]
    chosen = list(dict.fromkeys(leaves + sorted(extra))) or [len(b.values) - 1]
    inputs = [h.make_tensor_value_info(b.values[i][0], TensorProto.FLOAT, _declared(recipe.input_shape, recipe.batch))
              for i in range(recipe.n_inputs)]
    outputs = [h.make_tensor_value_info(b.values[i][0], TensorProto.FLOAT, _declared(b.values[i][1], recipe.batch))
               for i in chosen]
    graph = h.make_graph(b.nodes, "fuzz", inputs, outputs, b.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="taso-fuzz")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)  # a generator bug must not pass as a taso bug
    return model


def feeds(recipe: Recipe, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"x{i}": rng.standard_normal(recipe.input_shape).astype(np.float32) for i in range(recipe.n_inputs)}


# ----- drawing steps ---------------------------------------------------------------------------

UNARY: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = (
    ("Relu", ()), ("Relu", ()), ("Sigmoid", ()), ("Tanh", ()), ("Identity", ()), ("HardSwish", ()),
    ("HardSigmoid", (("alpha", 1 / 6), ("beta", 0.5))), ("HardSigmoid", (("alpha", 0.2), ("beta", 0.5))),
    ("Clip", (("min", 0.0), ("max", 6.0))), ("Clip", (("min", None), ("max", 1.0))),
    ("Cos", ()), ("Softplus", ()), ("Neg", ()),  # opaque to taso: no spec
)


def _of_rank(b: _Builder, rank: int | None = None, min_rank: int = 1) -> list[int]:
    return [i for i, (_, s) in enumerate(b.values) if (rank is None or len(s) == rank) and len(s) >= min_rank]


def _low_axis(b: _Builder) -> int:
    """Concat/Split/Transpose may move the batch axis only when it is static."""
    return 1 if b.symbolic else 0


def _draw_conv(draw: st.DrawFn, b: _Builder, x: int) -> Step | None:
    _, c, hh, ww = b.shape(x)
    group = draw(st.sampled_from([1, 1, *sorted({c} | ({2} if c % 2 == 0 else set()))]))
    cout = group * draw(st.sampled_from((1, 2) if group > 1 else (2, 4, 8)))
    k, stride, dilation = draw(st.sampled_from((1, 3))), draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 1, 2)))
    pads = draw(st.sampled_from(((0, 0, 0, 0), (k // 2,) * 4, (0, 1, 1, 0), (1, 0, 0, 1))))
    if min(_conv_out(hh, k, stride, (pads[0], pads[2]), dilation), _conv_out(ww, k, stride, (pads[1], pads[3]), dilation)) < 1:
        return None
    params = {"group": group, "cout": cout, "k": k, "stride": stride, "dilation": dilation, "pads": pads,
              "bias": draw(st.sampled_from((False, False, True)))}
    return Step("conv", (x,), tuple(params.items()))


def _const_shapes(shape: Shape) -> list[Shape]:
    options: list[Shape] = [(), (1,), (shape[-1],), tuple(shape[1:])]
    if len(shape) == 4:  # per-channel first and twice: what conv folding rules look for
        options = [(1, shape[1], 1, 1), (1, shape[1], 1, 1), (shape[1], 1, 1), *options]
    return options


def _draw_binary_const(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    op = draw(st.sampled_from(("Mul", "Add", "Sub", "Div")))
    const_shape = draw(st.sampled_from(_const_shapes(b.shape(x))))
    first = op in ("Add", "Mul", "Sub") and draw(st.booleans())
    return Step("binary_const", (x,), (("op", op), ("const_shape", const_shape), ("const_first", first)))


def _draw_binary_values(draw: st.DrawFn, b: _Builder, x: int) -> Step | None:
    partners = [i for i in range(len(b.values)) if b.shape(i) == b.shape(x)]
    y = draw(st.sampled_from(partners))
    return Step("binary_values", (x, y), (("op", draw(st.sampled_from(("Add", "Sub", "Mul")))),))


def _draw_unary(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    op, attrs = draw(st.sampled_from(UNARY))
    return Step("unary", (x,), (("op", op), ("attrs", attrs)))


def _draw_decomposed(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    return Step("decomposed", (x,), (("form", draw(st.sampled_from(("silu", "relu6", "hardsigmoid", "hardswish")))),))


def _draw_pool(draw: st.DrawFn, b: _Builder, x: int) -> Step | None:
    _, _, hh, ww = b.shape(x)
    op, k, stride = draw(st.sampled_from(("MaxPool", "AveragePool"))), draw(st.sampled_from((2, 3))), draw(st.sampled_from((1, 2)))
    pad = draw(st.sampled_from((0, 1)))
    if min(hh, ww) + 2 * pad < k:
        return None
    return Step("pool", (x,), (("op", op), ("k", k), ("stride", stride), ("pad", pad),
                               ("count_include_pad", draw(st.sampled_from((0, 1))))))


def _draw_transpose(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    rank, low = len(b.shape(x)), _low_axis(b)
    perm = tuple(range(low)) + tuple(draw(st.permutations(range(low, rank))))
    return Step("transpose", (x,), (("perm", perm),))


def _reshape_targets(shape: Shape) -> list[Shape]:
    n, rest = shape[0], shape[1:]
    total = int(np.prod(rest))
    targets = [(n, total), (n, total, 1, 1)]
    if len(rest) >= 2:
        targets.append((n, rest[0], int(np.prod(rest[1:]))))
    if total % 2 == 0:
        targets.append((n, total // 2, 2, 1))
    return [t for t in targets if t != shape]


def _draw_reshape(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    return Step("reshape", (x,), (("shape", draw(st.sampled_from(_reshape_targets(b.shape(x))))),))


def _draw_flatten(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    rank = len(b.shape(x))
    axis = 1 if b.symbolic else draw(st.integers(0, rank))
    return Step("flatten", (x,), (("axis", axis),))


def _draw_concat(draw: st.DrawFn, b: _Builder, x: int) -> Step | None:
    shape = b.shape(x)
    axis = draw(st.integers(_low_axis(b), len(shape) - 1))
    partners = [i for i in range(len(b.values)) if len(b.shape(i)) == len(shape)
                and all(d == e for j, (d, e) in enumerate(zip(b.shape(i), shape, strict=True)) if j != axis)]
    return Step("concat", (x, draw(st.sampled_from(partners))), (("axis", axis),))


def _draw_split(draw: st.DrawFn, b: _Builder, x: int) -> Step | None:
    shape = b.shape(x)
    axes = [a for a in range(_low_axis(b), len(shape)) if shape[a] >= 2]
    if not axes:
        return None
    axis = draw(st.sampled_from(axes))
    return Step("split", (x,), (("axis", axis), ("first", draw(st.integers(1, shape[axis] - 1)))))


def _draw_matmul(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    return Step("matmul", (x,), (("k", draw(st.sampled_from((2, 3, 4, 8)))),))


def _draw_gemm(draw: st.DrawFn, b: _Builder, x: int) -> Step:
    n = draw(st.sampled_from((2, 3, 4, 8)))
    bias = draw(st.sampled_from(((), (n,), (1, n))))
    return Step("gemm", (x,), (("n", n), ("trans_b", draw(st.sampled_from((0, 1)))), ("bias", bias),
                               ("alpha", draw(st.sampled_from((1.0, 0.5))))))


def _simple(kind: str) -> Callable[[st.DrawFn, _Builder, int], Step]:
    return lambda draw, b, x: Step(kind, (x,))


# kind -> (which values it applies to, how to draw its parameters)
DRAW: dict[str, tuple[Callable[[_Builder], list[int]], Callable[[st.DrawFn, _Builder, int], Step | None]]] = {
    "conv": (lambda b: _of_rank(b, 4), _draw_conv),
    "binary_const": (lambda b: _of_rank(b), _draw_binary_const),
    "binary_values": (lambda b: _of_rank(b), _draw_binary_values),
    "unary": (lambda b: _of_rank(b), _draw_unary),
    "decomposed": (lambda b: _of_rank(b), _draw_decomposed),
    "pool": (lambda b: _of_rank(b, 4), _draw_pool),
    "global_pool": (lambda b: _of_rank(b, 4), _simple("global_pool")),
    "lrn": (lambda b: _of_rank(b, 4), lambda draw, b, x: Step("lrn", (x,), (("size", draw(st.sampled_from((3, 5)))),))),
    "transpose": (lambda b: _of_rank(b, min_rank=2), _draw_transpose),
    "reshape": (lambda b: _of_rank(b, min_rank=2), _draw_reshape),
    "flatten": (lambda b: _of_rank(b, min_rank=2), _draw_flatten),
    "concat": (lambda b: _of_rank(b, min_rank=2), _draw_concat),
    "split": (lambda b: _of_rank(b, min_rank=1), _draw_split),
    "matmul": (lambda b: _of_rank(b, min_rank=2), _draw_matmul),
    "gemm": (lambda b: _of_rank(b, 2), _draw_gemm),
    "batchnorm": (lambda b: _of_rank(b, 4), _simple("batchnorm")),
}
KINDS = tuple(DRAW)
_WEIGHTS = {"conv": 5, "binary_const": 4, "unary": 4, "binary_values": 2, "matmul": 2, "gemm": 3, "flatten": 2}
_WEIGHTED_KINDS = tuple(k for k in KINDS for _ in range(_WEIGHTS.get(k, 1)))
_MAX_ELEMENTS = 1 << 14


class _Shape(enum.Enum):
    """How the next step relates to earlier ones (motifs that rules match)."""

    FREE = "any kind on any value"
    TWIN = "an earlier step again on the same operands, new weights: parallel branches"
    CHAIN = "the previous step's kind again, on its output: chains such as Relu(Relu(x))"


def _draw_step(draw: st.DrawFn, b: _Builder, steps: list[Step]) -> Step | None:
    motif = draw(st.sampled_from((_Shape.FREE, _Shape.FREE, _Shape.TWIN, _Shape.TWIN, _Shape.CHAIN))) if steps else _Shape.FREE
    if motif is _Shape.TWIN:
        return replace(draw(st.sampled_from(steps)), seed=len(steps))
    kind = steps[-1].kind if motif is _Shape.CHAIN else draw(st.sampled_from(_WEIGHTED_KINDS))
    applies, draw_params = DRAW[kind]
    candidates = applies(b)
    if not candidates:
        return None
    newest = len(b.values) - 1
    if newest in candidates and (motif is _Shape.CHAIN or draw(st.booleans())):
        x = newest
    else:
        x = draw(st.sampled_from(candidates[::-1]))  # newest first: shrinks toward deep chains
    step = draw_params(draw, b, x)
    return None if step is None else replace(step, seed=len(steps))


def _fits(b: _Builder, step: Step) -> bool:
    """Replaying `step` keeps every value small (and non-empty)."""
    trial = _Builder(b.recipe_batch, list(b.values))
    EMIT[step.kind](trial, step)
    return all(0 < int(np.prod(s)) <= _MAX_ELEMENTS for _, s in trial.values[len(b.values):])


@st.composite
def recipes(draw: st.DrawFn, *, max_steps: int = 10, batch: st.SearchStrategy[str | None] | None = None) -> Recipe:
    """A random valid model recipe of 1..max_steps steps."""
    symbol = draw(batch if batch is not None else st.sampled_from((None, None, "N")))
    shape = (draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 2, 3, 4, 8))),
             draw(st.integers(3, 9)), draw(st.integers(3, 9)))
    n_inputs = draw(st.sampled_from((1, 1, 2)))
    b = _Builder(symbol, [(f"x{i}", shape) for i in range(n_inputs)])
    steps: list[Step] = []
    for _ in range(draw(st.integers(2, max_steps))):
        step = _draw_step(draw, b, steps)
        if step is None or not _fits(b, step):
            continue
        steps.append(step)
        EMIT[step.kind](b, step)
    if not steps:
        steps.append(Step("unary", (0,), (("op", "Relu"), ("attrs", ()))))
        EMIT["unary"](b, steps[-1])
    extra = draw(st.lists(st.integers(n_inputs, len(b.values) - 1), max_size=2, unique=True))
    return Recipe(shape, tuple(steps), tuple(sorted(extra)), symbol, n_inputs)
