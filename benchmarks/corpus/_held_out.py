"""Held-out exports: real-converter models kept out of the corpus, to see that rules carry.

Rules and normal forms are written while looking at the corpus; a rule that fits one
file's exact form would show there and nowhere else. These entries are neighbours of the
corpus families (other sizes, other zoos, the other torch exporter) that no rule was
written against. After a change, build them and run the benchmark on them:

    python -m benchmarks.corpus build --held-out [--cache DIR]
    python -m benchmarks.run --corpus DIR

They are built like corpus entries (same builders, random weights, default opsets) into
their own cache folder (`held-out` under the corpus cache unless `--cache` says), so that a
corpus run never includes them. Once a rule is written for one of them it is no longer
held out: move it to the corpus (`_registry.ENTRIES`) and add a fresh one here.

First measured in stop 34 (benchmarks/results/held_out.md): timm GhostNet-100 had 32
Slices of every channel after its ghost modules, which no rule or normal form took (the
canonical stage bypasses them since). Stop 35 added five that no family of the set had:
a MiniLM-shaped BERT, ViT through the dynamo exporter, two QDQ models (torchvision
MobileNetV3-Large and EfficientNet-B0) and a dynamically quantized MNASNet
(benchmarks/results/held_out_additions.md).
"""

from __future__ import annotations

from benchmarks.corpus._registry import (
    _DYNAMO_IMAGE,
    _HIDDEN,
    _TOKEN_RANGES,
    _TOKENS,
    Entry,
    Family,
    Zoo,
    _keras,
    _paddleclas,
    _qdq,
    _qdynamic,
    _timm,
    _tv,
    _vit,
    _yolo,
)

_PADDLECLAS = "paddleclas ppcls.arch.backbone (PaddleClas package code)"

HELD_OUT: tuple[Entry, ...] = (
    _timm("timm_ghostnet_100", "ghostnet_100"),
    _timm("timm_mobilenetv3_large_100", "mobilenetv3_large_100"),
    _timm("timm_lcnet_050", "lcnet_050"),
    _timm("timm_efficientnet_lite0", "efficientnet_lite0"),
    _timm("timm_efficientnet_b1", "efficientnet_b1"),
    _timm("timm_convnext_femto", "convnext_femto"),
    _timm("timm_mobilevitv2_050", "mobilevitv2_050"),
    _tv("tv_efficientnet_b0", "efficientnet_b0"),
    _tv("tv_shufflenet_v2_x1_0", "shufflenet_v2_x1_0"),
    _tv("tv_mobilenet_v3_large", "mobilenet_v3_large"),
    _tv("tv_mnasnet0_5", "mnasnet0_5"),
    _tv("tv_resnext50_32x4d_dynamo", "resnext50_32x4d", Family.TORCH_DYNAMO, _DYNAMO_IMAGE),
    _tv("tv_regnet_y_400mf_dynamo", "regnet_y_400mf", Family.TORCH_DYNAMO, _DYNAMO_IMAGE),
    _yolo("yolov10n"),
    _paddleclas("pp_mobilenetv3_large_x1_0", "MobileNetV3_large_x1_0", _PADDLECLAS),
    _paddleclas("pp_pplcnet_x0_5", "PPLCNet_x0_5", _PADDLECLAS),
    _paddleclas("pp_esnet_x0_5", "ESNet_x0_5", _PADDLECLAS),
    _paddleclas("pp_pphgnetv2_b1", "PPHGNetV2_B1", _PADDLECLAS),
    _keras("keras_mobilenet_v3_large", "MobileNetV3Large"),
    _keras("keras_resnet50_v2", "ResNet50V2"),
    Entry("keras_efficientnet_b1", Family.TF2ONNX, "EfficientNetB1", "keras.applications.EfficientNetB1",
          (("input", (1, 240, 240, 3)),)),  # its own input size; Keras refuses 224
    Entry("hf_minilm_l6", Family.TORCHSCRIPT, "minilm",
          "transformers BertModel(BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, "
          "intermediate_size=1536)), MiniLM-L6's shape, called with keyword inputs",
          _TOKENS, requires=("transformers",), ranges=_TOKEN_RANGES, zoo=Zoo.TRANSFORMERS, outputs=_HIDDEN),
    _vit("hf_vit_tiny_dynamo", Family.TORCH_DYNAMO),
    _qdq("tv_mobilenet_v3_large"),
    _qdq("tv_efficientnet_b0"),
    _qdynamic("tv_mnasnet0_5"),
)

HELD_OUT_BY_NAME: dict[str, Entry] = {entry.name: entry for entry in HELD_OUT}

PADDLECLAS_BACKBONES = tuple(entry.architecture for entry in HELD_OUT if entry.family is Family.PADDLE2ONNX)
"""PaddleClas backbones the held-out entries name (built by `_paddle` by name, defaults)."""
