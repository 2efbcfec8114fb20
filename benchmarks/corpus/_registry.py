"""The corpus entries: which published architecture, which converter, which input shapes.

Every entry is built by a real converter from an architecture with random weights (no
pretrained download anywhere; BatchNorm statistics re-estimated on random inputs and,
for torch, constant-initialized parameters drawn, as `FamilyInfo.weights` records), at that converter's default opset unless the entry names
one (the PP-OCRv4 entries ask for opset 11, as PaddleOCR's deployment docs convert). The
opset and IR version actually written are recorded in the entry's manifest when it is built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from benchmarks.corpus._calibrate import AFFINE_RECIPE, CONSTANT_RECIPE, RECIPE


class Family(enum.Enum):
    """A converter family; its builder lives in the module named by `module`."""

    TORCHSCRIPT = "torch.onnx (TorchScript, dynamo=False)"
    TORCH_DYNAMO = "torch.onnx (dynamo=True)"
    PADDLE2ONNX = "paddle2onnx"
    PADDLE2ONNX_1X = "paddle2onnx 1.x (paddlepaddle 2.6)"
    ULTRALYTICS = "ultralytics export (torch.onnx TorchScript)"
    TF2ONNX = "tf2onnx"
    ORT_QUANT = "onnxruntime.quantization"


class Zoo(enum.Enum):
    """The library a torch entry's architecture comes from (its distribution name); the
    torch builder makes the network with `benchmarks.corpus._<value>.network`, except
    torchvision, which it calls itself."""

    TORCHVISION = "torchvision"
    TIMM = "timm"
    TRANSFORMERS = "transformers"


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
_TORCH_WEIGHTS = f"{RECIPE}; {CONSTANT_RECIPE}"


FAMILIES: dict[Family, FamilyInfo] = {
    Family.TORCHSCRIPT: FamilyInfo(
        "_torch", ("torch", "torchvision"), ("torch", "torchvision"), _TORCH_WEIGHTS
    ),
    Family.TORCH_DYNAMO: FamilyInfo(
        "_torch", ("torch", "torchvision", "onnxscript"), ("torch", "torchvision", "onnxscript"),
        _TORCH_WEIGHTS,
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
    # ultralytics' own exporter (`YOLO.export(format="onnx")`): it fuses Conv+BN, puts the
    # Detect head in export mode and calls torch.onnx (TorchScript) at its default opset.
    Family.ULTRALYTICS: FamilyInfo(
        "_ultralytics", ("torch", "ultralytics"), ("torch", "ultralytics"), _TORCH_WEIGHTS
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
    opset instead of its default (only the paddle builder reads it); `ranges` gives each
    integer input (token ids, masks) the range [low, high) its int64 values are drawn from,
    in calibration and in `check` (every other input is float32, standard normal); `zoo`
    names the library a torch entry's network comes from; `outputs` names the graph
    outputs where the exporter takes names (TorchScript; dynamo keeps its own).
    """

    name: str
    family: Family
    architecture: str
    source: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    requires: tuple[str, ...] = ()
    derived_from: str | None = None
    opset: int | None = None
    ranges: tuple[tuple[str, tuple[int, int]], ...] = ()
    zoo: Zoo | None = None
    outputs: tuple[str, ...] = ("output",)

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self.inputs)

    @property
    def input_ranges(self) -> dict[str, tuple[int, int]]:
        return dict(self.ranges)


_IMAGE = (("input", (1, 3, 224, 224)),)
_DYNAMO_IMAGE = (("x", (1, 3, 224, 224)),)  # the dynamo exporter names inputs after forward()'s


def _tv(name: str, architecture: str, family: Family = Family.TORCHSCRIPT,
        inputs: tuple[tuple[str, tuple[int, ...]], ...] = _IMAGE) -> Entry:
    """A torchvision classifier, `torchvision.models.<architecture>(weights=None)`."""
    return Entry(name, family, architecture, f"torchvision.models.{architecture}", inputs,
                 zoo=Zoo.TORCHVISION)


