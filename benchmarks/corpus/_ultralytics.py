"""An ultralytics YOLO built from its model yaml, exported by ultralytics' own exporter.

`YOLO(<yaml>)` builds the network from the yaml shipped in the package, with torch's
random initialization (seeded; no `.pt` is read or downloaded). Its constant parameters
are drawn and its BatchNorm statistics re-estimated on random inputs (`_torch`), then `YOLO.export(format="onnx")`
does what a user's export does: it fuses Conv+BatchNorm, switches the Detect head to
export mode (decoded boxes and class scores, one `output0`) and C2f blocks to their
Split form, and calls torch.onnx (TorchScript) with the input named `images` at
ultralytics' default opset (`best_onnx_opset`: 18 under torch >= 2.4). `simplify=False`
keeps the converter's graph: `yolo export` would run onnxslim over it by default, and a
graph optimizer's output is not what the corpus measures.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from ultralytics import YOLO

from benchmarks.corpus import _calibrate, _torch
from benchmarks.corpus._registry import Entry


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build `entry.architecture` (a model yaml), calibrate it and export it to `path`."""
    del cache  # ultralytics entries read nothing from the cache
    ((name, (batch, _, height, width)),) = entry.inputs
    if name != "images":
        raise ValueError(f"ultralytics names the input 'images', the entry says {name!r}")
    torch.manual_seed(_calibrate.SEED)
    yolo = YOLO(entry.architecture)
    _torch.draw_constants(yolo.model)
    _torch.calibrate(yolo.model, entry.inputs)
    with contextlib.chdir(path.parent):  # the exporter writes beside the yaml's name
        written = Path(yolo.export(format="onnx", imgsz=[height, width], batch=batch,
                                   simplify=False, device="cpu")).resolve()
    written.replace(path)
