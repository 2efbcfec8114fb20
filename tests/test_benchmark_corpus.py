"""Tests for the corpus mode of the benchmark harness (`python -m benchmarks.run --corpus`).

A fake corpus folder holds one tiny model with a dynamic batch dim and a manifest whose
`input_shapes` fix it; the run must measure it at that shape, profile it, and render
one table per model plus the per-group geomean summary. The grouping and geomean rules
are checked on hand-made rows without ONNX Runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks import run
from benchmarks._corpus_run import (
    FLOP_OPS,
    Group,
    ModelFile,
    OpProfile,
    _kernel_ms_by_op,
    corpus_models,
    group_speedups,
)
from benchmarks._measure import NOISE_ROW, PairTiming, Row, RowStatus, Verdict
from benchmarks.corpus._cache import ENV_VAR, MODEL_FILE, Manifest, write_manifest

MODEL = "tiny_conv"
SHAPE = [2, 3, 16, 16]


def _tiny_model() -> onnx.ModelProto:
    """x[N,3,16,16] -> Conv -> Mul(scalar) -> Add(scalar) -> Sigmoid."""
    rng = np.random.default_rng(0)
    weights = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    scale = numpy_helper.from_array(np.array([0.5], np.float32), "s")
    shift = numpy_helper.from_array(np.array([0.25], np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["c", "s"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 16])],
        [weights, scale, shift],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _write_corpus(root: Path) -> Path:
    folder = root / MODEL
    folder.mkdir(parents=True)
    onnx.save(_tiny_model(), folder / MODEL_FILE)
    manifest = Manifest(
        name=MODEL, converter="onnx.helper", versions={"onnx": onnx.__version__},
        opset={"ai.onnx": 17}, ir_version=8, ir_version_written=8,
        input_shapes={"x": SHAPE}, source="tests", build_seconds=0.0,
    )
    write_manifest(folder, manifest)
    return root


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    folder = tmp_path_factory.mktemp("corpus-bench")
    corpus = _write_corpus(folder / "corpus")
    out, markdown = folder / "results.json", folder / "results.md"
    argv = ["--corpus", str(corpus), "--tools", "taso", "no_such_tool", "--repeats", "3"]
    argv += ["--warmup", "0", "--time-budget", "0", "--out", str(out), "--markdown", str(markdown)]
    assert run.main(argv) == 0
    return json.loads(out.read_text()), markdown.read_text()


@pytest.mark.ort
@pytest.mark.slow
def test_corpus_model_gets_the_noise_row_and_one_row_per_tool(results: tuple[dict, str]) -> None:
    data, _ = results
    rows = {row["tool"]: row for row in data["rows"] if row["model"] == MODEL}
    assert list(rows) == [NOISE_ROW, "taso", "no_such_tool"]
    assert rows[NOISE_ROW]["status"] == RowStatus.MEASURED.value
    assert rows["no_such_tool"]["status"] == RowStatus.NOT_INSTALLED.value
    taso_row = rows["taso"]
    assert taso_row["status"] == RowStatus.MEASURED.value, taso_row["error"]
    assert taso_row["outputs_match"] is True and taso_row["max_abs_diff"] is not None
    assert taso_row["tool_run"]["wall_s"] > 0 and taso_row["tool_run"]["peak_rss_mb"] > 10
    assert taso_row["tool_run"]["notes"]["shapes"] == "x=2x3x16x16"  # the manifest's shape


@pytest.mark.ort
@pytest.mark.slow
def test_corpus_model_is_profiled_and_grouped(results: tuple[dict, str]) -> None:
    data, _ = results
    (profile,) = data["profiles"]
    assert profile["model"] == MODEL and profile["shapes"] == "x=2x3x16x16"
    assert profile["error"] == "" and profile["runs"] >= 1
    assert 0.0 <= profile["outside_share"] <= 1.0
    assert profile["group"] in {Group.ELEMENTWISE_HEAVY.value, Group.FLOP_BOUND.value}
    assert any(op in FLOP_OPS for op, _ in profile["op_ms"])  # the conv was seen
    assert {entry["tool"] for entry in data["groups"]} == {"taso", "no_such_tool"}


@pytest.mark.ort
@pytest.mark.slow
def test_corpus_markdown_has_a_table_per_model_and_a_group_summary(results: tuple[dict, str]) -> None:
    _, markdown = results
    assert f"### {MODEL}" in markdown and "x=2x3x16x16" in markdown
    table = [line for line in markdown.splitlines() if line.startswith(f"| {MODEL} |")]
    assert len(table) == 3
    assert "geomean speedup" in markdown
    assert "time to best" in markdown


def test_corpus_models_come_from_the_manifests(tmp_path: Path) -> None:
    _write_corpus(tmp_path)
    (model,) = corpus_models(tmp_path, [])
    assert model == ModelFile(MODEL, tmp_path / MODEL / MODEL_FILE, "x=2x3x16x16")
    assert corpus_models(tmp_path, [MODEL]) == [model]
    with pytest.raises(ValueError, match="no_such_model"):
        corpus_models(tmp_path, ["no_such_model"])
    with pytest.raises(ValueError, match="no corpus model cached"):
        corpus_models(tmp_path / "empty", [])


def test_corpus_flag_without_a_folder_means_the_default_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(_write_corpus(tmp_path)))
    assert run.parse_args(["--corpus"]).corpus == tmp_path
    assert run.parse_args([]).corpus is None


def test_outside_share_counts_every_conv_and_matmul_form_as_flops() -> None:
    profile = OpProfile("m", "", 3, (("FusedConv", 6.0), ("Mul", 3.0), ("MatMulInteger", 1.0)))
    assert profile.outside_share == pytest.approx(0.3)
    assert profile.group is Group.ELEMENTWISE_HEAVY
    flop_bound = OpProfile("m", "", 3, (("NchwcConv", 8.0), ("Relu", 2.0)))
    assert flop_bound.group is Group.FLOP_BOUND
    assert OpProfile("m", "", 0, (), error="boom").group is Group.NOT_PROFILED


def _kernel_event(node: str, op: str, ts: int, dur: int, index: int = 0) -> dict[str, object]:
    return {"cat": "Node", "name": f"{node}_kernel_time", "ts": ts, "dur": dur,
            "args": {"op_name": op, "node_index": str(index)}}


def test_a_run_slowed_by_the_machine_does_not_move_the_profile() -> None:
    warm_up = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 10},
               _kernel_event("conv", "Conv", 1, 500), _kernel_event("dq", "DequantizeLinear", 2, 500)]
    runs = []
    for index, dq_us in enumerate((100, 100, 900, 100, 100)):  # the third run's DQ is slowed
        start = 100 * (index + 1)
        runs += [_kernel_event("conv", "Conv", start, 300), _kernel_event("dq", "DequantizeLinear", start + 1, dq_us)]
    op_ms = _kernel_ms_by_op(warm_up + runs)
    assert op_ms == pytest.approx({"Conv": 1.5, "DequantizeLinear": 0.5})
    assert OpProfile("m", "", 5, tuple(op_ms.items())).outside_share == pytest.approx(0.25)


def test_nodes_with_one_event_name_keep_their_own_medians() -> None:
    # Three Relu nodes ORT named alike (told apart by their node index), one of them slow.
    warm_up = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 10}]
    runs = [_kernel_event("", "Relu", 100 * run + index, 900 if index == 2 else 100, index)
            for run in range(1, 4) for index in range(3)]
    assert _kernel_ms_by_op(warm_up + runs) == pytest.approx({"Relu": 3.3})


def _timed(ratio: float) -> PairTiming:
    return PairTiming(10, 1.0, ratio, ratio, ratio - 0.01, ratio + 0.01)


def test_group_geomean_counts_a_failed_or_wrong_output_as_the_original() -> None:
    profiles = [
        OpProfile("a", "", 3, (("Conv", 5.0), ("Mul", 5.0))),  # 50% outside
        OpProfile("b", "", 3, (("Conv", 5.0), ("Mul", 5.0))),
        OpProfile("c", "", 3, (("Conv", 9.0), ("Mul", 1.0))),  # 10% outside
    ]
    rows = [
        Row("a", "taso", RowStatus.MEASURED, timing=_timed(0.5), verdict=Verdict.FASTER,
            outputs_match=True),
        Row("b", "taso", RowStatus.TOOL_FAILED),
        Row("c", "taso", RowStatus.MEASURED, timing=_timed(0.5), outputs_match=False),
    ]
    by_group = {(s.group, s.tool): s for s in group_speedups(rows, profiles)}
    heavy = by_group[(Group.ELEMENTWISE_HEAVY, "taso")]
    assert heavy.models == 2 and heavy.valid == 1
    assert heavy.geomean == pytest.approx(2.0**0.5)  # 2.0x and 1.0x
    flop = by_group[(Group.FLOP_BOUND, "taso")]
    assert flop.models == 1 and flop.valid == 0 and flop.geomean == pytest.approx(1.0)
