"""`target_opset` / `--target-opset N`: the model upgraded with onnx's version converter
only when asked, checked and measured with the rewrites; refused when onnx knows no such
opset; a converter failure or a request to go down leaves the model at its own opset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso._onnx_import import import_model
from taso.pipeline import _upgrade
from taso.pipeline._export import export
from taso.pipeline._upgrade import UPGRADE_PREFIX, check_target_opset, model_opset, upgraded
from taso.pipeline.cli import main as taso_main


def _hard_swish_net(opset: int = 11) -> onnx.ModelProto:
    """conv -> x * clip(x + 3, 0, 6) / 6, as paddle2onnx writes HardSwish below opset 14."""
    w = nh.from_array(np.random.default_rng(0).standard_normal((16, 8, 3, 3)).astype(np.float32), "w")
    consts = [nh.from_array(np.array(v, dtype=np.float32), n) for n, v in
              (("three", 3.0), ("zero", 0.0), ("six", 6.0))]
    nodes = [
        h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        h.make_node("Add", ["c", "three"], ["a"]),
        h.make_node("Clip", ["a", "zero", "six"], ["k"]),
        h.make_node("Mul", ["c", "k"], ["m"]),
        h.make_node("Div", ["m", "six"], ["y"]),
    ]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 16, 16])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 16, 16, 16])], [w, *consts])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("bad", [0, -3, onnx.defs.onnx_opset_version() + 1, True, "17", 17.0])
def test_an_opset_onnx_does_not_know_is_refused(bad: object) -> None:
    with pytest.raises(taso.UsageError, match="target opset"):
        check_target_opset(bad)  # type: ignore[arg-type]


def test_none_and_known_opsets_are_accepted() -> None:
    for good in (None, 11, onnx.defs.onnx_opset_version()):
        check_target_opset(good)


def test_nothing_is_upgraded_unless_asked() -> None:
    model = _hard_swish_net()
    graph = import_model(model)
    notes: list[str] = []
    assert upgraded(model, graph, None, ".", notes.append).graph is graph and notes == []


@pytest.mark.parametrize("target", [9, 11])
def test_never_down_or_sideways(target: int) -> None:
    model = _hard_swish_net(11)
    graph = import_model(model)
    notes: list[str] = []
    result = upgraded(model, graph, target, ".", notes.append)
    assert result.graph is graph and result.applied == {}
    assert notes and "at opset 11 already" in notes[0]


def test_an_upgrade_is_one_applied_rewrite_on_the_converted_graph() -> None:
    model = _hard_swish_net(11)
    result = upgraded(model, import_model(model), 17, ".", lambda _m: None)
    assert result.applied == {f"{UPGRADE_PREFIX}/11-to-17": 1}
    assert model_opset(export(result.graph)) == 17
    assert model_opset(model) == 11  # the input proto is not touched


def test_a_converter_failure_leaves_the_model_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
        raise RuntimeError("no adapter for op Foo\nmore detail")

    monkeypatch.setattr(_upgrade.version_converter, "convert_version", broken)
    model = _hard_swish_net(11)
    graph = import_model(model)
    notes: list[str] = []
    result = upgraded(model, graph, 17, ".", notes.append)
    assert result.graph is graph and result.applied == {}
    assert notes == ["not upgraded to opset 17: onnx's version converter failed: RuntimeError: no adapter for op Foo"]


def test_the_cli_refuses_a_bad_target_opset_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_hard_swish_net(), source)
    code = taso_main(["optimize", str(source), "-o", str(tmp_path / "o.onnx"), "--target-opset", "0", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "target opset" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.ort
def test_an_upgraded_result_is_checked_against_the_original(tmp_path: Path) -> None:
    """The search runs at opset 17 (HardSwish exists there); whatever is returned matches
    the original's outputs, and the upgrade is reported kept or rejected, never silent."""
    source = tmp_path / "m.onnx"
    onnx.save(_hard_swish_net(11), source)
    before = source.read_bytes()
    result = taso.optimize_onnx(str(source), tmp_path / "o.onnx", target_opset=17, time_budget_s=20)
    report = result.report
    key = f"{UPGRADE_PREFIX}/11-to-17"
    assert key in report.applied_rewrites or key in report.rejected_rewrites
    returned = model_opset(result.model)
    assert returned == (17 if key in report.applied_rewrites else 11)
    assert report.check.value in ("passed", "skipped") and source.read_bytes() == before
