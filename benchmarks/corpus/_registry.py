"""The corpus entries: which published architecture, which converter, which input shapes.

Every entry is built by a real converter from an architecture with random weights (no
pretrained download anywhere; BatchNorm statistics re-estimated on random inputs, as
`FamilyInfo.weights` records), at that converter's default opset unless the entry names
one (the PP-OCRv4 entries ask for opset 11, as PaddleOCR's deployment docs convert). The
opset and IR version actually written are recorded in the entry's manifest when it is built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from benchmarks.corpus._calibrate import AFFINE_RECIPE, RECIPE


class Family(enum.Enum):
    """A converter family; its builder lives in the module named by `module`."""

    TORCHSCRIPT = "torch.onnx (TorchScript, dynamo=False)"
    TORCH_DYNAMO = "torch.onnx (dynamo=True)"
    PADDLE2ONNX = "paddle2onnx"
    PADDLE2ONNX_1X = "paddle2onnx 1.x (paddlepaddle 2.6)"
    TF2ONNX = "tf2onnx"
    ORT_QUANT = "onnxruntime.quantization"


@dataclass(frozen=True)
class FamilyInfo:
    """What a family needs installed (distribution names) and where its builder is.

    `pins` are requirement strings (PEP 508, e.g. "paddle2onnx<2") the installed versions
    must meet; an entry whose family's pins are unmet is skipped, so two families of one
    converter can each be built in the environment that has its version. `weights` says
    how the builder makes the weights (`_calibrate.py`); it is recorded in the manifest,
    and a cached model made another way is rebuilt.
    """

    module: str
    distributions: tuple[str, ...]
    importable: tuple[str, ...]
    weights: str
    pins: tuple[str, ...] = ()


_PADDLE_WEIGHTS = f"{RECIPE}; {AFFINE_RECIPE}, before the statistics and before rep()"


FAMILIES: dict[Family, FamilyInfo] = {
    Family.TORCHSCRIPT: FamilyInfo(
        "_torch", ("torch", "torchvision"), ("torch", "torchvision"), RECIPE
    ),
    Family.TORCH_DYNAMO: FamilyInfo(
        "_torch", ("torch", "torchvision", "onnxscript"), ("torch", "torchvision", "onnxscript"),
        RECIPE,
    ),
    Family.PADDLE2ONNX: FamilyInfo(
        "_paddle", ("paddlepaddle", "paddle2onnx"), ("paddle", "paddle2onnx"), _PADDLE_WEIGHTS,
        ("paddle2onnx>=2",),
    ),
    # Its own venv: `pip install paddlepaddle==2.6.2 paddle2onnx==1.2.0 'numpy<2' onnx==1.17.0
    # onnxruntime platformdirs six`. paddle2onnx 1.2.0 writes hardswish at opset 11 as
    # Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6), as published PP-OCR ONNX files have it; 1.2.11
    # and 1.3.1 raise the opset to 14 for a HardSwish node; 1.1.0 aborts on paddle 2.6's swish.
    Family.PADDLE2ONNX_1X: FamilyInfo(
        "_paddle", ("paddlepaddle", "paddle2onnx"), ("paddle", "paddle2onnx"), _PADDLE_WEIGHTS,
        ("paddle2onnx<2",),
    ),
    Family.TF2ONNX: FamilyInfo(
        "_tf", ("tensorflow-cpu", "tf2onnx"), ("tensorflow", "tf2onnx"), RECIPE
    ),
    Family.ORT_QUANT: FamilyInfo(
        "_quant", ("onnxruntime",), ("onnxruntime",), "those of the source entry, quantized"
    ),
}


@dataclass(frozen=True)
class Entry:
    """One corpus model.

    `architecture` is the builder's key for the network (its module knows how to make it);
    `source` names where the architecture's definition comes from; `inputs` maps each
    graph input to its static shape; `requires` names packages (import name = distribution
    name) the architecture needs beyond its family's; `derived_from` names the entry a
    post-processing converter (quantization) reads; `opset` asks the converter for that
    opset instead of its default (only the paddle builder reads it).
    """

    name: str
    family: Family
    architecture: str
    source: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    requires: tuple[str, ...] = ()
    derived_from: str | None = None
    opset: int | None = None

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self.inputs)


_IMAGE = (("input", (1, 3, 224, 224)),)

_V4_SOURCE = (
    "written in benchmarks/corpus/_ppocr_v4.py after the published PaddleOCR definition; "
    "LearnableRepLayers reparameterized (rep()) before export, as PaddleOCR's export_model "
    "does for PPLCNetV3; opset 11 as PaddleOCR's deployment docs convert"
)
_V4_REC = "PP-OCRv4 mobile rec (PPLCNetV3 x0.95 + SVTR neck, dims 120, kernel 1x3 + CTC head), "
_V4_DET = "PP-OCRv4 mobile det (PPLCNetV3 x0.75 det + RSEFPN 96 shortcut + DBHead k=50), "


_SIZED = (
    "; neck upsampling asks for its static output size, not the published scale_factor, "
    "which paddle2onnx 2.1 under paddle 3.3 refuses (PaddlePaddle/Paddle#77757)"
)


def _ppocr_v4(suffix: str, family: Family, det: str, det_note: str) -> tuple[Entry, ...]:
    """The PP-OCRv4 recognizer and detector for one paddle2onnx family."""
    return (
        Entry(f"ppocrv4_rec{suffix}", family, "ppocrv4_rec", _V4_REC + _V4_SOURCE,
              (("x", (1, 3, 48, 320)),), opset=11),
        Entry(f"ppocrv4_det{suffix}", family, det, _V4_DET + _V4_SOURCE + det_note,
              (("x", (1, 3, 640, 640)),), opset=11),
    )


_PPOCR_V4 = (
    *_ppocr_v4("", Family.PADDLE2ONNX, "ppocrv4_det_sized", _SIZED),
    *_ppocr_v4("_p2o1", Family.PADDLE2ONNX_1X, "ppocrv4_det", ""),
)

ENTRIES: tuple[Entry, ...] = (
    Entry("tv_resnet18", Family.TORCHSCRIPT, "resnet18", "torchvision.models.resnet18", _IMAGE),
    Entry(
        "tv_mobilenet_v3_small",
        Family.TORCHSCRIPT,
        "mobilenet_v3_small",
        "torchvision.models.mobilenet_v3_small",
        _IMAGE,
    ),
    Entry(
        "tv_resnext50_32x4d",
        Family.TORCHSCRIPT,
        "resnext50_32x4d",
        "torchvision.models.resnext50_32x4d",
        _IMAGE,
    ),
    Entry(
        "tv_squeezenet1_1", Family.TORCHSCRIPT, "squeezenet1_1", "torchvision.models.squeezenet1_1", _IMAGE
    ),
    Entry(
        "tv_resnet18_dynamo",
        Family.TORCH_DYNAMO,
        "resnet18",
        "torchvision.models.resnet18",
        (("x", (1, 3, 224, 224)),),
    ),
    Entry(
        "pp_lcnet_x1_0",
        Family.PADDLE2ONNX,
        "PPLCNet_x1_0",
        "paddleclas ppcls.arch.backbone.legendary_models.pp_lcnet (PaddleClas package code)",
        (("x", (1, 3, 224, 224)),),
        requires=("paddleclas",),
    ),
    Entry(
        "ppocrv3_rec",
        Family.PADDLE2ONNX,
        "ppocrv3_rec",
        "PP-OCRv3 rec (MobileNetV1Enhance x0.5 + SVTR neck + CTC head), written in "
        "benchmarks/corpus/_ppocr.py after the published PaddleOCR definition",
        (("x", (1, 3, 48, 320)),),
    ),
    Entry(
        "pp_hgnetv2_b0",
        Family.PADDLE2ONNX,
        "PPHGNetV2_B0",
        "paddleclas ppcls.arch.backbone.legendary_models.pp_hgnet_v2 (PaddleClas package code, "
        "use_lab=True)",
        (("x", (1, 3, 224, 224)),),
        requires=("paddleclas",),
    ),
    Entry(
        "pp_mobilenet_v3_small",
        Family.PADDLE2ONNX,
        "MobileNetV3_small_x1_0",
        "paddleclas ppcls.arch.backbone.legendary_models.mobilenet_v3 (PaddleClas package code)",
        (("x", (1, 3, 224, 224)),),
        requires=("paddleclas",),
    ),
    *_PPOCR_V4,
    Entry(
        "keras_mobilenet_v2",
        Family.TF2ONNX,
        "MobileNetV2",
        "keras.applications.MobileNetV2",
        (("input", (1, 224, 224, 3)),),
    ),
    Entry(
        "keras_mobilenet_v3_small",
        Family.TF2ONNX,
        "MobileNetV3Small",
        "keras.applications.MobileNetV3Small",
        (("input", (1, 224, 224, 3)),),
    ),
    Entry(
        "keras_efficientnet_b0",
        Family.TF2ONNX,
        "EfficientNetB0",
        "keras.applications.EfficientNetB0",
        (("input", (1, 224, 224, 3)),),
    ),
    Entry(
        "tv_resnet18_qdynamic",
        Family.ORT_QUANT,
        "quantize_dynamic",
        "onnxruntime.quantization.quantize_dynamic (default settings) of tv_resnet18",
        _IMAGE,
        derived_from="tv_resnet18",
    ),
)

BY_NAME: dict[str, Entry] = {entry.name: entry for entry in ENTRIES}
