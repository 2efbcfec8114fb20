"""Paddle architectures (random weights) exported by paddle2onnx at its default opset.

`paddle.onnx.export` is Paddle's documented route to paddle2onnx; it is called without
an opset, so the opset written is the default of that route (the manifest records it).
PP-LCNet comes from the PaddleClas package's own code; the PP-OCRv3 recognizer from
`_ppocr.py`, since no pip package ships PaddleOCR's modeling code.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import paddle
import paddle2onnx  # noqa: F401  (paddle.onnx.export needs it; imported here to fail early)

from benchmarks.corpus._ppocr import PPOCRv3Rec
from benchmarks.corpus._registry import Entry

SEED = 0


def _paddleclas_backbone(name: str) -> paddle.nn.Layer:
    """A PaddleClas backbone by name. The wheel nests its `ppcls` package inside
    `paddleclas/`, whose own `__init__` pulls in OpenCV and faiss, so the folder is put on
    `sys.path` and `ppcls` imported directly."""
    spec = importlib.util.find_spec("paddleclas")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("paddleclas is not installed")
    root = str(Path(spec.origin).parent)
    if root not in sys.path:
        sys.path.append(root)
    backbones = importlib.import_module("ppcls.arch.backbone")
    return getattr(backbones, name)(pretrained=False)


_ARCHITECTURES: dict[str, Callable[[], paddle.nn.Layer]] = {
    "PPLCNet_x1_0": lambda: _paddleclas_backbone("PPLCNet_x1_0"),
    "ppocrv3_rec": PPOCRv3Rec,
}


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build the entry's network and export it to `path` (paddle adds the `.onnx`)."""
    del cache  # paddle entries read nothing from the cache
    paddle.seed(SEED)
    network = _ARCHITECTURES[entry.architecture]()
    network.eval()
    specs = [paddle.static.InputSpec(list(shape), "float32", name) for name, shape in entry.inputs]
    paddle.onnx.export(network, str(path.with_suffix("")), input_spec=specs)