def _timm(name: str, architecture: str) -> Entry:
    return Entry(name, Family.TORCHSCRIPT, architecture,
                 f"timm.create_model('{architecture}', pretrained=False)", _IMAGE,
                 requires=("timm",), zoo=Zoo.TIMM)


def _keras(name: str, architecture: str) -> Entry:
    """A Keras application, `keras.applications.<architecture>(weights=None)`, via tf2onnx."""
    return Entry(name, Family.TF2ONNX, architecture, f"keras.applications.{architecture}",
                 (("input", (1, 224, 224, 3)),))


def _paddleclas(name: str, architecture: str, source: str, shape: tuple[int, ...] = (1, 3, 224, 224)) -> Entry:
    """A PaddleClas backbone (`benchmarks/corpus/_paddle.py`'s `architecture`), via paddle2onnx."""
    return Entry(name, Family.PADDLE2ONNX, architecture, source, (("x", shape),), requires=("paddleclas",))


def _yolo(name: str) -> Entry:
    """An ultralytics YOLO from its shipped model yaml `<name>.yaml`, exported by ultralytics."""
    return Entry(
        name, Family.ULTRALYTICS, f"{name}.yaml",
        f"ultralytics YOLO('{name}.yaml') (the model yaml; no .pt), exported by YOLO.export("
        "format='onnx', simplify=False): Conv+BN fused, Detect head in export mode",
        (("images", (1, 3, 640, 640)),), outputs=("output0",),
    )


BERT_VOCAB = 30522  # BertConfig's default vocab_size; the builder sets it from the id range
_TOKENS = (("input_ids", (1, 128)), ("attention_mask", (1, 128)))
_TOKEN_RANGES = (("input_ids", (0, BERT_VOCAB)), ("attention_mask", (1, 2)))  # no padding
_HIDDEN = ("last_hidden_state", "pooler_output")


def _bert(name: str, family: Family) -> Entry:
    return Entry(
        name, family, "bert",
        "transformers BertModel(BertConfig(hidden_size=256, num_hidden_layers=4, "
        "num_attention_heads=4, intermediate_size=1024)), called with keyword inputs",
        _TOKENS, requires=("transformers",), ranges=_TOKEN_RANGES, zoo=Zoo.TRANSFORMERS,
        outputs=_HIDDEN,
    )


def _vit(name: str, family: Family) -> Entry:
    return Entry(
        name, family, "vit",
        "transformers ViTModel(ViTConfig(hidden_size=192, num_hidden_layers=6, "
        "num_attention_heads=3, intermediate_size=768, image_size=224, patch_size=16))",
        (("pixel_values", (1, 3, 224, 224)),), requires=("transformers",),
        zoo=Zoo.TRANSFORMERS, outputs=_HIDDEN,
    )


_HUGGING_FACE = (
    _bert("hf_bert_small", Family.TORCHSCRIPT),
    _vit("hf_vit_tiny", Family.TORCHSCRIPT),
    _bert("hf_bert_small_dynamo", Family.TORCH_DYNAMO),
)


def _qdynamic(source: str) -> Entry:
    """`source` quantized by quantize_dynamic (QOperator integer ops), default settings."""
    return Entry(
        f"{source}_qdynamic", Family.ORT_QUANT, "quantize_dynamic",
        f"onnxruntime.quantization.quantize_dynamic (default settings) of {source}",
        _IMAGE, derived_from=source,
    )


