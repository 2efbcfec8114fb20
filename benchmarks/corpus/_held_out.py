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

def _ultralytics(name: str, yaml: str, outputs: tuple[str, ...] = ("output0",)) -> Entry:
    """An ultralytics model from its shipped yaml, exported like `_registry._yolo`'s."""
    return Entry(
        name, Family.ULTRALYTICS, yaml,
        f"ultralytics YOLO('{yaml}') (the model yaml; no .pt), exported by YOLO.export("
        "format='onnx', simplify=False): Conv+BN fused, head in export mode",
        (("images", (1, 3, 640, 640)),), outputs=outputs,
    )


UNSEEN_S48: tuple[Entry, ...] = (
    # timm's ConvNeXt with dense MLPs (conv_mlp=False from tiny up): the layer scale after the
    # permute back that stop 48's folds were written for, on torchvision's ConvNeXt-T
    _timm("timm_convnext_tiny", "convnext_tiny"),
)
"""Fresh in stop 48."""


UNSEEN_S47: tuple[Entry, ...] = (
    # families no rule was written against, first run in stop 47 (fresh_unseen_s47.md); its
    # EdgeNeXt-XXS moved to the corpus once the layer-scale fold was written against it, and
    # another EdgeNeXt size is held out in its place
    _timm("timm_edgenext_x_small", "edgenext_x_small"),
    _timm("timm_deit_tiny", "deit_tiny_patch16_224"),
    _timm("timm_efficientvit_b0", "efficientvit_b0"),
    _timm("timm_ghostnetv2_100", "ghostnetv2_100"),
    _timm("timm_mobilenetv4_conv_small", "mobilenetv4_conv_small"),
    _timm("timm_mobilenetv4_hybrid_medium", "mobilenetv4_hybrid_medium"),
    _timm("timm_mobilevit_xs", "mobilevit_xs"),
    _timm("timm_tinynet_a", "tinynet_a"),
    _tv("tv_resnet50", "resnet50"),
    _tv("tv_shufflenet_v2_x0_5", "shufflenet_v2_x0_5"),
)
"""Fresh in stop 47 (benchmarks/results/fresh_unseen_s47.md)."""


UNSEEN_S46: tuple[Entry, ...] = (
    # other sizes of the reparameterizable nets that stop 46's depthwise identity merges were
    # written against (in training form, as timm makes them); RepViT-M0.9, first measured
    # here, moved to the corpus once its RepVggDw merge was written
    _timm("timm_repvit_m1_1", "repvit_m1_1"),
    _timm("timm_fastvit_t12", "fastvit_t12"),
    _timm("timm_fastvit_sa12", "fastvit_sa12"),
    _timm("timm_repghostnet_100", "repghostnet_100"),
    _timm("timm_mobileone_s1", "mobileone_s1"),
)
"""Fresh in stop 46 (benchmarks/results/held_out_reparam_s46.md)."""


UNSEEN_S44: tuple[Entry, ...] = (
    # families no rule was written against, first run in stop 44 (fresh_unseen_avx2_s44.md);
    # its MobileOne-S0, FastViT-T8 and RepGhostNet-050 moved to the corpus in stop 46
    _timm("timm_mixnet_s", "mixnet_s"),
    _timm("timm_rexnet_100", "rexnet_100"),
    _timm("timm_semnasnet_100", "semnasnet_100"),
    _timm("timm_tf_efficientnet_b0", "tf_efficientnet_b0"),
    _timm("timm_efficientformer_l1", "efficientformer_l1"),
    _timm("timm_levit_128s", "levit_128s"),
    _timm("timm_resnet50d", "resnet50d"),
    _timm("timm_regnetx_002", "regnetx_002"),
    _timm("timm_dla34", "dla34"),
    _timm("timm_hrnet_w18_small", "hrnet_w18_small"),
    _tv("tv_googlenet", "googlenet"),
    _tv("tv_densenet121", "densenet121"),
    _tv("tv_mobilenet_v2_dynamo", "mobilenet_v2", Family.TORCH_DYNAMO, _DYNAMO_IMAGE),
    _keras("keras_densenet121", "DenseNet121"),
    Entry("keras_xception", Family.TF2ONNX, "Xception", "keras.applications.Xception",
          (("input", (1, 299, 299, 3)),)),  # its default input size
    Entry("keras_efficientnet_v2_b1", Family.TF2ONNX, "EfficientNetV2B1", "keras.applications.EfficientNetV2B1",
          (("input", (1, 240, 240, 3)),)),  # its default input size
    _ultralytics("yolov5nu", "yolov5nu.yaml"),
    _ultralytics("yolov8n_pose", "yolov8n-pose.yaml"),
    _ultralytics("yolov8n_seg", "yolov8n-seg.yaml", ("output0", "output1")),
)
"""Stop 44's fresh exports, as entries (that stop built them by hand-run scripts at 224 or
320; these build at the builders' sizes). Its Hugging Face models (DistilBERT, GPT-2,
DeBERTa-v2, a Whisper encoder) and RT-DETR need builders the corpus does not have yet."""


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
    *UNSEEN_S44,
    *UNSEEN_S46,
    *UNSEEN_S47,
    *UNSEEN_S48,
    _qdq("tv_mobilenet_v3_large"),
    _qdq("tv_efficientnet_b0"),
    _qdynamic("tv_mnasnet0_5"),
)

HELD_OUT_BY_NAME: dict[str, Entry] = {entry.name: entry for entry in HELD_OUT}

PADDLECLAS_BACKBONES = tuple(entry.architecture for entry in HELD_OUT if entry.family is Family.PADDLE2ONNX)
"""PaddleClas backbones the held-out entries name (built by `_paddle` by name, defaults)."""
