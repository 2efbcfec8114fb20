"""keras.applications architectures (weights=None) converted by tf2onnx at its default opset.

Before conversion the BatchNorm statistics are re-estimated on random inputs
(`_calibrate.py`: keras's BatchNormalization keeps `momentum` of the running value, set
per step for a cumulative average). `tf2onnx.convert.from_keras` is called with the
entry's static input signature and no `opset`, so tf2onnx writes its own default.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow starts logging

from pathlib import Path  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

from benchmarks.corpus import _calibrate  # noqa: E402
from benchmarks.corpus._registry import Entry  # noqa: E402

SEED = _calibrate.SEED


def calibrate(network: tf.keras.Model, inputs: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """Re-estimate every BatchNormalization's moving statistics on random inputs
    (`_calibrate`); each layer's momentum is restored afterwards."""
    norms = [layer for layer in network.layers
             if isinstance(layer, tf.keras.layers.BatchNormalization)]
    momenta = [norm.momentum for norm in norms]
    for step, batch in enumerate(_calibrate.random_batches(inputs)):
        for norm in norms:
            norm.momentum = _calibrate.keep_share(step)
        network(batch[0] if len(batch) == 1 else batch, training=True)
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum


def prepare(entry: Entry) -> tf.keras.Model:
    """`keras.applications.<architecture>(weights=None)`, seeded, with its BatchNorm
    statistics re-estimated."""
    tf.keras.utils.set_random_seed(SEED)
    network = getattr(tf.keras.applications, entry.architecture)(weights=None)
    calibrate(network, entry.inputs)
    return network


def export(entry: Entry, path: Path, cache: Path) -> None:
    """Build `keras.applications.<architecture>(weights=None)` and convert it to `path`."""
    del cache  # tf2onnx entries read nothing from the cache
    network = prepare(entry)
    signature = tuple(
        tf.TensorSpec(shape, tf.float32, name=name) for name, shape in entry.inputs
    )
    tf2onnx.convert.from_keras(network, input_signature=signature, output_path=str(path))
