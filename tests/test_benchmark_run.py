"""Tests for the benchmark harness `benchmarks.run` (fast: small models, tiny repeats).

The end-to-end run uses every default tool: tools whose package is installed must be
measured, the others reported as not installed (CI installs `.[dev]` only). A tool that
raises, an unknown tool and a tool that outlives its timeout are rows, never fatal.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from benchmarks import run
from benchmarks._measure import (
    NOISE_ROW,
    PairTiming,
    RowStatus,
    TimingPlan,
    Verdict,
    _Baseline,
    _QuietLatency,
)
from benchmarks._measure import _cap_ir_version as cap_ir_version
from benchmarks._measure import _graph_digest as graph_digest
from benchmarks._measure import _same_semantics as same_semantics
from benchmarks._tools import TOOLS, Tool, ToolOptions, ToolStatus, run_tool
from benchmarks.models import Size, build_cached
from taso import backends
from taso.backends import max_ir_version
from tests.helpers.qdq import qdq_pair

MODEL = "nasrnn"
EXPLODING = Tool("exploding", "benchmarks", "tests.test_benchmark_run:explode")
SLEEPING = Tool("sleeping", "benchmarks", "tests.test_benchmark_run:sleep")
HOGGING = Tool("hogging", "benchmarks", "tests.test_benchmark_run:hog")
COPYING = Tool("copying", "benchmarks", "tests.test_benchmark_run:copy")
HOG_MB = 300


def explode(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    raise RuntimeError("this tool always fails")


def sleep(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    time.sleep(60)
    return {}


def hog(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    block = bytearray(HOG_MB * 2**20)  # zero-filled: every page is touched
    dst.write_bytes(src.read_bytes())
    return {"held": len(block)}


def copy(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    dst.write_bytes(src.read_bytes())
    return {}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    folder = tmp_path_factory.mktemp("bench")
    out, markdown = folder / "results.json", folder / "results.md"
    tools = [*TOOLS, "exploding", "no_such_tool"]
    argv = ["--size", "small", "--models", MODEL, "--tools", *tools, "--repeats", "3"]
    argv += ["--warmup", "0", "--time-budget", "0", "--out", str(out), "--markdown", str(markdown)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(TOOLS, EXPLODING.name, EXPLODING)
        assert run.main(argv) == 0
    return json.loads(out.read_text()), markdown.read_text()


@pytest.mark.ort
def test_json_has_machine_config_noise_and_one_row_per_tool(results: tuple[dict, str]) -> None:
    data, _ = results
    assert {"machine", "config", "noise", "rows", "footnotes", "duration_s"} <= set(data)
    assert data["machine"]["nproc"] >= 1 and data["machine"]["cpu_model"]
    tools = [row["tool"] for row in data["rows"]]
    assert tools == [NOISE_ROW, *TOOLS, "exploding", "no_such_tool"]
    assert all(row["model"] == MODEL for row in data["rows"])


@pytest.mark.ort
def test_noise_row_is_measured(results: tuple[dict, str]) -> None:
    noise = results[0]["rows"][0]
    assert noise["status"] == RowStatus.MEASURED.value
    assert noise["timing"]["repeats"] == 3
    assert noise["timing"]["ratio_p10"] <= noise["timing"]["ratio"] <= noise["timing"]["ratio_p90"]
    assert results[0]["noise"]["models"] == 1


@pytest.mark.ort
def test_installed_tools_are_measured_and_missing_ones_reported(results: tuple[dict, str]) -> None:
    rows = {row["tool"]: row for row in results[0]["rows"]}
    for name, tool in TOOLS.items():
        row = rows[name]
        if not tool.installed():
            assert row["status"] == RowStatus.NOT_INSTALLED.value
            continue
        assert row["status"] == RowStatus.MEASURED.value, row["error"]
        assert row["outputs_match"] is True
        assert row["max_abs_diff"] is not None and row["max_abs_diff"] <= 1e-3
        assert row["tool_run"]["wall_s"] > 0 and row["tool_run"]["peak_rss_mb"] > 10
        assert row["nodes_before"] > 0 and row["nodes_after"] > 0
        assert row["verdict"] in {v.value for v in Verdict}


@pytest.mark.ort
def test_failing_and_unknown_tools_are_rows_not_crashes(results: tuple[dict, str]) -> None:
    rows = {row["tool"]: row for row in results[0]["rows"]}
    assert rows["exploding"]["status"] == RowStatus.TOOL_FAILED.value
    assert "this tool always fails" in rows["exploding"]["error"]
    assert rows["no_such_tool"]["status"] == RowStatus.NOT_INSTALLED.value


@pytest.mark.ort
def test_markdown_has_a_row_per_model_and_tool(results: tuple[dict, str]) -> None:
    data, markdown = results
    table = [line for line in markdown.splitlines() if line.startswith(f"| {MODEL} |")]
    assert len(table) == len(data["rows"])
    assert any(f"| {NOISE_ROW} |" in line for line in table)
    assert "Noise (baseline vs itself)" in markdown
    assert "IR version" in markdown


def test_tool_timeout_is_reported(tmp_path: Path) -> None:
    src = build_cached(MODEL, Size.SMALL)
    outcome = run_tool(SLEEPING, src, tmp_path / "out.onnx", timeout_s=1.0)
    assert outcome.status is ToolStatus.TIMED_OUT


@pytest.mark.ort
def test_ir_version_newer_than_ort_loads_is_lowered(tmp_path: Path) -> None:
    model = onnx.load(build_cached(MODEL, Size.SMALL))
    model.ir_version = max_ir_version() + 1
    path = tmp_path / "new_ir.onnx"
    onnx.save(model, path)
    assert cap_ir_version(path) == (max_ir_version() + 1, len(model.graph.node))
    assert onnx.load(path).ir_version == max_ir_version()


def test_adaptive_repeats_aim_for_a_time_per_pair() -> None:
    plan = TimingPlan(seconds_per_pair=10.0, min_repeats=20, max_repeats=1000)
    assert plan.repeats_for(100.0) == 50  # 10 s / (2 x 100 ms)
    assert plan.repeats_for(1000.0) == 20
    assert plan.repeats_for(0.001) == 1000
    assert TimingPlan(fixed_repeats=7).repeats_for(100.0) == 7


def test_a_ratio_is_claimed_only_outside_the_noise_band() -> None:
    noise = PairTiming(10, 1.0, 1.0, 1.0, 0.95, 1.05)
    assert PairTiming(10, 1.0, 0.9, 0.90, 0.85, 0.95).verdict_against(noise) is Verdict.FASTER
    assert PairTiming(10, 1.0, 1.1, 1.10, 1.05, 1.15).verdict_against(noise) is Verdict.SLOWER
    assert PairTiming(10, 1.0, 1.0, 0.97, 0.90, 1.02).verdict_against(noise) is Verdict.WITHIN_NOISE
    assert PairTiming(10, 1.0, 1.0, 0.5, 0.4, 0.6).verdict_against(None) is Verdict.NOT_APPLICABLE


def test_a_tool_whose_package_is_missing_is_not_installed(tmp_path: Path) -> None:
    missing = Tool("onnxsim", "_no_such_package_", "benchmarks._tools:optimize_with_onnxsim")
    outcome = run_tool(missing, build_cached(MODEL, Size.SMALL), tmp_path / "out.onnx")
    assert outcome.status is ToolStatus.NOT_INSTALLED and "_no_such_package_" in outcome.error


def test_peak_memory_is_each_tools_own(tmp_path: Path) -> None:
    src = build_cached(MODEL, Size.SMALL)
    hog_run = run_tool(HOGGING, src, tmp_path / "hog.onnx")
    copy_run = run_tool(COPYING, src, tmp_path / "copy.onnx")
    assert hog_run.ok and copy_run.ok
    assert hog_run.peak_rss_mb is not None and copy_run.peak_rss_mb is not None
    assert hog_run.peak_rss_mb >= HOG_MB > copy_run.peak_rss_mb


def test_an_unchanged_graph_is_told_apart_from_a_changed_one(tmp_path: Path) -> None:
    src = build_cached(MODEL, Size.SMALL)
    model = onnx.load(src)
    model.producer_name = "resaved"  # same graph, different file
    onnx.save(model, tmp_path / "same.onnx")
    del model.graph.node[-1].output[:]
    model.graph.node[-1].output.append("renamed")
    onnx.save(model, tmp_path / "changed.onnx")
    assert graph_digest(src) == graph_digest(tmp_path / "same.onnx")
    assert graph_digest(src) != graph_digest(tmp_path / "changed.onnx")


@pytest.mark.ort
def test_outputs_count_as_matching_only_where_the_semantics_are_the_same(tmp_path: Path) -> None:
    """A tool's output is held to `optimize_onnx`'s check: different outputs pass only when
    both models compute the same values unoptimized and the output is no further from them."""
    original, uint8 = qdq_pair()
    paths = {name: tmp_path / f"{name}.onnx" for name in ("original", "uint8", "other", "broken")}
    onnx.save(original, paths["original"])
    onnx.save(uint8, paths["uint8"])
    other = onnx.ModelProto()
    other.CopyFrom(original)
    other.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(
        onnx.numpy_helper.to_array(other.graph.initializer[0]) * 2, other.graph.initializer[0].name))
    onnx.save(other, paths["other"])
    paths["broken"].write_bytes(b"not a model")
    inputs = {"x": np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)}
    reference = backends.run_model(paths["original"], inputs)
    baseline = _Baseline(paths["original"], inputs, reference, 0, 0, b"", _QuietLatency([1.0]))
    assert not same_semantics(baseline, paths["other"], reference)  # even with the original's outputs
    assert not same_semantics(baseline, paths["broken"], reference)
    got = backends.run_model(paths["uint8"], inputs)
    assert same_semantics(baseline, paths["uint8"], got) is bool(np.allclose(got["y_dq"], reference["y_dq"],
                                                                            atol=1e-4, rtol=1e-3))
