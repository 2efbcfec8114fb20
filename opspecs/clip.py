"""Clip: clamp to [min, max] (Relu6 is Clip(0, 6)); bounds are constant ONNX inputs from
opset 11, float attributes at opsets 6-10 (`BOUNDS_AS_INPUTS_OPSET`; the importer reads
both, the emitter writes the model's)."""

from taso.opspecs._arith import clip
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints, ParamKind, ParamSource, ParamSpec

PARAMS = (
    ParamSpec("min", ParamKind.FLOAT, None, ParamSource.CONST_INPUT, input_index=1,
              doc="lower bound; None = unbounded"),
    ParamSpec("max", ParamKind.FLOAT, None, ParamSource.CONST_INPUT, input_index=2,
              doc="upper bound; None = unbounded"),
)
BOUNDS_AS_INPUTS_OPSET = 11
"""The first opset whose Clip takes its bounds as inputs; before it (6-10) they are the
float attributes ``min`` and ``max``."""

SPEC = unary_spec(
    "Clip",
    "Clip(x; lo, hi) = min(max(x, lo), hi)",
    lambda x, p: clip(x, p["min"], p["max"]),  # type: ignore[arg-type]
    params=PARAMS,
    min_opset=6,
    hints=EnumHints(param_values={"min": (0.0,), "max": (6.0,)}),
)
