"""Paddle architectures (random weights) exported by paddle2onnx.

`paddle.onnx.export` is Paddle's documented route to paddle2onnx; it is called without
an opset unless the entry names one, so the opset written is the default of that route
(the manifest records it). Before export the network is put in eval mode and every
sublayer with a `rep()` is reparameterized, as the PaddleOCR and PaddleClas exporters do.
PP-LCNet, PP-HGNetV2 and MobileNetV3 come from the PaddleClas package's own code; the
PP-OCR models from `_ppocr.py` and `_ppocr_v4.py`, since no pip package ships PaddleOCR's
modeling code. The same code runs under paddle 3 with paddle2onnx 2.x and under paddle
2.6 with paddle2onnx 1.x (the PADDLE2ONNX_1X family).
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
from benchmarks.corpus._ppocr_v4 import PPOCRv4Det, PPOCRv4Rec, Upsample
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
    # Some backbones (MobileNetV3) log a deprecation through ppcls's logger, which is
    # None until initialised.
    importlib.import_module("ppcls.utils.logger").init_logger()
    backbones = importlib.import_module("ppcls.arch.backbone")
    return getattr(backbones, name)(pretrained=False)


_ARCHITECTURES: dict[str, Callable[[], paddle.nn.Layer]] = {
    "PPLCNet_x1_0": lambda: _paddleclas_backbone("PPLCNet_x1_0"),
    "PPHGNetV2_B0": lambda: _paddleclas_backbone("PPHGNetV2_B0"),
    "MobileNetV3_small_x1_0": lambda: _paddleclas_backbone("MobileNetV3_small_x1_0"),
    "ppocrv3_rec": PPOCRv3Rec,
    "ppocrv4_rec": PPOCRv4Rec,
    "ppocrv4_det": PPOCRv4Det,
    "ppocrv4_det_sized": lambda: PPOCRv4Det(Upsample.SIZE),
}


def _reparameterize(network: paddle.nn.Layer) -> None:
    """Fold every re-parameterizable sublayer, as PaddleOCR's export_model does."""
    for layer in network.sublayers():
        if callable(getattr(layer, "rep", None)):
            layer.rep()


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build the entry's network and export it to `path` (paddle adds the `.onnx`)."""
    del cache  # paddle entries read nothing from the cache
    paddle.seed(SEED)
    network = _ARCHITECTURES[entry.architecture]()
    network.eval()
    _reparameterize(network)
    specs = [paddle.static.InputSpec(list(shape), "float32", name) for name, shape in entry.inputs]
    opset = {} if entry.opset is None else {"opset_version": entry.opset}
    try:
        paddle.onnx.export(network, str(path.with_suffix("")), input_spec=specs, **opset)
    except SystemExit as error:  # paddle2onnx logs its reason and calls sys.exit(-1)
        raise RuntimeError(f"paddle2onnx gave up (exit {error.code}); its log says why") from error
