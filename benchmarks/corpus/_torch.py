"""torchvision architectures (random weights) exported by torch.onnx, both exporters.

Before export the BatchNorm statistics are re-estimated on random inputs
(`_calibrate.py`; torch's `momentum=None` is the cumulative average).
Neither exporter is given an opset: each writes its own default. The TorchScript
exporter (`dynamo=False`) writes one file; the dynamo exporter writes its default layout
(weights in `model.onnx.data` beside the model).
"""

from __future__ import annotations

import enum
from pathlib import Path

import torch
import torchvision

from benchmarks.corpus import _calibrate
from benchmarks.corpus._registry import Entry, Family

SEED = _calibrate.SEED
_BATCH_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


class Exporter(enum.Enum):
    TORCHSCRIPT = "torchscript"
    DYNAMO = "dynamo"


_EXPORTERS = {Family.TORCHSCRIPT: Exporter.TORCHSCRIPT, Family.TORCH_DYNAMO: Exporter.DYNAMO}


@torch.no_grad()
def calibrate(network: torch.nn.Module, inputs: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """Re-estimate every BatchNorm's running statistics on random inputs (`_calibrate`),
    then leave the network in eval mode."""
    for module in network.modules():
        if isinstance(module, _BATCH_NORMS):
            module.reset_running_stats()
            module.momentum = None  # cumulative average of the batch statistics
    network.train()
    for batch in _calibrate.random_batches(inputs):
        network(*[torch.from_numpy(array) for array in batch])
    network.eval()


def prepare(entry: Entry) -> torch.nn.Module:
    """The entry's network as it is exported: seeded random weights, BatchNorm statistics
    re-estimated, in eval mode."""
    torch.manual_seed(SEED)
    network = getattr(torchvision.models, entry.architecture)(weights=None)
    calibrate(network, entry.inputs)
    return network


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Write `entry` to `path` with the exporter its family names."""
    del cache  # torch entries read nothing from the cache
    network = prepare(entry)
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
