"""BatchNorm statistics that fit a corpus network's random weights: the recipe, without a framework.

Random conv weights do not preserve scale, and a fresh BatchNorm normalizes with its
initial statistics (mean 0, variance 1), so activations grow layer by layer and sigmoid
or softmax outputs saturate (PP-OCRv4 det: activations near 1e4, 99.7% of the output at
exactly 0 or 1). Before export, every builder therefore re-estimates the statistics:

1. train mode (BatchNorm normalizes with the batch's statistics, so each layer sees a
   normalized input while the statistics below it are still being estimated);
2. `BATCHES` forward passes, without gradients, of standard normal inputs (integer
   inputs: uniform in the entry's range) at the entry's input shape with the batch dim
   `BATCH_SIZE` (numpy, seed `SEED`: reproducible);
3. running statistics = the plain average of the `BATCHES` batch statistics: before
   step i the builder sets each BatchNorm's momentum to `keep_share(i)` = i / (i + 1) in
   the convention `running = momentum * running + (1 - momentum) * batch` (paddle,
   keras), which gives the cumulative average from any initial value; torch's
   `momentum=None` after `reset_running_stats()` is the same average;
4. eval mode (the exported graph reads the running statistics).

Dropout layers are active during these passes, as in training.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

SEED = 0
BATCHES = 4
BATCH_SIZE = 4

RECIPE = (
    f"random weights (seed {SEED}); BatchNorm statistics re-estimated in train mode as the "
    f"average over {BATCHES} batches of {BATCH_SIZE} standard normal inputs, then eval mode"
)

# PP-OCRv4 and PP-HGNetV2 LearnableAffineBlocks start as the identity (scale 1, bias 0),
# which would leave the folds of their scalars unexercised: both are drawn near it.
AFFINE_SCALE = (0.8, 1.2)
AFFINE_BIAS = (-0.1, 0.1)
AFFINE_RECIPE = (
    f"LearnableAffineBlock scalars drawn (seed {SEED}): scale ~ U{AFFINE_SCALE}, "
    f"bias ~ U{AFFINE_BIAS}"
)

# A parameter its initializer sets to one constant (zero biases, unit norm scales,
# layer-scale and head-bias vectors) is drawn near that value: converters write equal
# initializers once and an Identity per further use, a form no trained model exports.
CONSTANT_SCALE = AFFINE_SCALE  # a constant c != 0 becomes c * U(CONSTANT_SCALE)
CONSTANT_ZERO = AFFINE_BIAS  # a constant 0 becomes U(CONSTANT_ZERO)
CONSTANT_RECIPE = (
    f"parameters initialized to one constant c drawn first (seed {SEED}): "
    f"c * U{CONSTANT_SCALE}, or U{CONSTANT_ZERO} where c = 0"
)


def keep_share(step: int) -> float:
    """The momentum (share of the running value kept) that makes step `step` (from 0)
    of `running = m * running + (1 - m) * batch` a cumulative average."""
    return step / (step + 1)


def random_batches(
    inputs: tuple[tuple[str, tuple[int, ...]], ...],
    ranges: Mapping[str, tuple[int, int]] | None = None,
) -> Iterator[list[np.ndarray]]:
    """`BATCHES` lists of arrays, one per input, in input order, each at the input's shape
    with its first (batch) dim set to `BATCH_SIZE`: float32 standard normal, or int64
    uniform in [low, high) for an input `ranges` names (token ids, masks)."""
    rng = np.random.default_rng(SEED)
    ranges = ranges or {}
    for _ in range(BATCHES):
        yield [_draw(rng, (BATCH_SIZE, *shape[1:]), ranges.get(name)) for name, shape in inputs]


def _draw(rng: np.random.Generator, shape: tuple[int, ...],
          bounds: tuple[int, int] | None) -> np.ndarray:
    if bounds is None:
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(bounds[0], bounds[1], shape, dtype=np.int64)