def _qdq(source: str) -> Entry:
    """`source` quantized to QDQ by quantize_static, calibrated on random inputs (`_quant`)."""
    return Entry(
        f"{source}_qdq", Family.ORT_QUANT, "quantize_static",
        "onnxruntime.quantization.quantize_static (QuantFormat.QDQ, default settings "
        f"otherwise; calibrated on random inputs) of {source}",
        _IMAGE, derived_from=source,
    )


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
    _tv("tv_resnet18", "resnet18"),
    _tv("tv_mobilenet_v3_small", "mobilenet_v3_small"),
    _tv("tv_resnext50_32x4d", "resnext50_32x4d"),
    _tv("tv_squeezenet1_1", "squeezenet1_1"),
    _tv("tv_regnet_y_400mf", "regnet_y_400mf"),
    _tv("tv_regnet_x_400mf", "regnet_x_400mf"),
    _tv("tv_resnet18_dynamo", "resnet18", Family.TORCH_DYNAMO, _DYNAMO_IMAGE),
    _tv("tv_mobilenet_v3_small_dynamo", "mobilenet_v3_small", Family.TORCH_DYNAMO, _DYNAMO_IMAGE),
    _timm("timm_convnext_atto", "convnext_atto"),
    _timm("timm_efficientnet_b0", "efficientnet_b0"),
    _timm("timm_repvgg_a0", "repvgg_a0"),  # as trained: 3x3 and 1x1 branches, no reparameterize()
    # held out until stop 46, whose depthwise identity merges were written looking at them
    _timm("timm_mobileone_s0", "mobileone_s0"),
    _timm("timm_fastvit_t8", "fastvit_t8"),
    _timm("timm_repghostnet_050", "repghostnet_050"),
    _timm("timm_repvit_m0_9", "repvit_m0_9"),  # its RepVggDw merge was written looking at it
    _timm("timm_edgenext_xx_small", "edgenext_xx_small"),  # its layer-scale fold was written looking at it (stop 47)
    _tv("tv_convnext_tiny", "convnext_tiny"),  # its layer scale after the permute back, written looking at it (stop 48)
    _yolo("yolov8n"),
    _yolo("yolo11n"),
    *_HUGGING_FACE,
    _paddleclas("pp_lcnet_x1_0", "PPLCNet_x1_0",
                "paddleclas ppcls.arch.backbone.legendary_models.pp_lcnet (PaddleClas package code)"),
    Entry(
        "ppocrv3_rec",
        Family.PADDLE2ONNX,
        "ppocrv3_rec",
        "PP-OCRv3 rec (MobileNetV1Enhance x0.5 + SVTR neck + CTC head), written in "
        "benchmarks/corpus/_ppocr.py after the published PaddleOCR definition",
        (("x", (1, 3, 48, 320)),),
    ),
    _paddleclas("pp_hgnetv2_b0", "PPHGNetV2_B0",
                "paddleclas ppcls.arch.backbone.legendary_models.pp_hgnet_v2 (PaddleClas package code, "
                "use_lab=True)"),
    _paddleclas("pp_mobilenet_v3_small", "MobileNetV3_small_x1_0",
                "paddleclas ppcls.arch.backbone.legendary_models.mobilenet_v3 (PaddleClas package code)"),
    *_PPOCR_V4,
    _paddleclas("ppocr_textline_ori", "PPLCNet_x0_25_textline_ori",
                "PP-OCR text line orientation classifier (PP-LCNet_x0_25_textline_ori): paddleclas "
                "PPLCNet_x0_25 with class_num=2 (PaddleClas package code), at its 80x160 input", (1, 3, 80, 160)),
    _paddleclas("ppocr_cls_mv3", "MobileNetV3_small_x0_35_cls",
                "PP-OCR direction classifier as ch_ppocr_mobile_v2.0_cls configures it (MobileNetV3 "
                "small x0.35, two classes): paddleclas MobileNetV3_small_x0_35 with class_num=2, at 48x192",
                (1, 3, 48, 192)),
    _keras("keras_mobilenet_v2", "MobileNetV2"),
    _keras("keras_mobilenet_v3_small", "MobileNetV3Small"),
    _keras("keras_efficientnet_b0", "EfficientNetB0"),
    _keras("keras_nasnet_mobile", "NASNetMobile"),
    _keras("keras_efficientnet_v2_b0", "EfficientNetV2B0"),
    _qdynamic("tv_resnet18"),
    _qdq("tv_resnet18"),
    _qdq("tv_mobilenet_v3_small"),
)

BY_NAME: dict[str, Entry] = {entry.name: entry for entry in ENTRIES}
