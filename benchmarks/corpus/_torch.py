"""torch networks (random weights) exported by torch.onnx, both exporters.

The network comes from the entry's zoo (`Zoo`): torchvision here, timm and transformers
from `_timm` and `_transformers`, loaded only for their own entries so that each library
is needed only where its entries are built. Before export the parameters initialized to
one constant are drawn near it and the BatchNorm statistics are re-estimated on random
inputs (`_calibrate.py`; torch's `momentum=None` is the cumulative average). Neither exporter is given an opset: each writes its own default. The
TorchScript exporter (`dynamo=False`) writes one file with the entry's input and output
names; the dynamo exporter writes its default layout (weights in `model.onnx.data` beside
the model) and names the inputs after `forward()`'s parameters.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Mapping
from pathlib import Path

import torch
import torchvision

from benchmarks.corpus import _calibrate
from benchmarks.corpus._registry import Entry, Family, Zoo

SEED = _calibrate.SEED
_BATCH_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


class Exporter(enum.Enum):
    TORCHSCRIPT = "torchscript"
    DYNAMO = "dynamo"


_EXPORTERS = {Family.TORCHSCRIPT: Exporter.TORCHSCRIPT, Family.TORCH_DYNAMO: Exporter.DYNAMO}


@torch.no_grad()
def draw_constants(network: torch.nn.Module) -> None:
    """Draw every parameter of more than one element whose elements are all equal near
    its value (`_calibrate.CONSTANT_RECIPE`), from the torch generator (seeded)."""
    for parameter in network.parameters():
        if parameter.numel() < 2 or not bool((parameter == parameter.flatten()[0]).all()):
            continue
        value = float(parameter.flatten()[0])
        if value == 0.0:
            parameter.uniform_(*_calibrate.CONSTANT_ZERO)
        else:
            parameter.uniform_(*_calibrate.CONSTANT_SCALE).mul_(value)


@torch.no_grad()
def calibrate(
    network: torch.nn.Module,
    inputs: tuple[tuple[str, tuple[int, ...]], ...],
    ranges: Mapping[str, tuple[int, int]] | None = None,
) -> None:
    """Re-estimate every BatchNorm's running statistics on random inputs (`_calibrate`),
    then leave the network in eval mode."""
    for module in network.modules():
        if isinstance(module, _BATCH_NORMS):
            module.reset_running_stats()
            module.momentum = None  # cumulative average of the batch statistics
    network.train()
    for batch in _calibrate.random_batches(inputs, ranges):
        network(*[torch.from_numpy(array) for array in batch])
    network.eval()


def network(entry: Entry) -> torch.nn.Module:
    """The entry's architecture with fresh random weights, from its zoo."""
    if entry.zoo is None:
        raise ValueError(f"{entry.name} names no zoo to take its torch network from")
    if entry.zoo is Zoo.TORCHVISION:
        return getattr(torchvision.models, entry.architecture)(weights=None)
    return importlib.import_module(f"benchmarks.corpus._{entry.zoo.value}").network(entry)


def prepare(entry: Entry) -> torch.nn.Module:
    """The entry's network as it is exported: seeded random weights, constant parameters
    drawn, BatchNorm statistics re-estimated, in eval mode."""
    torch.manual_seed(SEED)
    built = network(entry)
    draw_constants(built)
    calibrate(built, entry.inputs, entry.input_ranges)
    return built


def example(entry: Entry) -> tuple[torch.Tensor, ...]:
    """One input per graph input at its shape: standard normal, or int64 in its range."""
    ranges = entry.input_ranges
    return tuple(
        torch.randint(*ranges[name], shape) if name in ranges else torch.randn(*shape)
        for name, shape in entry.inputs
    )


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Write `entry` to `path` with the exporter its family names."""
    del cache  # torch entries read nothing from the cache
    built = prepare(entry)
    inputs = example(entry)
    with torch.no_grad():
        if _EXPORTERS[entry.family] is Exporter.DYNAMO:
            torch.onnx.export(built, inputs, str(path), dynamo=True)
        else:
            torch.onnx.export(
                built,
                inputs,
                str(path),
                dynamo=False,
                input_names=[name for name, _ in entry.inputs],
                output_names=list(entry.outputs),
            )
