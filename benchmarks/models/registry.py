"""The benchmark models by name, with what each full-size model should hold."""

from __future__ import annotations

from benchmarks.models._types import ModelBuilder, Origin
from benchmarks.models.crnn import build_crnn
from benchmarks.models.inception import build_inception_v3
from benchmarks.models.mobilenetv3 import build_mobilenetv3
from benchmarks.models.nasnet import build_nasnet_a
from benchmarks.models.nasrnn import build_nasrnn
from benchmarks.models.pplcnet import build_pplcnet
from benchmarks.models.resnet import build_resnet50, build_resnext50
from benchmarks.models.squeezenet import build_squeezenet
from benchmarks.models.transformer import build_bert_base, build_transformer_exported
from benchmarks.models.yolo import build_yolov8

_BUILDERS = (
    ModelBuilder(
        "resnet50",
        "ResNet-50 (v1.5), 224x224, BN after every conv",
        Origin.ARCHITECTURE,
        build_resnet50,
        25_557_032,
        "torchvision resnet50",
    ),
    ModelBuilder(
        "resnext50_32x4d",
        "ResNeXt-50 32x4d, 224x224, 32-group 3x3 convs",
        Origin.ARCHITECTURE,
        build_resnext50,
        25_028_904,
        "torchvision resnext50_32x4d",
    ),
    ModelBuilder(
        "inception_v3",
        "Inception-v3, 299x299, no aux head",
        Origin.ARCHITECTURE,
        build_inception_v3,
        23_834_568,
        "torchvision inception_v3 (27,161,264) less its AuxLogits head (3,326,696)",
    ),
    ModelBuilder(
        "squeezenet1_1",
        "SqueezeNet 1.1, 224x224, Fire modules",
        Origin.ARCHITECTURE,
        build_squeezenet,
        1_235_496,
        "torchvision squeezenet1_1",
    ),
    ModelBuilder(
        "nasnet_a_mobile",
        "NASNet-A Mobile 4@1056, 224x224, normal/reduction cells",
        Origin.ARCHITECTURE,
        build_nasnet_a,
        5_289_978,
        "Keras NASNetMobile, trainable parameters",
    ),
    ModelBuilder(
        "nasrnn",
        "NASRNN cell (TF NASCell), hidden 512, unrolled 5 steps",
        Origin.ARCHITECTURE,
        build_nasrnn,
        4_194_304,
        "TF NASCell(512) on 512 inputs, no biases: 2 x 512 x 8 x 512",
    ),
    ModelBuilder(
        "bert_base",
        "BERT-base encoder, 12 layers, hidden 768, 12 heads, sequence 128",
        Origin.ARCHITECTURE,
        build_bert_base,
        85_054_464,
        "HF bert-base-uncased (109,482,240) less embeddings (23,837,184) and pooler (590,592)",
    ),
    ModelBuilder(
        "mobilenetv3_converted",
        "MobileNetV3-Large, folded BN as Mul/Add, decomposed hard-swish",
        Origin.CONVERTER,
        build_mobilenetv3,
        5_483_032,
        "torchvision mobilenet_v3_large",
    ),
    ModelBuilder(
        "transformer_exported",
        "DistilBERT encoder stack, decomposed LayerNorm/GELU, shape ops",
        Origin.CONVERTER,
        build_transformer_exported,
        42_527_232,
        "HF distilbert-base-uncased (66,362,880) less embeddings (23,835,648)",
    ),
    ModelBuilder(
        "crnn_converted",
        "CRNN OCR, 3x32x320, decomposed hard-swish, Mul/Add BN, BiLSTM head",
        Origin.CONVERTER,
        build_crnn,
        8_300_000,
        "Shi et al. 2016: 8.3M (two significant digits)",
    ),
    ModelBuilder(
        "yolov8n_exported",
        "YOLOv8n detector, 640x640, folded BN, x*sigmoid(x) SiLU, C2f Split",
        Origin.CONVERTER,
        build_yolov8,
        3_151_896,
        "Ultralytics yolov8n (3,157,200) less BN's second parameter per folded channel (5,296) and "
        "the fixed DFL conv (16), plus the two Resize scale vectors (8)",
    ),
)

_BUILDERS += (
    ModelBuilder(
        "pplcnet_converted",
        "PP-LCNet x1.0 (PaddleOCR's mobile backbone), paddle2onnx opset 11: BN nodes, decomposed hard-swish",
        Origin.CONVERTER,
        build_pplcnet,
        2_960_000,
        "PaddleClas model zoo PPLCNet_x1_0: 2.96M (three significant digits)",
    ),
)

MODELS: dict[str, ModelBuilder] = {builder.name: builder for builder in _BUILDERS}
