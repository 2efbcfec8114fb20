"""What a user sees while and after `taso optimize` runs, on stderr.

In a terminal: one live status line (the phase, the latest progress message, the time
spent and, with a given budget, the time left), redrawn in place by tqdm; at the end the
report's tables, drawn by rich when it is installed. Anywhere else (a log file, a pipe):
plain lines, no escape codes, no redrawn line, and the tables as aligned text
(`Report.summary()`).

Also the two figures the report keeps of each model for that table: op counts by type
and the model's size in bytes, weights and external data included.
"""

from __future__ import annotations

import enum
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

import onnx
from tqdm import tqdm

from taso.report import NUMERIC_MODEL_COLUMNS, NUMERIC_SWEEP_COLUMNS, Report

try:  # optional: without rich, a terminal gets the same tables as plain text
    from rich.console import Console
    from rich.table import Table
except ImportError:
    Console = Table = None  # type: ignore[assignment,misc]


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Nodes of the main graph by op type (a custom domain's op as `domain.Op`)."""
    counts = Counter(f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in model.graph.node)
    return dict(sorted(counts.items()))


def model_bytes(model: onnx.ModelProto) -> int:
    """The model's serialized size, external data files included (the proto is encoded to
    count it: about 0.1 s per 100 MB of weights held in the proto, twice a call)."""
    external = sum(_data_bytes(t) for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    return model.ByteSize() + external


def _data_bytes(tensor: onnx.TensorProto) -> int:
    for entry in tensor.external_data:
        if entry.key == "length":
            return int(entry.value)
    try:
        return math.prod(tensor.dims) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return 0


class Output(enum.Enum):
    """How stderr is written to."""

    TERMINAL = "terminal"  # a live status line, tables drawn by rich if installed
    PLAIN = "plain"  # one line per message: logs and pipes
    QUIET = "quiet"  # -q: warnings only

    @classmethod
    def for_stream(cls, stream: TextIO, *, quiet: bool) -> Output:
        if quiet:
            return cls.QUIET
        return cls.TERMINAL if stream.isatty() else cls.PLAIN


@dataclass
class Status:
    """The progress callback `optimize_onnx` is given: in a terminal, one line redrawn in
    place; otherwise a `taso: message` line per message; nothing when quiet."""

    output: Output
    budget_s: float | None = None
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    _started: float = field(default_factory=time.perf_counter)
    _line: tqdm | None = None

    def __call__(self, message: str) -> None:
        if self.output is Output.QUIET:
            return
        if self.output is Output.PLAIN:
            print(f"taso: {message}", file=self.stream, flush=True)
            return
        if self._line is None:
            self._line = tqdm(total=None, bar_format="{desc}", file=self.stream, leave=False, dynamic_ncols=True)
        self._line.set_description_str(f"taso: {self._clock()}  {message}")

    def warn(self, message: str) -> None:
        """A line of its own, quiet or not."""
        print(f"taso: warning: {message}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._line is not None:
            self._line.close()
            self._line = None

    def _clock(self) -> str:
        spent = time.perf_counter() - self._started
        if self.budget_s is None:
            return f"[{spent:.0f} s]"
        return f"[{spent:.0f} s, {max(0.0, self.budget_s - spent):.0f} s left]"


def print_summary(report: Report, output: Output, stream: TextIO) -> None:
    """The report's tables and notes: drawn by rich in a terminal (when installed), else
    as aligned text. Nothing when quiet."""
    if output is Output.QUIET:
        return
    if output is Output.TERMINAL and Console is not None:
        _print_rich(report, stream)
        return
    print(report.summary(), file=stream, flush=True)


def _print_rich(report: Report, stream: TextIO) -> None:
    layout = report.layout()
    console = Console(file=stream, highlight=False)
    tables = [(layout.models, NUMERIC_MODEL_COLUMNS, None)]
    if layout.sweeps:
        tables.append((layout.sweeps, NUMERIC_SWEEP_COLUMNS, f"sweeps: {len(layout.sweeps) - 1}, in the order judged"))
    for rows, numeric, title in tables:
        table = Table(title=title, title_justify="left", show_edge=False)
        for i, name in enumerate(rows[0]):
            table.add_column(name, justify="right" if i in numeric else "left")
        for row in rows[1:]:
            table.add_row(*row)
        console.print(table)
    for line in layout.notes:
        console.print(line, markup=False)
