"""The closing summary (issue 20, item 1): a before/after table of the two models, the
sweeps as rows, and what a log or a terminal gets while `taso optimize` runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h

from taso.pipeline._summary import Output, Status, model_bytes, op_counts, print_summary
from taso.pipeline.cli import main
from taso.report import CheckStatus, Decision, Latency, Report, StopReason, SweepRecord, shown_ops
from tests.helpers.models import scaled_chain_model

OPS_BEFORE = {"Conv": 52, "Relu": 30, "Mul": 26, "Add": 10, "HardSigmoid": 9, "GlobalAveragePool": 5,
              "Sigmoid": 4, "Reshape": 3, "Concat": 2, "Flatten": 1, "Gemm": 1, "Softmax": 1}
OPS_AFTER = {**OPS_BEFORE, "Mul": 9, "HardSigmoid": 0, "HardSwish": 9, "Softmax": 0}


def _report(**changes: object) -> Report:
    fields: dict[str, object] = dict(
        input_nodes=144, output_nodes=118, applied_rewrites={"cv-fold_mul_conv": 17, "cv-hard_swish": 9},
        latency=Latency(1.9, 1.5, 2.412, 1.805, 0.02, measured_cached=True), max_abs_diff={"y": 2.4e-6, "z": None},
        check=CheckStatus.PASSED, decision=Decision.OPTIMIZED, stop_reason=StopReason.CONVERGED, graphs_explored=40,
        phase_seconds={"load": 0.2, "search": 6.0, "measure": 1.2}, time_to_best_s=1.25,
        sweeps=(SweepRecord("cv-hard_swish", 9, 1.21, True, predicted_speedup=1.18, cached=False),
                SweepRecord("cv-fold_mul_conv", 17, 1.08, True, predicted_speedup=1.06, cached=True),
                SweepRecord("ax-relu_as_clip", 30, None, False, predicted_speedup=1.0,
                            not_judged="priced exactly like the current graph (the same kernels)")),
        input_ops=OPS_BEFORE, output_ops={op: n for op, n in OPS_AFTER.items() if n},
        input_bytes=5_230_000, output_bytes=5_190_123, warnings=("a warning",),
    )
    return Report(**{**fields, **changes})  # type: ignore[arg-type]


def _row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith(label + " ") or line.strip() == label)
    return line.split()


def test_the_table_puts_the_two_models_side_by_side() -> None:
    text = _report().summary()
    assert _row(text, "nodes") == ["nodes", "144", "118", "-26"]
    assert _row(text, "size") == ["size", "5.23", "MB", "5.19", "MB", "-39.9", "kB"]
    assert _row(text, "Mul") == ["Mul", "26", "9", "-17"]
    assert _row(text, "HardSwish") == ["HardSwish", "0", "9", "+9"]
    assert _row(text, "latency, measured")[2:] == ["2.412", "ms", "1.805", "ms", "1.336x", "(from", "the", "cost", "cache)"]
    assert _row(text, "latency, predicted")[-1] == "1.267x"
    assert _row(text, "max abs diff")[3:] == ["2.4e-06", "check", "passed"]


def test_a_faster_median_the_decision_did_not_accept_is_marked_not_significant() -> None:
    """A loaded machine's YOLOv8n-seg call printed 1.167x beside "not measurably faster"."""
    latency = Latency(1.9, 1.5, 121.371, 104.005, 0.3)
    text = _report(latency=latency, decision=Decision.NOT_FASTER).summary()
    assert _row(text, "latency, measured")[-3:] == ["1.167x", "(not", "significant)"]
    slower = _report(latency=Latency(1.9, 1.5, 100.0, 104.0, 0.3), decision=Decision.NOT_FASTER).summary()
    assert _row(slower, "latency, measured")[-1] == "0.962x"
    assert _row(_report(latency=latency).summary(), "latency, measured")[-1] == "1.167x"


def test_the_table_shows_the_top_ops_and_every_op_whose_count_changed() -> None:
    shown = shown_ops(OPS_BEFORE, {op: n for op, n in OPS_AFTER.items() if n})
    assert shown[:3] == ["Conv", "Relu", "Mul"]  # most frequent first
    assert {"HardSwish", "Softmax", "HardSigmoid"} <= set(shown)  # changed, however rare
    assert "Flatten" not in shown and "Gemm" not in shown  # rare and unchanged


