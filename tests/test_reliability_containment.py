"""Nothing is read from outside the model's folder, nothing the input references is replaced.

Each test here was seen failing on main at d2ecee7 (issue 16, items 1 and 2): external
data at an absolute path, through `..` or through a symlink was copied into the output's
data file; an output named like the input's data file replaced the input's weights; a
report path equal to the output replaced the model with JSON.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso.errors import InvalidModelError, UsageError
from taso.pipeline.cli import main as cli_main

SECRET = b"top secret bytes that must never be copied\n" * 100


def _model_with_external(location: str) -> onnx.ModelProto:
    """y = x + w, w (float[1000]) stored externally at `location`."""
    weight = nh.from_array(np.zeros(1000, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "4000")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = h.make_graph(
        [h.make_node("Add", ["x", "w"], ["y"])], "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1000])], [weight],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _secret(folder: Path) -> Path:
    secret = folder / "secret.bin"
    secret.write_bytes(SECRET[:4000].ljust(4000, b"x"))
    return secret


def _hostile_locations(tmp_path: Path) -> list[tuple[str, Path]]:
    """(location, model folder) pairs whose data lies outside the model folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = _secret(outside)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "link.bin").symlink_to(secret)
    (folder / "sub").mkdir()
    return [(str(secret), folder), ("../outside/secret.bin", folder), ("sub/../../outside/secret.bin", folder),
            ("link.bin", folder)]


