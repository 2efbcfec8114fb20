"""Corpus builders re-estimate BatchNorm statistics on random inputs before export.

The recipe (`benchmarks/corpus/_calibrate.py`) is checked here without a framework; each
framework's `calibrate` is checked where that framework is installed (the corpus venvs,
not the dev environment: there these tests skip): the running mean a BatchNorm ends
with is the mean of what it saw over all calibration batches, and a layer whose random
weights blow activations up is normalized afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.corpus import BY_NAME, _calibrate, _verify

NCHW = (("x", (1, 3, 8, 8)),)
NHWC = (("input", (1, 8, 8, 3)),)


def _seen_mean(inputs, axes: tuple[int, ...]) -> np.ndarray:
    """The per-channel mean over every calibration batch."""
    return np.mean([batch[0].mean(axis=axes) for batch in _calibrate.random_batches(inputs)], 0)


def test_keep_share_makes_the_running_value_a_cumulative_average() -> None:
    values = np.random.default_rng(1).standard_normal(7)
    running = 123.0  # any initial value is forgotten at step 0
    for step, value in enumerate(values):
        share = _calibrate.keep_share(step)
        running = share * running + (1 - share) * value
    assert running == pytest.approx(values.mean())


def test_random_batches_are_reproducible_and_batched() -> None:
    first, second = list(_calibrate.random_batches(NCHW)), list(_calibrate.random_batches(NCHW))
    assert len(first) == _calibrate.BATCHES
    assert first[0][0].shape == (_calibrate.BATCH_SIZE, 3, 8, 8)
    assert first[0][0].dtype == np.float32
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(first[0][0], first[1][0])


def test_paddle_batch_norm_ends_with_the_mean_it_saw() -> None:
    pytest.importorskip("paddle")
    import paddle

    from benchmarks.corpus import _paddle

    network = paddle.nn.Sequential(paddle.nn.BatchNorm2D(3))
    _paddle.calibrate(network, NCHW)
    assert not network.training
    np.testing.assert_allclose(network[0]._mean.numpy(), _seen_mean(NCHW, (0, 2, 3)), atol=1e-5)
    np.testing.assert_allclose(network[0]._variance.numpy(), 1.0, atol=0.1)


def test_paddle_calibration_normalizes_a_blown_up_conv() -> None:
    pytest.importorskip("paddle")
    import paddle

    from benchmarks.corpus import _paddle

    paddle.seed(0)
    network = paddle.nn.Sequential(paddle.nn.Conv2D(3, 8, 3), paddle.nn.BatchNorm(8))
    network[0].weight.set_value(network[0].weight.numpy() * 100)
    _paddle.calibrate(network, NCHW)
    fresh = np.random.default_rng(7).standard_normal((4, 3, 8, 8)).astype(np.float32)
    out = network(paddle.to_tensor(fresh)).numpy()
    assert abs(out.mean()) < 0.2 and 0.8 < out.std() < 1.2


def test_paddle_affine_blocks_are_drawn_near_identity_and_reproducibly() -> None:
    pytest.importorskip("paddle")
    import paddle

    from benchmarks.corpus import _paddle
    from benchmarks.corpus._ppocr_v4 import Affine, ConvBN

    def drawn() -> list[float]:
        network = paddle.nn.Sequential(Affine(), ConvBN(3, 3, 1), Affine())
        assert _paddle.draw_affine_scalars(network) == 2  # not the conv, not the BN
        return [float(p.numpy()[0]) for p in (network[0].scale, network[0].bias,
                                                network[2].scale, network[2].bias)]

    values = drawn()
    assert values == drawn()
    assert all(0.8 <= scale <= 1.2 and scale != 1.0 for scale in values[0::2])
    assert all(-0.1 <= bias <= 0.1 and bias != 0.0 for bias in values[1::2])


def test_torch_batch_norm_ends_with_the_mean_it_saw() -> None:
    torch = pytest.importorskip("torch")

    from benchmarks.corpus import _torch

    network = torch.nn.Sequential(torch.nn.BatchNorm2d(3))
    _torch.calibrate(network, NCHW)
    assert not network.training
    np.testing.assert_allclose(network[0].running_mean.numpy(), _seen_mean(NCHW, (0, 2, 3)),
                               atol=1e-5)
    np.testing.assert_allclose(network[0].running_var.numpy(), 1.0, atol=0.1)


def test_keras_batch_norm_ends_with_the_mean_it_saw() -> None:
    tf = pytest.importorskip("tensorflow")

    from benchmarks.corpus import _tf

    norm = tf.keras.layers.BatchNormalization()
    network = tf.keras.Sequential([tf.keras.Input((8, 8, 3)), norm])
    _tf.calibrate(network, NHWC)
    assert norm.momentum == 0.99  # restored
    np.testing.assert_allclose(norm.moving_mean.numpy(), _seen_mean(NHWC, (0, 1, 2)), atol=1e-5)
    np.testing.assert_allclose(norm.moving_variance.numpy(), 1.0, atol=0.1)


def _degeneracy(output: np.ndarray) -> str | None:
    stats = _verify.output_stats("y", output)
    assert stats is not None
    return _verify.degenerate_reason([stats])


@pytest.mark.slow
def test_prepared_ppocrv4_detector_is_not_degenerate() -> None:
    """Unfitted statistics saturated 99% of this detector's sigmoid output at 0 or 1."""
    pytest.importorskip("paddle")
    import paddle

    from benchmarks.corpus import _paddle
    from benchmarks.corpus._ppocr_v4 import RepLayer

    entry = BY_NAME["ppocrv4_det_p2o1"]
    network = _paddle.prepare(entry)
    assert not network.training
    fused = [layer for layer in network.sublayers() if isinstance(layer, RepLayer)]
    assert fused and all(layer.fused is not None for layer in fused)
    scales = [float(layer.affine.scale.numpy()[0]) for layer in fused]
    assert len(set(scales)) == len(scales)  # drawn, not the identity init
    image = np.random.default_rng(0).standard_normal(entry.inputs[0][1]).astype(np.float32)
    assert _degeneracy(network(paddle.to_tensor(image)).numpy()) is None


@pytest.mark.slow
def test_prepared_torchvision_network_has_fitted_statistics() -> None:
    torch = pytest.importorskip("torch")

    from benchmarks.corpus import _torch

    network = _torch.prepare(BY_NAME["tv_resnet18"])
    assert not network.training
    norms = [module for module in network.modules() if isinstance(module, torch.nn.BatchNorm2d)]
    assert all(int(norm.num_batches_tracked) == _calibrate.BATCHES for norm in norms)
    assert all(float((norm.running_var - 1).abs().max()) > 0.05 for norm in norms)


@pytest.mark.slow
def test_prepared_keras_network_is_not_degenerate() -> None:
    """Unfitted statistics made this classifier's softmax exactly uniform (constant)."""
    pytest.importorskip("tensorflow")

    from benchmarks.corpus import _tf

    entry = BY_NAME["keras_mobilenet_v3_small"]
    network = _tf.prepare(entry)
    image = np.random.default_rng(0).standard_normal(entry.inputs[0][1]).astype(np.float32)
    assert _degeneracy(np.asarray(network(image, training=False))) is None
