"""Axioms of pooling: pooling commutes with channel concat, AveragePool is a depthwise Conv
with the constant pool kernel, GlobalAveragePool is AveragePool over the whole plane."""

from __future__ import annotations

from taso.opspecs.axioms._core import Axiom, cfg

POOL_PARAMS = ("kernel_shape", "strides", "pads", "count_include_pad")


def pool(p: dict, *, count: bool = True) -> dict:
    keys = POOL_PARAMS if count else POOL_PARAMS[:-1]
    return {k: p[k] for k in keys if k in p}


CAT_CONFIGS = (
    cfg({"x": (1, 1, 3, 3), "y": (1, 2, 3, 3)}, kernel_shape=(2, 2)),
    cfg({"x": (1, 2, 4, 4), "y": (1, 1, 4, 4)}, kernel_shape=(3, 3), strides=(2, 2),
        pads=(1, 1, 1, 1)),
    cfg({"x": (2, 1, 3, 3), "y": (2, 1, 3, 3)}, kernel_shape=(3, 3), pads=(1, 1, 1, 1),
        count_include_pad=1),
)

AXIOMS = (
    Axiom("avgpool_concat", "avgpool(concat(x, y, 1)) = concat(avgpool(x), avgpool(y), 1)",
          ("x", "y"),
          lambda a, v, p: a("AveragePool", a("Concat", v["x"], v["y"], axis=1), **pool(p)),
          lambda a, v, p: a("Concat", a("AveragePool", v["x"], **pool(p)),
                            a("AveragePool", v["y"], **pool(p)), axis=1), CAT_CONFIGS),
    Axiom("maxpool_concat", "maxpool(concat(x, y, 1)) = concat(maxpool(x), maxpool(y), 1)",
          ("x", "y"),
          lambda a, v, p: a("MaxPool", a("Concat", v["x"], v["y"], axis=1), **pool(p, count=False)),
          lambda a, v, p: a("Concat", a("MaxPool", v["x"], **pool(p, count=False)),
                            a("MaxPool", v["y"], **pool(p, count=False)), axis=1), CAT_CONFIGS),
    Axiom("avgpool_as_conv",
          "avgpool(x; k, s, pads, count_include_pad) = conv(x, poolkernel(C, k); s, pads, group C)",
          ("x",),
          lambda a, v, p: a("AveragePool", v["x"], count_include_pad=1, **pool(p)),
          lambda a, v, p: a("Conv", v["x"], a("ConstPoolKernel", channels=p["c"],
                                              kernel_shape=p["kernel_shape"]),
                            group=p["c"], **{k: p[k] for k in ("strides", "pads") if k in p}),
          (cfg({"x": (1, 2, 3, 3)}, c=2, kernel_shape=(2, 2)),
           cfg({"x": (1, 1, 4, 4)}, c=1, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
           cfg({"x": (2, 3, 3, 3)}, c=3, kernel_shape=(3, 3), pads=(1, 1, 1, 1))),
          condition=lambda s, p: s["x"][1] == p["c"]),
    Axiom("global_avgpool_as_avgpool", "globalavgpool(x) = avgpool(x; kernel (H, W))", ("x",),
          lambda a, v, p: a("GlobalAveragePool", v["x"]),
          lambda a, v, p: a("AveragePool", v["x"], kernel_shape=p["hw"]),
          (cfg({"x": (1, 2, 3, 3)}, hw=(3, 3)), cfg({"x": (2, 1, 2, 4)}, hw=(2, 4)),
           cfg({"x": (1, 3, 1, 1)}, hw=(1, 1))),
          condition=lambda s, p: tuple(s["x"][2:]) == p["hw"]),
)
