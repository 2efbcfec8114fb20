"""Channel padding widens to the NCHWc block of the machine ORT runs on: 8 channels with
AVX2, 16 with AVX-512, none where ORT has no blocked kernels (`_pad_channels`, `api`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import helper as h

from taso.backends import AnalyticalCostModel, OrtCpuBackend, nchwc_block
from taso.backends.registry import backend_spec
from taso.ir import Graph
from taso.pipeline import api
from taso.pipeline._pad_channels import (
    BLOCK,
    is_pad_rule,
    pad_channels,
    pad_rule_id,
    padded_rewrites,
)
from taso.pipeline._rewriting import Sweeping, default_rules, run_search
from taso.pipeline.budget import Budget
from taso.search.sweep import Judgement
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs


def _chain() -> Graph:
    """Conv to 12 channels -> Relu -> Conv to 24 -> Relu -> Conv to 16: classes of 12 and 24."""
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["a"]), h.make_node("Relu", ["a"], ["r"]),
             h.make_node("Conv", ["r", "w1"], ["b"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["b"], ["s"]),
             h.make_node("Conv", ["s", "w2"], ["y"])]
    inits = [weight("w0", (12, 3, 1, 1), 1), weight("b0", (12,), 2), weight("w1", (24, 12, 3, 3), 3),
             weight("w2", (16, 24, 1, 1), 4)]
    return make_graph(nodes, {"x": (1, 3, 6, 6)}, ["y"], inits)


def _widths(block: int) -> tuple[int, int]:
    padding = pad_channels(_chain(), block=block)
    assert padding is not None
    return padding.graph.types["a"].shape[1], padding.graph.types["b"].shape[1]


def test_a_class_already_a_multiple_of_the_block_keeps_its_width() -> None:
    assert _widths(8) == (16, 24)  # AVX2: 24 channels are blocked as they are
    assert _widths(16) == (16, 32)  # AVX-512: both widened
    assert pad_channels(_chain(), block=4) is None  # 12 and 24 are multiples of 4


@pytest.mark.ort
def test_padding_to_a_block_of_8_computes_the_same_on_ort() -> None:
    graph = _chain()
    padding = pad_channels(graph, block=8)
    assert padding is not None
    assert_same_outputs(graph, padding.graph)


def test_the_rule_id_names_the_block() -> None:
    (rewrite,) = padded_rewrites(_chain(), None, block=8)
    assert rewrite.rule_id == pad_rule_id(8) == "layout/pad-channels-8" and is_pad_rule(rewrite.rule_id)
    assert not is_pad_rule("ax-relu_idempotent")
    with pytest.raises(ValueError, match="at least 2"):
        pad_channels(_chain(), block=1)


def _faster_when_wider(current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
    change = candidate.types["a"].shape[1] - current.types["a"].shape[1]
    return Judgement(1.2 if change > 0 else 1 / 1.2 if change < 0 else 1.0, change > 0)


@pytest.mark.parametrize("block, kept", [(8, "layout/pad-channels-8"), (16, "layout/pad-channels-16"), (None, None)])
def test_the_sweeps_pad_to_the_block_they_are_given(block: int | None, kept: str | None) -> None:
    rules = [rule for rule in default_rules() if rule.id == "ax-relu_idempotent"]
    outcome = run_search(_chain(), rules=rules, cost_model=AnalyticalCostModel(), alpha=1.0, budget=Budget.of(5),
                         sweeping=Sweeping(_faster_when_wider, AnalyticalCostModel(), channel_block=block))
    padded = [step.rule_id for step in outcome.sweeps if is_pad_rule(step.rule_id)]
    assert padded == ([] if kept is None else [kept])
    assert outcome.applied == ({} if kept is None else {kept: 1})


def test_on_ort_cpu_the_block_is_this_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = api._Target(backend_spec("ort-cpu"), backend_spec("ort-cpu").runner())
    notes: list[str] = []
    assert api._channel_block(cpu, notes.append) == (nchwc_block() if nchwc_block() > 1 else None)
    monkeypatch.setattr(api, "nchwc_block", lambda: 1)
    assert api._channel_block(cpu, notes.append) is None  # no blocked kernels: no padding
    monkeypatch.setattr(api, "nchwc_block", lambda: 8)
    assert api._channel_block(cpu, notes.append) == 8
    assert notes == []

    def broken() -> int:
        raise RuntimeError("probe failed")

    monkeypatch.setattr(api, "nchwc_block", broken)
    assert api._channel_block(cpu, notes.append) is None
    assert notes and "channel padding skipped" in notes[0] and "probe failed" in notes[0]


def test_the_default_block_is_avx512s() -> None:
    assert BLOCK == 16 and nchwc_block() in (1, 4, 8, 16)


def test_the_cpu_device_label_names_the_vector_isa() -> None:
    """Verdicts and kernel costs are cached by device: an AVX2 host and an AVX-512 host that
    both call themselves "AMD EPYC" must not share them."""
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "") \
        if Path("/proc/cpuinfo").is_file() else ""
    label = OrtCpuBackend(cache=None).device
    if " avx512f" in flags:
        assert "(AVX-512)" in label
    elif " avx2" in flags:
        assert "(AVX2)" in label