def _no_secret_written(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET[:200] not in path.read_bytes(), path


@pytest.mark.parametrize("budget", [0.0, 1.0])
def test_a_proto_whose_external_data_leaves_its_folder_is_refused(tmp_path: Path, budget: float) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for location, folder in _hostile_locations(tmp_path):
        with pytest.raises(InvalidModelError, match="external data location"):
            taso.optimize_onnx(_model_with_external(location), out_dir / "o.onnx", time_budget_s=budget,
                               base_dir=folder)
        assert not list(out_dir.iterdir()), location


@pytest.mark.parametrize("budget", [0.0, 1.0])
def test_a_model_file_whose_external_data_leaves_its_folder_is_refused(tmp_path: Path, budget: float) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for k, (location, folder) in enumerate(_hostile_locations(tmp_path)):
        path = folder / f"m{k}.onnx"
        onnx.save_model(_model_with_external(location), path)
        with pytest.raises(InvalidModelError, match="external data location"):
            taso.optimize_onnx(path, out_dir / "o.onnx", time_budget_s=budget)
        args = ["optimize", str(path), "-o", str(out_dir / "o.onnx"), "--time-budget", str(budget), "-q"]
        assert cli_main(args) == 2
    assert not list(out_dir.iterdir())
    _no_secret_written(tmp_path / "model")


def test_a_proto_with_external_data_needs_an_explicit_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _secret(tmp_path)
    monkeypatch.chdir(tmp_path)  # the working directory is never where external data is looked for
    with pytest.raises(UsageError, match="base_dir"):
        taso.optimize_onnx(_model_with_external("secret.bin"), tmp_path / "o.onnx", time_budget_s=0)
    assert not (tmp_path / "o.onnx").exists() and not (tmp_path / "o.onnx.data").exists()


@pytest.mark.ort
def test_a_proto_with_external_data_inside_base_dir_is_optimized(tmp_path: Path) -> None:
    _secret(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = taso.optimize_onnx(_model_with_external("secret.bin"), out / "o.onnx", time_budget_s=0,
                                base_dir=tmp_path)
    assert result.model is not None and (out / "o.onnx").exists()


def _input_with_data_named(folder: Path, data_name: str) -> tuple[Path, bytes]:
    weights = nh.from_array(np.arange(1000, dtype=np.float32), "w")
    graph = h.make_graph(
        [h.make_node("Add", ["x", "w"], ["s"]), h.make_node("Relu", ["s"], ["y"])], "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1000])], [weights],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    path = folder / "in.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location=data_name, size_threshold=0)
    return path, (folder / data_name).read_bytes()


def test_an_output_whose_data_file_is_the_inputs_weights_is_refused(tmp_path: Path) -> None:
    path, weights = _input_with_data_named(tmp_path, "out.onnx.data")
    with pytest.raises(UsageError, match="references"):
        taso.optimize_onnx(path, tmp_path / "out.onnx", time_budget_s=0)
    assert cli_main(["optimize", str(path), "-o", str(tmp_path / "out.onnx"), "--time-budget", "0", "-q"]) == 2
    assert (tmp_path / "out.onnx.data").read_bytes() == weights
    assert not (tmp_path / "out.onnx").exists()
    onnx.checker.check_model(str(path), full_check=True)  # the input still loads


def test_an_output_that_is_the_inputs_data_file_is_refused(tmp_path: Path) -> None:
    path, weights = _input_with_data_named(tmp_path, "weights.bin")
    with pytest.raises(UsageError, match="references"):
        taso.optimize_onnx(path, tmp_path / "weights.bin", time_budget_s=0)
    assert (tmp_path / "weights.bin").read_bytes() == weights


@pytest.mark.parametrize("report_name", ["out.onnx", "out.onnx.data", "in.onnx", "weights.bin"])
def test_a_report_path_that_would_replace_a_model_file_is_refused(tmp_path: Path, report_name: str) -> None:
    path, weights = _input_with_data_named(tmp_path, "weights.bin")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code = cli_main(["optimize", str(path), "-o", str(tmp_path / "out.onnx"), "--report", str(tmp_path / report_name),
                     "--time-budget", "0", "-q"])
    assert code == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.ort
def test_outputs_respect_the_umask(tmp_path: Path) -> None:
    path, _ = _input_with_data_named(tmp_path, "weights.bin")
    previous = os.umask(0o022)
    try:
        assert cli_main(["optimize", str(path), "-o", str(tmp_path / "out.onnx"), "--report",
                         str(tmp_path / "r.json"), "--time-budget", "0", "-q"]) == 0
    finally:
        os.umask(previous)
    for name in ("out.onnx", "out.onnx.data", "r.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


@pytest.mark.ort
def test_a_temp_file_left_by_a_killed_run_is_removed_by_the_next(tmp_path: Path) -> None:
    path, _ = _input_with_data_named(tmp_path, "weights.bin")
    dead_pid = _a_dead_pid()
    orphans = [tmp_path / f".out.onnx.{dead_pid}.abc123.tmp", tmp_path / f".out.onnx.data.{dead_pid}.x.tmp"]
    for orphan in orphans:
        orphan.write_bytes(b"")
    live = tmp_path / f".out.onnx.{os.getpid()}.zzz.tmp"  # a writer still running: kept
    live.write_bytes(b"")
    taso.optimize_onnx(path, tmp_path / "out.onnx", time_budget_s=0)
    assert not any(o.exists() for o in orphans)
    assert live.exists()


def _a_dead_pid() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        pid -= 1


def _reshape_with_external_shape(folder: Path) -> Path:
    """y = reshape(x + w, shape) with every initializer, the shape tensor too, external."""
    weights = nh.from_array(np.ones((2, 6), np.float32), "w")
    shape = nh.from_array(np.array([3, 4], np.int64), "shape")
    graph = h.make_graph(
        [h.make_node("Add", ["x", "w"], ["s"]), h.make_node("Reshape", ["s", "shape"], ["y"])], "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], [weights, shape],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    path = folder / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    return path


@pytest.mark.ort
def test_a_shape_tensor_in_external_data_is_accepted(tmp_path: Path) -> None:
    """Found by the reliability fuzzer: onnx's checker by path cannot read it, and refused BERT."""
    path = _reshape_with_external_shape(tmp_path)
    result = taso.optimize_onnx(path, tmp_path / "o.onnx", time_budget_s=0)
    assert result.model.graph.node


@pytest.mark.parametrize("damage", ["truncated", "length too short", "offset past the end"])
def test_external_data_that_does_not_fit_its_file_is_refused(tmp_path: Path, damage: str) -> None:
    path = _reshape_with_external_shape(tmp_path)
    model = onnx.load(path, load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.name == "w")
    info = {e.key: e for e in tensor.external_data}
    if damage == "truncated":
        data = tmp_path / "m.data"
        data.write_bytes(data.read_bytes()[:10])
    elif damage == "length too short":
        info["length"].value = "8"
    else:
        info["offset"].value = "100000"
    onnx.save_model(model, path)
    with pytest.raises(InvalidModelError, match="external data"):
        taso.optimize_onnx(path, tmp_path / "o.onnx", time_budget_s=0)
