"""BatchNorm statistics that fit a corpus network's random weights: the recipe, without a framework.

Random conv weights do not preserve scale, and a fresh BatchNorm normalizes with its
initial statistics (mean 0, variance 1), so activations grow layer by layer and sigmoid
or softmax outputs saturate (PP-OCRv4 det: activations near 1e4, 99.7% of the output at
exactly 0 or 1). Before export, every builder therefore re-estimates the statistics:

1. train mode (BatchNorm normalizes with the batch's statistics, so each layer sees a
   normalized input while the statistics below it are still being estimated);
2. `BATCHES` forward passes, without gradients, of standard normal inputs at the entry's
   input shape with the batch dim `BATCH_SIZE` (numpy, seed `SEED`: reproducible);
3. running statistics = the plain average of the `BATCHES` batch statistics: before
   step i the builder sets each BatchNorm's momentum to `keep_share(i)` = i / (i + 1) in
   the convention `running = momentum * running + (1 - momentum) * batch` (paddle,
   keras), which gives the cumulative average from any initial value; torch's
   `momentum=None` after `reset_running_stats()` is the same average;
4. eval mode (the exported graph reads the running statistics).

Dropout layers are active during these passes, as in training.
"""

from __future__ import annotations

from collections.abc import Iterator

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


def keep_share(step: int) -> float:
    """The momentum (share of the running value kept) that makes step `step` (from 0)
    of `running = m * running + (1 - m) * batch` a cumulative average."""
    return step / (step + 1)


def random_batches(inputs: tuple[tuple[str, tuple[int, ...]], ...]) -> Iterator[list[np.ndarray]]:
    """`BATCHES` lists of float32 standard normal arrays, one per input, in input order,
    each at the input's shape with its first (batch) dim set to `BATCH_SIZE`."""
    rng = np.random.default_rng(SEED)
    for _ in range(BATCHES):
        yield [
            rng.standard_normal((BATCH_SIZE, *shape[1:])).astype(np.float32)
            for _, shape in inputs
        ]
