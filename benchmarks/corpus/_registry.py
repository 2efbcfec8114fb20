"""The corpus entries: which published architecture, which converter, which input shapes.

Every entry is built by a real converter at that converter's default opset from an
architecture with random weights (no pretrained download anywhere). The opset and IR
version actually written are recorded in the entry's manifest when it is built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Family(enum.Enum):
    """A converter family; its builder lives in the module named by `module`."""

    TORCHSCRIPT = "torch.onnx (TorchScript, dynamo=False)"
    TORCH_DYNAMO = "torch.onnx (dynamo=True)"
    PADDLE2ONNX = "paddle2onnx"
    TF2ONNX = "tf2onnx"
    ORT_QUANT = "onnxruntime.quantization"


@dataclass(frozen=True)
class FamilyInfo:
    """What a family needs installed (distribution names) and where its builder is."""

    module: str
    distributions: tuple[str, ...]
    importable: tuple[str, ...]


FAMILIES: dict[Family, FamilyInfo] = {
    Family.TORCHSCRIPT: FamilyInfo("_torch", ("torch", "torchvision"), ("torch", "torchvision")),
    Family.TORCH_DYNAMO: FamilyInfo(
        "_torch", ("torch", "torchvision", "onnxscript"), ("torch", "torchvision", "onnxscript")
    ),
    Family.PADDLE2ONNX: FamilyInfo("_paddle", ("paddlepaddle", "paddle2onnx"), ("paddle", "paddle2onnx")),
    Family.TF2ONNX: FamilyInfo("_tf", ("tensorflow-cpu", "tf2onnx"), ("tensorflow", "tf2onnx")),
    Family.ORT_QUANT: FamilyInfo("_quant", ("onnxruntime",), ("onnxruntime",)),
}


@dataclass(frozen=True)
class Entry:
    """One corpus model.

    `architecture` is the builder's key for the network (its module knows how to make it);
    `source` names where the architecture's definition comes from; `inputs` maps each
    graph input to its static shape; `requires` names packages (import name = distribution
    name) the architecture needs beyond its family's; `derived_from` names the entry a
    post-processing converter (quantization) reads.
    """

    name: str
    family: Family
    architecture: str
    source: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    requires: tuple[str, ...] = ()
    derived_from: str | None = None

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self.inputs)


_IMAGE = (("input", (1, 3, 224, 224)),)

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
        "keras_mobilenet_v2",
        Family.TF2ONNX,
        "MobileNetV2",
        "keras.applications.MobileNetV2",
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