def test_the_columns_line_up() -> None:
    lines = _report().summary().splitlines()
    table = lines[: lines.index(next(line for line in lines if line.startswith("sweeps:")))]
    after_ends = {line.index(cells[2]) + len(cells[2]) for line in table[1:] if len(cells := line.split()) == 4
                  and cells[2].isdigit()}
    assert len(after_ends) == 1  # the "after" counts are right-aligned in one column


def test_the_sweeps_are_rows_with_their_verdicts() -> None:
    text = _report().summary()
    assert "sweeps: 3, in the order judged" in text
    assert _row(text, "cv-hard_swish") == ["cv-hard_swish", "9", "1.180x", "1.210x", "kept"]
    assert _row(text, "cv-fold_mul_conv") == ["cv-fold_mul_conv", "17", "1.060x", "1.080x", "kept", "(from", "the",
                                              "cost", "cache)"]
    assert _row(text, "ax-relu_as_clip")[:5] == ["ax-relu_as_clip", "30", "1.000x", "-", "not"]
    assert "sweeps: none" in _report(sweeps=()).summary()


def test_the_notes_say_when_the_best_was_found_and_what_was_decided() -> None:
    lines = _report().summary().splitlines()
    search = next(line for line in lines if line.startswith("search: "))
    assert "best found after 1.2 s (the call took 7.4 s)" in search
    assert "result: optimized model returned: measured faster" in lines
    assert lines[-1] == "warning: a warning"


def test_the_json_report_keeps_the_figures() -> None:
    data = json.loads(_report().to_json())
    assert data["input_ops"]["Mul"] == 26 and data["output_ops"]["HardSwish"] == 9
    assert (data["input_bytes"], data["output_bytes"]) == (5_230_000, 5_190_123)


def test_a_model_is_counted_by_op_type_and_sized_with_its_external_data(tmp_path: Path) -> None:
    model = scaled_chain_model()
    assert op_counts(model) == {"Conv": 1, "Mul": 2, "Relu": 2}
    assert model_bytes(model) == len(model.SerializeToString())
    big = h.make_model(h.make_graph(
        [h.make_node("Add", ["x", "w"], ["y"])], "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])],
        [numpy_helper.from_array(np.ones((256, 256), np.float32), "w")]))
    onnx.save(big, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    external = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    assert model_bytes(external) == external.ByteSize() + 256 * 256 * 4  # the header here, the data in m.data


def _optimize(tmp_path: Path, *extra: str) -> list[str]:
    source = tmp_path / "in.onnx"
    onnx.save(scaled_chain_model(), source)
    return ["optimize", str(source), "-o", str(tmp_path / "out.onnx"), "--no-check", "--backend", "analytical",
            "--time-budget", "1", "--report", str(tmp_path / "r.json"), *extra]


def test_a_log_gets_plain_lines_and_stdout_the_files_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_optimize(tmp_path)) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"wrote {tmp_path / 'out.onnx'}", f"wrote {tmp_path / 'r.json'}"]
    assert "\r" not in captured.err and "\x1b" not in captured.err  # no redrawn line, no colours
    assert "taso: loaded: 5 nodes" in captured.err.splitlines()
    assert _row(captured.err, "nodes")[:3] == ["nodes", "5", "2"] and "result: " in captured.err


def test_quiet_says_nothing_but_the_files_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_optimize(tmp_path, "-q")) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and len(captured.out.splitlines()) == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_status_line_redrawn_in_place() -> None:
    stream = _Terminal()
    assert Output.for_stream(stream, quiet=False) is Output.TERMINAL
    assert Output.for_stream(io.StringIO(), quiet=False) is Output.PLAIN
    assert Output.for_stream(stream, quiet=True) is Output.QUIET
    status = Status(Output.TERMINAL, budget_s=30, stream=stream)
    status("searching with 600 proved rules for up to 20.0 s")
    status("search: 12 graphs explored, best 1.500 ms (start 1.900 ms)")
    status.close()
    text = stream.getvalue()
    assert "\n" not in text.rstrip("\n") and text.count("\r") >= 2  # redrawn, never scrolled
    assert "best 1.500 ms" in text and "s left]" in text


def test_a_terminal_gets_the_tables_drawn_by_rich_when_installed() -> None:
    pytest.importorskip("rich")
    stream = _Terminal()
    print_summary(_report(), Output.TERMINAL, stream)
    text = stream.getvalue()
    assert "HardSwish" in text and "cv-fold_mul_conv" in text and "result: optimized model returned" in text
    assert "│" in text or "┃" in text  # rich's box drawing
