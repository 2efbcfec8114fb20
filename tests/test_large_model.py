"""A model over 2 GB (external data) round-trips without being held whole in memory.

Peak RSS is compared with the size of the weights (2.24 GB = 2.09 GiB). With the check on,
the floor is about 1.43x: ORT holds every weight, the 280 MB input and two 280 MB
intermediates while it runs the original.

Slow (writes ~2.2 GB twice): `python -m pytest -m slow tests/test_large_model.py -s`
prints peak memory against model size.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

CHUNKS = 8
CHUNK_FLOATS = 70_000_000  # 8 x 280 MB = 2.24 GB


def write_large_model(folder: Path) -> Path:
    """x + w0 + w1 + ... with each w a 280 MB external tensor, written without holding them all."""
    data = folder / "big.onnx.data"
    inits, nodes, previous = [], [], "x"
    with open(data, "wb") as sink:
        for k in range(CHUNKS):
            offset = sink.tell()
            block = np.full(CHUNK_FLOATS, 0.001 * (k + 1), dtype=np.float32)
            sink.write(block.tobytes())
            del block
            tensor = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[CHUNK_FLOATS])
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", data.name), ("offset", str(offset)), ("length", str(CHUNK_FLOATS * 4))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            inits.append(tensor)
            nodes.append(h.make_node("Add", [previous, f"w{k}"], [f"s{k}"]))
            previous = f"s{k}"
    nodes.append(h.make_node("ReduceSum", [previous], ["y"], keepdims=0))
    graph = h.make_graph(nodes, "big", [h.make_tensor_value_info("x", TensorProto.FLOAT, [CHUNK_FLOATS])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    path = folder / "big.onnx"
    onnx.save_model(model, path)
    return path


_CHILD = """
import json, resource, sys, time
import taso
rules = None
if sys.argv[4] != "0":
    from tests.helpers.rules import FIXTURE_RULES as rules
start = time.perf_counter()
result = taso.optimize_onnx(sys.argv[1], sys.argv[2], time_budget_s=float(sys.argv[4]), check=sys.argv[3] == "check",
                            backend="analytical", rules=rules)
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "check": result.report.check.value, "applied": result.report.applied_rewrites}))
"""




@pytest.fixture
def big_folder(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, emptied afterwards: pytest keeps the last runs' folders (4 x 4.5 GB here)."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.ort
@pytest.mark.parametrize(("mode", "budget"), [
    ("no-check", "0"), ("check", "0"), ("no-check", "5"), ("check", "5"),
])
@pytest.mark.slow
def test_over_2gb_model_roundtrips_keeping_external_data(big_folder: Path, mode: str, budget: str) -> None:
    """Budget 5 s searches with the fixture rules: `(x + a) + b = x + (a + b)` folds weights."""
    tmp_path = big_folder
    source = write_large_model(tmp_path)
    size = (tmp_path / "big.onnx.data").stat().st_size
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = {**os.environ, "TASO_CACHE_DIR": str(tmp_path / "cache")}  # no remembered verdict: the decision is timed
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(source), str(out_dir / "big.onnx"), mode, budget],
                          capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent, env=env)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\n{mode}, budget {budget} s, applied {figures['applied']}: model {size / 2**30:.2f} GiB, peak RSS {figures['peak_rss_bytes'] / 2**30:.2f} GiB "
          f"({figures['peak_rss_bytes'] / size:.2f}x), {figures['seconds']:.1f} s, check {figures['check']}")
    written = onnx.load(str(out_dir / "big.onnx"), load_external_data=False)
    # the input's weights stay external; a folded weight may be inline when the model fits one file
    inputs_weights = [t for t in written.graph.initializer if t.name in {f"w{k}" for k in range(CHUNKS)}]
    assert all(t.data_location == TensorProto.EXTERNAL for t in inputs_weights)
    assert (out_dir / "big.onnx").stat().st_size < 2**31
    if budget == "0":
        assert (out_dir / "big.onnx.data").stat().st_size == size
    # the measured decision times both models interleaved, so both sessions are alive (2.2x
    # here); loading, searching, the reference run and the check each stay under 1.5x
    decided = mode == "check" and figures["applied"]
    assert figures["peak_rss_bytes"] <= (2.3 if decided else 1.5) * size
    if mode == "no-check" and budget == "0":
        assert figures["peak_rss_bytes"] < 0.5 * size
