"""timm architectures for the torch builder: `timm.create_model(name, pretrained=False)`.

No weights are downloaded: `pretrained=False` leaves timm's own random initialization.
"""

from __future__ import annotations

import timm
import torch

from benchmarks.corpus._registry import Entry


def network(entry: Entry) -> torch.nn.Module:
    return timm.create_model(entry.architecture, pretrained=False)
