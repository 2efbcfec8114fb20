"""The reliability fuzzer (`benchmarks/fuzz_reliability.py`) on mutated benchmark models.

Its detectors are checked on hand-made cases (a file touched outside the output folder, a
changed graph returned unchecked); a CI-sized run and the issue's 2,000-example run
(`-m fuzz`) must find no crash, no unchecked rewrite and no file touched outside.
"""

from __future__ import annotations

import random
from pathlib import Path

import onnx
import pytest

from benchmarks._fuzz_example import (
    Call,
    Example,
    Kind,
    Result,
    Storage,
    _diff,
    _judge_returned,
    _Returned,
    model_signature,
    plan,
    snapshot,
)
from benchmarks._fuzz_mutations import MUTATIONS, Hostile
from benchmarks.fuzz_reliability import GATING, FuzzOptions, count, fuzz, summary
from tests.helpers import models


def _example(hostile: Hostile | None = None) -> Example:
    return Example(0, 0, "conv_net", (), (), Storage.INLINE, Call.PATH, False, hostile)


def test_the_snapshot_diff_flags_every_file_touched_outside_the_output_folder(tmp_path: Path) -> None:
    for folder in ("in", "out", "tmp"):
        (tmp_path / folder).mkdir()
    (tmp_path / "in" / "m.onnx").write_bytes(b"model")
    (tmp_path / "in" / "m.data").write_bytes(b"weights")
    before = snapshot(tmp_path)
    (tmp_path / "in" / "m.onnx").write_bytes(b"MODEL")  # same size, new content
    (tmp_path / "in" / "m.data").unlink()
    (tmp_path / "tmp" / "left.onnx").write_bytes(b"")
    (tmp_path / "out" / "o.onnx").write_bytes(b"result")
    problems = _diff(before, snapshot(tmp_path), ok=True)
    assert {(p.kind, p.message) for p in problems} == {
        (Kind.TOUCHED, "modified in/m.onnx"), (Kind.TOUCHED, "deleted in/m.data"), (Kind.TOUCHED, "created tmp/left.onnx"),
    }


def test_files_a_refused_call_leaves_in_the_output_folder_are_stray(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    before = snapshot(tmp_path)
    (tmp_path / "out" / "o.onnx").write_bytes(b"half")
    assert [p.kind for p in _diff(before, snapshot(tmp_path), ok=False)] == [Kind.STRAY]
    assert _diff(before, snapshot(tmp_path), ok=True) == []


def test_a_changed_graph_returned_without_a_passed_check_is_an_unchecked_rewrite() -> None:
    given = models.conv_net()
    changed = models.conv_net()
    del changed.graph.node[1]  # the Relu
    problems = _judge_returned(_example(), model_signature(given), _Returned(changed, "skipped"))
    assert [p.kind for p in problems] == [Kind.UNCHECKED]
    assert _judge_returned(_example(), model_signature(given), _Returned(changed, "passed")) == []


def test_the_original_in_another_node_order_is_not_a_rewrite() -> None:
    given, reordered = models.conv_net(), models.conv_net()
    nodes = list(reversed([onnx.NodeProto.FromString(n.SerializeToString()) for n in reordered.graph.node]))
    del reordered.graph.node[:]
    reordered.graph.node.extend(nodes)
    assert _judge_returned(_example(), model_signature(given), _Returned(reordered, "skipped")) == []


def test_optimizing_a_model_whose_data_lies_outside_its_folder_is_a_hostile_read() -> None:
    model = models.conv_net()
    problems = _judge_returned(_example(Hostile.SYMLINK), model_signature(model), _Returned(model, "passed"))
    assert [p.kind for p in problems] == [Kind.HOSTILE_READ]


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_applies_to_a_small_conv_net(name: str) -> None:
    model = models.conv_net()
    assert MUTATIONS[name](model, random.Random(0)) is not None


def test_an_example_is_planned_the_same_way_every_time() -> None:
    for index in range(5):
        (first, model), (again, twin) = plan(7, index), plan(7, index)
        assert first == again and model.SerializeToString() == twin.SerializeToString()
        assert 1 <= len(first.mutations) <= 3


@pytest.mark.ort
def test_a_ci_sized_fuzz_run_finds_no_crash_unchecked_rewrite_or_touched_file() -> None:
    options = FuzzOptions(examples=20, seed=0, backend="analytical", budget_s=0.2)
    findings = fuzz(options)
    assert len(findings) == 20
    counts = count(findings)
    assert {kind: counts[kind] for kind in GATING} == dict.fromkeys(GATING, 0), summary(findings, options)
    assert counts[Result.HARNESS_ERROR] == 0, summary(findings, options)


@pytest.mark.ort
@pytest.mark.fuzz
def test_two_thousand_mutated_models_find_no_crash_unchecked_rewrite_or_touched_file() -> None:
    options = FuzzOptions(examples=2000, seed=0, backend="ort-cpu", budget_s=0.5, jobs=2)
    findings = fuzz(options)
    counts = count(findings)
    assert {kind: counts[kind] for kind in GATING} == dict.fromkeys(GATING, 0), summary(findings, options)
