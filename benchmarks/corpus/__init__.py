"""A corpus of ONNX models made by the real converters, built on demand into a cache.

    python -m benchmarks.corpus build [--only NAME ...] [--cache DIR]
    python -m benchmarks.corpus list [--cache DIR]

Published architectures with random weights, their BatchNorm statistics re-estimated on
random inputs so that outputs are not degenerate (`_calibrate.py`), are converted by
paddle2onnx, tf2onnx, torch.onnx (both exporters; networks from torchvision, timm and
transformers), ultralytics' exporter and onnxruntime quantization (dynamic and QDQ), each
at its default opset (`_registry.py` lists the entries). Nothing is downloaded and nothing is committed: the
cache is `$TASO_CORPUS_DIR` or the user cache folder (`_cache.default_cache_dir`).
An entry whose converter is missing is skipped with a one-line reason.

Install the converters in a virtual environment of their own (paddle2onnx caps onnx at
1.17, which the project's dev environment should not be pinned to):

    python -m venv .corpus-venv && . .corpus-venv/bin/activate
    pip install -e '.[corpus]'
    pip install --no-deps 'paddleclas>=2.6'   # PP-LCNet; its own pins are unusable
"""

from benchmarks.corpus._cache import Manifest, cached_entries, default_cache_dir
from benchmarks.corpus._registry import BY_NAME, ENTRIES, Entry, Family

__all__ = ["BY_NAME", "ENTRIES", "Entry", "Family", "Manifest", "cached_entries", "default_cache_dir"]
