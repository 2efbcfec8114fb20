"""keras.applications architectures (weights=None) converted by tf2onnx at its default opset.

`tf2onnx.convert.from_keras` is called with the entry's static input signature and no
`opset`, so tf2onnx writes its own default.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow starts logging

from pathlib import Path  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

from benchmarks.corpus._registry import Entry  # noqa: E402

SEED = 0


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build `keras.applications.<architecture>(weights=None)` and convert it to `path`."""
    del cache  # tf2onnx entries read nothing from the cache
    tf.keras.utils.set_random_seed(SEED)
    network = getattr(tf.keras.applications, entry.architecture)(weights=None)
    signature = tuple(
        tf.TensorSpec(shape, tf.float32, name=name) for name, shape in entry.inputs
    )
    tf2onnx.convert.from_keras(network, input_signature=signature, output_path=str(path))
