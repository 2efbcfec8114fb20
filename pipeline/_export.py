"""The export stage: fold weight transforms, then write a ModelProto ONNX Runtime loads.

    fold (internal weight transforms -> initializers, NumPy semantics of the opspecs)
      -> export (the IR version lowered to what the installed onnxruntime accepts)
"""

from __future__ import annotations

import onnx

from taso._fold import fold_constants
from taso._onnx_export import export_model
from taso.backends import max_ir_version
from taso.ir import Graph
from taso.opspecs import evaluate_op


def export(graph: Graph) -> onnx.ModelProto:
    """`graph` as a ModelProto: weight transforms folded, IR version ORT loads."""
    return export_model(fold_constants(graph, evaluate_op), ir_version=max_ir_version())
