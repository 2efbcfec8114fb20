"""Axioms of data movement: Concat/Split inverses and nesting, Transpose composition and its
interaction with Concat and elementwise ops, Reshape/Flatten/Squeeze/Unsqueeze identities."""

from __future__ import annotations

from collections.abc import Mapping

from taso.opspecs._registry import spec_by_name
from taso.opspecs._types import Params, Shape
from taso.opspecs.axioms._core import Axiom, cfg


def compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """Permutation of transpose(transpose(x, p), q): r[i] = p[q[i]]."""
    return tuple(p[i] for i in q)


def inverse(p: tuple[int, ...]) -> tuple[int, ...]:
    out = [0] * len(p)
    for i, axis in enumerate(p):
        out[axis] = i
    return tuple(out)


def _split_sizes(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    axis = int(p["axis"])  # type: ignore[call-overload]
    return {"sizes": (s["x"][axis], s["y"][axis])}


def _flat(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    x, axis = s["x"], int(p["axis"])  # type: ignore[call-overload]
    rows = 1
    for d in x[:axis]:
        rows *= int(d)
    return {"target": (rows, -1)}


def _keeps_shape(s: Mapping[str, Shape], p: Params) -> bool:
    """reshape(x, s) has x's own shape (0 copies a dim, -1 infers one)."""
    return tuple(spec_by_name("Reshape").infer_shapes([s["x"]], {"shape": p["s"]})[0]) == tuple(s["x"])


CAT2 = (cfg({"x": (2, 3), "y": (1, 3)}, axis=0), cfg({"x": (2, 3), "y": (2, 2)}, axis=1),
        cfg({"x": (1, 2, 2, 2), "y": (1, 1, 2, 2)}, axis=1))
CAT3 = tuple(cfg({**c.shapes, "z": c.shapes["x"]}, **c.params) for c in CAT2)
EW_CAT = tuple(cfg({"x": c.shapes["x"], "y": c.shapes["y"], "u": c.shapes["x"],
                    "w": c.shapes["y"]}, **c.params) for c in CAT2)

def _through(op: str, *, scalar: bool) -> Axiom:
    """transpose(op(x, c), p) = op(transpose(x, p), transpose(c, p)) for a c of x's rank that
    broadcasts against it (or c unchanged, for a scalar): the same values, permuted."""
    name = f"transpose_{op.lower()}_const{'_scalar' if scalar else ''}"
    configs = ((cfg({"x": (1, 3, 4, 2), "c": ()}, perm=(0, 3, 1, 2)), cfg({"x": (2, 3), "c": ()}, perm=(1, 0)),
                cfg({"x": (2, 3, 4), "c": ()}, perm=(2, 0, 1)))
               if scalar else
               (cfg({"x": (1, 3, 4, 2), "c": (1, 1, 1, 2)}, perm=(0, 3, 1, 2)),
                cfg({"x": (2, 3, 4), "c": (2, 1, 4)}, perm=(2, 0, 1)),
                cfg({"x": (2, 3), "c": (2, 3)}, perm=(1, 0))))
    c = "c" if scalar else "transpose(c, p)"
    return Axiom(name, f"transpose({op.lower()}(x, c), p) = {op.lower()}(transpose(x, p), {c})", ("x", "c"),
                 lambda a, v, p: a("Transpose", a(op, v["x"], v["c"]), perm=p["perm"]),
                 lambda a, v, p: a(op, a("Transpose", v["x"], perm=p["perm"]),
                                   v["c"] if scalar else a("Transpose", v["c"], perm=p["perm"])),
                 configs,
                 condition=lambda s, p: len(s["c"]) == 0 if scalar else len(s["c"]) == len(s["x"]))


def _through_two(first: str, second: str) -> Axiom:
    """transpose(second(first(x, c), d), p) = second(first(transpose(x, p), transpose(c, p)),
    transpose(d, p)) for c, d of x's rank: a constant scale-and-shift chain moved past the
    Transpose in one step (each op alone gains too little to measure)."""
    name = f"transpose_{first.lower()}_{second.lower()}_const"
    configs = (cfg({"x": (1, 3, 4, 2), "c": (1, 1, 1, 2), "d": (1, 1, 1, 2)}, perm=(0, 3, 1, 2)),
               cfg({"x": (2, 3, 4), "c": (2, 1, 4), "d": (1, 3, 1)}, perm=(2, 0, 1)),
               cfg({"x": (2, 3), "c": (2, 3), "d": (1, 3)}, perm=(1, 0)))
    math = (f"transpose({second.lower()}({first.lower()}(x, c), d), p) = "
            f"{second.lower()}({first.lower()}(transpose(x, p), transpose(c, p)), transpose(d, p))")

    def t(a, x, p):  # noqa: ANN001, ANN202
        return a("Transpose", x, perm=p["perm"])

    return Axiom(name, math, ("x", "c", "d"),
                 lambda a, v, p: t(a, a(second, a(first, v["x"], v["c"]), v["d"]), p),
                 lambda a, v, p: a(second, a(first, t(a, v["x"], p), t(a, v["c"], p)), t(a, v["d"], p)),
                 configs, condition=lambda s, p: len(s["c"]) == len(s["d"]) == len(s["x"]))


AXIOMS = (
    Axiom("split_concat", "split(concat(x, y, a), a, (|x|, |y|)) = (x, y)", ("x", "y"),
          lambda a, v, p: a("Split", a("Concat", v["x"], v["y"], axis=p["axis"]),
                            axis=p["axis"], split=p["sizes"]),
          lambda a, v, p: (v["x"], v["y"]), CAT2, derive=_split_sizes),
    Axiom("concat_split", "concat(split(x, a, sizes), a) = x", ("x",),
          lambda a, v, p: a("Concat", *a("Split", v["x"], axis=p["axis"], split=p["sizes"]),
                            axis=p["axis"]),
          lambda a, v, p: v["x"],
          (cfg({"x": (3, 2)}, axis=0, sizes=(1, 2)), cfg({"x": (2, 4)}, axis=1, sizes=(1, 1, 2)),
           cfg({"x": (1, 4, 2, 2)}, axis=1, sizes=(2, 2)))),
    Axiom("concat_nested", "concat(concat(x, y, a), z, a) = concat(x, y, z, a)", ("x", "y", "z"),
          lambda a, v, p: a("Concat", a("Concat", v["x"], v["y"], axis=p["axis"]), v["z"],
                            axis=p["axis"]),
          lambda a, v, p: a("Concat", v["x"], v["y"], v["z"], axis=p["axis"]), CAT3),
    Axiom("concat_add", "concat(x, y) + concat(u, w) = concat(x + u, y + w)  (same axis, sizes)",
          ("x", "y", "u", "w"),
          lambda a, v, p: a("Add", a("Concat", v["x"], v["y"], axis=p["axis"]),
                            a("Concat", v["u"], v["w"], axis=p["axis"])),
          lambda a, v, p: a("Concat", a("Add", v["x"], v["u"]), a("Add", v["y"], v["w"]),
                            axis=p["axis"]), EW_CAT),
    Axiom("concat_mul", "concat(x, y) * concat(u, w) = concat(x * u, y * w)  (same axis, sizes)",
          ("x", "y", "u", "w"),
          lambda a, v, p: a("Mul", a("Concat", v["x"], v["y"], axis=p["axis"]),
                            a("Concat", v["u"], v["w"], axis=p["axis"])),
          lambda a, v, p: a("Concat", a("Mul", v["x"], v["u"]), a("Mul", v["y"], v["w"]),
                            axis=p["axis"]), EW_CAT),
    Axiom("transpose_compose", "transpose(transpose(x, p), q) = transpose(x, p[q])", ("x",),
          lambda a, v, p: a("Transpose", a("Transpose", v["x"], perm=p["p"]), perm=p["q"]),
          lambda a, v, p: a("Transpose", v["x"], perm=compose(p["p"], p["q"])),  # type: ignore[arg-type]
          (cfg({"x": (2, 3)}, p=(1, 0), q=(1, 0)), cfg({"x": (2, 3, 4)}, p=(1, 2, 0), q=(0, 2, 1)),
           cfg({"x": (1, 2, 3, 2)}, p=(0, 2, 3, 1), q=(3, 1, 0, 2)))),
    Axiom("transpose_inverse", "transpose(transpose(x, p), p^-1) = x", ("x",),
          lambda a, v, p: a("Transpose", a("Transpose", v["x"], perm=p["p"]),
                            perm=inverse(p["p"])),  # type: ignore[arg-type]
          lambda a, v, p: v["x"],
          (cfg({"x": (2, 3)}, p=(1, 0)), cfg({"x": (2, 3, 4)}, p=(1, 2, 0)),
           cfg({"x": (1, 2, 3, 2)}, p=(0, 2, 3, 1)))),
    Axiom("transpose_concat", "transpose(concat(x, y, a), p) = concat(T(x), T(y), p^-1[a])",
          ("x", "y"),
          lambda a, v, p: a("Transpose", a("Concat", v["x"], v["y"], axis=p["axis"]), perm=p["perm"]),
          lambda a, v, p: a("Concat", a("Transpose", v["x"], perm=p["perm"]),
                            a("Transpose", v["y"], perm=p["perm"]),
                            axis=inverse(p["perm"])[p["axis"]]),  # type: ignore[arg-type, index]
          (cfg({"x": (2, 3), "y": (1, 3)}, axis=0, perm=(1, 0)),
           cfg({"x": (2, 3, 2), "y": (2, 1, 2)}, axis=1, perm=(2, 0, 1)),
           cfg({"x": (1, 2, 2, 2), "y": (1, 1, 2, 2)}, axis=1, perm=(0, 2, 3, 1)))),
    Axiom("transpose_add", "transpose(x + y, p) = transpose(x, p) + transpose(y, p)", ("x", "y"),
          lambda a, v, p: a("Transpose", a("Add", v["x"], v["y"]), perm=p["perm"]),
          lambda a, v, p: a("Add", a("Transpose", v["x"], perm=p["perm"]),
                            a("Transpose", v["y"], perm=p["perm"])),
          (cfg({"x": (2, 3), "y": (2, 3)}, perm=(1, 0)),
           cfg({"x": (2, 3, 4), "y": (2, 3, 4)}, perm=(2, 0, 1)),
           cfg({"x": (1, 2, 2), "y": (1, 2, 2)}, perm=(0, 2, 1))),
          condition=lambda s, p: s["x"] == s["y"]),
    Axiom("reshape_reshape", "reshape(reshape(x, s1), s2) = reshape(x, s2)", ("x",),
          lambda a, v, p: a("Reshape", a("Reshape", v["x"], shape=p["s1"]), shape=p["s2"]),
          lambda a, v, p: a("Reshape", v["x"], shape=p["s2"]),
          (cfg({"x": (2, 6)}, s1=(3, 4), s2=(12,)), cfg({"x": (2, 3, 4)}, s1=(6, -1), s2=(4, 3, 2)),
           cfg({"x": (1, 4, 1, 1)}, s1=(1, 4), s2=(2, 2))),
          condition=lambda s, p: 0 not in p["s2"]),  # type: ignore[operator]
    Axiom("reshape_identity", "reshape(x, shape(x)) = x", ("x",),
          lambda a, v, p: a("Reshape", v["x"], shape=p["s"]),
          lambda a, v, p: v["x"],
          (cfg({"x": (2, 3)}, s=(2, 3)), cfg({"x": (2, 3, 4)}, s=(0, 3, -1)),
           cfg({"x": (1, 4, 1, 1)}, s=(1, 4, 1, 1))),
          condition=_keeps_shape),
    Axiom("flatten_as_reshape", "flatten(x, a) = reshape(x, (prod(dims[:a]), -1))", ("x",),
          lambda a, v, p: a("Flatten", v["x"], axis=p["axis"]),
          lambda a, v, p: a("Reshape", v["x"], shape=p["target"]),
          (cfg({"x": (2, 3)}, axis=1), cfg({"x": (2, 3, 4)}, axis=2),
           cfg({"x": (1, 4, 1, 1)}, axis=1)), derive=_flat),
    Axiom("squeeze_unsqueeze", "squeeze(unsqueeze(x, axes), axes) = x", ("x",),
          lambda a, v, p: a("Squeeze", a("Unsqueeze", v["x"], axes=p["axes"]), axes=p["axes"]),
          lambda a, v, p: v["x"],
          (cfg({"x": (2, 3)}, axes=(0,)), cfg({"x": (2, 3)}, axes=(1, 3)),
           cfg({"x": (4,)}, axes=(-1,)))),
    *(_through(op, scalar=scalar) for op in ("Add", "Mul") for scalar in (False, True)),
    *(_through_two(first, second) for first in ("Add", "Mul") for second in ("Add", "Mul")),
)
