"""The export stage: fold weight transforms, then write a ModelProto ONNX Runtime loads.

    fold (internal weight transforms -> initializers, NumPy semantics of the opspecs)
      -> export (the IR version lowered to what the installed onnxruntime accepts)
"""

from __future__ import annotations

import onnx

from taso._fold import fold_constants
from taso._model_io import check_exported
from taso._onnx_export import export_model
from taso.backends import max_ir_version
from taso.ir import Graph
from taso.opspecs import evaluate_op


def export(graph: Graph) -> onnx.ModelProto:
    """`graph` as a ModelProto: weight transforms folded, IR version ORT loads."""
    return export_model(fold_constants(graph, evaluate_op), ir_version=max_ir_version())


def checked_export(graph: Graph) -> onnx.ModelProto:
    """`export`, then the checks every model taso writes passes (`check_exported`); raises
    whatever either raises (a rewrite's fault: callers fall back on an earlier model)."""
    model = export(graph)
    check_exported(model)
    return model
