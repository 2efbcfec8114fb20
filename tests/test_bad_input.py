"""The bad-input table: each case exits 2 with one clear line, writes nothing, leaves the input alone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import taso
from taso.pipeline.cli import main
from tests.helpers import models


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _cyclic(path: Path) -> Path:
    nodes = [h.make_node("Add", ["x", "b"], ["a"]), h.make_node("Relu", ["a"], ["b"])]
    graph = h.make_graph(
        nodes, "cycle", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [h.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
    )
    return _save(h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 17)]), path)


def _dangling(path: Path) -> Path:
    graph = h.make_graph(
        [h.make_node("Add", ["x", "ghost"], ["y"])], "dangling",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return _save(h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 17)]), path)


def _checker_failure(path: Path) -> Path:
    model = models.conv_net()
    model.graph.node[1].op_type = "NoSuchStandardOp"
    return _save(model, path)


def _new_ir(path: Path) -> Path:
    model = models.conv_net()
    model.ir_version = onnx.IR_VERSION + 1
    return _save(model, path)


def _new_opset(path: Path) -> Path:
    model = models.conv_net()
    model.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    return _save(model, path)


def _truncated(path: Path) -> Path:
    data = models.conv_net().SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    return path


INPUT_CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing file": (lambda p: p, "no such file"),
    "empty file": (lambda p: (p.write_bytes(b""), p)[1], "empty"),
    "non-ONNX bytes": (lambda p: (p.write_bytes(b"\x89PNG\r\n\x1a\n not a model at all"), p)[1], "not an ONNX model"),
    "truncated protobuf": (_truncated, "not an ONNX model"),
    "fails the checker": (_checker_failure, "ONNX checker"),
    "cycle": (_cyclic, "cycle"),
    "input nothing produces": (_dangling, "ghost"),
    "IR version too new": (_new_ir, "IR version"),
    "opset too new": (_new_opset, "opset"),
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
def test_bad_input_exits_2_with_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, needle = INPUT_CASES[case]
    source = make(tmp_path / "in.onnx")
    before = source.read_bytes() if source.exists() else None
    out = tmp_path / "out.onnx"
    code, err = _run(["optimize", str(source), "-o", str(out), "--time-budget", "0", "-q"], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("taso: error:"), err
    assert needle.lower() in lines[0].lower()
    assert "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))
    assert (source.read_bytes() if source.exists() else None) == before


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
def test_bad_input_raises_typed_error(case: str, tmp_path: Path) -> None:
    make, _ = INPUT_CASES[case]
    source = make(tmp_path / "in.onnx")
    with pytest.raises(taso.InputError):
        taso.optimize_onnx(source, tmp_path / "out.onnx", time_budget_s=0)
    assert not (tmp_path / "out.onnx").exists()


def _good(tmp_path: Path) -> Path:
    return _save(models.conv_net(), tmp_path / "in.onnx")


def test_output_folder_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(tmp_path / "nope" / "o.onnx"), "-q"], capsys)
    assert code == 2 and "does not exist" in err


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else False, reason="root ignores permissions")
def test_output_folder_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(folder / "o.onnx"), "-q"], capsys)
    finally:
        folder.chmod(stat.S_IRWXU)
    assert code == 2 and "not writable" in err


def test_output_folder_read_only_as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Root may write anywhere, so simulate the permission answer the OS would give a user."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real_access(p, mode))
    code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(folder / "o.onnx"), "-q"], capsys)
    assert code == 2 and "not writable" in err
    assert not list(folder.iterdir())


def test_output_equal_to_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _good(tmp_path)
    before = source.read_bytes()
    code, err = _run(["optimize", str(source), "-o", str(source), "-q"], capsys)
    assert code == 2 and "input" in err
    assert source.read_bytes() == before


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["optimize"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, err = _run(["optimize", "x.onnx", "-o", "y.onnx", "--time-budget", "soon"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_negative_time_budget_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--time-budget", "-1"], capsys)
    assert code == 2 and "time budget" in err


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed `taso` script itself: exit 2, one line, no traceback."""
    script = Path(sys.executable).parent / "taso"
    proc = subprocess.run([str(script), "optimize", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o.onnx")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_unavailable_or_unknown_backend_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from taso.backends import OrtCudaBackend

    if OrtCudaBackend.available():
        pytest.skip("CUDA is available here")
    for backend in ("ort-cuda",):
        code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--backend", backend], capsys)
        assert code == 2 and "not available" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(taso.UsageError):
        taso.optimize_onnx(_good(tmp_path), backend="tpu")
    assert not (tmp_path / "o.onnx").exists()


def test_bad_alpha_and_shape_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--alpha", "0.5"], capsys)
    assert code == 2 and "alpha" in err
    code, err = _run(["optimize", str(_good(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--shape", "nosuch=3", "-q"], capsys)
    assert code == 2 and "nosuch" in err
    assert not (tmp_path / "o.onnx").exists()
