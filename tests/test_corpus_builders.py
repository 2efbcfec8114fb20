"""Corpus builders: constant-initialized parameters are drawn, integer inputs stay in range.

A fresh network's zero biases and unit norm scales are equal tensors; torch.onnx then
writes one initializer for all of them and an `Identity` node per further use, a form no
trained model's export has (and ORT's quantizer cannot quantize such a Conv bias). The
builders draw each constant parameter near its value first. Token ids and masks are
int64 inputs drawn from the entry's range, recorded in the manifest, in calibration,
quantization and `check`. The torch tests run where torch is installed (the corpus venv).
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest

from benchmarks.corpus import BY_NAME, Family, _cache, _calibrate, _quant, _verify

_TORCH = (Family.TORCHSCRIPT, Family.TORCH_DYNAMO)


def _constant(parameter) -> bool:
    return parameter.numel() > 1 and bool((parameter == parameter.flatten()[0]).all())


def test_prepared_network_has_no_constant_parameter() -> None:
    pytest.importorskip("torch")
    from benchmarks.corpus import _torch

    network = _torch.prepare(BY_NAME["tv_squeezenet1_1"])
    assert not [name for name, p in network.named_parameters() if _constant(p)]


def test_torchscript_export_has_no_identity_for_shared_constants(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.corpus import _torch

    torch.manual_seed(0)
    network = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(4, 4, 1), torch.nn.LayerNorm(8),
        torch.nn.LayerNorm(8),
    )
    for conv in network[:2]:
        torch.nn.init.zeros_(conv.bias)
    _torch.draw_constants(network)
    path = tmp_path / "m.onnx"
    torch.onnx.export(network.eval(), (torch.randn(1, 3, 8, 8),), str(path), dynamo=False)
    ops = Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    assert ops["Identity"] == 0


def test_calibration_batches_draw_integer_inputs_in_their_range() -> None:
    entry = BY_NAME["hf_bert_small"]
    for batch in _calibrate.random_batches(entry.inputs, entry.input_ranges):
        ids, mask = batch
        assert ids.dtype == mask.dtype == np.int64
        assert 0 <= ids.min() and ids.max() < entry.input_ranges["input_ids"][1]
        assert (mask == 1).all()


def test_check_feeds_integer_inputs_from_their_recorded_range() -> None:
    class Meta:
        def __init__(self, name: str, kind: str) -> None:
            self.name, self.type, self.shape = name, kind, [1, 128]

    feeds = _verify.random_feeds(
        [Meta("input_ids", "tensor(int64)"), Meta("attention_mask", "tensor(int64)")],
        {"input_ids": [1, 128], "attention_mask": [1, 128]},
        {"input_ids": [0, 30522], "attention_mask": [1, 2]},
    )
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].max() < 30522
    assert len(np.unique(feeds["input_ids"])) > 100
    assert (feeds["attention_mask"] == 1).all()


def test_ranges_name_the_entry_integer_inputs_and_torch_entries_a_zoo() -> None:
    for entry in BY_NAME.values():
        for name, (low, high) in entry.ranges:
            assert name in entry.input_shapes and low < high, entry.name
        assert (entry.zoo is not None) == (entry.family in _TORCH), entry.name


def test_manifest_keeps_input_ranges_and_reads_older_ones() -> None:
    manifest = _cache.Manifest(
        name="m", converter="c", versions={}, opset={"ai.onnx": 20}, ir_version=10,
        ir_version_written=10, input_shapes={"input_ids": [1, 128]}, source="tests",
        build_seconds=0.0, input_ranges={"input_ids": [0, 30522]},
    )
    assert _cache.Manifest.from_json(manifest.to_json()) == manifest
    older = json.loads(manifest.to_json())
    del older["input_ranges"]
    assert _cache.Manifest.from_json(json.dumps(older)).input_ranges == {}


def test_static_quantization_calibrates_on_batches_of_one() -> None:
    entry = BY_NAME["tv_resnet18_qdq"]
    samples = list(_quant.calibration_samples(entry))
    assert len(samples) == _calibrate.BATCHES * _calibrate.BATCH_SIZE
    assert {sample["input"].shape for sample in samples} == {(1, 3, 224, 224)}
    assert entry.inputs == BY_NAME[entry.derived_from].inputs
