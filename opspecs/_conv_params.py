"""Parameter schema shared by Conv and the pooling ops (ONNX names and defaults)."""

from __future__ import annotations

from taso.opspecs._types import ParamKind, Params, ParamSpec, Shape
from taso.opspecs._window import Pads, resolve_pads

STRIDES = ParamSpec("strides", ParamKind.INTS, (1, 1))
PADS = ParamSpec("pads", ParamKind.INTS, (0, 0, 0, 0), doc="top, left, bottom, right")
DILATIONS = ParamSpec("dilations", ParamKind.INTS, (1, 1))
AUTO_PAD = ParamSpec("auto_pad", ParamKind.STRING, "NOTSET")


def explicit_pads(x_shape: Shape, kernel: tuple[int, int], params: Params) -> Pads:
    """``pads`` after resolving ``auto_pad`` against the input's spatial dims."""
    return resolve_pads(
        x_shape[2:],
        kernel,
        params["strides"],  # type: ignore[arg-type]
        params.get("dilations", (1, 1)),  # type: ignore[arg-type]
        params["pads"],  # type: ignore[arg-type]
        str(params["auto_pad"]),
    )
