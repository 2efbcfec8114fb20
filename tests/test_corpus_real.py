"""Every model in the converter-made corpus cache loads and round-trips through taso.

Builds nothing: it reads what `python -m benchmarks.corpus build` left in the cache
(`$TASO_CORPUS_DIR` or the user cache) and skips cleanly when the cache is empty. For
each cached model: ONNX Runtime loads it, and `taso.optimize_onnx(path, out, time_budget_s=0)`
writes a model with the same operators giving the same outputs on random inputs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import taso
from benchmarks.corpus import Manifest, _verify, cached_entries, default_cache_dir

pytestmark = [pytest.mark.slow, pytest.mark.ort]

_CACHED = cached_entries(default_cache_dir())
_CASES = [pytest.param(manifest, path, id=manifest.name) for manifest, path in _CACHED] or [
    pytest.param(None, None, marks=pytest.mark.skip(reason="corpus cache is empty; "
                 "run `python -m benchmarks.corpus build`"), id="empty-cache")
]


def _session(model: str | bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _feeds(manifest: Manifest, session: ort.InferenceSession) -> dict[str, np.ndarray]:
    """The check's random inputs: integer ones (token ids, masks) in their recorded range."""
    return _verify.random_feeds(session.get_inputs(), manifest.input_shapes,
                                manifest.input_ranges)


@pytest.mark.parametrize(("manifest", "path"), _CASES)
def test_cached_model_round_trips(manifest: Manifest, path: Path, tmp_path: Path) -> None:
    original = onnx.load(str(path), load_external_data=False)
    original_session = _session(str(path))
    expected = original_session.run(None, _feeds(manifest, original_session))

    written = tmp_path / "model.onnx"  # a file, so external data (dynamo export) comes along
    taso.optimize_onnx(path, written, time_budget_s=0)

    ops = Counter(node.op_type for node in original.graph.node)
    round_tripped = onnx.load(str(written), load_external_data=False)
    assert Counter(node.op_type for node in round_tripped.graph.node) == ops
    written_session = _session(str(written))
    actual = written_session.run(None, _feeds(manifest, written_session))
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)
