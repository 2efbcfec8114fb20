"""torchvision architectures (random weights) exported by torch.onnx, both exporters.

Neither exporter is given an opset: each writes its own default. The TorchScript
exporter (`dynamo=False`) writes one file; the dynamo exporter writes its default layout
(weights in `model.onnx.data` beside the model).
"""

from __future__ import annotations

import enum
from pathlib import Path

import torch
import torchvision

from benchmarks.corpus._registry import Entry, Family

SEED = 0


class Exporter(enum.Enum):
    TORCHSCRIPT = "torchscript"
    DYNAMO = "dynamo"


_EXPORTERS = {Family.TORCHSCRIPT: Exporter.TORCHSCRIPT, Family.TORCH_DYNAMO: Exporter.DYNAMO}


def _network(architecture: str) -> torch.nn.Module:
    torch.manual_seed(SEED)
    factory = getattr(torchvision.models, architecture)
    return factory(weights=None).eval()


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Write `entry` to `path` with the exporter its family names."""
    del cache  # torch entries read nothing from the cache
    network = _network(entry.architecture)
    ((input_name, shape),) = entry.inputs
    example = (torch.randn(*shape),)
    with torch.no_grad():
        if _EXPORTERS[entry.family] is Exporter.DYNAMO:
            torch.onnx.export(network, example, str(path), dynamo=True)
        else:
            torch.onnx.export(
                network,
                example,
                str(path),
                dynamo=False,
                input_names=[input_name],
                output_names=["output"],
            )
