"""Paddle architectures (random weights) exported by paddle2onnx.

`paddle.onnx.export` is Paddle's documented route to paddle2onnx; it is called without
an opset unless the entry names one, so the opset written is the default of that route
(the manifest records it). Before export, the LearnableAffineBlock scalars are drawn near
their identity init, the BatchNorm statistics are re-estimated on random inputs
(`_calibrate.py`: paddle's BatchNorm keeps `_momentum` of the running value, set per step
for a cumulative average), the network is put in eval mode and every sublayer with a
`rep()` is reparameterized, as the PaddleOCR and PaddleClas exporters do.
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

import numpy as np
import paddle
import paddle2onnx  # noqa: F401  (paddle.onnx.export needs it; imported here to fail early)

from benchmarks.corpus import _calibrate
from benchmarks.corpus._held_out import PADDLECLAS_BACKBONES
from benchmarks.corpus._ppocr import PPOCRv3Rec
from benchmarks.corpus._ppocr_v4 import PPOCRv4Det, PPOCRv4Rec, Upsample
from benchmarks.corpus._registry import Entry

SEED = _calibrate.SEED

# paddle.nn.BatchNorm is the older class (PaddleClas MobileNetV3 uses it); both keep their
# running statistics in `_mean` / `_variance` and their momentum in `_momentum`.
_BATCH_NORMS = (paddle.nn.BatchNorm, paddle.nn.BatchNorm1D, paddle.nn.BatchNorm2D,
                paddle.nn.BatchNorm3D)


def _paddleclas_backbone(name: str, **options: object) -> paddle.nn.Layer:
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
    return getattr(backbones, name)(pretrained=False, **options)


_ARCHITECTURES: dict[str, Callable[[], paddle.nn.Layer]] = {
    "PPLCNet_x1_0": lambda: _paddleclas_backbone("PPLCNet_x1_0"),
    "PPHGNetV2_B0": lambda: _paddleclas_backbone("PPHGNetV2_B0"),
    "MobileNetV3_small_x1_0": lambda: _paddleclas_backbone("MobileNetV3_small_x1_0"),
    # PP-OCR's text orientation classifiers: two classes (0 or 180 degrees)
    "PPLCNet_x0_25_textline_ori": lambda: _paddleclas_backbone("PPLCNet_x0_25", class_num=2),
    "MobileNetV3_small_x0_35_cls": lambda: _paddleclas_backbone("MobileNetV3_small_x0_35", class_num=2),
    "ppocrv3_rec": PPOCRv3Rec,
    "ppocrv4_rec": PPOCRv4Rec,
    "ppocrv4_det": PPOCRv4Det,
    "ppocrv4_det_sized": lambda: PPOCRv4Det(Upsample.SIZE),
    # the held-out entries' backbones, with PaddleClas's defaults
    **{name: (lambda name=name: _paddleclas_backbone(name)) for name in PADDLECLAS_BACKBONES},
}


def _is_affine_block(layer: paddle.nn.Layer) -> bool:
    """A LearnableAffineBlock (ours or PaddleClas's): exactly a scalar `scale` and `bias`."""
    own = dict(layer.named_parameters(include_sublayers=False))
    return own.keys() == {"scale", "bias"} and all(p.shape == [1] for p in own.values())


def draw_affine_scalars(network: paddle.nn.Layer) -> int:
    """Draw every LearnableAffineBlock's scale and bias near its identity init (seeded);
    returns how many blocks were drawn."""
    rng = np.random.default_rng(SEED)
    blocks = [layer for layer in network.sublayers() if _is_affine_block(layer)]
    for block in blocks:
        block.scale.set_value(np.array([rng.uniform(*_calibrate.AFFINE_SCALE)], "float32"))
        block.bias.set_value(np.array([rng.uniform(*_calibrate.AFFINE_BIAS)], "float32"))
    return len(blocks)


@paddle.no_grad()
def calibrate(network: paddle.nn.Layer, inputs: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """Re-estimate every BatchNorm's running statistics on random inputs (`_calibrate`),
    then leave the network in eval mode."""
    norms = [layer for layer in network.sublayers() if isinstance(layer, _BATCH_NORMS)]
    network.train()
    for step, batch in enumerate(_calibrate.random_batches(inputs)):
        for norm in norms:
            norm._momentum = _calibrate.keep_share(step)
        network(*[paddle.to_tensor(array) for array in batch])
    network.eval()


def _reparameterize(network: paddle.nn.Layer) -> None:
    """Fold every re-parameterizable sublayer, as PaddleOCR's export_model does."""
    for layer in network.sublayers():
        if callable(getattr(layer, "rep", None)):
            layer.rep()


def prepare(entry: Entry) -> paddle.nn.Layer:
    """The entry's network as it is exported: seeded random weights, affine scalars
    drawn, BatchNorm statistics re-estimated, reparameterized, in eval mode."""
    paddle.seed(SEED)
    network = _ARCHITECTURES[entry.architecture]()
    draw_affine_scalars(network)
    calibrate(network, entry.inputs)
    _reparameterize(network)
    return network


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build the entry's network and export it to `path` (paddle adds the `.onnx`)."""
    del cache  # paddle entries read nothing from the cache
    network = prepare(entry)
    specs = [paddle.static.InputSpec(list(shape), "float32", name) for name, shape in entry.inputs]
    opset = {} if entry.opset is None else {"opset_version": entry.opset}
    try:
        paddle.onnx.export(network, str(path.with_suffix("")), input_spec=specs, **opset)
    except SystemExit as error:  # paddle2onnx logs its reason and calls sys.exit(-1)
        raise RuntimeError(f"paddle2onnx gave up (exit {error.code}); its log says why") from error
